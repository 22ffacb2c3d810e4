// SPDX-License-Identifier: GPL-2.0

//! The back end of one shared ring (`struct blkif_back_ring`): requests
//! copied out of the shared page, responses written into it, and the
//! notification rules of Xen's ring.h (`RING_PUSH_RESPONSES_AND_CHECK_NOTIFY`,
//! `RING_FINAL_CHECK_FOR_REQUESTS`). The codecs are blkcore's.

use std::sync::atomic::{fence, AtomicU32, Ordering};

use blkcore::blkif::{
    ring_size, sring_entry_offset, BlkifResponse, RingEntryBytes, BLKIF_RESPONSE_SIZE,
    SRING_REQ_EVENT, SRING_REQ_PROD, SRING_RSP_EVENT, SRING_RSP_PROD,
};

use crate::xen::Mapping;

/// One mapped ring and this backend's private indices.
pub struct BackRing {
    map: Mapping,
    /// Slots in the ring (a power of two).
    pub nr_ents: u32,
    /// Next request to consume.
    pub req_cons: u32,
    /// Next response slot to fill (published by `push`).
    pub rsp_prod_pvt: u32,
    /// The local event channel port of this ring.
    pub port: u32,
}

impl BackRing {
    /// Takes over a mapped ring of `pages` pages, bound to `port`. A fresh
    /// ring starts at whatever index the frontend initialised (0).
    pub fn new(map: Mapping, pages: u32, port: u32) -> Option<Self> {
        let nr_ents = ring_size(pages)?;
        let mut r = Self {
            map,
            nr_ents,
            req_cons: 0,
            rsp_prod_pvt: 0,
            port,
        };
        let start = r.index(SRING_RSP_PROD).load(Ordering::Acquire);
        r.req_cons = start;
        r.rsp_prod_pvt = start;
        Some(r)
    }

    /// The mapping, for unmapping at disconnect.
    pub fn into_mapping(self) -> Mapping {
        self.map
    }

    fn index(&mut self, off: usize) -> &AtomicU32 {
        let b = self.map.bytes();
        // SAFETY: `off` is one of the four header offsets (below 16, within
        // the first mapped page) and 4-byte aligned (the page is); the other
        // end writes these indices concurrently, hence atomics.
        unsafe { &*b.as_mut_ptr().add(off).cast::<AtomicU32>() }
    }

    /// The frontend's `req_prod` (read before the requests it covers).
    pub fn req_prod(&mut self) -> u32 {
        let v = self.index(SRING_REQ_PROD).load(Ordering::Acquire);
        fence(Ordering::Acquire);
        v
    }

    fn slot(&mut self, idx: u32) -> *mut u8 {
        let off = sring_entry_offset(idx & (self.nr_ents - 1)).unwrap_or(0);
        // SAFETY: slot < nr_ents = ring_size(pages), so the entry lies inside
        // the mapped pages.
        unsafe { self.map.bytes().as_mut_ptr().add(off) }
    }

    /// Copies request slot `idx` out of the shared page (the frontend may
    /// rewrite it afterwards: only the copy is used).
    pub fn request(&mut self, idx: u32) -> RingEntryBytes {
        let p = self.slot(idx).cast::<RingEntryBytes>();
        // SAFETY: `slot` points at a whole entry inside the mapping; a
        // volatile read because the other domain writes the page.
        unsafe { std::ptr::read_volatile(p) }
    }

    /// Writes `rsp` into the next response slot (not yet published).
    pub fn put_response(&mut self, rsp: &BlkifResponse) {
        let bytes: [u8; BLKIF_RESPONSE_SIZE] = rsp.encode();
        let p = self
            .slot(self.rsp_prod_pvt)
            .cast::<[u8; BLKIF_RESPONSE_SIZE]>();
        // SAFETY: as in `request`: a whole entry inside the mapping.
        unsafe { std::ptr::write_volatile(p, bytes) };
        self.rsp_prod_pvt = self.rsp_prod_pvt.wrapping_add(1);
    }

    /// Publishes `rsp_prod_pvt`; whether the frontend wants a notification.
    pub fn push(&mut self) -> bool {
        let old = self.index(SRING_RSP_PROD).load(Ordering::Relaxed);
        let new = self.rsp_prod_pvt;
        fence(Ordering::Release);
        self.index(SRING_RSP_PROD).store(new, Ordering::Release);
        fence(Ordering::SeqCst);
        let event = self.index(SRING_RSP_EVENT).load(Ordering::Acquire);
        new.wrapping_sub(event) < new.wrapping_sub(old)
    }

    /// The `rsp_prod` the frontend sees.
    pub fn rsp_prod(&mut self) -> u32 {
        self.index(SRING_RSP_PROD).load(Ordering::Relaxed)
    }

    /// Writes a raw `rsp_prod` (misbehaviour only).
    pub fn set_rsp_prod(&mut self, v: u32) {
        fence(Ordering::Release);
        self.index(SRING_RSP_PROD).store(v, Ordering::Release);
    }

    /// Whether requests remain after re-arming `req_event` (no request may
    /// slip between the last check and the frontend's next notification).
    pub fn more_requests(&mut self) -> bool {
        if self.req_prod() != self.req_cons {
            return true;
        }
        let want = self.req_cons.wrapping_add(1);
        self.index(SRING_REQ_EVENT).store(want, Ordering::Release);
        fence(Ordering::SeqCst);
        self.req_prod() != self.req_cons
    }
}
