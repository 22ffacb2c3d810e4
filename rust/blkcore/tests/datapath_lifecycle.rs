// SPDX-License-Identifier: GPL-2.0

//! The Xen data path from request to completion against a backend that
//! does the I/O (tests/xen_host): data written reads back in every grant
//! mode, statuses follow the responses, withdrawn features stop reaching
//! the backend, a protocol error fails everything in flight, and grants
//! end when their requests do.

mod xen_host;

use blkcore::blkif::{
    BlkifResponse,
    Request as WireRequest,
    BLKIF_DISCARD_SECURE,
    BLKIF_OP_FLUSH_DISKCACHE,
    BLKIF_OP_READ,
    BLKIF_OP_WRITE,
    BLKIF_OP_WRITE_BARRIER,
    BLKIF_RSP_EOPNOTSUPP,
    BLKIF_RSP_ERROR,
    BLKIF_RSP_OKAY, //
};
use blkcore::datapath::{
    Drained,
    Fault,
    QueueError,
    Request,
    RingStats,
    Status,
    PURGE_CHECK_EVERY,
    PURGE_INTERVAL_MS, //
};
use blkcore::negotiate::FlushKind;
use blkcore::ring::ResponseError;
use blkcore::stall::Silence;
use xen_host::{
    negotiated,
    op_of,
    pages,
    Rig,
    HANDLE,
    PAGE, //
};

/// (persistent, copy) of the three grant modes.
const MODES: [(bool, bool); 3] = [(true, true), (false, true), (false, false)];

fn write(sector: u64) -> Request {
    Request::Write { sector, fua: false }
}

fn read(sector: u64) -> Request {
    Request::Read { sector }
}

fn plain(persistent: bool, copy: bool, indirect: u32) -> Rig {
    Rig::new(negotiated(persistent, copy, indirect, None, false))
}

/// Fills data page `p` with a byte of its own.
fn pattern(rig: &mut Rig, first: u32, n: u32) {
    for p in first..first + n {
        rig.host.fill(p, 0x10 + p as u8);
    }
}

#[test]
fn written_data_reads_back_in_every_grant_mode() {
    for (persistent, copy) in MODES {
        // 3 pages: a direct request; 20: indirect (more than 11 segments).
        for (indirect, n) in [(0, 3), (32, 20)] {
            let what = format!("persistent {persistent} copy {copy} pages {n}");
            let mut rig = plain(persistent, copy, indirect);
            pattern(&mut rig, 0, n);
            rig.submit(1, write(8), &pages(0, n)).unwrap();
            assert_eq!(rig.run(BLKIF_RSP_OKAY), Drained::Responses, "{what}");
            for p in 0..n as usize {
                let at = (8 * 512) + p * PAGE;
                assert_eq!(
                    rig.backend.disk[at..at + PAGE],
                    rig.host.frames[p],
                    "{what}"
                );
            }
            rig.submit(2, read(8), &pages(30, n)).unwrap();
            rig.run(BLKIF_RSP_OKAY);
            assert_eq!(rig.done, [(1, Status::Ok), (2, Status::Ok)], "{what}");
            for p in 0..n as usize {
                assert_eq!(rig.host.frames[30 + p], rig.host.frames[p], "{what}");
            }
            let ops: Vec<_> = rig.backend.seen.iter().map(op_of).collect();
            assert_eq!(ops, [BLKIF_OP_WRITE, BLKIF_OP_READ], "{what}");
            let indirect_sent = rig
                .backend
                .seen
                .iter()
                .all(|r| matches!(r, WireRequest::Indirect(_)));
            assert_eq!(indirect_sent, indirect != 0, "{what}");
            let st = rig.dp.stats();
            assert_eq!(st.requests, 2, "{what}");
            assert_eq!(st.indirect_requests, if indirect != 0 { 2 } else { 0 });
            assert_eq!(rig.dp.in_flight(), 0, "{what}");
            assert_eq!(rig.dp.grant_stats().in_use, 0, "{what}");
            assert!(rig.host.grants.is_empty(), "{what}: every grant ended");
        }
    }
}

#[test]
fn requests_in_flight_together_keep_their_own_indirect_pages() {
    // 1100 segments: three indirect pages a request. Two such requests in
    // flight at once, answered only when both are on the ring: each slot's
    // pages must be its own, or one request's descriptors overwrite the
    // other's before the backend reads them.
    let n = 1100;
    let mut rig = plain(false, false, n);
    rig.backend = xen_host::Backend::new(2 * n as usize * PAGE / 512);
    pattern(&mut rig, 0, 64);
    let cycle = |first: u32| -> Vec<_> { (0..n).map(|i| pages(first + i % 32, 1)[0]).collect() };
    rig.submit(1, write(0), &cycle(0)).unwrap();
    rig.submit(2, write(u64::from(n) * 8), &cycle(32)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.done, [(1, Status::Ok), (2, Status::Ok)]);
    for (req, first) in [(0, 0), (1, 32)] {
        for i in 0..n as usize {
            let at = (req * n as usize + i) * PAGE;
            assert_eq!(
                rig.backend.disk[at..at + PAGE],
                rig.host.frames[first + i % 32],
                "request {req}, page {i}"
            );
        }
    }
}

#[test]
fn grants_in_flight_are_what_the_backend_was_given() {
    for (persistent, copy) in MODES {
        let mut rig = plain(persistent, copy, 32);
        rig.submit(1, write(0), &pages(0, 2)).unwrap();
        rig.submit(2, read(0), &pages(4, 12)).unwrap();
        let mut listed = Vec::new();
        rig.dp.for_each_grant_in_flight(|g| listed.push(g));
        listed.sort();
        let live: Vec<_> = rig.host.grants.keys().copied().collect();
        // Write: 2 data grants; read: 12 data grants and an indirect page.
        assert_eq!(listed.len(), 2 + 12 + 1);
        assert_eq!(listed, live, "persistent {persistent} copy {copy}");
        let data_frames_granted = rig.host.grants.values().filter(|g| g.frame < 64).count();
        if copy {
            assert_eq!(data_frames_granted, 0, "only bounce frames are granted");
            assert!(rig.host.grants.values().all(|g| !g.readonly));
        } else {
            // Write pages read-only, read pages writable.
            for g in rig.host.grants.values().filter(|g| g.frame < 64) {
                assert_eq!(g.readonly, g.frame < 2, "frame {}", g.frame);
            }
            assert_eq!(data_frames_granted, 14);
        }
    }
}

