// SPDX-License-Identifier: GPL-2.0

//! Queue limits: exact values for known devices, invariants for all valid
//! inputs, and no overflow/panic for arbitrary ones.

use blkcore::limits::{virtio_limits, xen_limits, QueueLimits};
use blkcore::negotiate::*;
use blkcore::virtio::*;
use blkcore::xenstore::SliceValues;
use proptest::prelude::*;

fn neg(pairs: &[(&str, &str)], p: &FrontendParams) -> Negotiated {
    negotiate(&SliceValues(pairs), p).unwrap()
}

#[test]
fn xen_blkback_limits() {
    let pairs = [
        ("sectors", "2097152"),
        ("info", "0"),
        ("sector-size", "512"),
        ("physical-sector-size", "4096"),
        ("feature-flush-cache", "1"),
        ("feature-discard", "1"),
        ("discard-granularity", "0"),
        ("discard-alignment", "0"),
        ("discard-secure", "1"),
        ("feature-persistent", "1"),
        ("feature-max-indirect-segments", "256"),
    ];
    let l = xen_limits(&neg(&pairs, &FrontendParams::default()));
    assert_eq!(
        l,
        QueueLimits {
            logical_block_size: 512,
            physical_block_size: 4096,
            alignment_offset: 0,
            io_min: 4096,
            io_opt: 0,
            max_hw_sectors: 32 * 8,
            max_segments: 32,
            max_segment_size: 4096,
            seg_boundary_mask: 4095,
            discard_granularity: 4096,
            discard_alignment: 0,
            max_discard_sectors: u32::MAX,
            max_discard_segments: 1,
            max_secure_erase_sectors: u32::MAX,
            max_write_zeroes_sectors: 0,
            rotational: None,
            read_only: false,
            write_cache: true,
            fua: false,
        }
    );
    assert_eq!(l.check_invariants(), Ok(()));
}

#[test]
fn xen_direct_barrier_readonly_extension_keys() {
    let pairs = [
        ("sectors", "8"),
        ("info", "4"),
        ("sector-size", "4096"),
        ("feature-barrier", "1"),
        ("minimum-io-size", "65536"),
        ("optimal-io-size", "196608"),
    ];
    let l = xen_limits(&neg(&pairs, &FrontendParams::default()));
    assert_eq!((l.max_segments, l.max_hw_sectors), (11, 88));
    assert_eq!((l.logical_block_size, l.physical_block_size), (4096, 4096));
    assert_eq!((l.io_min, l.io_opt), (65536, 196_608));
    assert!(l.read_only && l.write_cache && l.fua);
    assert_eq!((l.max_discard_sectors, l.discard_granularity), (0, 0));
    assert_eq!(l.check_invariants(), Ok(()));
}

#[test]
fn xen_fua_only_where_a_barrier_can_carry_it() {
    // Barrier-only backend with indirect descriptors: a FUA write may need
    // an indirect request, which cannot be a barrier, so no FUA (the block
    // layer then sends write + empty barrier).
    let pairs = [
        ("sectors", "8"),
        ("info", "0"),
        ("sector-size", "512"),
        ("feature-barrier", "1"),
        ("feature-max-indirect-segments", "256"),
    ];
    let n = neg(&pairs, &FrontendParams::default());
    assert_eq!(n.flush, Some(FlushKind::Barrier));
    assert!(n.indirect_segments > 0);
    let l = xen_limits(&n);
    assert!(l.write_cache && !l.fua);
    // A flush-cache backend never gets FUA either.
    let pairs = [
        ("sectors", "8"),
        ("info", "0"),
        ("sector-size", "512"),
        ("feature-barrier", "1"),
        ("feature-flush-cache", "1"),
    ];
    let l = xen_limits(&neg(&pairs, &FrontendParams::default()));
    assert!(l.write_cache && !l.fua);
}

#[test]
fn xen_limits_saturate_on_hand_built_input() {
    let mut n = neg(
        &[("sectors", "8"), ("info", "0"), ("sector-size", "512")],
        &FrontendParams::default(),
    );
    n.segments_per_request = u32::MAX;
    n.indirect_segments = u32::MAX;
    let l = xen_limits(&n);
    assert_eq!(l.max_hw_sectors, u32::MAX);
    assert_eq!(l.max_segments, u32::MAX);
}

