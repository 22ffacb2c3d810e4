// SPDX-License-Identifier: GPL-2.0

//! Negotiation: upstream rules (indirect segments, copy decision, ring and
//! queue clamps), validation, and errors naming the key.

use blkcore::negotiate::*;
use blkcore::xenstore::{Reason, Side, SliceValues};
use proptest::prelude::*;

/// A Linux xen-blkback directory (persistent grants on, discard).
const BLKBACK: &[(&str, &str)] = &[
    ("max-ring-page-order", "4"),
    ("multi-queue-max-queues", "8"),
    ("sectors", "2097152"),
    ("info", "0"),
    ("sector-size", "512"),
    ("physical-sector-size", "4096"),
    ("feature-flush-cache", "1"),
    ("feature-barrier", "0"),
    ("feature-discard", "1"),
    ("discard-granularity", "4096"),
    ("discard-alignment", "0"),
    ("discard-secure", "0"),
    ("feature-persistent", "1"),
    ("feature-max-indirect-segments", "256"),
];

/// `base` with `key` set to `value` (or removed when `None`).
fn with(
    base: &[(&'static str, &'static str)],
    key: &'static str,
    value: Option<&'static str>,
) -> Vec<(&'static str, &'static str)> {
    let mut v: Vec<_> = base.iter().copied().filter(|(k, _)| *k != key).collect();
    if let Some(value) = value {
        v.push((key, value));
    }
    v
}

fn run(
    pairs: &[(&str, &str)],
    params: &FrontendParams,
) -> Result<Negotiated, blkcore::xenstore::KeyError> {
    negotiate(&SliceValues(pairs), params)
}

#[test]
fn blkback_with_upstream_defaults() {
    let n = run(BLKBACK, &FrontendParams::default()).unwrap();
    assert_eq!(
        n,
        Negotiated {
            queues: 4,
            ring_page_order: 0,
            ring_pages: 1,
            persistent: true,
            indirect_segments: 32,
            segments_per_request: 32,
            flush: Some(FlushKind::Flush),
            discard: Some(Discard {
                granularity: 4096,
                alignment: 0,
                secure: false
            }),
            sectors: 2_097_152,
            info: 0,
            sector_size: 512,
            physical_sector_size: 4096,
            minimum_io_size: None,
            optimal_io_size: None,
            copy_data: true,
            ignored: Default::default(),
        }
    );
    assert_eq!(FrontendParams::default(), FrontendParams::UPSTREAM_DEFAULTS);
    assert_eq!(
        FrontendParams::UPSTREAM_DEFAULTS,
        FrontendParams {
            max_indirect_segments: 32,
            max_queues: 4,
            max_ring_page_order: 0,
            feature_persistent: true,
            trusted: true
        }
    );
}

#[test]
fn minimal_old_backend_gets_defaults() {
    let n = run(
        &[("sectors", "0"), ("info", "5"), ("sector-size", "4096")],
        &FrontendParams::default(),
    )
    .unwrap();
    assert_eq!((n.queues, n.ring_page_order, n.ring_pages), (1, 0, 1));
    assert!(!n.persistent && !n.copy_data);
    assert_eq!((n.indirect_segments, n.segments_per_request), (0, 11));
    assert_eq!(n.flush, None);
    assert_eq!(n.discard, None);
    assert_eq!(n.sectors, 0, "zero-sized disks are allowed");
    assert_eq!(n.physical_sector_size, 4096, "defaults to sector-size");
    assert!(n.read_only() && n.cdrom() && !n.removable());
}

#[test]
fn mandatory_keys_missing_are_named() {
    for key in [KEY_SECTORS, KEY_INFO, KEY_SECTOR_SIZE] {
        let e = run(&with(BLKBACK, key, None), &FrontendParams::default()).unwrap_err();
        assert_eq!((e.key, e.reason), (key, Reason::Missing), "{key}");
        assert_eq!(e.to_string(), format!("backend key '{key}' missing"));
    }
}