#[test]
fn a_failed_read_leaves_the_pages_untouched() {
    for (persistent, copy) in MODES {
        let mut rig = plain(persistent, copy, 0);
        rig.backend.disk.fill(0xaa);
        rig.host.fill(5, 0x55);
        rig.submit(1, read(0), &pages(5, 1)).unwrap();
        rig.run(BLKIF_RSP_ERROR);
        assert_eq!(rig.done, [(1, Status::IoErr)]);
        assert!(rig.host.frames[5].iter().all(|&b| b == 0x55));
        assert!(rig.host.grants.is_empty());
    }
}

#[test]
fn bounced_bytes_are_counted_both_ways() {
    let mut rig = plain(false, true, 0);
    rig.submit(1, write(0), &pages(0, 2)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.dp.grant_stats().bytes_copied, 2 * PAGE as u64);
    rig.submit(2, read(0), &pages(2, 3)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.dp.grant_stats().bytes_copied, 5 * PAGE as u64);
}

#[test]
fn fua_writes_go_out_as_the_backend_flushes() {
    let cases = [
        (Some(FlushKind::Flush), BLKIF_OP_FLUSH_DISKCACHE),
        (Some(FlushKind::Barrier), BLKIF_OP_WRITE_BARRIER),
        (None, BLKIF_OP_WRITE),
    ];
    for (flush, op) in cases {
        let mut rig = Rig::new(negotiated(false, false, 0, flush, false));
        pattern(&mut rig, 0, 1);
        rig.submit(
            1,
            Request::Write {
                sector: 3,
                fua: true,
            },
            &pages(0, 1),
        )
        .unwrap();
        rig.run(BLKIF_RSP_OKAY);
        assert_eq!(op_of(&rig.backend.seen[0]), op, "{flush:?}");
        assert_eq!(
            rig.backend.disk[3 * 512..3 * 512 + PAGE],
            rig.host.frames[0]
        );
        assert_eq!(rig.done, [(1, Status::Ok)]);
    }
}

#[test]
fn an_empty_flush_the_backend_refuses_completes_and_withdraws_flushes() {
    for (kind, barrier) in [(FlushKind::Flush, false), (FlushKind::Barrier, true)] {
        let mut rig = Rig::new(negotiated(false, false, 0, Some(kind), false));
        assert!(rig.dp.flushes());
        rig.submit(1, Request::Flush, &[]).unwrap();
        rig.run(BLKIF_RSP_EOPNOTSUPP);
        assert_eq!(rig.done, [(1, Status::Ok)], "{kind:?}");
        assert!(!rig.dp.flushes());
        assert_eq!(rig.dp.take_notes().flush, Some(barrier), "{kind:?}");
        assert_eq!(rig.dp.take_notes().flush, None, "reported once");
        assert_eq!(
            rig.submit(2, Request::Flush, &[]),
            Err(QueueError::CompleteWithoutSending)
        );
        // A FUA write now goes out as a plain write.
        rig.submit(
            3,
            Request::Write {
                sector: 0,
                fua: true,
            },
            &pages(0, 1),
        )
        .unwrap();
        rig.run(BLKIF_RSP_OKAY);
        assert_eq!(op_of(&rig.backend.seen[1]), BLKIF_OP_WRITE);
        assert_eq!(rig.backend.seen.len(), 2, "the refused flush never left");
    }
}

#[test]
fn a_refused_flush_with_data_fails() {
    let mut rig = Rig::new(negotiated(false, true, 0, Some(FlushKind::Barrier), false));
    rig.submit(
        1,
        Request::Write {
            sector: 0,
            fua: true,
        },
        &pages(0, 1),
    )
    .unwrap();
    rig.run(BLKIF_RSP_EOPNOTSUPP);
    assert_eq!(rig.done, [(1, Status::IoErr)]);
    assert_eq!(rig.dp.take_notes().flush, Some(true));
}

#[test]
fn a_refused_discard_is_not_supported_and_withdraws_discards() {
    let mut rig = Rig::new(negotiated(false, false, 0, None, true));
    assert!(rig.dp.discards());
    let discard = |secure| Request::Discard {
        sector: 64,
        nr_sectors: 16,
        secure,
    };
    rig.submit(1, discard(true), &[]).unwrap();
    rig.run(BLKIF_RSP_EOPNOTSUPP);
    assert_eq!(rig.done, [(1, Status::NotSupp)]);
    let WireRequest::Discard(d) = rig.backend.seen[0] else {
        panic!("not a discard: {:?}", rig.backend.seen[0]);
    };
    assert_eq!(
        (d.sector_number, d.nr_sectors, d.flag),
        (64, 16, BLKIF_DISCARD_SECURE)
    );
    assert!(!rig.dp.discards());
    assert!(rig.dp.take_notes().discard);
    assert!(!rig.dp.take_notes().discard, "reported once");
    assert_eq!(rig.submit(2, discard(false), &[]), Err(QueueError::NotSupp));
}

#[test]
fn a_discard_without_the_feature_or_of_nothing_is_refused() {
    let mut rig = Rig::new(negotiated(false, false, 0, None, false));
    let d = Request::Discard {
        sector: 0,
        nr_sectors: 8,
        secure: false,
    };
    assert_eq!(rig.submit(1, d, &[]), Err(QueueError::NotSupp));
    let mut rig = Rig::new(negotiated(false, true, 0, None, true));
    let empty = Request::Discard {
        sector: 0,
        nr_sectors: 0,
        secure: false,
    };
    assert_eq!(rig.submit(1, empty, &[]), Err(QueueError::Io));
    assert_eq!(rig.dp.in_flight(), 0, "its id was given back");
    assert_eq!(rig.front.req_prod_pvt(), 0);
}

