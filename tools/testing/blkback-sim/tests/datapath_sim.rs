// SPDX-License-Identifier: GPL-2.0

//! blkcore's data path (mapping + grants + ring) against the blkback model.

use blkback_sim::backend::{BackendConfig, MAX_INDIRECT_SEGMENTS, MAX_PERSISTENT_GRANTS};
use blkback_sim::frontend::{BlockRequest, FrontError, FrontendConfig};
use blkback_sim::harness::{Sim, SimConfig};
use blkcore::datapath::{Fault, Request, Status};
use blkcore::mapping::Piece;
use proptest::prelude::*;

/// A backend with persistent grants or not; the frontend offers them and
/// negotiates from the backend's keys (`blkcore::negotiate`, as the kernel
/// does).
fn sim(
    backend_persistent: bool,
    trusted: bool,
    modparam_segs: u32,
    ring_pages: u32,
    start: u32,
    seed: u64,
) -> Sim {
    let back = BackendConfig {
        persistent: backend_persistent,
        ring_pages,
        start_idx: start,
        ..BackendConfig::default()
    };
    let front = FrontendConfig {
        feature_persistent: true,
        trusted,
        max_indirect_segments: modparam_segs,
        ring_pages,
        start_idx: start,
    };
    Sim::new(
        SimConfig {
            front,
            back,
            guest_frames: 40_000,
        },
        seed,
    )
}

fn run(s: &mut Sim, rounds: u32) {
    for _ in 0..rounds {
        s.step(12).expect("step");
    }
    s.drain().expect("drain");
    s.check_disk();
    s.check_grants();
    assert_eq!(s.pending(), 0);
}

/// Tears down in the real order (backend disconnects first), then checks
/// that no grant is left.
fn teardown_all(s: &mut Sim) {
    s.back.disconnect(&mut s.gt);
    let deferred = s.front.teardown(&mut s.gt);
    assert_eq!(deferred, 0);
    assert_eq!(s.gt.live_grants(), 0, "grants left after teardown");
}

#[test]
fn data_integrity_persistent() {
    let mut s = sim(true, true, 32, 1, 0, 1);
    run(&mut s, 400);
    assert!(s.stats.reads_verified > 100);
    assert!(s.stats.indirect > 10);
    assert!(s.front.grant_stats().bytes_copied > 0);
    assert!(s.front.grant_stats().reused > 0);
    teardown_all(&mut s);
}

#[test]
fn data_integrity_non_persistent_trusted() {
    let mut s = sim(false, true, 32, 1, 0, 2);
    run(&mut s, 400);
    assert!(s.stats.reads_verified > 100);
    assert!(s.stats.indirect > 10);
    let g = s.front.grant_stats();
    assert_eq!(
        g.bytes_copied, 0,
        "no copy without persistent grants (trusted backend)"
    );
    assert_eq!(g.reused, 0);
    assert_eq!(g.granted, g.revoked, "every grant ended at completion");
    assert_eq!(s.gt.live_grants(), 0);
    assert_eq!(s.back.persistent_grants(), 0);
    teardown_all(&mut s);
}

#[test]
fn data_integrity_non_persistent_untrusted_bounces() {
    let mut s = sim(false, false, 32, 1, 0, 3);
    run(&mut s, 300);
    let g = s.front.grant_stats();
    assert!(g.bytes_copied > 0, "untrusted backend: data is bounced");
    assert_eq!(g.granted, g.revoked);
    assert_eq!(s.gt.live_grants(), 0);
    teardown_all(&mut s);
}

#[test]
fn max_indirect_and_multi_page_ring() {
    for (persistent, seed) in [(true, 4), (false, 5)] {
        let mut s = sim(persistent, true, 256, 4, 0, seed);
        run(&mut s, 150);
        assert!(s.stats.indirect > 10);
        teardown_all(&mut s);
    }
}

#[test]
fn no_indirect_backend() {
    let mut s = sim(true, true, 11, 1, 0, 6);
    run(&mut s, 200);
    assert_eq!(s.stats.indirect, 0);
    teardown_all(&mut s);
}

#[test]
fn persistent_steady_state_has_no_grant_ops() {
    // Default blkfront (32 segments, one page) against default blkback:
    // pool = (32 + 1) * 32 = 1056 = max_persistent_grants.
    let mut s = sim(true, true, 32, 1, 0, 7);
    s.fill_ring(32).expect("warm-up");
    assert_eq!(s.back.persistent_grants(), MAX_PERSISTENT_GRANTS);
    let before = (s.front.grant_stats(), s.gt.stats);
    assert_eq!(before.0.held, MAX_PERSISTENT_GRANTS as u32);
    run(&mut s, 300);
    let after = (s.front.grant_stats(), s.gt.stats);
    assert_eq!(
        after.0.granted, before.0.granted,
        "new grants after warm-up"
    );
    assert_eq!(
        after.0.revoked, before.0.revoked,
        "revocations after warm-up"
    );
    assert_eq!(after.1.grant_ops, before.1.grant_ops);
    assert_eq!(
        after.1.map_ops, before.1.map_ops,
        "backend map ops after warm-up"
    );
    assert_eq!(after.1.unmap_ops, before.1.unmap_ops);
    assert!(after.0.reused > before.0.reused + 1000);
    teardown_all(&mut s);
}

