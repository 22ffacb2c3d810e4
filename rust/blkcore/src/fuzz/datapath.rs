// SPDX-License-Identifier: GPL-2.0

//! The whole Xen data path (`blkcore::datapath`, the code the kernel
//! driver runs) under a hostile backend: the input negotiates a mode, then
//! is a script of block requests in, arbitrary responses and producer
//! indices back, grant-unmap outcomes chosen per call, purges and failures,
//! and finally teardown.
//!
//! Invariants checked: no panic; every request ends exactly once (a status,
//! or handed back at teardown), none is invented; grants are only ended
//! once and only if granted; no request ends while the backend still maps
//! one of its own pages (those are held until it lets go); after teardown
//! no grant is left live except those the backend still maps (deferred) and
//! every request not ended is held, and once the backend is gone the held
//! ones end too; the pool's in-use count returns to zero; bounce copies
//! stay inside their frames.

extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::{
    ensure,
    Outcome,
    Violation, //
};
use crate::blkif::{
    BlkifResponse,
    Request as WireRequest, //
};
use crate::datapath::{
    map_request,
    wire_segments,
    DataPath,
    Drained,
    Geometry,
    Memory,
    MemoryError,
    Request,
    Status, //
};
use crate::grants::{
    GrantError,
    GrantOps,
    GrantRef, //
};
use crate::host::VecStorage;
use crate::mapping::{
    merged,
    MappedSegment,
    Piece, //
};
use crate::negotiate::{
    Discard,
    FlushKind,
    Negotiated, //
};
use crate::ring::{
    FrontRing,
    SharedRing,
    SliceRing, //
};

/// Input bytes, read front to back; zeros once exhausted.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

const FRAMES: u32 = 64;

/// Frames below this are the data path's own (bounce and indirect frames);
/// from it on, the caller's pages.
const CALLER_FRAMES: u32 = 8;

/// What the backend can reach, shared by the grant table and the check
/// run when a request ends.
#[derive(Default)]
struct Reach {
    /// Live grants: gref -> the request being queued when it was made, if
    /// it grants one of the caller's pages.
    live: BTreeMap<GrantRef, Option<u32>>,
    /// Caller's pages ended with a deferred release: gref -> request. The
    /// backend keeps them mapped for good.
    deferred_pages: BTreeMap<GrantRef, u32>,
    /// The request being queued.
    queuing: Option<u32>,
    /// The backend is gone: every grant is unmapped.
    gone: bool,
}

impl Reach {
    /// Whether the backend can still reach a page of request `tag`.
    fn reaches(&self, tag: u32) -> bool {
        self.live.values().any(|&o| o == Some(tag))
            || self.deferred_pages.values().any(|&o| o == tag)
    }
}

/// A grant table whose backend maps and unmaps as the input says, over
/// `FRAMES` frames whose contents are not kept (copies only check bounds).
struct FuzzMem<'a, 'b, 'c> {
    input: &'b mut Input<'a>,
    reach: &'c RefCell<Reach>,
    next: GrantRef,
    /// Grants ended while mapped (deferred release).
    deferred: u32,
    violation: Option<&'static str>,
}

impl FuzzMem<'_, '_, '_> {
    fn flag(&mut self, what: &'static str) {
        self.violation.get_or_insert(what);
    }
}

impl GrantOps for FuzzMem<'_, '_, '_> {
    type Frame = u32;

    fn grant(&mut self, frame: u32, _readonly: bool) -> Result<GrantRef, GrantError> {
        if frame >= FRAMES {
            self.flag("grant of a frame that is not guest memory");
        }
        // Now and then the grant table is out of references.
        if self.input.byte() == 0xff {
            return Err(GrantError::NoGrantRefs);
        }
        let g = self.next;
        self.next += 1;
        // The backend maps what it is given, sometimes for good.
        let mut r = self.reach.borrow_mut();
        let owner = if frame >= CALLER_FRAMES {
            r.queuing
        } else {
            None
        };
        r.live.insert(g, owner);
        Ok(g)
    }

    fn try_end_access(&mut self, gref: GrantRef) -> bool {
        let gone = self.reach.borrow().gone;
        if !self.reach.borrow().live.contains_key(&gref) {
            self.flag("end of a grant that is not live");
            return true;
        }
        // The backend unmapped it, or (input says) still holds it.
        if !gone && self.input.byte() & 7 == 0 {
            return false;
        }
        self.reach.borrow_mut().live.remove(&gref);
        true
    }

    fn end_access(&mut self, gref: GrantRef) {
        if !self.try_end_access(gref) {
            let mut r = self.reach.borrow_mut();
            if let Some(Some(tag)) = r.live.remove(&gref) {
                r.deferred_pages.insert(gref, tag);
            }
            self.deferred += 1;
        }
    }
}