fn qemu() -> VirtioBlkConfig {
    let mut cfg = [0u8; 96];
    let mut put = |off: usize, b: &[u8]| cfg[off..off + b.len()].copy_from_slice(b);
    put(offset::CAPACITY, &2_097_152u64.to_le_bytes());
    put(offset::SIZE_MAX, &65536u32.to_le_bytes());
    put(offset::SEG_MAX, &254u32.to_le_bytes());
    put(offset::BLK_SIZE, &512u32.to_le_bytes());
    put(offset::PHYSICAL_BLOCK_EXP, &[3]);
    put(offset::ALIGNMENT_OFFSET, &[1]);
    put(offset::MIN_IO_SIZE, &8u16.to_le_bytes());
    put(offset::OPT_IO_SIZE, &2048u32.to_le_bytes());
    put(offset::WCE, &[1]);
    put(offset::NUM_QUEUES, &2u16.to_le_bytes());
    put(offset::MAX_DISCARD_SECTORS, &4_194_303u32.to_le_bytes());
    put(offset::MAX_DISCARD_SEG, &1u32.to_le_bytes());
    put(offset::DISCARD_SECTOR_ALIGNMENT, &8u32.to_le_bytes());
    put(offset::MAX_WRITE_ZEROES_SECTORS, &0u32.to_le_bytes());
    put(offset::MAX_WRITE_ZEROES_SEG, &1u32.to_le_bytes());
    let f = [
        VIRTIO_BLK_F_SIZE_MAX,
        VIRTIO_BLK_F_SEG_MAX,
        VIRTIO_BLK_F_BLK_SIZE,
        VIRTIO_BLK_F_FLUSH,
        VIRTIO_BLK_F_TOPOLOGY,
        VIRTIO_BLK_F_CONFIG_WCE,
        VIRTIO_BLK_F_MQ,
        VIRTIO_BLK_F_DISCARD,
        VIRTIO_BLK_F_WRITE_ZEROES,
    ]
    .iter()
    .fold(0, |m, &b| m | feature_mask(b));
    VirtioBlkConfig::parse(&cfg, f).unwrap()
}

#[test]
fn virtio_qemu_limits() {
    let l = virtio_limits(&qemu(), usize::MAX).unwrap();
    assert_eq!(
        l,
        QueueLimits {
            logical_block_size: 512,
            physical_block_size: 4096,
            alignment_offset: 512,
            io_min: 4096,
            io_opt: 1_048_576,
            max_hw_sectors: u32::MAX,
            max_segments: 254,
            max_segment_size: 65536,
            seg_boundary_mask: 0,
            discard_granularity: 4096,
            discard_alignment: 0,
            max_discard_sectors: 4_194_303,
            max_discard_segments: 1,
            max_secure_erase_sectors: 0,
            max_write_zeroes_sectors: u32::MAX,
            rotational: Some(true),
            read_only: false,
            write_cache: true,
            fua: false,
        }
    );
    assert_eq!(l.check_invariants(), Ok(()));
    // The transport's DMA limit caps the segment size...
    assert_eq!(
        virtio_limits(&qemu(), 16384).unwrap().max_segment_size,
        16384
    );
    // ...and one below a page is an error naming it.
    let e = virtio_limits(&qemu(), 2048).unwrap_err();
    assert_eq!(e.field, "transport max_dma_size");
}

#[test]
fn virtio_bare_device_defaults() {
    let c = VirtioBlkConfig::parse(&64u64.to_le_bytes(), 0).unwrap();
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!(
        (
            l.logical_block_size,
            l.physical_block_size,
            l.io_min,
            l.io_opt
        ),
        (512, 512, 512, 0)
    );
    assert_eq!((l.max_segments, l.max_segment_size), (1, u32::MAX));
    assert_eq!(
        (
            l.max_discard_sectors,
            l.discard_granularity,
            l.max_write_zeroes_sectors
        ),
        (0, 0, 0)
    );
    assert_eq!(l.rotational, Some(true));
    assert!(!l.write_cache);
    assert_eq!(l.check_invariants(), Ok(()));
}

#[test]
fn virtio_secure_erase_combines_with_discard() {
    let mut c = qemu();
    c.secure_erase = Some(SecureEraseConfig {
        max_sectors: 2048,
        max_seg: 4,
        sector_alignment: 16,
    });
    c.discard = Some(DiscardConfig {
        max_sectors: 0,
        max_seg: 0,
        sector_alignment: 0,
    });
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!(l.max_discard_sectors, u32::MAX, "0 = unlimited");
    assert_eq!(l.max_discard_segments, 4);
    assert_eq!(l.discard_granularity, 16 * 512);
    assert_eq!(l.max_secure_erase_sectors, 2048);
    // Secure erase alone: no discard, so no discard granularity (what
    // blk_validate_limits leaves of upstream's value).
    c.discard = None;
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!(
        (
            l.max_discard_sectors,
            l.discard_granularity,
            l.max_secure_erase_sectors
        ),
        (0, 0, 2048)
    );
    assert_eq!(l.check_invariants(), Ok(()));
    // No max_discard_seg from either: seg_max, capped at 256.
    c.secure_erase = None;
    c.discard = Some(DiscardConfig {
        max_sectors: 8,
        max_seg: 0,
        sector_alignment: 0,
    });
    c.seg_max = 1000;
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!((l.max_discard_segments, l.discard_granularity), (256, 4096));
}

