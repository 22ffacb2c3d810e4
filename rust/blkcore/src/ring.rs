// SPDX-License-Identifier: GPL-2.0

//! The frontend half of a Xen shared ring (include/xen/interface/io/ring.h)
//! and the validation of the responses a backend puts on it.
//!
//! Indices are free-running `u32`s that wrap; a slot is `idx & (size - 1)`.
//! The shared page is reached only through [`SharedRing`], which the kernel
//! glue implements over the granted ring pages (with the barriers documented
//! on each method) and the host implements over a byte buffer
//! ([`SliceRing`]).
//!
//! Everything the backend writes (`rsp_prod`, `req_event`, the response
//! bytes) is untrusted: [`FrontRing::response_prod`] rejects an impossible
//! producer index with an error, and [`InFlight::complete`] rejects a
//! response whose id or operation does not match a request in flight. The
//! caller is expected to stop using the ring (device to error state) on the
//! first error, as xen-blkfront does.

use super::blkif::{
    ring_size, sring_entry_offset, BlkifResponse, RingEntryBytes, BLKIF_MAX_RING_SIZE,
    BLKIF_OP_DISCARD, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_OP_READ, BLKIF_OP_WRITE,
    BLKIF_OP_WRITE_BARRIER, BLKIF_RESPONSE_SIZE, BLKIF_RING_ENTRY_SIZE, BLKIF_RSP_EOPNOTSUPP,
    BLKIF_RSP_ERROR, BLKIF_RSP_OKAY, SRING_REQ_EVENT, SRING_REQ_PROD, SRING_RSP_EVENT,
    SRING_RSP_PROD, XEN_PAGE_SIZE,
};

mod inflight;
mod slice;

/// A free-running ring index (`RING_IDX`).
pub type RingIdx = u32;

/// Access to the shared ring page(s).
///
/// Index loads and stores must each be a single, untorn 32-bit access
/// (`READ_ONCE` / `WRITE_ONCE`); the barrier methods must be the Xen
/// "virt" barriers (`virt_wmb`, `virt_rmb`, `virt_mb`), because the other
/// end runs on another (v)CPU even in a UP guest. [`FrontRing`] calls them at
/// exactly the points ring.h does:
///
/// * pushing requests: write entries, [`wmb`](Self::wmb), store `req_prod`,
///   [`mb`](Self::mb), load `req_event`;
/// * reading responses: load `rsp_prod`, [`rmb`](Self::rmb), copy entries;
/// * final check: store `rsp_event`, [`mb`](Self::mb), load `rsp_prod`.
pub trait SharedRing {
    /// `READ_ONCE(sring->req_prod)`.
    fn load_req_prod(&self) -> RingIdx;
    /// `WRITE_ONCE(sring->req_prod, v)`.
    fn store_req_prod(&mut self, v: RingIdx);
    /// `READ_ONCE(sring->req_event)` (backend-written).
    fn load_req_event(&self) -> RingIdx;
    /// `READ_ONCE(sring->rsp_prod)` (backend-written).
    fn load_rsp_prod(&self) -> RingIdx;
    /// `WRITE_ONCE(sring->rsp_event, v)`.
    fn store_rsp_event(&mut self, v: RingIdx);
    /// `WRITE_ONCE(sring->req_event, v)` (used only by `SHARED_RING_INIT`).
    fn store_req_event(&mut self, v: RingIdx);
    /// `WRITE_ONCE(sring->rsp_prod, v)` (used only by `SHARED_RING_INIT`).
    fn store_rsp_prod(&mut self, v: RingIdx);
    /// Copies a request into ring slot `slot` (`slot < size`, already
    /// masked).
    fn write_entry(&mut self, slot: u32, entry: &RingEntryBytes);
    /// Copies the response in ring slot `slot` out of shared memory, once
    /// (`RING_COPY_RESPONSE`). `slot < size`, already masked.
    fn read_response(&self, slot: u32) -> [u8; BLKIF_RESPONSE_SIZE];
    /// `virt_wmb()`: entries visible before the producer index.
    fn wmb(&mut self);
    /// `virt_rmb()`: producer index read before the entries it covers.
    fn rmb(&mut self);
    /// `virt_mb()`: full barrier between an index store and an event load.
    fn mb(&mut self);
}