#[test]
fn an_undefined_status_fails_the_request_and_is_noted_once() {
    let mut rig = plain(false, true, 0);
    rig.submit(1, write(0), &pages(0, 1)).unwrap();
    rig.run(7);
    rig.submit(2, read(0), &pages(1, 1)).unwrap();
    rig.run(9);
    assert_eq!(rig.done, [(1, Status::IoErr), (2, Status::IoErr)]);
    assert_eq!(
        rig.dp.take_notes().unknown_status,
        Some((7, BLKIF_OP_WRITE))
    );
    assert_eq!(rig.dp.take_notes().unknown_status, None);
}

#[test]
fn a_response_to_no_request_fails_everything_in_flight() {
    for (persistent, copy) in MODES {
        let mut rig = plain(persistent, copy, 0);
        for t in 0..3 {
            rig.submit(t, read(0), &pages(t, 2)).unwrap();
        }
        rig.push();
        rig.inject(BlkifResponse {
            id: 5,
            operation: BLKIF_OP_READ,
            ..BlkifResponse::default()
        });
        let r = rig.drain();
        assert_eq!(
            r,
            Drained::Broken {
                fault: Fault::Response(ResponseError::NotInFlight(5)),
                failed: 3,
            }
        );
        rig.done.sort_by_key(|d| d.0);
        assert_eq!(
            rig.done,
            [(0, Status::IoErr), (1, Status::IoErr), (2, Status::IoErr)]
        );
        assert_eq!(rig.dp.in_flight(), 0);
        assert_eq!(rig.dp.stats().errors, 1);
        assert_eq!(rig.dp.grant_stats().in_use, 0);
        assert!(
            rig.host.grants.is_empty(),
            "persistent {persistent} copy {copy}"
        );
    }
}

#[test]
fn a_grant_kept_mapped_without_persistence_breaks_the_ring_and_holds_the_callers_pages() {
    for copy in [true, false] {
        let mut rig = plain(false, copy, 0);
        rig.backend.keep_mapped = true;
        rig.submit(1, write(0), &pages(0, 1)).unwrap();
        rig.submit(2, write(8), &pages(1, 1)).unwrap();
        rig.push();
        // The backend answers the first request only, keeping its grant.
        let mut first = true;
        rig.answer(|_| {
            let st = if first {
                BLKIF_RSP_OKAY
            } else {
                BLKIF_RSP_ERROR
            };
            first = false;
            st
        });
        let kept = *rig.host.grants.keys().next().unwrap();
        let r = rig.drain();
        let failed = if copy { 1 } else { 0 };
        match r {
            Drained::Broken {
                fault: Fault::StillMapped(g),
                failed: f,
            } if f == failed => assert_eq!(g, kept, "copy {copy}"),
            other => panic!("copy {copy}: {other:?}"),
        }
        if copy {
            // Bounce frames: the callers' pages were never granted; the
            // frames the backend keeps are retired from the pool.
            assert_eq!(rig.done, [(1, Status::Ok), (2, Status::IoErr)]);
            assert_eq!(rig.host.deferred, 2, "both kept grants: release deferred");
            assert!(rig.host.grants.is_empty());
            assert_eq!(rig.dp.grant_stats().deferred, 2);
            assert_eq!(rig.dp.held(), 0);
            continue;
        }
        // The callers' own pages: neither request ends while the backend
        // can still write them, and no release is deferred.
        assert!(rig.done.is_empty(), "{:?}", rig.done);
        assert_eq!(rig.dp.held(), 2);
        assert_eq!(rig.host.grants.len(), 2);
        assert_eq!(rig.host.deferred, 0);
        assert_eq!(rig.dp.retry_held(&mut rig.host, &mut |_, _| {}), 0);
        // The backend lets go of the second only: it ends, with an error.
        let second = *rig.host.grants.keys().nth(1).unwrap();
        rig.host.grants.get_mut(&second).unwrap().mapped = false;
        let mut ended = Vec::new();
        assert_eq!(
            rig.dp
                .retry_held(&mut rig.host, &mut |t, s| ended.push((t, s))),
            1
        );
        assert_eq!(ended, [(2, Status::IoErr)]);
        assert_eq!(rig.dp.held(), 1);
        rig.host.grants.get_mut(&kept).unwrap().mapped = false;
        assert_eq!(
            rig.dp
                .retry_held(&mut rig.host, &mut |t, s| ended.push((t, s))),
            1
        );
        assert_eq!(ended, [(2, Status::IoErr), (1, Status::IoErr)]);
        assert_eq!(rig.dp.held(), 0);
        assert!(rig.host.grants.is_empty());
        assert_eq!(rig.dp.grant_stats().in_use, 0);
    }
}