/// Negotiates `pairs`, which must succeed with exactly one optional key
/// ignored: the result and that key's error.
fn one_ignored(
    pairs: &[(&str, &str)],
    params: &FrontendParams,
) -> (Negotiated, blkcore::xenstore::KeyError) {
    let n = run(pairs, params).unwrap_or_else(|e| panic!("refused: {e}"));
    assert_eq!(n.ignored.count, 1, "{:?}", n.ignored);
    let e = n.ignored.first.expect("the ignored key");
    (n, e)
}

#[test]
fn junk_fails_a_required_key_and_is_ignored_in_an_optional_one_naming_it() {
    for key in BACKEND_KEYS {
        for junk in [
            "",
            "x",
            "-1",
            "1 ",
            "2\n",
            "0x10",
            "99999999999999999999999",
        ] {
            let kv = with(BLKBACK, key, Some(junk));
            let e = if REQUIRED_KEYS.contains(&key) {
                run(&kv, &FrontendParams::default()).expect_err(&format!("{key}={junk:?} accepted"))
            } else {
                one_ignored(&kv, &FrontendParams::default()).1
            };
            assert_eq!(e.key, key, "{key}={junk:?}");
            assert_eq!(e.side, Side::Backend);
            assert!(
                e.to_string()
                    .starts_with(&format!("backend key '{key}' = '")),
                "{e}"
            );
        }
    }
}

#[test]
fn sector_size_validation() {
    for ok in ["512", "1024", "2048", "4096"] {
        let n = run(
            &with(
                &with(BLKBACK, KEY_SECTOR_SIZE, Some(ok)),
                KEY_PHYSICAL_SECTOR_SIZE,
                None,
            ),
            &FrontendParams::default(),
        )
        .unwrap();
        assert_eq!(n.sector_size.to_string(), ok);
        assert_eq!(n.physical_sector_size, n.sector_size);
    }
    let e = run(
        &with(BLKBACK, KEY_SECTOR_SIZE, Some("1000")),
        &FrontendParams::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "backend key 'sector-size' = '1000': not a power of two"
    );
    for bad in ["0", "256", "8192"] {
        let e = run(
            &with(BLKBACK, KEY_SECTOR_SIZE, Some(bad)),
            &FrontendParams::default(),
        )
        .unwrap_err();
        assert_eq!(e.key, KEY_SECTOR_SIZE, "{bad}");
    }
    let e = run(
        &with(BLKBACK, KEY_SECTOR_SIZE, Some("8192")),
        &FrontendParams::default(),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "backend key 'sector-size' = '8192': out of range 512..=4096"
    );
}

#[test]
fn bad_physical_sector_size_or_io_hint_is_ignored_for_its_default() {
    let (n, e) = one_ignored(
        &with(BLKBACK, KEY_PHYSICAL_SECTOR_SIZE, Some("3000")),
        &FrontendParams::default(),
    );
    assert_eq!(n.physical_sector_size, 512, "the sector size, as if absent");
    assert_eq!(
        e.to_string(),
        "backend key 'physical-sector-size' = '3000': not a power of two"
    );
    let four_k = with(BLKBACK, KEY_SECTOR_SIZE, Some("4096"));
    let (n, e) = one_ignored(
        &with(&four_k, KEY_PHYSICAL_SECTOR_SIZE, Some("512")),
        &FrontendParams::default(),
    );
    assert_eq!(n.physical_sector_size, 4096);
    assert_eq!(
        e.to_string(),
        "backend key 'physical-sector-size' = '512': less than sector-size (4096)"
    );
    let (n, e) = one_ignored(
        &with(BLKBACK, KEY_PHYSICAL_SECTOR_SIZE, Some("131072")),
        &FrontendParams::default(),
    );
    assert_eq!(n.physical_sector_size, 512);
    assert_eq!(
        e.reason,
        Reason::OutOfRange {
            min: 512,
            max: 65536
        }
    );
    let n = run(
        &with(BLKBACK, KEY_PHYSICAL_SECTOR_SIZE, Some("65536")),
        &FrontendParams::default(),
    )
    .unwrap();
    assert_eq!(n.physical_sector_size, 65536);
}