#[test]
fn virtio_io_hints_follow_block_layer_fixups() {
    let mut c = qemu();
    c.min_io_size = 1; // 512 < physical 4096: raised
    c.opt_io_size = 9; // 4608: rounded down to 4096
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!((l.io_min, l.io_opt), (4096, 4096));
    c.opt_io_size = 7; // below one physical block: none
    assert_eq!(virtio_limits(&c, usize::MAX).unwrap().io_opt, 0);
}

#[test]
fn check_invariants_catches_violations() {
    let good = virtio_limits(&qemu(), usize::MAX).unwrap();
    let cases: [fn(&mut QueueLimits); 8] = [
        |l| l.logical_block_size = 1000,
        |l| l.physical_block_size = 256,
        |l| l.io_min = 6144,
        |l| l.io_opt = 100,
        |l| l.max_segments = 0,
        |l| l.max_segment_size = 512,
        |l| l.discard_alignment = l.discard_granularity,
        |l| {
            l.write_cache = false;
            l.fua = true;
        },
    ];
    for (i, f) in cases.iter().enumerate() {
        let mut l = good;
        f(&mut l);
        assert!(l.check_invariants().is_err(), "case {i}");
    }
}

/// Valid backend directories: every key drawn from its valid domain.
fn valid_xen_dir() -> impl Strategy<Value = (Vec<(&'static str, String)>, FrontendParams)> {
    (
        9u32..=12,                   // log2 logical
        0u32..=4,                    // physical = logical << k (capped at 64K below)
        prop::option::of(0u32..=6),  // io_min = physical << k
        prop::option::of(1u32..=64), // io_opt = physical * k (>= io_min enforced)
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(any::<u32>()),
        prop::option::of((0u32..=3, any::<bool>())),
        any::<(u32, u32, u32, bool, bool)>(),
        0..=u64::MAX / 512,
    )
        .prop_map(
            |(
                ll,
                pk,
                min_k,
                opt_k,
                barrier,
                flush,
                persistent,
                indirect,
                discard,
                params,
                sectors,
            )| {
                let logical = 1u32 << ll;
                let physical = (logical << pk).min(65536);
                let mut v: Vec<(&'static str, String)> = vec![
                    (KEY_SECTORS, sectors.to_string()),
                    (KEY_INFO, (params.0 & 7).to_string()),
                    (KEY_SECTOR_SIZE, logical.to_string()),
                    (KEY_PHYSICAL_SECTOR_SIZE, physical.to_string()),
                    (KEY_FEATURE_BARRIER, u8::from(barrier).to_string()),
                    (KEY_FEATURE_FLUSH_CACHE, u8::from(flush).to_string()),
                    (KEY_FEATURE_PERSISTENT, u8::from(persistent).to_string()),
                    (KEY_MAX_RING_PAGE_ORDER, (params.1 % 8).to_string()),
                    (KEY_MULTI_QUEUE_MAX_QUEUES, (params.2 % 64).to_string()),
                ];
                let min = min_k.map(|k| physical << k);
                if let Some(m) = min {
                    v.push((KEY_MINIMUM_IO_SIZE, m.to_string()));
                }
                if let Some(k) = opt_k {
                    v.push((
                        KEY_OPTIMAL_IO_SIZE,
                        (physical * k).max(min.unwrap_or(0)).to_string(),
                    ));
                }
                if let Some(i) = indirect {
                    v.push((KEY_FEATURE_MAX_INDIRECT_SEGMENTS, i.to_string()));
                }
                if let Some((g, secure)) = discard {
                    let gran = if g == 0 { 0 } else { logical << g };
                    v.push((KEY_FEATURE_DISCARD, "1".to_string()));
                    v.push((KEY_DISCARD_GRANULARITY, gran.to_string()));
                    v.push((
                        KEY_DISCARD_ALIGNMENT,
                        if gran > 512 { "512" } else { "0" }.to_string(),
                    ));
                    v.push((KEY_DISCARD_SECURE, u8::from(secure).to_string()));
                }
                let p = FrontendParams {
                    max_indirect_segments: params.0 % 5000,
                    max_queues: params.1 % 70,
                    max_ring_page_order: params.2 % 8,
                    feature_persistent: params.3,
                    trusted: params.4,
                };
                (v, p)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn xen_limits_invariants((dir, p) in valid_xen_dir()) {
        let pairs: Vec<(&str, &str)> = dir.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let n = negotiate(&SliceValues(&pairs), &p).unwrap();
        let l = xen_limits(&n);
        prop_assert_eq!(l.check_invariants(), Ok(()));
        prop_assert_eq!(l.logical_block_size, n.sector_size);
        prop_assert_eq!(l.physical_block_size, n.physical_sector_size);
        prop_assert!(l.physical_block_size >= l.logical_block_size);
        prop_assert_eq!(l.io_min % l.physical_block_size, 0);
        prop_assert_eq!(l.io_min, n.minimum_io_size.unwrap_or(n.physical_sector_size));
        prop_assert_eq!(l.io_opt, n.optimal_io_size.unwrap_or(0));
        prop_assert_eq!(l.max_segments, n.segments_per_request);
        prop_assert_eq!(u64::from(l.max_hw_sectors), u64::from(n.segments_per_request) * 4096 / 512);
        prop_assert_eq!(l.max_segment_size, 4096);
        prop_assert_eq!(l.max_discard_sectors != 0, n.discard.is_some());
        prop_assert_eq!(l.write_cache, n.flush.is_some());
        prop_assert_eq!(l.read_only, n.info & VDISK_READONLY != 0);
    }

    /// Any hand-built Negotiated: xen_limits never panics.
    #[test]
    fn xen_limits_total(
        segs in any::<u32>(), ss in any::<u32>(), ps in any::<u32>(),
        min in any::<Option<u32>>(), opt in any::<Option<u32>>(),
        disc in any::<Option<(u32, u32, bool)>>(),
    ) {
        let mut n = neg(&[("sectors", "8"), ("info", "0"), ("sector-size", "512")], &FrontendParams::default());
        n.segments_per_request = segs;
        n.sector_size = ss;
        n.physical_sector_size = ps;
        n.minimum_io_size = min;
        n.optimal_io_size = opt;
        n.discard = disc.map(|(granularity, alignment, secure)| Discard { granularity, alignment, secure });
        let l = xen_limits(&n);
        prop_assert!(l.max_segments >= 1);
        prop_assert!(l.physical_block_size >= l.logical_block_size);
    }

    /// Any config that parses yields limits satisfying the invariants.
    #[test]
    fn virtio_limits_invariants(
        bytes in prop::collection::vec(any::<u8>(), 96),
        features in any::<u64>(),
        dma in prop_oneof![Just(usize::MAX), 4096usize..1 << 20],
    ) {
        if let Ok(c) = VirtioBlkConfig::parse(&bytes, features) {
            let l = virtio_limits(&c, dma).unwrap();
            prop_assert_eq!(l.check_invariants(), Ok(()));
            prop_assert_eq!(l.logical_block_size, c.blk_size);
            prop_assert_eq!(l.physical_block_size, c.physical_block_size());
            prop_assert_eq!(l.max_segments, c.seg_max);
            prop_assert!(l.max_segment_size <= c.size_max.unwrap_or(u32::MAX));
            prop_assert_eq!(l.read_only, c.read_only);
        }
    }

    /// Valid topologies mostly parse (the byte soup above rarely does).
    #[test]
    fn virtio_topology_invariants(
        lbs_log in 9u32..=16, exp in any::<u8>(), align in any::<u8>(),
        min_io in any::<u16>(), opt_io in any::<u32>(),
        disc_align in any::<u32>(), disc_seg in any::<u32>(),
    ) {
        let mut cfg = [0u8; 96];
        cfg[offset::BLK_SIZE..offset::BLK_SIZE + 4].copy_from_slice(&(1u32 << lbs_log).to_le_bytes());
        cfg[offset::PHYSICAL_BLOCK_EXP] = exp;
        cfg[offset::ALIGNMENT_OFFSET] = align;
        cfg[offset::MIN_IO_SIZE..offset::MIN_IO_SIZE + 2].copy_from_slice(&min_io.to_le_bytes());
        cfg[offset::OPT_IO_SIZE..offset::OPT_IO_SIZE + 4].copy_from_slice(&opt_io.to_le_bytes());
        cfg[offset::DISCARD_SECTOR_ALIGNMENT..offset::DISCARD_SECTOR_ALIGNMENT + 4].copy_from_slice(&disc_align.to_le_bytes());
        cfg[offset::MAX_DISCARD_SEG..offset::MAX_DISCARD_SEG + 4].copy_from_slice(&disc_seg.to_le_bytes());
        let f = [VIRTIO_BLK_F_BLK_SIZE, VIRTIO_BLK_F_TOPOLOGY, VIRTIO_BLK_F_DISCARD]
            .iter().fold(0, |m, &b| m | feature_mask(b));
        // Advisory fields only: every such device is accepted, clamped.
        let c = VirtioBlkConfig::parse(&cfg, f).unwrap();
        let l = virtio_limits(&c, usize::MAX).unwrap();
        prop_assert_eq!(l.check_invariants(), Ok(()));
        // The block layer's masking of the offset.
        let pbs = u64::from(l.physical_block_size);
        prop_assert_eq!(u64::from(l.alignment_offset), (u64::from(align) << lbs_log) % pbs);
        prop_assert!(l.max_discard_segments <= 256);
        if opt_io != 0 {
            prop_assert!(u64::from(l.io_opt) <= u64::from(opt_io) << lbs_log);
        }
        for cl in c.clamps.iter() {
            prop_assert!(["physical_block_exp", "alignment_offset", "min_io_size",
                "opt_io_size", "discard_sector_alignment"].contains(&cl.field), "{}", cl);
        }
    }
}

/// A guest restored onto a backend with fewer indirect segments cannot
/// resubmit the requests its queue already built; the same or a wider
/// backend can.
#[test]
fn reconnect_admits_requests_only_under_equal_or_wider_limits() {
    let backend = |segs: &'static str, sector: &'static str| {
        [
            ("sectors", "2097152"),
            ("info", "0"),
            ("sector-size", sector),
            ("feature-max-indirect-segments", segs),
        ]
    };
    let at = |segs, sector, max| {
        xen_limits(&neg(
            &backend(segs, sector),
            &FrontendParams {
                max_indirect_segments: max,
                ..FrontendParams::default()
            },
        ))
    };
    let old = at("256", "512", 32);
    assert_eq!(at("256", "512", 32).admits_requests_of(&old), Ok(()));
    assert_eq!(at("256", "512", 64).admits_requests_of(&old), Ok(()));
    assert_eq!(
        at("16", "512", 32).admits_requests_of(&old),
        Err("max_hw_sectors shrank")
    );
    assert_eq!(
        at("0", "512", 32).admits_requests_of(&old),
        Err("max_hw_sectors shrank")
    );
    assert_eq!(
        at("256", "4096", 32).admits_requests_of(&old),
        Err("logical block size changed")
    );
}

proptest! {
    /// Limits always admit their own requests, and never those of limits
    /// with more segments.
    #[test]
    fn admits_is_reflexive_and_monotonic(a in 11u32..=512, b in 11u32..=512) {
        let l = |m| xen_limits(&neg(
            &[("sectors", "8"), ("info", "0"), ("sector-size", "512"), ("feature-max-indirect-segments", "256")],
            &FrontendParams { max_indirect_segments: m, ..FrontendParams::default() },
        ));
        let (la, lb) = (l(a), l(b));
        prop_assert_eq!(la.admits_requests_of(&la), Ok(()));
        prop_assert_eq!(la.admits_requests_of(&lb).is_ok(), la.max_segments >= lb.max_segments);
    }
}

/// Xen segments are single frames: the mask keeps the block layer from
/// merging across a page; a mask that is not a power-of-two span, or
/// narrower than a segment, is rejected.
#[test]
fn seg_boundary_mask_rules() {
    let pairs = [("sectors", "8"), ("info", "0"), ("sector-size", "512")];
    let x = xen_limits(&neg(&pairs, &FrontendParams::default()));
    assert_eq!(x.seg_boundary_mask, 4095);
    assert_eq!(x.check_invariants(), Ok(()));
    for bad in [4094u64, 2047, 0x1_0000 + 4095] {
        let l = QueueLimits {
            seg_boundary_mask: bad,
            ..x
        };
        assert!(l.check_invariants().is_err(), "mask {bad:#x} accepted");
    }
    let wide = QueueLimits {
        seg_boundary_mask: 0,
        ..x
    };
    assert_eq!(
        x.admits_requests_of(&wide),
        Err("seg_boundary_mask narrowed")
    );
    assert_eq!(wide.admits_requests_of(&x), Ok(()));
}