/// Errors of the ring itself. All of them mean "the backend is broken or
/// hostile": the caller disables the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// Page count outside `1..=16`.
    BadPageCount(u32),
    /// No free slot for another request (a caller bug, not a backend one).
    Full,
    /// `rsp_prod - rsp_cons > size` (`RING_RESPONSE_PROD_OVERFLOW`).
    ResponseOverflow {
        /// The backend's `rsp_prod`.
        rsp_prod: RingIdx,
        /// Our `rsp_cons`.
        rsp_cons: RingIdx,
    },
    /// More responses than requests we produced (stricter than ring.h).
    ResponsesBeyondRequests {
        /// The backend's `rsp_prod`.
        rsp_prod: RingIdx,
        /// Our `req_prod_pvt`.
        req_prod_pvt: RingIdx,
    },
}

/// Frontend private ring state (`struct blkif_front_ring`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrontRing {
    req_prod_pvt: RingIdx,
    rsp_cons: RingIdx,
    nr_ents: u32,
}

impl FrontRing {
    /// `FRONT_RING_INIT` for a ring of `pages` 4 KiB pages.
    pub fn new(pages: u32) -> Result<Self, RingError> {
        Self::attach(pages, 0)
    }

    /// `FRONT_RING_ATTACH`: private indices start at `start` (which must be
    /// what the shared `req_prod`/`rsp_prod` hold).
    pub fn attach(pages: u32, start: RingIdx) -> Result<Self, RingError> {
        let nr_ents = ring_size(pages).ok_or(RingError::BadPageCount(pages))?;
        Ok(Self {
            req_prod_pvt: start,
            rsp_cons: start,
            nr_ents,
        })
    }

    /// Bytes of shared memory the ring spans (`pages * 4096`).
    pub fn shared_bytes(pages: u32) -> Option<usize> {
        ring_size(pages)?;
        (pages as usize).checked_mul(XEN_PAGE_SIZE as usize)
    }

    /// `SHARED_RING_INIT`: zero producers, events at 1. Also resets the
    /// private indices to 0.
    pub fn init_shared<S: SharedRing>(&mut self, s: &mut S) {
        s.store_req_prod(0);
        s.store_rsp_prod(0);
        s.store_req_event(1);
        s.store_rsp_event(1);
        self.req_prod_pvt = 0;
        self.rsp_cons = 0;
    }

    /// `RING_SIZE`.
    pub fn size(&self) -> u32 {
        self.nr_ents
    }

    /// Private request producer.
    pub fn req_prod_pvt(&self) -> RingIdx {
        self.req_prod_pvt
    }

    /// Response consumer.
    pub fn rsp_cons(&self) -> RingIdx {
        self.rsp_cons
    }

    /// `RING_FREE_REQUESTS`: slots not holding a request awaiting its
    /// response. Saturates at 0 instead of wrapping.
    pub fn free_requests(&self) -> u32 {
        let used = self.req_prod_pvt.wrapping_sub(self.rsp_cons);
        self.nr_ents.saturating_sub(used)
    }

    /// `RING_FULL`.
    pub fn is_full(&self) -> bool {
        self.free_requests() == 0
    }

    /// Requests produced but not yet answered.
    pub fn in_flight(&self) -> u32 {
        self.req_prod_pvt.wrapping_sub(self.rsp_cons)
    }

    fn slot(&self, idx: RingIdx) -> u32 {
        // nr_ents is a power of two >= 32 (from ring_size).
        idx & self.nr_ents.wrapping_sub(1)
    }

    /// Writes a request at `req_prod_pvt` and advances it (not yet visible
    /// to the backend: see [`push_requests_and_check_notify`]). Returns the
    /// slot used.
    ///
    /// [`push_requests_and_check_notify`]: Self::push_requests_and_check_notify
    pub fn put_request<S: SharedRing>(
        &mut self,
        s: &mut S,
        entry: &RingEntryBytes,
    ) -> Result<u32, RingError> {
        if self.is_full() {
            return Err(RingError::Full);
        }
        let slot = self.slot(self.req_prod_pvt);
        s.write_entry(slot, entry);
        self.req_prod_pvt = self.req_prod_pvt.wrapping_add(1);
        Ok(slot)
    }