#[test]
fn persistent_grants_stay_mapped_are_reused_and_purged() {
    let mut rig = plain(true, true, 0);
    rig.backend.keep_mapped = true;
    rig.submit(1, write(0), &pages(0, 3)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    let g = rig.dp.grant_stats();
    assert_eq!((g.granted, g.held, g.in_use, g.reused), (3, 3, 0, 0));
    assert_eq!(rig.host.grants.len(), 3, "kept for the next request");
    rig.submit(2, read(0), &pages(10, 2)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.host.frames[10], rig.host.frames[0]);
    let g = rig.dp.grant_stats();
    assert_eq!((g.granted, g.reused), (3, 2), "no new grants");
    // The backend lets go of them: a purge ends them.
    for g in rig.host.grants.values_mut() {
        g.mapped = false;
    }
    assert_eq!(rig.dp.purge(&mut rig.host), 3);
    assert!(rig.host.grants.is_empty());
    assert_eq!(rig.dp.grant_stats().held, 0);
}

#[test]
fn the_purge_reads_the_clock_every_256_passes_and_runs_every_10_s() {
    let mut rig = plain(true, true, 0);
    rig.backend.keep_mapped = true;
    rig.submit(1, write(0), &pages(0, 2)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    for g in rig.host.grants.values_mut() {
        g.mapped = false;
    }
    let mut reads = 0;
    let pass = |rig: &mut Rig, now: u64, reads: &mut u32| {
        rig.dp.maybe_purge(&mut rig.host, || {
            *reads += 1;
            now
        })
    };
    for _ in 1..PURGE_CHECK_EVERY {
        pass(&mut rig, PURGE_INTERVAL_MS, &mut reads);
    }
    assert_eq!(reads, 0, "the clock is not read before pass 256");
    // Pass 256 reads it: 10 s - 1 ms since the start: too early.
    pass(&mut rig, PURGE_INTERVAL_MS - 1, &mut reads);
    assert_eq!(reads, 1);
    assert_eq!(rig.host.grants.len(), 2);
    for _ in 0..PURGE_CHECK_EVERY {
        pass(&mut rig, PURGE_INTERVAL_MS, &mut reads);
    }
    assert_eq!(reads, 2);
    assert!(rig.host.grants.is_empty(), "purged 10 s after the start");
    assert_eq!(rig.dp.grant_stats().held, 0);

    // Without persistent grants there is nothing to purge: no clock.
    let rig = &mut plain(false, true, 0);
    for _ in 0..2 * PURGE_CHECK_EVERY {
        rig.dp.maybe_purge(&mut rig.host, || panic!("clock read"));
    }
}

#[test]
fn take_down_hands_back_what_is_in_flight_and_holds_what_the_backend_maps() {
    for (persistent, copy) in MODES {
        let mut rig = plain(persistent, copy, 32);
        rig.submit(4, read(0), &pages(0, 2)).unwrap();
        rig.submit(5, write(0), &pages(2, 12)).unwrap();
        // The backend maps the grants of the first request.
        let first: Vec<_> = rig.host.grants.keys().take(2).copied().collect();
        for g in &first {
            rig.host.grants.get_mut(g).unwrap().mapped = true;
        }
        let mut back = Vec::new();
        let deferred = rig.dp.take_down(&mut rig.host, |t| back.push(t));
        assert!(rig.done.is_empty(), "handed back, not ended");
        assert_eq!(rig.dp.in_flight(), 0);
        if copy {
            // Bounce frames: deferred, and both requests handed back.
            assert_eq!(deferred, 2);
            assert_eq!(back, [4, 5], "persistent {persistent} copy {copy}");
            assert!(rig.host.grants.is_empty());
            assert_eq!(rig.host.deferred, 2);
            assert_eq!(rig.dp.grant_stats().in_use, 0);
            continue;
        }
        // The first request's own pages are mapped: it stays held.
        assert_eq!((deferred, rig.host.deferred), (0, 0));
        assert_eq!(back, [5]);
        assert_eq!(rig.dp.held(), 1);
        assert_eq!(rig.host.grants.len(), 2);
        for g in &first {
            rig.host.grants.get_mut(g).unwrap().mapped = false;
        }
        let mut ended = Vec::new();
        rig.dp
            .retry_held(&mut rig.host, &mut |t, s| ended.push((t, s)));
        assert_eq!(ended, [(4, Status::IoErr)]);
        assert!(rig.host.grants.is_empty());
        assert_eq!(rig.dp.grant_stats().in_use, 0);
    }
}

#[test]
fn a_full_ring_is_busy_and_counted() {
    let mut rig = Rig::new(negotiated(false, false, 0, Some(FlushKind::Flush), false));
    let size = rig.front.size();
    for t in 0..size {
        rig.submit(t, Request::Flush, &[]).unwrap();
    }
    assert_eq!(rig.submit(size, Request::Flush, &[]), Err(QueueError::Busy));
    assert_eq!(
        rig.submit(size, read(0), &pages(0, 1)),
        Err(QueueError::Busy)
    );
    assert!(
        rig.host.grants.is_empty(),
        "the refused read's grants ended"
    );
    let st = rig.dp.stats();
    assert_eq!((st.requests, st.busy), (u64::from(size), 2));
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.done.len(), size as usize);
    assert!(rig.done.iter().all(|d| d.1 == Status::Ok));
}

#[test]
fn interrupts_without_responses_count_as_spurious() {
    let mut rig = plain(false, true, 0);
    assert_eq!(rig.drain(), Drained::NonePending);
    rig.submit(1, read(0), &pages(0, 1)).unwrap();
    assert_eq!(rig.run(BLKIF_RSP_OKAY), Drained::Responses);
    let st = rig.dp.stats();
    assert_eq!((st.interrupts, st.spurious_interrupts), (2, 1));
    assert_eq!(st.notifications, 1, "the first push notifies");
}

#[test]
fn out_of_grant_references_is_busy_and_gives_back_what_was_taken() {
    for (persistent, copy) in MODES {
        let mut rig = plain(persistent, copy, 0);
        rig.host.refs_left = Some(2);
        let r = rig.submit(1, write(0), &pages(0, 3));
        assert_eq!(
            r,
            Err(QueueError::Busy),
            "persistent {persistent} copy {copy}"
        );
        assert!(rig.host.grants.is_empty());
        assert_eq!(rig.dp.in_flight(), 0);
        // With references again, the same request goes through. (Without
        // bounce frames the refusal happened before the ring lock: the
        // data path counts it when it next queues.)
        rig.host.refs_left = None;
        rig.submit(1, write(0), &pages(0, 3)).unwrap();
        rig.run(BLKIF_RSP_OKAY);
        assert_eq!(rig.done, [(1, Status::Ok)]);
        let st = rig.dp.stats();
        assert_eq!((st.busy, st.out_of_grants, st.requests), (1, 1, 1));
    }
}

#[test]
fn a_request_no_ring_slot_can_carry_fails() {
    for (persistent, copy) in MODES {
        // 12 pages without indirect descriptors: more than 11 segments.
        let mut rig = plain(persistent, copy, 0);
        let r = rig.submit(1, read(0), &pages(0, 12));
        assert_eq!(
            r,
            Err(QueueError::Io),
            "persistent {persistent} copy {copy}"
        );
        assert!(rig.host.grants.is_empty());
        assert_eq!(rig.dp.in_flight(), 0);
        assert_eq!(rig.dp.stats().busy, 0);
    }
}

#[test]
fn ring_stats_add_every_counter() {
    let a = RingStats {
        requests: 1,
        indirect_requests: 2,
        notifications: 3,
        busy: 4,
        out_of_grants: 5,
        errors: 6,
        responses: 9,
        interrupts: 7,
        spurious_interrupts: 8,
        timeouts: 12,
    };
    let b = RingStats {
        requests: 10,
        indirect_requests: 20,
        notifications: 30,
        busy: 40,
        out_of_grants: 50,
        errors: 60,
        responses: 90,
        interrupts: 70,
        spurious_interrupts: 80,
        timeouts: 120,
    };
    let mut sum = a;
    sum.add(&b);
    assert_eq!(
        sum,
        RingStats {
            requests: 11,
            indirect_requests: 22,
            notifications: 33,
            busy: 44,
            out_of_grants: 55,
            errors: 66,
            responses: 99,
            interrupts: 77,
            spurious_interrupts: 88,
            timeouts: 132,
        }
    );
}

#[test]
fn faults_name_what_the_backend_did() {
    let cases = [
        (
            Fault::Response(ResponseError::BadId(99)),
            "response has incorrect id 99",
        ),
        (
            Fault::Response(ResponseError::NotInFlight(3)),
            "response 3 references no pending request",
        ),
        (
            Fault::Response(ResponseError::WrongOperation {
                id: 1,
                expected: 0,
                got: 1,
            }),
            "response 1 has wrong operation 1 (expected 0)",
        ),
        (Fault::Storm, "more responses than ring slots in one pass"),
        (
            Fault::StillMapped(42),
            "backend has not unmapped non-persistent grant 42",
        ),
        (
            Fault::Unanswered { silent_ms: 5000 },
            "no response for 5000 ms with requests in flight",
        ),
        (Fault::Injected, "fault injected"),
    ];
    for (f, text) in cases {
        assert_eq!(f.to_string(), text);
    }
    assert!(Fault::Producer(blkcore::ring::RingError::Full)
        .to_string()
        .starts_with("bad response producer: "));
}

#[test]
fn the_data_path_reports_its_mode_and_counts_direct_grants() {
    for (persistent, copy) in MODES {
        let mut rig = plain(persistent, copy, 0);
        assert_eq!(rig.dp.copy_data(), copy, "persistent {persistent}");
        assert_eq!(rig.dp.grants_before_lock(), !copy);
        assert_eq!(rig.dp.geometry().wire_max, 11);
        rig.submit(1, write(0), &pages(0, 3)).unwrap();
        assert_eq!(rig.dp.grant_stats().in_use, 3);
        rig.run(BLKIF_RSP_OKAY);
        let g = rig.dp.grant_stats();
        assert_eq!((g.granted, g.revoked, g.in_use, g.deferred), (3, 3, 0, 0));
    }
}

#[test]
fn descriptors_past_one_indirect_page_reach_the_backend() {
    // 600 one-sector pieces: 600 segments, two indirect pages. Without
    // bounce frames (a pool for 600-segment requests would be large).
    let mut rig = plain(false, false, 1024);
    assert_eq!(rig.dp.geometry().indirect_pages, 2);
    let pieces: Vec<_> = (0..600u32)
        .map(|i| blkcore::mapping::Piece {
            page: i % 64,
            offset: (i / 64 % 8) * 512,
            len: 512,
        })
        .collect();
    for p in 0..64 {
        for s in 0..8 {
            rig.host.frames[p][s * 512..(s + 1) * 512].fill((p * 8 + s) as u8);
        }
    }
    rig.submit(1, write(0), &pieces).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.done, [(1, Status::Ok)]);
    let WireRequest::Indirect(r) = rig.backend.seen[0] else {
        panic!("not indirect");
    };
    assert_eq!(r.nr_segments, 600);
    for (i, p) in pieces.iter().enumerate() {
        let want = (p.page * 8 + p.offset / 512) as u8;
        assert_eq!(rig.backend.disk[i * 512], want, "sector {i}");
    }
    assert!(rig.host.grants.is_empty());
}