#[test]
fn backend_purge_then_frontend_purge_revokes_idle_grants() {
    let mut s = sim(true, true, 32, 1, 0, 8);
    s.fill_ring(32).expect("warm-up");
    let held = s.front.grant_stats().held;
    // blkback drops unused persistent grants (persistent_grant_unused_seconds).
    let dropped = s.back.purge_persistent(&mut s.gt, 100) as u32;
    assert!(dropped > 0);
    let purged = s.front.purge(&mut s.gt);
    assert_eq!(purged, dropped);
    assert_eq!(s.front.grant_stats().held, held - dropped);
    assert_eq!(s.gt.live_grants(), 100);
    s.check_grants();
    // Still correct afterwards, re-granting as needed.
    run(&mut s, 100);
    teardown_all(&mut s);
}

#[test]
fn teardown_with_backend_still_mapping_defers() {
    let mut s = sim(true, true, 32, 1, 0, 9);
    run(&mut s, 50);
    let held = s.front.grant_stats().held;
    assert!(held > 0);
    let deferred = s.front.teardown(&mut s.gt);
    assert_eq!(deferred, held);
    assert_eq!(s.gt.deferred(), held as usize);
    // Once the backend lets go, nothing is left.
    s.back.disconnect(&mut s.gt);
    assert_eq!(s.gt.live_grants(), 0);
}

#[test]
fn teardown_with_requests_in_flight() {
    let mut s = sim(false, true, 32, 1, 0, 10);
    for _ in 0..5 {
        let r = s.random_rw(32).unwrap();
        s.submit(r).unwrap();
    }
    assert!(s.gt.live_grants() > 0);
    s.front.teardown(&mut s.gt);
    assert_eq!(s.gt.live_grants(), 0);
}

#[test]
fn backend_keeping_grants_without_persistent_is_an_error() {
    // A non-persistent frontend, bouncing data (untrusted) or granting the
    // request's own pages before the ring lock (trusted); a buggy backend
    // keeps mappings. A read: its frame is granted writable, which the
    // backend's persistent mapping needs (a write's own page is granted
    // read-only, which it fails to map).
    for trusted in [false, true] {
        let back = BackendConfig {
            persistent: true,
            ..BackendConfig::default()
        };
        let front = FrontendConfig {
            feature_persistent: false,
            trusted,
            max_indirect_segments: 32,
            ring_pages: 1,
            start_idx: 0,
        };
        let mut s = Sim::new(
            SimConfig {
                front,
                back,
                guest_frames: 4096,
            },
            11,
        );
        let pieces = vec![Piece {
            page: s.gt.alloc_frames(1).unwrap(),
            offset: 0,
            len: 4096,
        }];
        s.submit(BlockRequest {
            req: Request::Read { sector: 0 },
            pieces,
        })
        .unwrap();
        s.kick();
        s.run_backend(u32::MAX);
        let err = s.run_frontend().unwrap_err();
        assert!(
            matches!(err, FrontError::Broken(Fault::StillMapped(_))),
            "trusted {trusted}: {err:?}"
        );
        let g = s.front.grant_stats();
        if trusted {
            // The request's own page: held, its grant neither ended nor
            // deferred, until the backend lets go.
            assert_eq!((g.deferred, g.in_use, s.front.held()), (0, 1, 1));
        } else {
            // A bounce frame: deferred and retired; the request ended.
            assert_eq!((g.deferred, g.in_use, s.front.held()), (1, 0, 0));
        }
        // Teardown keeps the held request; once the backend goes away it
        // ends with an I/O error and nothing is left granted.
        s.front.teardown(&mut s.gt);
        s.back.disconnect(&mut s.gt);
        let ended = s.front.retry_held(&mut s.gt);
        assert_eq!(ended.len(), usize::from(trusted), "trusted {trusted}");
        assert!(ended.iter().all(|d| d.status == Status::IoErr));
        assert_eq!(s.front.held(), 0, "trusted {trusted}");
        assert_eq!(s.gt.live_grants(), 0, "trusted {trusted}");
    }
}

#[test]
fn persistent_pool_larger_than_backend_cap_keeps_working() {
    // 256 segments: pool (256+1)*32 = 8224 grants > 1056 cap; the excess
    // is granted and revoked per request (no stale grants left behind).
    let mut s = sim(true, true, MAX_INDIRECT_SEGMENTS, 1, 0, 12);
    run(&mut s, 150);
    assert!(s.back.persistent_grants() <= MAX_PERSISTENT_GRANTS);
    assert_eq!(
        s.front.grant_stats().held as usize,
        s.back.persistent_grants()
    );
    teardown_all(&mut s);
}

#[test]
fn misaligned_request_is_rejected_before_the_ring() {
    let mut s = sim(true, true, 32, 1, 0, 13);
    let page = s.gt.alloc_frames(1).unwrap();
    let err = s
        .submit(BlockRequest {
            req: Request::Read { sector: 0 },
            pieces: vec![Piece {
                page,
                offset: 100,
                len: 512,
            }],
        })
        .unwrap_err();
    assert_eq!(err, FrontError::Io);
    assert_eq!(s.front.in_flight(), 0);
    assert_eq!(s.gt.live_grants(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Indices start just below 2^32 and wrap many times over; every
    /// request still completes with the right data, in both modes.
    #[test]
    fn ring_wraps_around(
        back_off in 0u32..200,
        persistent in any::<bool>(),
        pages in prop::sample::select(vec![1u32, 2]),
        seed in any::<u64>(),
        rounds in 100u32..300,
    ) {
        let start = u32::MAX - back_off;
        let mut s = sim(persistent, true, 32, pages, start, seed);
        run(&mut s, rounds);
        let ring = s.front.ring();
        // Wrapped past zero (free-running indices).
        prop_assert!(ring.req_prod_pvt() < start);
        prop_assert_eq!(ring.req_prod_pvt(), ring.rsp_cons());
        teardown_all(&mut s);
    }
}