    /// `RING_PUSH_REQUESTS_AND_CHECK_NOTIFY`: publishes the private
    /// producer and returns whether the backend must be notified.
    pub fn push_requests_and_check_notify<S: SharedRing>(&mut self, s: &mut S) -> bool {
        let old = s.load_req_prod();
        let new = self.req_prod_pvt;
        s.wmb();
        s.store_req_prod(new);
        s.mb();
        let event = s.load_req_event();
        new.wrapping_sub(event) < new.wrapping_sub(old)
    }

    /// Loads `rsp_prod`, issues the read barrier and validates it
    /// (`RING_RESPONSE_PROD_OVERFLOW`, plus "no more responses than
    /// requests"). Consume up to the returned index with
    /// [`take_response`](Self::take_response).
    pub fn response_prod<S: SharedRing>(&self, s: &mut S) -> Result<RingIdx, RingError> {
        let rp = s.load_rsp_prod();
        s.rmb();
        self.check_rsp_prod(rp)?;
        Ok(rp)
    }

    fn check_rsp_prod(&self, rp: RingIdx) -> Result<(), RingError> {
        let pending = rp.wrapping_sub(self.rsp_cons);
        if pending > self.nr_ents {
            return Err(RingError::ResponseOverflow {
                rsp_prod: rp,
                rsp_cons: self.rsp_cons,
            });
        }
        if pending > self.in_flight() {
            return Err(RingError::ResponsesBeyondRequests {
                rsp_prod: rp,
                req_prod_pvt: self.req_prod_pvt,
            });
        }
        Ok(())
    }

    /// Copies out (once) and decodes the response at `rsp_cons` if
    /// `rsp_cons != rp`, advancing `rsp_cons`. `rp` must come from
    /// [`response_prod`](Self::response_prod).
    pub fn take_response<S: SharedRing>(&mut self, s: &S, rp: RingIdx) -> Option<BlkifResponse> {
        if self.rsp_cons == rp {
            return None;
        }
        let bytes = s.read_response(self.slot(self.rsp_cons));
        self.rsp_cons = self.rsp_cons.wrapping_add(1);
        BlkifResponse::decode(&bytes)
    }

    /// `RING_HAS_UNCONSUMED_RESPONSES`.
    pub fn has_unconsumed_responses<S: SharedRing>(&self, s: &S) -> bool {
        s.load_rsp_prod() != self.rsp_cons
    }

    /// `RING_FINAL_CHECK_FOR_RESPONSES`: true if more responses are
    /// pending; otherwise arms `rsp_event` for the next one and re-checks.
    pub fn final_check_for_responses<S: SharedRing>(&mut self, s: &mut S) -> bool {
        if self.has_unconsumed_responses(s) {
            return true;
        }
        s.store_rsp_event(self.rsp_cons.wrapping_add(1));
        s.mb();
        self.has_unconsumed_responses(s)
    }
}

/// Why [`FrontRing::drain_responses`] stopped before the ring was empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainError<E> {
    /// The backend's `rsp_prod` is impossible.
    Ring(RingError),
    /// The caller rejected a response.
    Response(E),
    /// More responses in one pass than slots in the ring. Unreachable for
    /// any backend, conforming or not, while the caller's lock keeps new
    /// requests off the ring ([`FrontRing::response_prod`] never admits
    /// more responses than requests in flight); kept as the loop's hard
    /// bound so that an interrupt handler can never spin.
    Budget,
}