#[test]
fn io_size_extension_keys() {
    let p = FrontendParams::default();
    let base = with(
        &with(BLKBACK, KEY_MINIMUM_IO_SIZE, Some("65536")),
        KEY_OPTIMAL_IO_SIZE,
        Some("196608"),
    );
    let n = run(&base, &p).unwrap();
    assert_eq!(
        (n.minimum_io_size, n.optimal_io_size),
        (Some(65536), Some(196_608))
    );

    let n = run(
        &with(
            &with(BLKBACK, KEY_MINIMUM_IO_SIZE, Some("0")),
            KEY_OPTIMAL_IO_SIZE,
            Some("0"),
        ),
        &p,
    )
    .unwrap();
    assert_eq!(
        (n.minimum_io_size, n.optimal_io_size),
        (None, None),
        "0 = not given"
    );

    let (n, e) = one_ignored(&with(BLKBACK, KEY_MINIMUM_IO_SIZE, Some("12288")), &p);
    assert_eq!((n.minimum_io_size, n.optimal_io_size), (None, None));
    assert_eq!(
        e.to_string(),
        "backend key 'minimum-io-size' = '12288': not a power of two"
    );
    let (n, e) = one_ignored(&with(BLKBACK, KEY_MINIMUM_IO_SIZE, Some("2048")), &p);
    assert_eq!(n.minimum_io_size, None);
    assert_eq!(
        e.to_string(),
        "backend key 'minimum-io-size' = '2048': not a multiple of physical-sector-size (4096)"
    );
    let (n, e) = one_ignored(&with(BLKBACK, KEY_OPTIMAL_IO_SIZE, Some("6144")), &p);
    assert_eq!(n.optimal_io_size, None);
    assert_eq!(
        e.reason,
        Reason::NotMultipleOf {
            key: KEY_PHYSICAL_SECTOR_SIZE,
            value: 4096
        }
    );
    let (n, e) = one_ignored(&with(&base, KEY_OPTIMAL_IO_SIZE, Some("32768")), &p);
    assert_eq!((n.minimum_io_size, n.optimal_io_size), (Some(65536), None));
    assert_eq!(
        e.to_string(),
        "backend key 'optimal-io-size' = '32768': less than minimum-io-size (65536)"
    );
    // Without minimum-io-size, any multiple of the physical size will do.
    let n = run(&with(BLKBACK, KEY_OPTIMAL_IO_SIZE, Some("4096")), &p).unwrap();
    assert_eq!(n.optimal_io_size, Some(4096));
}

#[test]
fn io_size_hints_are_at_most_the_largest_blkif_request() {
    let p = FrontendParams::default();
    assert_eq!(MAX_IO_SIZE_HINT, 16 << 20);
    let n = run(&with(BLKBACK, KEY_OPTIMAL_IO_SIZE, Some("16777216")), &p).unwrap();
    assert_eq!((n.optimal_io_size, n.ignored.count), (Some(16 << 20), 0));
    let (n, e) = one_ignored(&with(BLKBACK, KEY_OPTIMAL_IO_SIZE, Some("16781312")), &p);
    assert_eq!(n.optimal_io_size, None);
    assert_eq!(
        e.to_string(),
        "backend key 'optimal-io-size' = '16781312': out of range 0..=16777216"
    );
    let (n, e) = one_ignored(&with(BLKBACK, KEY_MINIMUM_IO_SIZE, Some("33554432")), &p);
    assert_eq!((n.minimum_io_size, e.key), (None, KEY_MINIMUM_IO_SIZE));
    // Near 4 GiB (the review's case): ignored, never a readahead of GiBs.
    let (n, _) = one_ignored(&with(BLKBACK, KEY_OPTIMAL_IO_SIZE, Some("4294963200")), &p);
    assert_eq!(n.optimal_io_size, None);
}

#[test]
fn flush_kinds() {
    let p = FrontendParams::default();
    let cases = [
        (None, None, None),
        (Some("0"), Some("0"), None),
        (Some("1"), None, Some(FlushKind::Barrier)),
        (Some("1"), Some("0"), Some(FlushKind::Barrier)),
        (None, Some("1"), Some(FlushKind::Flush)),
        (Some("1"), Some("1"), Some(FlushKind::Flush)),
    ];
    for (barrier, flush, want) in cases {
        let kv = with(
            &with(BLKBACK, KEY_FEATURE_BARRIER, barrier),
            KEY_FEATURE_FLUSH_CACHE,
            flush,
        );
        assert_eq!(
            run(&kv, &p).unwrap().flush,
            want,
            "barrier={barrier:?} flush={flush:?}"
        );
    }
}