#[test]
fn a_write_too_big_for_a_direct_request_cannot_carry_fua() {
    // Indirect requests are reads and writes only: a FUA write that
    // needs one (under feature-flush-cache) fails.
    let mut rig = Rig::new(negotiated(false, true, 32, Some(FlushKind::Flush), false));
    let r = rig.submit(
        1,
        Request::Write {
            sector: 0,
            fua: true,
        },
        &pages(0, 12),
    );
    assert_eq!(r, Err(QueueError::Io));
    assert!(rig.host.grants.is_empty());
    assert_eq!(rig.dp.in_flight(), 0);
    rig.submit(
        2,
        Request::Write {
            sector: 0,
            fua: true,
        },
        &pages(0, 11),
    )
    .unwrap();
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(op_of(&rig.backend.seen[0]), BLKIF_OP_FLUSH_DISKCACHE);
}

#[test]
fn an_exhausted_pool_is_busy_without_counting_missing_references() {
    // Pieces straddling two frames need twice the segments the pool was
    // sized for ((32 + 1) * 32 entries): the 17th such request finds it
    // empty and is retried, not failed.
    let mut rig = plain(false, true, 32);
    let straddling: Vec<_> = (0..32u32)
        .map(|i| blkcore::mapping::Piece {
            page: 2 * i,
            offset: 512,
            len: PAGE as u32,
        })
        .collect();
    for t in 0..16 {
        rig.submit(t, write(0), &straddling).unwrap();
    }
    let r = rig.submit(16, write(0), &straddling);
    assert_eq!(r, Err(QueueError::Busy));
    let st = rig.dp.stats();
    assert_eq!((st.busy, st.out_of_grants), (1, 0));
    assert_eq!(rig.dp.grant_stats().in_use, 16 * 65);
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.done.len(), 16);
    assert_eq!(rig.dp.grant_stats().in_use, 0);
}