impl FrontRing {
    /// The completion loop of `blkif_interrupt`: consumes every response
    /// up to the backend's `rsp_prod`, hands each to `f`, then arms
    /// `rsp_event` (`RING_FINAL_CHECK_FOR_RESPONSES`) and goes round again
    /// if more arrived meanwhile. Returns how many responses `f` took.
    ///
    /// Bounded: at most [`size`](Self::size) responses per call (each one
    /// advances `rsp_cons`, which `response_prod` keeps behind
    /// `req_prod_pvt`), so a backend that keeps moving `rsp_prod` ends the
    /// loop with an error instead of holding the CPU. On any error the
    /// caller must stop using the ring.
    pub fn drain_responses<S: SharedRing, E>(
        &mut self,
        s: &mut S,
        mut f: impl FnMut(BlkifResponse) -> Result<(), E>,
    ) -> Result<u32, DrainError<E>> {
        let budget = self.nr_ents;
        let mut taken = 0u32;
        loop {
            let rp = self.response_prod(s).map_err(DrainError::Ring)?;
            while self.rsp_cons != rp {
                if taken >= budget {
                    return Err(DrainError::Budget);
                }
                taken += 1;
                // A slot that does not decode is still consumed: `f` gets
                // a response with an impossible id instead.
                let rsp = self.take_response(s, rp).unwrap_or(BlkifResponse {
                    id: u64::MAX,
                    ..BlkifResponse::default()
                });
                f(rsp).map_err(DrainError::Response)?;
            }
            if !self.final_check_for_responses(s) {
                return Ok(taken);
            }
        }
    }
}

/// [`SharedRing`] over a byte buffer laid out like the shared ring pages
/// (header, then 112-byte slots). For host tests, the simulator and fuzzing;
/// barriers are `SeqCst` fences.
#[derive(Debug)]
pub struct SliceRing<'a> {
    bytes: &'a mut [u8],
}

/// Outcome of a response, from its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RspStatus {
    /// `BLKIF_RSP_OKAY`.
    Okay,
    /// `BLKIF_RSP_ERROR`.
    Error,
    /// `BLKIF_RSP_EOPNOTSUPP`.
    NotSupported,
    /// Any other value: treated as an I/O error by callers.
    Unknown(i16),
}

impl RspStatus {
    /// Classifies a wire status.
    pub fn from_wire(s: i16) -> Self {
        match s {
            BLKIF_RSP_OKAY => Self::Okay,
            BLKIF_RSP_ERROR => Self::Error,
            BLKIF_RSP_EOPNOTSUPP => Self::NotSupported,
            other => Self::Unknown(other),
        }
    }
}

/// A validated response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The id, now free again.
    pub id: u32,
    /// The operation (`indirect_op` for indirect requests).
    pub operation: u8,
    /// Whether the request was sent as [`BLKIF_OP_INDIRECT`](super::blkif::BLKIF_OP_INDIRECT).
    pub indirect: bool,
    /// The status.
    pub status: RspStatus,
}

/// What a valid response means for the block layer
/// (`blkif_interrupt`'s per-operation cases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Done (`BLK_STS_OK`).
    Ok,
    /// Failed (`BLK_STS_IOERR`).
    IoError,
    /// The backend does not flush (any more): from now on flushes complete
    /// without reaching it and FUA writes go out as plain writes, like
    /// upstream. An empty flush then completes as done (the cache the
    /// backend cannot flush is not ours to flush); one that carried data
    /// fails, since the data may not have been written.
    FlushWithdrawn {
        /// The request carried data segments.
        with_data: bool,
    },
    /// The backend does not discard (any more): this one ends with
    /// `BLK_STS_NOTSUPP` and later discards fail without reaching it.
    DiscardWithdrawn,
}

impl Verdict {
    /// The verdict on `c`, a request of `nr_segments` data segments.
    ///
    /// Unlike upstream, an empty flush answered `BLKIF_RSP_ERROR` fails:
    /// upstream reports it as done (old backends answered an unsupported
    /// barrier that way), which tells the file system that data reached
    /// stable storage when the backend said it did not.
    pub fn of(c: &Completion, nr_segments: u32) -> Self {
        let flush = matches!(
            c.operation,
            BLKIF_OP_FLUSH_DISKCACHE | BLKIF_OP_WRITE_BARRIER
        );
        match c.status {
            RspStatus::Okay => Self::Ok,
            RspStatus::NotSupported if flush => Self::FlushWithdrawn {
                with_data: nr_segments != 0,
            },
            RspStatus::NotSupported if c.operation == BLKIF_OP_DISCARD => Self::DiscardWithdrawn,
            _ => Self::IoError,
        }
    }
}

