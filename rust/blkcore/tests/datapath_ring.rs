// SPDX-License-Identifier: GPL-2.0

//! Front ring semantics (ring.h) and response validation.

use blkcore::blkif::*;
use blkcore::ring::*;
use proptest::prelude::*;

fn page() -> Vec<u8> {
    vec![0u8; 4096]
}

fn rsp(id: u64, op: u8, status: i16) -> BlkifResponse {
    BlkifResponse {
        id,
        operation: op,
        status,
        ..Default::default()
    }
}

/// Backend side: writes a response at rsp_prod and publishes it.
fn respond(mem: &mut [u8], r: &BlkifResponse, publish: bool) {
    let prod = u32::from_le_bytes(mem[8..12].try_into().unwrap());
    let off = sring_entry_offset(prod & 31).unwrap();
    mem[off..off + 16].copy_from_slice(&r.encode());
    if publish {
        mem[8..12].copy_from_slice(&prod.wrapping_add(1).to_le_bytes());
    }
}

fn set(mem: &mut [u8], off: usize, v: u32) {
    mem[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn init_and_free_requests() {
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    let mut s = SliceRing::new(&mut mem);
    ring.init_shared(&mut s);
    assert_eq!(
        (s.load_req_prod(), s.load_rsp_prod(), s.load_req_event()),
        (0, 0, 1)
    );
    assert_eq!(ring.size(), 32);
    assert_eq!(ring.free_requests(), 32);
    for i in 0..32 {
        assert_eq!(ring.put_request(&mut s, &[i as u8; 112]), Ok(i));
    }
    assert!(ring.is_full());
    assert_eq!(ring.put_request(&mut s, &[0; 112]), Err(RingError::Full));
    assert_eq!(FrontRing::new(0), Err(RingError::BadPageCount(0)));
    assert_eq!(FrontRing::new(17), Err(RingError::BadPageCount(17)));
    assert_eq!(FrontRing::shared_bytes(4), Some(16384));
}

#[test]
fn notify_follows_req_event() {
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    {
        let mut s = SliceRing::new(&mut mem);
        ring.init_shared(&mut s);
        ring.put_request(&mut s, &[0; 112]).unwrap();
        // req_event = 1: crossing it notifies.
        assert!(ring.push_requests_and_check_notify(&mut s));
        // Backend busy (req_event not re-armed): no notify.
        ring.put_request(&mut s, &[0; 112]).unwrap();
        assert!(!ring.push_requests_and_check_notify(&mut s));
    }
    // Backend re-arms at req_cons + 1 = 3 after consuming both.
    set(&mut mem, SRING_REQ_EVENT, 3);
    let mut s = SliceRing::new(&mut mem);
    ring.put_request(&mut s, &[0; 112]).unwrap();
    ring.put_request(&mut s, &[0; 112]).unwrap();
    assert!(ring.push_requests_and_check_notify(&mut s));
    // Nothing new: no notify.
    assert!(!ring.push_requests_and_check_notify(&mut s));
}

#[test]
fn responses_and_final_check() {
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    let mut ids: InFlight<32> = InFlight::new(32);
    {
        let mut s = SliceRing::new(&mut mem);
        ring.init_shared(&mut s);
        for _ in 0..3 {
            let id = ids.alloc(BLKIF_OP_READ, false).unwrap();
            ring.put_request(
                &mut s,
                &BlkifRequest {
                    id: id.into(),
                    ..Default::default()
                }
                .encode(),
            )
            .unwrap();
        }
        ring.push_requests_and_check_notify(&mut s);
    }
    respond(&mut mem, &rsp(0, BLKIF_OP_READ, 0), true);
    respond(&mut mem, &rsp(2, BLKIF_OP_READ, -1), true);
    let mut s = SliceRing::new(&mut mem);
    let rp = ring.response_prod(&mut s).unwrap();
    assert_eq!(rp, 2);
    let a = ids.complete(&ring.take_response(&s, rp).unwrap()).unwrap();
    assert_eq!((a.id, a.status), (0, RspStatus::Okay));
    let b = ids.complete(&ring.take_response(&s, rp).unwrap()).unwrap();
    assert_eq!((b.id, b.status), (2, RspStatus::Error));
    assert_eq!(ring.take_response(&s, rp), None);
    assert!(!ring.final_check_for_responses(&mut s));
    assert_eq!(s.load_rsp_prod(), 2);
    // rsp_event armed for the next response.
    let _ = s;
    assert_eq!(u32::from_le_bytes(mem[12..16].try_into().unwrap()), 3);
    assert_eq!(ids.waiting(), 1);
    assert_eq!(ring.free_requests(), 31);
}

#[test]
fn bad_rsp_prod_is_an_error() {
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    let mut s = SliceRing::new(&mut mem);
    ring.init_shared(&mut s);
    ring.put_request(&mut s, &[0; 112]).unwrap();
    ring.push_requests_and_check_notify(&mut s);
    s.store_rsp_prod(33);
    assert_eq!(
        ring.response_prod(&mut s),
        Err(RingError::ResponseOverflow {
            rsp_prod: 33,
            rsp_cons: 0
        })
    );
    s.store_rsp_prod(2);
    assert_eq!(
        ring.response_prod(&mut s),
        Err(RingError::ResponsesBeyondRequests {
            rsp_prod: 2,
            req_prod_pvt: 1
        })
    );
    s.store_rsp_prod(u32::MAX);
    assert!(ring.response_prod(&mut s).is_err());
    assert_eq!(ring.free_requests(), 31);
}

#[test]
fn response_validation() {
    let mut ids: InFlight<512> = InFlight::new(64);
    assert_eq!(ids.size(), 64);
    let w = ids.alloc(BLKIF_OP_WRITE, true).unwrap();
    let f = ids.alloc(BLKIF_OP_FLUSH_DISKCACHE, false).unwrap();
    assert_eq!(ids.complete(&rsp(64, 1, 0)), Err(ResponseError::BadId(64)));
    assert_eq!(
        ids.complete(&rsp(1 << 40, 1, 0)),
        Err(ResponseError::BadId(1 << 40))
    );
    assert_eq!(
        ids.complete(&rsp(5, 1, 0)),
        Err(ResponseError::NotInFlight(5))
    );
    assert_eq!(
        ids.complete(&rsp(w.into(), BLKIF_OP_INDIRECT, 0)),
        Err(ResponseError::WrongOperation {
            id: w,
            expected: BLKIF_OP_WRITE,
            got: BLKIF_OP_INDIRECT
        })
    );
    let c = ids.complete(&rsp(w.into(), BLKIF_OP_WRITE, 0)).unwrap();
    assert!(c.indirect);
    // Duplicate response.
    assert_eq!(
        ids.complete(&rsp(w.into(), BLKIF_OP_WRITE, 0)),
        Err(ResponseError::NotInFlight(w))
    );
    let c = ids
        .complete(&rsp(f.into(), BLKIF_OP_FLUSH_DISKCACHE, -2))
        .unwrap();
    assert_eq!(c.status, RspStatus::NotSupported);
    assert_eq!(RspStatus::from_wire(7), RspStatus::Unknown(7));
    // All ids usable, then exhausted.
    for _ in 0..64 {
        assert!(ids.alloc(BLKIF_OP_READ, false).is_some());
    }
    assert_eq!(ids.alloc(BLKIF_OP_READ, false), None);
    assert!(ids.cancel(3));
    assert!(!ids.cancel(3));
    assert_eq!(ids.alloc(BLKIF_OP_READ, false), Some(3));
    let empty: InFlight<4> = InFlight::new(0);
    assert_eq!(empty.size(), 0);
}

/// The C macros, written out on plain integers, as the oracle.
fn c_notify(old: u32, new: u32, req_event: u32) -> bool {
    new.wrapping_sub(req_event) < new.wrapping_sub(old)
}

proptest! {
    #[test]
    fn push_matches_ring_h(start in any::<u32>(), n in 0u32..=32, ev_off in any::<u32>()) {
        let mut mem = page();
        let mut ring = FrontRing::attach(1, start).unwrap();
        let mut s = SliceRing::new(&mut mem);
        s.store_req_prod(start);
        s.store_rsp_prod(start);
        let ev = start.wrapping_add(ev_off % 40);
        s.store_req_event(ev);
        for _ in 0..n {
            ring.put_request(&mut s, &[7; 112]).unwrap();
        }
        let notify = ring.push_requests_and_check_notify(&mut s);
        prop_assert_eq!(notify, c_notify(start, start.wrapping_add(n), ev));
        prop_assert_eq!(s.load_req_prod(), start.wrapping_add(n));
        prop_assert_eq!(ring.free_requests(), 32 - n);
    }

    #[test]
    fn fuzz_entry_never_panics(data in prop::collection::vec(any::<u8>(), 0..4200)) {
        fuzz_entry(&data);
    }

    #[test]
    fn fuzz_entry_with_plausible_responses(n in 0u8..33, start in any::<u32>(), ids in prop::collection::vec((0u64..40, 0u8..8, -3i16..2), 0..33)) {
        let mut data = vec![n, 0];
        data.extend_from_slice(&start.to_le_bytes());
        let mut page = vec![0u8; 4096];
        let rp = start.wrapping_add(ids.len() as u32);
        page[8..12].copy_from_slice(&rp.to_le_bytes());
        for (i, (id, op, st)) in ids.iter().enumerate() {
            let slot = start.wrapping_add(i as u32) & 31;
            let off = sring_entry_offset(slot).unwrap();
            page[off..off + 16].copy_from_slice(&rsp(*id, *op, *st).encode());
        }
        data.extend_from_slice(&page);
        fuzz_entry(&data);
    }
}

#[test]
fn drain_consumes_all_and_rearms() {
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    {
        let mut s = SliceRing::new(&mut mem);
        ring.init_shared(&mut s);
        for _ in 0..5 {
            ring.put_request(&mut s, &[0; 112]).unwrap();
        }
        ring.push_requests_and_check_notify(&mut s);
    }
    for id in 0..3 {
        respond(&mut mem, &rsp(id, BLKIF_OP_READ, 0), true);
    }
    let mut s = SliceRing::new(&mut mem);
    let mut seen = Vec::new();
    let n = ring
        .drain_responses(&mut s, |r| {
            seen.push(r.id);
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!((n, seen), (3, vec![0, 1, 2]));
    // rsp_event armed for the next response.
    assert_eq!(u32::from_le_bytes(mem[12..16].try_into().unwrap()), 4);
}

#[test]
fn drain_stops_at_the_first_rejected_response() {
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    {
        let mut s = SliceRing::new(&mut mem);
        ring.init_shared(&mut s);
        for _ in 0..4 {
            ring.put_request(&mut s, &[0; 112]).unwrap();
        }
    }
    for id in 0..4 {
        respond(&mut mem, &rsp(id, BLKIF_OP_READ, 0), true);
    }
    let mut s = SliceRing::new(&mut mem);
    let mut calls = 0;
    let r = ring.drain_responses(&mut s, |r| {
        calls += 1;
        if r.id == 1 {
            Err("bad")
        } else {
            Ok(())
        }
    });
    assert_eq!((r, calls), (Err(DrainError::Response("bad")), 2));
}

#[test]
fn drain_is_bounded_by_the_ring_under_a_response_storm() {
    // Even if every response were accepted, a backend that keeps moving
    // rsp_prod cannot hold the (interrupt) loop: it ends after at most one
    // ring's worth, with an error that disables the ring.
    let mut mem = page();
    let mut ring = FrontRing::new(1).unwrap();
    {
        let mut s = SliceRing::new(&mut mem);
        ring.init_shared(&mut s);
        for _ in 0..32 {
            ring.put_request(&mut s, &[0; 112]).unwrap();
        }
    }
    // rsp_prod one more on every look.
    let mut s = ScriptedRing {
        inner: SliceRing::new(&mut mem),
        prods: (1..=200).collect(),
        next: std::cell::Cell::new(0),
    };
    let mut calls = 0u32;
    let r = ring.drain_responses(&mut s, |_| {
        calls += 1;
        Ok::<(), ()>(())
    });
    assert!(r.is_err(), "{r:?}");
    assert!(calls <= 32, "{calls} responses in one pass");
}

proptest! {
    /// Whatever the backend does to rsp_prod between looks, one drain
    /// takes at most a ring's worth of responses.
    #[test]
    fn drain_never_exceeds_the_ring(prods in proptest::collection::vec(any::<u32>(), 1..64), queued in 0u32..=32) {
        let mut mem = page();
        let mut ring = FrontRing::new(1).unwrap();
        {
            let mut s = SliceRing::new(&mut mem);
            ring.init_shared(&mut s);
            for _ in 0..queued {
                ring.put_request(&mut s, &[0; 112]).unwrap();
            }
        }
        let mut s = ScriptedRing { inner: SliceRing::new(&mut mem), prods, next: std::cell::Cell::new(0) };
        let mut calls = 0u32;
        let _ = ring.drain_responses(&mut s, |_| { calls += 1; Ok::<(), ()>(()) });
        prop_assert!(calls <= queued);
    }
}

/// A backend whose `rsp_prod` follows a script, one value per load.
struct ScriptedRing<'a> {
    inner: SliceRing<'a>,
    prods: Vec<u32>,
    next: std::cell::Cell<usize>,
}

impl SharedRing for ScriptedRing<'_> {
    fn load_req_prod(&self) -> RingIdx {
        self.inner.load_req_prod()
    }
    fn store_req_prod(&mut self, v: RingIdx) {
        self.inner.store_req_prod(v)
    }
    fn load_req_event(&self) -> RingIdx {
        self.inner.load_req_event()
    }
    fn load_rsp_prod(&self) -> RingIdx {
        let i = self.next.get();
        self.next.set(i + 1);
        self.prods.get(i % self.prods.len()).copied().unwrap_or(0)
    }
    fn store_rsp_event(&mut self, v: RingIdx) {
        self.inner.store_rsp_event(v)
    }
    fn store_req_event(&mut self, v: RingIdx) {
        self.inner.store_req_event(v)
    }
    fn store_rsp_prod(&mut self, v: RingIdx) {
        self.inner.store_rsp_prod(v)
    }
    fn write_entry(&mut self, slot: u32, entry: &RingEntryBytes) {
        self.inner.write_entry(slot, entry)
    }
    fn read_response(&self, slot: u32) -> [u8; BLKIF_RESPONSE_SIZE] {
        self.inner.read_response(slot)
    }
    fn wmb(&mut self) {}
    fn rmb(&mut self) {}
    fn mb(&mut self) {}
}

#[test]
fn verdicts_follow_operation_and_status() {
    let c = |operation, status| Completion {
        id: 0,
        operation,
        indirect: false,
        status,
    };
    assert_eq!(
        Verdict::of(&c(BLKIF_OP_READ, RspStatus::Okay), 3),
        Verdict::Ok
    );
    assert_eq!(
        Verdict::of(&c(BLKIF_OP_READ, RspStatus::Error), 3),
        Verdict::IoError
    );
    assert_eq!(
        Verdict::of(&c(BLKIF_OP_WRITE, RspStatus::Unknown(0x7fff)), 1),
        Verdict::IoError
    );
    // A backend that cannot flush withdraws the feature; an empty flush
    // completes, one with data fails.
    for op in [BLKIF_OP_FLUSH_DISKCACHE, BLKIF_OP_WRITE_BARRIER] {
        assert_eq!(
            Verdict::of(&c(op, RspStatus::NotSupported), 0),
            Verdict::FlushWithdrawn { with_data: false }
        );
        assert_eq!(
            Verdict::of(&c(op, RspStatus::NotSupported), 2),
            Verdict::FlushWithdrawn { with_data: true }
        );
        // A flush that failed is an error, never a success.
        assert_eq!(Verdict::of(&c(op, RspStatus::Error), 0), Verdict::IoError);
        assert_eq!(
            Verdict::of(&c(op, RspStatus::Unknown(-7)), 0),
            Verdict::IoError
        );
    }
    assert_eq!(
        Verdict::of(&c(BLKIF_OP_DISCARD, RspStatus::NotSupported), 0),
        Verdict::DiscardWithdrawn
    );
    assert_eq!(
        Verdict::of(&c(BLKIF_OP_DISCARD, RspStatus::Error), 0),
        Verdict::IoError
    );
    // EOPNOTSUPP for a read or write is an I/O error.
    assert_eq!(
        Verdict::of(&c(BLKIF_OP_WRITE, RspStatus::NotSupported), 1),
        Verdict::IoError
    );
}