#[test]
fn a_request_faked_in_flight_completes_from_its_response() {
    let mut rig = plain(false, true, 0);
    let id = rig.dp.fake_in_flight(BLKIF_OP_WRITE, 0, 9).unwrap();
    let id2 = rig.dp.fake_in_flight(BLKIF_OP_READ, 0, 10).unwrap();
    assert_ne!(id, id2);
    assert_eq!(rig.dp.in_flight(), 2);
    // The ring's own indices know nothing of them: produce two slots.
    let mut ring = blkcore::ring::SliceRing::new(&mut rig.ring_mem);
    for _ in 0..2 {
        rig.front.put_request(&mut ring, &[0u8; 112]).unwrap();
    }
    for (id, op, status) in [
        (id2, BLKIF_OP_READ, BLKIF_RSP_ERROR),
        (id, BLKIF_OP_WRITE, 0),
    ] {
        rig.inject(BlkifResponse {
            id: u64::from(id),
            operation: op,
            status,
            ..BlkifResponse::default()
        });
    }
    assert_eq!(rig.drain(), Drained::Responses);
    assert_eq!(rig.done, [(10, Status::IoErr), (9, Status::Ok)]);
    assert_eq!(rig.dp.in_flight(), 0);
}

#[test]
fn a_grant_the_backend_maps_before_it_was_sent_is_a_backend_error() {
    // Without bounce frames, pages are granted before the ring lock; if
    // the request then finds the ring full, its grants are ended, and one
    // the backend mapped anyway (it was never told of it) counts as an
    // error of the backend, its release deferred.
    let mut rig = Rig::new(negotiated(false, false, 0, Some(FlushKind::Flush), false));
    let size = rig.front.size();
    for t in 0..size {
        rig.submit(t, Request::Flush, &[]).unwrap();
    }
    let req = write(0);
    rig.pre.begin(&mut rig.host, &req);
    rig.pre
        .grant_pieces(&mut rig.host, pages(0, 2).into_iter().map(Ok::<_, ()>))
        .unwrap();
    let first = *rig.host.grants.keys().next().unwrap();
    rig.host.grants.get_mut(&first).unwrap().mapped = true;
    let mut ring = blkcore::ring::SliceRing::new(&mut rig.ring_mem);
    let r = rig.dp.queue_granted(
        &mut rig.host,
        &mut rig.front,
        &mut ring,
        99,
        req,
        &mut rig.pre,
    );
    assert_eq!(r, Err((99, QueueError::Busy)));
    assert!(rig.pre.is_empty());
    assert!(rig.host.grants.is_empty());
    assert_eq!(rig.host.deferred, 1);
    assert_eq!(rig.dp.stats().errors, 1);
}

#[test]
fn granted_pages_cannot_ride_a_flush_or_another_data_paths_scratch() {
    let mut rig = Rig::new(negotiated(false, false, 0, Some(FlushKind::Flush), false));
    // A flush whose scratch holds grants: a caller's bug, refused.
    let w = write(0);
    rig.pre.begin(&mut rig.host, &w);
    rig.pre
        .grant_pieces(&mut rig.host, pages(0, 1).into_iter().map(Ok::<_, ()>))
        .unwrap();
    let mut ring = blkcore::ring::SliceRing::new(&mut rig.ring_mem);
    let r = rig.dp.queue_granted(
        &mut rig.host,
        &mut rig.front,
        &mut ring,
        1,
        Request::Flush,
        &mut rig.pre,
    );
    assert_eq!(r, Err((1, QueueError::Io)));
    assert!(rig.host.grants.is_empty(), "its grants ended");
    // A scratch sized for another data path (indirect: 64 segments).
    let other = plain(false, false, 32);
    let mut pre = other.dp.new_pregranted().unwrap();
    pre.begin(&mut rig.host, &w);
    pre.grant_pieces(&mut rig.host, pages(0, 1).into_iter().map(Ok::<_, ()>))
        .unwrap();
    let r = rig
        .dp
        .queue_granted(&mut rig.host, &mut rig.front, &mut ring, 2, w, &mut pre);
    assert_eq!(r, Err((2, QueueError::Io)));
    assert!(rig.host.grants.is_empty());
    assert_eq!(rig.dp.in_flight(), 0);
    assert_eq!(rig.dp.stats().requests, 0);
}

#[test]
fn grants_in_flight_include_each_slots_own_indirect_pages() {
    // Two indirect pages per slot: the listing must find each request's
    // own, at its slot.
    let mut rig = plain(false, false, 1024);
    assert_eq!(rig.dp.geometry().indirect_pages, 2);
    for t in 0..3 {
        rig.submit(t, write(0), &pages(20 * t, 20)).unwrap();
    }
    let mut listed = Vec::new();
    rig.dp.for_each_grant_in_flight(|g| listed.push(g));
    listed.sort();
    let live: Vec<_> = rig.host.grants.keys().copied().collect();
    assert_eq!(live.len(), 3 * 21);
    assert_eq!(listed, live);
}

#[test]
fn reads_in_flight_together_each_get_their_own_data() {
    // Direct (3 pages) and indirect (12 pages) reads.
    for (indirect, n) in [(0, 3), (32, 12)] {
        for (persistent, copy) in MODES {
            let mut rig = plain(persistent, copy, indirect);
            for (i, b) in rig.backend.disk.iter_mut().enumerate() {
                *b = (i / 512) as u8;
            }
            // Three reads in flight at once, on slots 0, 1 and 2.
            let first = |t: u32| 16 + (n + 1) * t;
            for t in 0..3u32 {
                rig.submit(t, read(u64::from(t) * 128), &pages(first(t), n))
                    .unwrap();
            }
            assert_eq!(rig.run(BLKIF_RSP_OKAY), Drained::Responses);
            assert_eq!(rig.done.len(), 3);
            for t in 0..3u32 {
                for p in 0..n {
                    let at = (t * 128 * 512 + p * PAGE as u32) as usize;
                    assert_eq!(
                        rig.host.frames[(first(t) + p) as usize],
                        rig.backend.disk[at..at + PAGE],
                        "persistent {persistent} copy {copy} read {t} page {p}"
                    );
                }
            }
        }
    }
}