/// Why a response was rejected. Each means a broken or hostile backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseError {
    /// Id outside the table (`id >= BLK_RING_SIZE`).
    BadId(u64),
    /// Id of no request in flight (duplicate or invented response).
    NotInFlight(u32),
    /// Operation differs from the request's.
    WrongOperation {
        /// The id.
        id: u32,
        /// What the request was.
        expected: u8,
        /// What the response says.
        got: u8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Free {
        next: u32,
    },
    Waiting {
        op: u8,
        indirect: bool,
    },
    /// Answered or failed, but not reusable: the backend still maps one of
    /// the request's pages (see [`InFlight::hold`]).
    Held,
}

const NO_SLOT: u32 = u32::MAX;

/// Ids of requests in flight (`shadow[].status == REQ_WAITING` plus the id
/// free list of xen-blkfront), with room for `N` ids (use
/// [`BLKIF_MAX_RING_SIZE`] to cover any ring) of which the first `size`
/// are used.
#[derive(Clone, Debug)]
pub struct InFlight<const N: usize> {
    slots: [Slot; N],
    size: u32,
    free_head: u32,
    waiting: u32,
    held: u32,
}

/// Fuzz entry for everything a backend can put on the ring: arbitrary
/// bytes become a one-page shared ring (header and responses) plus a set of
/// requests in flight, and the frontend consumption loop runs over it:
/// `response_prod` validation, copy-once decode, id/operation validation,
/// final check. Must never panic, loop forever or allocate.
///
/// Layout of `data`: byte 0 = number of requests put in flight (mod 33),
/// byte 1 = their operations seed, bytes 2..6 = start index, then the shared
/// page bytes (zero-filled if short).
pub fn fuzz_entry(data: &[u8]) {
    const PAGE: usize = XEN_PAGE_SIZE as usize;
    let nreq = u32::from(data.first().copied().unwrap_or(0)) % 33;
    let op_seed = data.get(1).copied().unwrap_or(0);
    let mut start = [0u8; 4];
    if let Some(s) = data.get(2..6) {
        start.copy_from_slice(s);
    }
    let start = u32::from_le_bytes(start);
    let mut page = [0u8; PAGE];
    if let Some(rest) = data.get(6..) {
        let n = rest.len().min(PAGE);
        if let (Some(d), Some(s)) = (page.get_mut(..n), rest.get(..n)) {
            d.copy_from_slice(s);
        }
    }
    // The backend controls the header, except req_prod which is ours.
    let mut shared = SliceRing::new(&mut page);
    shared.store_req_prod(start);
    let Ok(mut ring) = FrontRing::attach(1, start) else {
        return;
    };
    let mut table: InFlight<{ BLKIF_MAX_RING_SIZE as usize }> = InFlight::new(ring.size());
    const OPS: [u8; 5] = [
        BLKIF_OP_READ,
        BLKIF_OP_WRITE,
        BLKIF_OP_FLUSH_DISKCACHE,
        BLKIF_OP_WRITE_BARRIER,
        BLKIF_OP_DISCARD,
    ];
    // Producing requests rewrites slots; keep the fuzzer's response bytes by
    // only advancing the indices (as if the backend had already overwritten
    // the request slots with responses).
    for i in 0..nreq {
        let pick = (usize::from(op_seed) + i as usize) % OPS.len();
        let op = OPS.get(pick).copied().unwrap_or(BLKIF_OP_READ);
        let indirect = op_seed & 0x80 != 0 && op <= BLKIF_OP_WRITE;
        if table.alloc(op, indirect).is_none() {
            break;
        }
        ring.req_prod_pvt = ring.req_prod_pvt.wrapping_add(1);
    }
    let _ = ring.push_requests_and_check_notify(&mut shared);
    // Bounded: at most size responses per round and a few rounds.
    for _ in 0..4 {
        let Ok(rp) = ring.response_prod(&mut shared) else {
            return;
        };
        while let Some(rsp) = ring.take_response(&shared, rp) {
            if table.complete(&rsp).is_err() {
                return;
            }
        }
        if !ring.final_check_for_responses(&mut shared) {
            return;
        }
    }
}