#[test]
fn discard_keys() {
    let p = FrontendParams::default();
    let off = with(BLKBACK, KEY_FEATURE_DISCARD, Some("0"));
    // Without feature-discard the discard keys are not even read.
    assert_eq!(
        run(&with(&off, KEY_DISCARD_GRANULARITY, Some("junk")), &p)
            .unwrap()
            .discard,
        None
    );
    let bare = [
        ("sectors", "8"),
        ("info", "0"),
        ("sector-size", "512"),
        ("feature-discard", "1"),
    ];
    assert_eq!(
        run(&bare, &p).unwrap().discard,
        Some(Discard {
            granularity: 0,
            alignment: 0,
            secure: false
        })
    );
    let sec = with(
        &with(BLKBACK, KEY_DISCARD_SECURE, Some("1")),
        KEY_DISCARD_ALIGNMENT,
        Some("1024"),
    );
    assert_eq!(
        run(&sec, &p).unwrap().discard,
        Some(Discard {
            granularity: 4096,
            alignment: 1024,
            secure: true
        })
    );
    let (n, e) = one_ignored(&with(BLKBACK, KEY_DISCARD_ALIGNMENT, Some("4096")), &p);
    assert_eq!(n.discard, None, "discard off, the rest kept");
    assert!(n.persistent);
    assert_eq!(
        e.to_string(),
        "backend key 'discard-alignment' = '4096': not less than discard-granularity (4096)"
    );
    let (n, e) = one_ignored(&with(BLKBACK, KEY_DISCARD_ALIGNMENT, Some("100")), &p);
    assert_eq!(n.discard, None);
    assert_eq!(e.key, KEY_DISCARD_ALIGNMENT);
    let four_k = with(BLKBACK, KEY_SECTOR_SIZE, Some("4096"));
    let (n, e) = one_ignored(&with(&four_k, KEY_DISCARD_GRANULARITY, Some("512")), &p);
    assert_eq!(n.discard, None);
    assert_eq!(
        e.to_string(),
        "backend key 'discard-granularity' = '512': not a multiple of sector-size (4096)"
    );
}

#[test]
fn sectors_byte_size_must_fit() {
    let p = FrontendParams::default();
    let max = (u64::MAX / 512).to_string();
    let kv = with(BLKBACK, KEY_SECTORS, Some(Box::leak(max.into_boxed_str())));
    assert_eq!(run(&kv, &p).unwrap().sectors, u64::MAX / 512);
    let over = (u64::MAX / 512 + 1).to_string();
    let kv = with(BLKBACK, KEY_SECTORS, Some(Box::leak(over.into_boxed_str())));
    assert_eq!(run(&kv, &p).unwrap_err().key, KEY_SECTORS);
    // Online resize re-reads through the same checks.
    assert_eq!(read_sectors(&SliceValues(&[("sectors", "42")])), Ok(42));
    assert_eq!(
        read_sectors(&SliceValues(&[])).unwrap_err().reason,
        Reason::Missing
    );
}