#[test]
fn unsent_grants_end_and_those_still_mapped_are_counted() {
    let mut rig = plain(false, false, 0);
    let req = write(0);
    rig.pre.begin(&mut rig.host, &req);
    rig.pre
        .grant_pieces(&mut rig.host, pages(0, 3).into_iter().map(Ok::<_, ()>))
        .unwrap();
    assert_eq!(rig.pre.len(), 3);
    let mapped: Vec<_> = rig.host.grants.keys().skip(1).copied().collect();
    for g in &mapped {
        rig.host.grants.get_mut(g).unwrap().mapped = true;
    }
    assert_eq!(rig.pre.end_unsent(&mut rig.host), 2);
    assert!(rig.pre.is_empty());
    assert!(rig.host.grants.is_empty());
    assert_eq!(rig.host.deferred, 2);
    assert_eq!(rig.pre.end_unsent(&mut rig.host), 0, "nothing left to end");
}

#[test]
fn a_discard_is_secure_only_when_asked_and_offered() {
    for offered in [true, false] {
        let mut n = negotiated(false, false, 0, None, true);
        n.discard = Some(blkcore::negotiate::Discard {
            granularity: 4096,
            alignment: 0,
            secure: offered,
        });
        let mut rig = Rig::new(n);
        for (t, asked) in [(1, true), (2, false)] {
            let d = Request::Discard {
                sector: 8,
                nr_sectors: 8,
                secure: asked,
            };
            rig.submit(t, d, &[]).unwrap();
        }
        rig.run(BLKIF_RSP_OKAY);
        let flags: Vec<_> = rig
            .backend
            .seen
            .iter()
            .map(|r| match r {
                WireRequest::Discard(d) => d.flag,
                other => panic!("not a discard: {other:?}"),
            })
            .collect();
        let secure = if offered { BLKIF_DISCARD_SECURE } else { 0 };
        assert_eq!(flags, [secure, 0], "offered {offered}");
    }
}

#[test]
fn a_write_without_data_fails_even_with_fua() {
    for (persistent, copy) in MODES {
        let mut rig = Rig::new(negotiated(
            persistent,
            copy,
            0,
            Some(FlushKind::Flush),
            false,
        ));
        let r = rig.submit(
            1,
            Request::Write {
                sector: 0,
                fua: true,
            },
            &[],
        );
        assert_eq!(
            r,
            Err(QueueError::Io),
            "persistent {persistent} copy {copy}"
        );
        assert_eq!(rig.submit(2, read(0), &[]), Err(QueueError::Io));
        assert_eq!(rig.dp.in_flight(), 0);
        rig.push();
        assert_eq!(rig.answer(|_| BLKIF_RSP_OKAY), 0, "nothing was sent");
    }
}

#[test]
fn bounce_grants_mapped_before_the_request_was_sent_are_a_backend_error() {
    // Out of references half way through a request's grants: the ones
    // taken go back, and a hostile backend mapping them already (it was
    // never told of them) costs a deferred release and counts as an error.
    let mut rig = plain(false, true, 0);
    rig.host.map_on_grant = true;
    rig.host.refs_left = Some(2);
    let r = rig.submit(1, write(0), &pages(0, 3));
    assert_eq!(r, Err(QueueError::Busy));
    assert_eq!(rig.dp.stats().errors, 1);
    assert_eq!(rig.host.deferred, 2);
    assert!(rig.host.grants.is_empty());
    assert_eq!(rig.dp.in_flight(), 0);
}

