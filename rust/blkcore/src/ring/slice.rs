// SPDX-License-Identifier: GPL-2.0

//! [`SliceRing`]: the shared ring over a byte buffer (host tests, the
//! simulator, fuzzing), with the backend's side for tests.

use super::*;

impl<'a> SliceRing<'a> {
    /// Wraps `bytes` (at least `pages * 4096` long for the ring used).
    pub fn new(bytes: &'a mut [u8]) -> Self {
        Self { bytes }
    }

    /// The backend's side: the request in ring slot `slot`.
    pub fn read_request(&self, slot: u32) -> RingEntryBytes {
        let mut e = [0u8; BLKIF_RING_ENTRY_SIZE];
        if let Some(off) = sring_entry_offset(slot) {
            if let Some(s) = off
                .checked_add(BLKIF_RING_ENTRY_SIZE)
                .and_then(|end| self.bytes.get(off..end))
            {
                e.copy_from_slice(s);
            }
        }
        e
    }

    /// The backend's side: puts `rsp` into ring slot `slot` (publish it
    /// with [`SharedRing::store_rsp_prod`]).
    pub fn write_response(&mut self, slot: u32, rsp: &BlkifResponse) {
        if let Some(off) = sring_entry_offset(slot) {
            if let Some(d) = off
                .checked_add(BLKIF_RESPONSE_SIZE)
                .and_then(|end| self.bytes.get_mut(off..end))
            {
                d.copy_from_slice(&rsp.encode());
            }
        }
    }

    fn load(&self, off: usize) -> u32 {
        let mut a = [0u8; 4];
        if let Some(s) = off.checked_add(4).and_then(|end| self.bytes.get(off..end)) {
            a.copy_from_slice(s);
        }
        u32::from_le_bytes(a)
    }

    fn store(&mut self, off: usize, v: u32) {
        if let Some(d) = off
            .checked_add(4)
            .and_then(|end| self.bytes.get_mut(off..end))
        {
            d.copy_from_slice(&v.to_le_bytes());
        }
    }
}

impl SharedRing for SliceRing<'_> {
    fn load_req_prod(&self) -> RingIdx {
        self.load(SRING_REQ_PROD)
    }
    fn store_req_prod(&mut self, v: RingIdx) {
        self.store(SRING_REQ_PROD, v)
    }
    fn load_req_event(&self) -> RingIdx {
        self.load(SRING_REQ_EVENT)
    }
    fn load_rsp_prod(&self) -> RingIdx {
        self.load(SRING_RSP_PROD)
    }
    fn store_rsp_event(&mut self, v: RingIdx) {
        self.store(SRING_RSP_EVENT, v)
    }
    fn store_req_event(&mut self, v: RingIdx) {
        self.store(SRING_REQ_EVENT, v)
    }
    fn store_rsp_prod(&mut self, v: RingIdx) {
        self.store(SRING_RSP_PROD, v)
    }
    fn write_entry(&mut self, slot: u32, entry: &RingEntryBytes) {
        if let Some(off) = sring_entry_offset(slot) {
            if let Some(d) = off
                .checked_add(BLKIF_RING_ENTRY_SIZE)
                .and_then(|end| self.bytes.get_mut(off..end))
            {
                d.copy_from_slice(entry);
            }
        }
    }
    fn read_response(&self, slot: u32) -> [u8; BLKIF_RESPONSE_SIZE] {
        let mut a = [0u8; BLKIF_RESPONSE_SIZE];
        if let Some(off) = sring_entry_offset(slot) {
            if let Some(s) = off
                .checked_add(BLKIF_RESPONSE_SIZE)
                .and_then(|end| self.bytes.get(off..end))
            {
                a.copy_from_slice(s);
            }
        }
        a
    }
    fn wmb(&mut self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
    fn rmb(&mut self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
    fn mb(&mut self) {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
}