impl Memory for FuzzMem<'_, '_, '_> {
    fn frame_in_page(&self, page: u32, frame_offset: u32) -> u32 {
        page.saturating_add(frame_offset / 4096)
    }

    fn copy(&mut self, src: u32, so: u32, dst: u32, d_o: u32, len: u32) -> Result<(), MemoryError> {
        if src >= FRAMES || dst >= FRAMES || so + len > 4096 || d_o + len > 4096 {
            self.flag("copy outside guest memory");
            return Err(MemoryError);
        }
        Ok(())
    }

    fn write(&mut self, dst: u32, off: u32, bytes: &[u8]) -> Result<(), MemoryError> {
        if dst >= FRAMES || off as usize + bytes.len() > 4096 {
            self.flag("write outside guest memory");
            return Err(MemoryError);
        }
        Ok(())
    }
}

/// A negotiation from two input bytes: persistent/copy, indirect segments,
/// flush kind, discard, ring pages. `negotiated(0, 0)` is the plainest
/// (one ring page, 11 direct segments, no persistent grants, no copy,
/// neither flush nor discard), which host tests take too.
pub(crate) fn negotiated(a: u8, b: u8) -> Negotiated {
    let persistent = a & 1 != 0;
    let indirect_segments = [0, 32, 64, 256][usize::from((a >> 1) & 3)];
    let flush =
        [None, Some(FlushKind::Flush), Some(FlushKind::Barrier), None][usize::from((a >> 3) & 3)];
    let ring_pages = 1 << (b & 1);
    Negotiated {
        queues: 1,
        ring_page_order: u32::from(b & 1),
        ring_pages,
        persistent,
        indirect_segments,
        segments_per_request: if indirect_segments == 0 {
            11
        } else {
            indirect_segments
        },
        flush,
        discard: (a & 0x20 != 0).then_some(Discard {
            granularity: 4096,
            alignment: 0,
            secure: a & 0x40 != 0,
        }),
        sectors: 1 << 21,
        info: 0,
        sector_size: 512,
        physical_sector_size: 512,
        minimum_io_size: None,
        optimal_io_size: None,
        copy_data: persistent || a & 0x80 != 0,
        ignored: Default::default(),
    }
}

/// Requests handed to the data path and not yet ended.
type Open = BTreeMap<u32, ()>;

fn ended(open: &mut Open, reach: &RefCell<Reach>, tag: u32, bad: &mut Option<&'static str>) {
    if open.remove(&tag).is_none() {
        bad.get_or_insert("a request ended twice, or one never queued");
    }
    if reach.borrow().reaches(tag) {
        bad.get_or_insert("a request ended while the backend still maps one of its pages");
    }
}