#[test]
fn requests_carry_the_devices_handle() {
    for kind in [FlushKind::Flush, FlushKind::Barrier] {
        let mut rig = Rig::new(negotiated(false, true, 32, Some(kind), false));
        rig.submit(1, read(0), &pages(0, 1)).unwrap();
        rig.submit(2, write(0), &pages(0, 12)).unwrap();
        rig.submit(3, Request::Flush, &[]).unwrap();
        rig.run(BLKIF_RSP_OKAY);
        let handles: Vec<_> = rig
            .backend
            .seen
            .iter()
            .map(|r| match r {
                WireRequest::ReadWrite(r) => r.handle,
                WireRequest::Indirect(r) => r.handle,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(handles, [HANDLE; 3], "{kind:?}");
    }
}

#[test]
fn a_ring_that_answered_nothing_for_the_limit_is_given_up() {
    for (persistent, copy) in MODES {
        let what = format!("persistent {persistent} copy {copy}");
        let mut rig = plain(persistent, copy, 0);
        rig.submit(1, write(0), &pages(0, 2)).unwrap();
        rig.run(BLKIF_RSP_OKAY);
        assert_eq!(rig.dp.stats().responses, 1, "{what}");
        // Pushed, never taken off the ring by the backend.
        rig.submit(2, read(0), &pages(4, 2)).unwrap();
        rig.submit(3, write(8), &pages(8, 3)).unwrap();
        rig.push();
        // Both expire in one pass: the silence starts at the first.
        for _ in 0..2 {
            assert_eq!(
                rig.dp.timed_out(5_000, Some(5_000)),
                Silence::Tolerated,
                "{what}"
            );
        }
        // A period later, nothing answered since.
        let silence = rig.dp.timed_out(10_000, Some(5_000));
        assert_eq!(silence, Silence::TooLong { silent_ms: 5_000 }, "{what}");
        let fault = Fault::Unanswered { silent_ms: 5_000 };
        let done = &mut rig.done;
        let r = rig
            .dp
            .break_ring(&mut rig.host, fault, &mut |t, s| done.push((t, s)));
        assert_eq!(r, Drained::Broken { fault, failed: 2 }, "{what}");
        assert_eq!(
            rig.done,
            [(1, Status::Ok), (2, Status::IoErr), (3, Status::IoErr)],
            "{what}"
        );
        // Never mapped: every grant revoked at once, no request held.
        assert_eq!(rig.dp.held(), 0, "{what}");
        assert_eq!(rig.dp.in_flight(), 0, "{what}");
        assert!(rig.host.grants.is_empty(), "{what}");
    }
}

#[test]
fn without_a_limit_a_silent_ring_is_waited_for() {
    let mut rig = plain(false, false, 0);
    rig.submit(1, read(0), &pages(0, 1)).unwrap();
    rig.push();
    // An hour of timeouts, 30 s apart, not one answer.
    for t in 0..120 {
        assert_eq!(rig.dp.timed_out(t * 30_000, None), Silence::Tolerated);
    }
    rig.run(BLKIF_RSP_OKAY);
    assert_eq!(rig.done, [(1, Status::Ok)]);
}

#[test]
fn a_slow_ring_is_not_given_up() {
    let mut rig = plain(false, false, 0);
    rig.submit(1, read(0), &pages(0, 1)).unwrap();
    rig.push();
    assert_eq!(rig.dp.timed_out(5_000, Some(5_000)), Silence::Tolerated);
    rig.submit(2, read(8), &pages(1, 1)).unwrap();
    rig.run(BLKIF_RSP_OKAY);
    // Both answered since that timeout: a third request that waits a
    // period on a ring that answers is slow.
    rig.submit(3, read(16), &pages(2, 1)).unwrap();
    rig.push();
    assert_eq!(rig.dp.timed_out(10_000, Some(5_000)), Silence::Tolerated);
    assert_eq!(
        rig.dp.timed_out(15_000, Some(5_000)),
        Silence::TooLong { silent_ms: 5_000 }
    );
}

#[test]
fn a_stuck_ring_holds_the_requests_whose_pages_the_backend_maps() {
    let mut rig = plain(false, false, 0);
    rig.submit(1, read(0), &pages(0, 2)).unwrap();
    rig.submit(2, read(8), &pages(2, 2)).unwrap();
    rig.push();
    // The backend took request 1 and mapped its pages, then stopped.
    let g1: Vec<_> = rig
        .host
        .grants
        .iter()
        .filter(|(_, g)| g.frame < 2)
        .map(|(r, _)| *r)
        .collect();
    assert_eq!(g1.len(), 2);
    for r in &g1 {
        rig.host.grants.get_mut(r).unwrap().mapped = true;
    }
    assert_eq!(rig.dp.timed_out(0, Some(30_000)), Silence::Tolerated);
    let silence = rig.dp.timed_out(30_000, Some(30_000));
    assert_eq!(silence, Silence::TooLong { silent_ms: 30_000 });
    let fault = Fault::Unanswered { silent_ms: 30_000 };
    let done = &mut rig.done;
    let r = rig
        .dp
        .break_ring(&mut rig.host, fault, &mut |t, s| done.push((t, s)));
    assert_eq!(r, Drained::Broken { fault, failed: 1 });
    assert_eq!(rig.done, [(2, Status::IoErr)]);
    assert_eq!(rig.dp.held(), 1, "its pages stay the backend's");
    let done = &mut rig.done;
    assert_eq!(
        rig.dp
            .retry_held(&mut rig.host, &mut |t, s| done.push((t, s))),
        0
    );
    for r in &g1 {
        rig.host.grants.get_mut(r).unwrap().mapped = false;
    }
    let done = &mut rig.done;
    assert_eq!(
        rig.dp
            .retry_held(&mut rig.host, &mut |t, s| done.push((t, s))),
        1
    );
    assert_eq!(rig.done, [(2, Status::IoErr), (1, Status::IoErr)]);
    assert!(rig.host.grants.is_empty());
}

#[test]
fn held_requests_abandoned_at_removal_end_and_leave_their_grants_deferred() {
    let mut rig = plain(false, false, 0);
    rig.submit(1, read(0), &pages(0, 2)).unwrap();
    rig.push();
    let g1: Vec<_> = rig.host.grants.keys().copied().collect();
    assert_eq!(g1.len(), 2);
    // Mapped, and never unmapped.
    for r in &g1 {
        rig.host.grants.get_mut(r).unwrap().mapped = true;
    }
    let done = &mut rig.done;
    rig.dp
        .break_ring(&mut rig.host, Fault::Injected, &mut |t, s| {
            done.push((t, s))
        });
    assert_eq!(rig.dp.held(), 1);
    let done = &mut rig.done;
    assert_eq!(
        rig.dp
            .retry_held(&mut rig.host, &mut |t, s| done.push((t, s))),
        0
    );
    let done = &mut rig.done;
    assert_eq!(
        rig.dp
            .abandon_held(&mut rig.host, &mut |t, s| done.push((t, s))),
        1
    );
    assert_eq!(rig.done, [(1, Status::IoErr)]);
    assert_eq!(rig.dp.held(), 0);
    assert_eq!(rig.dp.in_flight(), 0);
    // Still mapped: released only through the deferred path.
    assert_eq!(rig.dp.grant_stats().deferred, 2);
}

#[test]
fn a_full_ring_grants_nothing_for_the_request_it_sends_back() {
    let mut rig = plain(false, false, 0);
    let size = rig.front.size();
    for tag in 0..size {
        rig.submit(tag, read(u64::from(tag) * 8), &pages(tag % 4, 1))
            .unwrap();
    }
    assert!(!rig.dp.has_room(&rig.front), "full");
    let granted = rig.dp.grant_stats().granted;
    let grants = rig.host.grants.len();
    // The backend could map a predicted reference of a request that goes
    // back unsent while its pages return to their owner: none is made.
    assert_eq!(
        rig.submit(size, read(0), &pages(0, 2)),
        Err(QueueError::Busy)
    );
    assert_eq!(rig.dp.grant_stats().granted, granted);
    assert_eq!(rig.host.grants.len(), grants);
    rig.run(BLKIF_RSP_OKAY);
    assert!(rig.dp.has_room(&rig.front), "answered");
}