#[test]
fn indirect_segment_examples() {
    let cases: [(Option<&'static str>, u32, u32); 9] = [
        (Some("256"), 32, 32),
        (Some("256"), 5, 0), // param below 11 acts as 11 = no indirect
        (Some("256"), 11, 0),
        (Some("12"), 32, 12),
        (Some("11"), 32, 0),
        (Some("0"), 32, 0),
        (None, 32, 0),
        (Some("256"), 1000, 256),
        (Some("100000"), 100_000, MAX_INDIRECT_SEGMENTS),
    ];
    for (backend, param, want) in cases {
        let p = FrontendParams {
            max_indirect_segments: param,
            ..FrontendParams::default()
        };
        let n = run(
            &with(BLKBACK, KEY_FEATURE_MAX_INDIRECT_SEGMENTS, backend),
            &p,
        )
        .unwrap();
        assert_eq!(
            n.indirect_segments, want,
            "backend={backend:?} param={param}"
        );
        assert_eq!(n.segments_per_request, if want == 0 { 11 } else { want });
    }
    assert_eq!(MAX_INDIRECT_SEGMENTS, 4096);
}

#[test]
fn copy_rule_truth_table() {
    for param_persistent in [false, true] {
        for backend_persistent in [None, Some("0"), Some("1")] {
            for trusted in [false, true] {
                let p = FrontendParams {
                    feature_persistent: param_persistent,
                    trusted,
                    ..FrontendParams::default()
                };
                let n = run(
                    &with(BLKBACK, KEY_FEATURE_PERSISTENT, backend_persistent),
                    &p,
                )
                .unwrap();
                let persistent = param_persistent && backend_persistent == Some("1");
                assert_eq!(n.persistent, persistent);
                assert_eq!(
                    n.copy_data,
                    persistent || !trusted,
                    "{param_persistent} {backend_persistent:?} {trusted}"
                );
            }
        }
    }
}

#[test]
fn frontend_trusted_node_and_param() {
    let absent = SliceValues(&[]);
    let yes = SliceValues(&[("trusted", "1")]);
    let no = SliceValues(&[("trusted", "0")]);
    assert_eq!(frontend_trusted(&absent, true), Ok(true));
    assert_eq!(frontend_trusted(&yes, true), Ok(true));
    assert_eq!(frontend_trusted(&no, true), Ok(false));
    assert_eq!(frontend_trusted(&yes, false), Ok(false));
    let e = frontend_trusted(&SliceValues(&[("trusted", "true")]), true).unwrap_err();
    assert_eq!((e.side, e.key), (Side::Frontend, KEY_TRUSTED));
}

fn opt_num() -> impl Strategy<Value = Option<u32>> {
    prop_oneof![
        Just(None),
        (0u32..40).prop_map(Some),
        any::<u32>().prop_map(Some)
    ]
}

fn set_num(base: &mut Vec<(&'static str, String)>, key: &'static str, v: Option<u32>) {
    base.retain(|(k, _)| *k != key);
    if let Some(v) = v {
        base.push((key, v.to_string()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn ring_and_queue_clamps(
        backend_order in opt_num(),
        backend_queues in opt_num(),
        param_order in prop_oneof![0u32..8, any::<u32>()],
        param_queues in prop_oneof![0u32..70, any::<u32>()],
    ) {
        let mut kv: Vec<(&'static str, String)> = BLKBACK.iter().map(|(k, v)| (*k, v.to_string())).collect();
        set_num(&mut kv, KEY_MAX_RING_PAGE_ORDER, backend_order);
        set_num(&mut kv, KEY_MULTI_QUEUE_MAX_QUEUES, backend_queues);
        let pairs: Vec<(&str, &str)> = kv.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let p = FrontendParams { max_ring_page_order: param_order, max_queues: param_queues, ..FrontendParams::default() };
        let n = run(&pairs, &p).unwrap();
        let want_order = backend_order.unwrap_or(0).min(param_order).min(4);
        prop_assert_eq!(n.ring_page_order, want_order);
        prop_assert_eq!(n.ring_pages, 1 << want_order);
        prop_assert!(n.queues >= 1);
        prop_assert!(n.queues <= param_queues.max(1));
        prop_assert!(n.queues <= backend_queues.unwrap_or(1).max(1));
        prop_assert_eq!(n.queues, backend_queues.unwrap_or(1).min(param_queues).max(1));
        // The InitWait-time ring negotiation agrees, without the disk keys.
        let ring_only: Vec<(&str, &str)> = pairs.iter().copied()
            .filter(|(k, _)| *k == KEY_MAX_RING_PAGE_ORDER || *k == KEY_MULTI_QUEUE_MAX_QUEUES)
            .collect();
        let r = negotiate_rings(&SliceValues(&ring_only), &p);
        prop_assert_eq!(r, RingLayout { queues: n.queues, ring_page_order: n.ring_page_order, ring_pages: n.ring_pages });
    }

    #[test]
    fn indirect_rule(backend in opt_num(), param in prop_oneof![0u32..300, any::<u32>()]) {
        let mut kv: Vec<(&'static str, String)> = BLKBACK.iter().map(|(k, v)| (*k, v.to_string())).collect();
        set_num(&mut kv, KEY_FEATURE_MAX_INDIRECT_SEGMENTS, backend);
        let pairs: Vec<(&str, &str)> = kv.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let p = FrontendParams { max_indirect_segments: param, ..FrontendParams::default() };
        let n = run(&pairs, &p).unwrap();
        let b = backend.unwrap_or(0);
        if n.indirect_segments == 0 {
            // No indirect only when one side can't do more than 11.
            prop_assert!(b <= 11 || param <= 11);
            prop_assert_eq!(n.segments_per_request, 11);
        } else {
            prop_assert!(n.indirect_segments > 11);
            prop_assert!(n.indirect_segments <= b && n.indirect_segments <= param);
            prop_assert!(n.indirect_segments <= MAX_INDIRECT_SEGMENTS);
            // It is the largest such value.
            prop_assert_eq!(n.indirect_segments, b.min(param).min(MAX_INDIRECT_SEGMENTS));
            prop_assert_eq!(n.segments_per_request, n.indirect_segments);
        }
    }

    /// Arbitrary (mostly broken) directories: never a panic; an error always
    /// names a key negotiation reads.
    #[test]
    fn arbitrary_directories(
        entries in prop::collection::vec(
            (prop::sample::select(vec![
                KEY_MAX_RING_PAGE_ORDER, KEY_MULTI_QUEUE_MAX_QUEUES, KEY_SECTORS, KEY_INFO,
                KEY_SECTOR_SIZE, KEY_PHYSICAL_SECTOR_SIZE, KEY_FEATURE_BARRIER,
                KEY_FEATURE_FLUSH_CACHE, KEY_FEATURE_DISCARD, KEY_DISCARD_GRANULARITY,
                KEY_DISCARD_ALIGNMENT, KEY_DISCARD_SECURE, KEY_FEATURE_PERSISTENT,
                KEY_FEATURE_MAX_INDIRECT_SEGMENTS, KEY_MINIMUM_IO_SIZE, KEY_OPTIMAL_IO_SIZE,
            ]), prop_oneof!["[0-9]{1,6}", "0|1|512|4096|65536", ".{0,8}"]),
            0..20,
        ),
        trusted in any::<bool>(),
    ) {
        let pairs: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let p = FrontendParams { trusted, ..FrontendParams::default() };
        match run(&pairs, &p) {
            Ok(n) => {
                prop_assert!(n.sector_size.is_power_of_two());
                prop_assert!(n.physical_sector_size >= n.sector_size);
                prop_assert_eq!(n.copy_data, n.persistent || !trusted);
            }
            Err(e) => {
                prop_assert!(pairs.iter().any(|(k, _)| *k == e.key) || e.reason == Reason::Missing);
                prop_assert!(e.to_string().contains(e.key));
            }
        }
    }
}

#[test]
fn the_rings_set_up_at_init_wait_are_kept_at_connected() {
    let p = FrontendParams {
        max_queues: 4,
        max_ring_page_order: 4,
        ..FrontendParams::default()
    };
    let init_wait = negotiate_rings(&SliceValues(BLKBACK), &p);
    assert_eq!((init_wait.queues, init_wait.ring_pages), (4, 16));
    // Changed between InitWait and Connected.
    let changed = with(
        &with(BLKBACK, "multi-queue-max-queues", Some("1")),
        "max-ring-page-order",
        Some("0"),
    );
    let connected = run(&changed, &p).unwrap();
    assert_eq!((connected.queues, connected.ring_pages), (1, 1));
    let n = connected.with_rings(init_wait);
    assert_eq!(n.rings(), init_wait);
    assert_eq!((n.queues, n.ring_page_order, n.ring_pages), (4, 4, 16));
    assert_eq!(n.with_rings(connected.rings()), connected);
}