/// See the module documentation.
pub fn fuzz_datapath(data: &[u8]) -> Result<Outcome, Violation> {
    let mut input = Input(data);
    let n = negotiated(input.byte(), input.byte());
    let mut ring_mem = alloc::vec![0u8; 4096 * n.ring_pages as usize];
    let mut front = FrontRing::new(n.ring_pages).map_err(|_| Violation("ring pages"))?;
    front.init_shared(&mut SliceRing::new(&mut ring_mem));
    let geo = Geometry::new(&n, front.size(), wire_segments(&n, 512));
    let frames: Vec<u32> = (0..geo.frames(n.copy_data) as u32).map(|f| f % 8).collect();
    let mut dp: DataPath<VecStorage, u32, u32> =
        DataPath::new(&n, geo, 0, &frames, 0).map_err(|_| Violation("data path"))?;
    let reach = RefCell::new(Reach::default());
    let mut mem = FuzzMem {
        input: &mut input,
        reach: &reach,
        next: 8,
        deferred: 0,
        violation: None,
    };
    let mut open = Open::new();
    let mut pre = dp.new_pregranted().map_err(|_| Violation("scratch"))?;
    // The caller's scratch for the mapped segments, as the kernel's.
    let unset = MappedSegment {
        page: 0,
        frame_offset: 0,
        first_sect: 0,
        last_sect: 0,
    };
    let mut mapped = alloc::vec![unset; geo.wire_max as usize];
    let mut bad: Option<&'static str> = None;
    let mut tag = 0u32;
    let mut broken = false;
    let mut steps = 0u32;
    // The backend's consumer index.
    let mut req_cons = 0u32;
    while !mem.input.is_empty() && steps < 512 && !broken {
        steps += 1;
        let op = mem.input.byte();
        match op % 8 {
            // A read or write of 1..=k pieces on the data pages 8..64.
            0..=2 => {
                let count = usize::from(mem.input.byte() % 40) + 1;
                let mut pieces = Vec::new();
                for _ in 0..count {
                    let page = 8 + u32::from(mem.input.byte()) % (FRAMES - 8);
                    let offset = u32::from(mem.input.byte() % 8) * 512;
                    let len = (u32::from(mem.input.byte() % 8) + 1) * 512;
                    pieces.push(Piece {
                        page,
                        offset,
                        len: len.min(4096 - offset),
                    });
                }
                let sector = u64::from(mem.input.u32());
                let req = if op & 0x10 != 0 {
                    Request::Write {
                        sector,
                        fua: op & 0x20 != 0,
                    }
                } else {
                    Request::Read { sector }
                };
                let mut ring = SliceRing::new(&mut ring_mem);
                // As the kernel: granted before the ring lock without
                // bounce frames, mapped and granted under it with them.
                reach.borrow_mut().queuing = Some(tag);
                let queued = if dp.grants_before_lock() {
                    pre.begin(&mut mem, &req);
                    // As the kernel walks a request's data: runs in one
                    // page merged, and (op bit 6) a walk that fails after
                    // its pieces.
                    let failed_walk = (op & 0x40 != 0).then_some(Err(()));
                    let walk = merged(pieces.iter().map(|p| Ok(*p)).chain(failed_walk));
                    match pre.grant_pieces(&mut mem, walk) {
                        Ok(()) => dp
                            .queue_granted(&mut mem, &mut front, &mut ring, tag, req, &mut pre)
                            .map_err(|(_, e)| e),
                        Err(e) => {
                            pre.end_unsent(&mut mem);
                            Err(e)
                        }
                    }
                } else {
                    map_request(&pieces, &mut mapped).and_then(|segs| {
                        dp.queue(&mut mem, &mut front, &mut ring, tag, req, segs)
                            .map_err(|(_, e)| e)
                    })
                };
                reach.borrow_mut().queuing = None;
                if queued.is_ok() {
                    open.insert(tag, ());
                }
                ensure(pre.is_empty(), "grants left in the scratch after queueing")?;
                tag += 1;
            }
            3 => {
                let req = if op & 0x10 != 0 {
                    Request::Flush
                } else {
                    Request::Discard {
                        sector: u64::from(mem.input.u32()),
                        nr_sectors: u64::from(mem.input.byte()),
                        secure: op & 0x20 != 0,
                    }
                };
                let mut ring = SliceRing::new(&mut ring_mem);
                let queued = if dp.grants_before_lock() {
                    pre.begin(&mut mem, &req);
                    dp.queue_granted(&mut mem, &mut front, &mut ring, tag, req, &mut pre)
                } else {
                    dp.queue(&mut mem, &mut front, &mut ring, tag, req, &[])
                };
                if queued.is_ok() {
                    open.insert(tag, ());
                }
                tag += 1;
            }
            // The backend answers the next k requests it finds on the ring
            // (id and operation from the request, status from the input),
            // some responses corrupted, then moves rsp_prod (now and then
            // by an arbitrary amount); the interrupt handler's pass runs.
            4 | 5 => {
                let mut ring = SliceRing::new(&mut ring_mem);
                front.push_requests_and_check_notify(&mut ring);
                let k = u32::from(mem.input.byte() % 8);
                let prod = ring.load_rsp_prod();
                let mut written = 0u32;
                for _ in 0..k {
                    let sel = mem.input.byte();
                    let corrupt = sel & 0xc0 == 0xc0;
                    let mut rsp = BlkifResponse {
                        status: [0, -1, -2, 7][usize::from((sel >> 3) & 3)],
                        ..BlkifResponse::default()
                    };
                    if req_cons != ring.load_req_prod() {
                        let req =
                            WireRequest::decode(&ring.read_request(req_cons & (front.size() - 1)));
                        req_cons = req_cons.wrapping_add(1);
                        rsp.id = req.id();
                        rsp.operation = req.response_operation();
                    } else if !corrupt {
                        break;
                    }
                    if corrupt {
                        match sel & 3 {
                            0 => rsp.id = u64::from(mem.input.byte() % 40),
                            1 => rsp.operation = mem.input.byte() % 8,
                            2 => rsp.id = u64::from(mem.input.u32()) << 8,
                            _ => rsp.id = rsp.id.wrapping_add(1),
                        }
                    }
                    ring.write_response(prod.wrapping_add(written) & (front.size() - 1), &rsp);
                    written += 1;
                }
                let jump = if op & 0xc0 == 0xc0 {
                    mem.input.u32()
                } else {
                    written
                };
                ring.store_rsp_prod(prod.wrapping_add(jump));
                let r = dp.drain(&mut mem, &mut front, &mut ring, &mut |t, _| {
                    ended(&mut open, &reach, t, &mut bad)
                });
                if let Drained::Broken { .. } = r {
                    broken = true;
                }
            }
            6 => {
                dp.purge(&mut mem);
            }
            _ => {
                if op & 0x10 != 0 {
                    dp.fail_in_flight(&mut mem, &mut |t, s| {
                        if s != Status::IoErr {
                            bad.get_or_insert("a failed request did not end with an I/O error");
                        }
                        ended(&mut open, &reach, t, &mut bad);
                    });
                }
            }
        }
        ensure(
            dp.in_flight() <= front.size(),
            "more requests in flight than slots",
        )?;
        // Every live grant is an entry in use or a persistent one held (the
        // pool counts with wrapping adds: a bookkeeping slip shows here).
        let g = dp.grant_stats();
        ensure(
            u64::from(g.held) + u64::from(g.in_use) == reach.borrow().live.len() as u64,
            "the pool's in_use + held differ from the live grants",
        )?;
    }
    if broken {
        ensure(dp.in_flight() == 0, "a broken ring left requests in flight")?;
    }
    dp.take_down(&mut mem, |t| ended(&mut open, &reach, t, &mut bad));
    ensure(
        open.len() == dp.held() as usize,
        "a request neither ended nor held at teardown",
    )?;
    // The backend goes: it unmaps everything, and the held requests end.
    reach.borrow_mut().gone = true;
    dp.retry_held(&mut mem, &mut |t, _| ended(&mut open, &reach, t, &mut bad));
    if let Some(v) = mem.violation.or(bad) {
        return Err(Violation(v));
    }
    ensure(open.is_empty(), "a request never ended")?;
    ensure(
        dp.held() == 0,
        "a request still held after the backend went",
    )?;
    ensure(dp.grant_stats().in_use == 0, "grants in use after teardown")?;
    ensure(
        reach.borrow().live.is_empty(),
        "a grant left live after teardown",
    )?;
    Ok(if dp.stats().requests > 0 {
        Outcome::Accepted
    } else {
        Outcome::Rejected
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_scripted_exchange_ends_every_request() {
        // Persistent, 32 indirect segments, flush: two writes, answered
        // in order with OKAY, then teardown.
        let mut s = alloc::vec![0x0b, 0x00];
        s.extend_from_slice(&[0x10, 2, 9, 0, 7, 9, 0, 7, 0, 0, 0, 0]);
        s.extend_from_slice(&[0x10, 1, 10, 0, 7, 8, 0, 0, 0]);
        s.extend_from_slice(&[0x04, 2, 0x00, 0, 0x00, 1]);
        assert_eq!(fuzz_datapath(&s), Ok(Outcome::Accepted));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn datapath_target_never_fails(data in prop::collection::vec(any::<u8>(), 0..400)) {
            prop_assert!(fuzz_datapath(&data).is_ok(), "{:?}", fuzz_datapath(&data));
        }
    }
}
