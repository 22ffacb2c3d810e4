// SPDX-License-Identifier: GPL-2.0

//! The Xen frontend's data path, as the kernel runs it: a block request's
//! pieces → per-frame segments → grants (and bounce copies) → direct or
//! indirect encoding → a ring slot; a response → validation → copy back →
//! grant release (persistent pool, deferred release of what the backend
//! still maps) → the request's status. Also the purge of idle persistent
//! grants, failing everything in flight when the backend breaks the
//! protocol, and teardown.
//!
//! Generic over the mechanisms, so that the kernel driver (rust/xen's grant
//! table, struct pages and granted ring pages), the host simulator
//! (`tools/testing/blkback-sim`) and the fuzz targets run this same code:
//! - [`Memory`]: the grant table plus copying into frames;
//! - [`Storage`]: fixed-size buffers allocated once when the backend
//!   connects (the kernel's `KVec`, the host's `Vec`); nothing is allocated
//!   on the request path;
//! - [`SharedRing`]: the shared ring pages;
//! - `Rq`: the caller's request token (the kernel's `blk-mq` request), handed
//!   back with its [`Status`] when it ends.

use super::blkif::{
    indirect_pages,
    BlkifRequestSegment,
    BlkifResponse,
    RingEntryBytes,
    BLKIF_MAX_RING_SIZE,
    BLKIF_OP_DISCARD,
    BLKIF_OP_FLUSH_DISKCACHE,
    BLKIF_OP_READ,
    BLKIF_OP_WRITE_BARRIER,
    BLKIF_RING_ENTRY_SIZE,
    BLKIF_SEGMENT_SIZE,
    XEN_PAGE_SIZE, //
};
use super::grants::{
    GrantError,
    GrantHandle,
    GrantMode,
    GrantOps,
    GrantPool,
    GrantRef,
    GrantStats,
    PoolEntry,
    INVALID_GRANT_REF, //
};
use super::mapping::{
    encode_direct_wire,
    encode_discard,
    encode_flush,
    encode_indirect,
    layout,
    map_piece,
    map_pieces,
    Layout,
    MapError,
    MappedSegment,
    Piece,
    RwHeader,
    RwOp, //
};
use super::negotiate::{
    FlushKind,
    Negotiated, //
};
use super::ring::{
    DrainError,
    FrontRing,
    InFlight,
    ResponseError,
    RingError,
    RspStatus,
    SharedRing,
    Verdict, //
};
use super::stall::{
    Silence,
    StallWatch, //
};
use core::fmt;

mod build;
mod complete;
pub mod pregrant;
mod slot_tables;
mod submit;

use slot_tables::SlotTables;

/// Why the data path gave up on the backend. Each means a broken or
/// hostile backend; the ring is disabled for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The backend's `rsp_prod` is impossible.
    Producer(RingError),
    /// A response names no request in flight, or the wrong operation.
    Response(ResponseError),
    /// More responses in one pass than slots in the ring.
    Storm,
    /// Without persistent grants the backend still maps this grant after
    /// answering the request.
    StillMapped(GrantRef),
    /// Requests in flight, and not one response for `silent_ms`, at least
    /// the limit the user set or removal's (the backend stopped serving
    /// the ring, its state unchanged): see [`DataPath::timed_out`].
    Unanswered {
        /// How long the ring answered nothing, in milliseconds.
        silent_ms: u64,
    },
    /// Fault injection (tests) or the caller's own reason.
    Injected,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Producer(e) => write!(f, "bad response producer: {e:?}"),
            Self::Response(ResponseError::BadId(id)) => {
                write!(f, "response has incorrect id {id}")
            }
            Self::Response(ResponseError::NotInFlight(id)) => {
                write!(f, "response {id} references no pending request")
            }
            Self::Response(ResponseError::WrongOperation { id, expected, got }) => write!(
                f,
                "response {id} has wrong operation {got} (expected {expected})"
            ),
            Self::Storm => write!(f, "more responses than ring slots in one pass"),
            Self::StillMapped(g) => {
                write!(f, "backend has not unmapped non-persistent grant {g}")
            }
            Self::Unanswered { silent_ms } => {
                write!(f, "no response for {silent_ms} ms with requests in flight")
            }
            Self::Injected => write!(f, "fault injected"),
        }
    }
}

/// What one pass over the responses found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Responses were consumed.
    Responses,
    /// None were pending (a spurious event).
    NonePending,
    /// The backend broke the protocol (`fault`); every request in flight
    /// (`failed` of them) ended with [`Status::IoErr`]. The caller stops
    /// using the ring.
    Broken {
        /// What the backend did.
        fault: Fault,
        /// Requests failed.
        failed: u32,
    },
}

/// Idle persistent grants are purged at most this often (upstream: 10 s).
pub const PURGE_INTERVAL_MS: u64 = 10_000;

/// Submission/completion passes between two looks at the clock for the
/// purge: a Xen PV guest's clock read may trap (emulated TSC), so not on
/// every request.
pub const PURGE_CHECK_EVERY: u32 = 256;

const MAX_RING: usize = BLKIF_MAX_RING_SIZE as usize;

/// Grant table plus access to frame contents.
pub trait Memory: GrantOps {
    /// The Xen frame `frame_offset` bytes (a multiple of 4096) into `page`.
    fn frame_in_page(&self, page: Self::Frame, frame_offset: u32) -> Self::Frame;
    /// Copies `len` bytes from `src` at `src_off` to `dst` at `dst_off`
    /// (both ranges inside one frame).
    fn copy(
        &mut self,
        src: Self::Frame,
        src_off: u32,
        dst: Self::Frame,
        dst_off: u32,
        len: u32,
    ) -> Result<(), MemoryError>;
    /// Writes `bytes` into `dst` at `off`.
    fn write(&mut self, dst: Self::Frame, off: u32, bytes: &[u8]) -> Result<(), MemoryError>;
}

/// A copy into or out of a frame failed (range outside the frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryError;

/// Allocation failed while building the data path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

/// Fixed-size buffers, allocated once in [`DataPath::new`].
pub trait Storage {
    /// A buffer of `T`.
    type Buf<T>: AsRef<[T]> + AsMut<[T]>;
    /// A buffer of `len` values made by `f`.
    fn buf<T>(len: usize, f: impl FnMut() -> T) -> Result<Self::Buf<T>, OutOfMemory>;
}

/// Segments one indirect request may carry on the wire: twice the block
/// layer's limit (a block-layer segment that straddles a page needs two
/// frames, and the kernel's queue limits have no `seg_boundary_mask` to
/// prevent it), within the backend's `feature-max-indirect-segments` and
/// the protocol. Without indirect descriptors: the direct limit.
pub fn wire_segments(n: &Negotiated, backend_max_indirect: u32) -> u32 {
    if n.indirect_segments == 0 {
        return n.segments_per_request;
    }
    n.indirect_segments
        .saturating_mul(2)
        .min(backend_max_indirect)
        .min(super::negotiate::MAX_INDIRECT_SEGMENTS)
        .max(n.indirect_segments)
}

/// Maps a request's pieces to per-frame segments in `out` (the caller's
/// scratch) before [`DataPath::queue`], outside the ring lock: the
/// segments, or [`QueueError::Io`] for pieces no request can carry (fail
/// the request). No pieces map to no segments (flush, discard).
///
/// Out of line: it runs once per request before the ring lock, and its
/// cost is measured apart from the caller's.
#[inline(never)]
pub fn map_request<'a, F: Copy>(
    pieces: &[Piece<F>],
    out: &'a mut [MappedSegment<F>],
) -> Result<&'a [MappedSegment<F>], QueueError> {
    if pieces.is_empty() {
        return Ok(&[]);
    }
    let max = u32::try_from(out.len()).unwrap_or(u32::MAX);
    let n = map_pieces(pieces, max, out).map_err(|_| QueueError::Io)?;
    out.get(..n.nr_segments as usize).ok_or(QueueError::Io)
}

/// What a block request asks the ring to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read `sector..` into the request's pieces.
    Read {
        /// Start sector.
        sector: u64,
    },
    /// Write the request's pieces at `sector`; `fua` asks for forced unit
    /// access.
    Write {
        /// Start sector.
        sector: u64,
        /// `REQ_FUA`.
        fua: bool,
    },
    /// Empty cache flush.
    Flush,
    /// Discard (or secure erase) of a sector range.
    Discard {
        /// Start sector.
        sector: u64,
        /// Sectors.
        nr_sectors: u64,
        /// Secure erase.
        secure: bool,
    },
}

/// Why a request was not put on the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueError {
    /// Out of ring slots, ids or grants: retry later.
    Busy,
    /// The request can't be expressed: fail it.
    Io,
    /// Complete it successfully without sending it (flush without a
    /// backend flush feature, like upstream).
    CompleteWithoutSending,
    /// Fail it as not supported: a discard the backend does not offer, or
    /// withdrew (fstrim then says "not supported", not an I/O error).
    NotSupp,
}

/// How a request ended (the kernel maps it to `blk_status_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `BLK_STS_OK`.
    Ok,
    /// `BLK_STS_IOERR`.
    IoErr,
    /// `BLK_STS_NOTSUPP`.
    NotSupp,
}

/// Counters of one ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Requests put on the ring.
    pub requests: u64,
    /// Of those, indirect.
    pub indirect_requests: u64,
    /// Notifications sent to the backend.
    pub notifications: u64,
    /// Requests sent back to blk-mq to retry (ring full, no id, no grant).
    pub busy: u64,
    /// Of those, the grant table had no free reference.
    pub out_of_grants: u64,
    /// Protocol errors of the backend.
    pub errors: u64,
    /// Responses consumed.
    pub responses: u64,
    /// Calls of the interrupt handler, and those that found no response
    /// (acknowledged as spurious: two in a row delay the next event, see
    /// `xen_irq_lateeoi`).
    pub interrupts: u64,
    /// See `interrupts`.
    pub spurious_interrupts: u64,
    /// Request timeouts: each a request that waited a whole `io_timeout`
    /// ([`DataPath::timed_out`]).
    pub timeouts: u64,
}

impl RingStats {
    /// Adds another ring's counters (per-disk totals).
    pub fn add(&mut self, o: &RingStats) {
        self.requests += o.requests;
        self.indirect_requests += o.indirect_requests;
        self.notifications += o.notifications;
        self.busy += o.busy;
        self.out_of_grants += o.out_of_grants;
        self.errors += o.errors;
        self.responses += o.responses;
        self.interrupts += o.interrupts;
        self.spurious_interrupts += o.spurious_interrupts;
        self.timeouts += o.timeouts;
    }
}

/// What the backend did that the caller reports in one line each: the
/// features it withdrew at run time (it answered `BLKIF_RSP_EOPNOTSUPP`;
/// later requests no longer reach it), and the first status blkif does
/// not define (that request failed; later ones fail silently).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendNotes {
    /// Flushes (and FUA): `Some(true)` if the refused request was a barrier.
    pub flush: Option<bool>,
    /// Discards.
    pub discard: bool,
    /// The first undefined status, with the request's operation.
    pub unknown_status: Option<(i16, u8)>,
}

/// A data segment of a read through a bounce frame, copied back on
/// completion.
#[derive(Clone, Copy, Debug)]
struct CopySeg<F> {
    /// The request's frame and the byte offset of the data in it.
    data: F,
    /// The bounce frame; the data sits at the same offset in both.
    bounce: F,
    off: u32,
    len: u32,
}

/// Per-id state of a request in flight (`struct blk_shadow`). Its grants,
/// indirect grants and copies are its share of the data path's
/// [`SlotTables`], under the same id; the counts here say how much of
/// each share is in use.
#[derive(Debug)]
struct Slot<Rq> {
    rq: Option<Rq>,
    nr_segments: u32,
    /// Data grants through the pool (with bounce frames), in
    /// [`SlotTables::data_grants`].
    nr_data_grants: u32,
    /// Data grants made before the ring lock ([`PreGranted`]), in
    /// [`SlotTables::direct_grefs`].
    nr_direct_grants: u32,
    /// Indirect pages granted, in [`SlotTables::indirect_grants`].
    nr_indirect_pages: u32,
    /// Reads to copy back, in [`SlotTables::copies`].
    nr_copies: u32,
    /// Answered or failed, but the backend still maps one of its direct
    /// grants (the caller's own pages): `rq` stays here, not ended, and
    /// the id stays taken, until [`DataPath::retry_held`] finds them
    /// released.
    held: bool,
}

/// The sizes the data path is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Ring slots.
    pub ring_size: u32,
    /// Most segments one request may carry on the wire (>= the block
    /// layer's limit, see [`wire_segments`]).
    pub wire_max: u32,
    /// Indirect pages one request may need (0 without indirect).
    pub indirect_pages: u32,
    /// Grant pool entries (upstream: `(segments + indirect pages) * ring
    /// size`).
    pub pool_entries: u32,
}

/// The data path of one ring, built when the backend connects.
pub struct DataPath<S: Storage, F: Copy, Rq> {
    n: Negotiated,
    handle: u16,
    pool: GrantPool<F, S::Buf<PoolEntry<F>>>,
    inflight: S::Buf<InFlight<MAX_RING>>,
    slots: S::Buf<Slot<Rq>>,
    /// Each slot's grants, indirect pages and copies back; also the
    /// [`Geometry`].
    tables: SlotTables<S, F>,
    /// Counters of the grants in [`SlotTables::direct_grefs`] (granted,
    /// revoked, in use, deferred), added to the pool's in
    /// [`DataPath::grant_stats`].
    direct_grant_stats: GrantStats,
    // Scratch space of the request being queued: its segments' wire
    // descriptors (`wire_max` of 8 bytes), its indirect pages' grants.
    desc: S::Buf<u8>,
    indirect_grefs: S::Buf<GrantRef>,
    last_purge_ms: u64,
    /// Passes since the clock was last read for the purge.
    purge_countdown: u32,
    notes: BackendNotes,
    /// An undefined status was noted once already.
    unknown_status_seen: bool,
    stats: RingStats,
    /// Slow or stalled, from the request timeouts ([`DataPath::timed_out`]).
    stall: StallWatch,
}

impl<S: Storage, F: Copy, Rq> DataPath<S, F, Rq> {
    /// Counters of the ring.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Counters of the grant pool.
    pub fn grant_stats(&self) -> GrantStats {
        let mut g = self.pool.stats();
        g.granted = g.granted.wrapping_add(self.direct_grant_stats.granted);
        g.revoked = g.revoked.wrapping_add(self.direct_grant_stats.revoked);
        g.in_use = g.in_use.wrapping_add(self.direct_grant_stats.in_use);
        g.deferred = g.deferred.wrapping_add(self.direct_grant_stats.deferred);
        g
    }

    /// Whether data is bounced through the pool's frames.
    pub fn copy_data(&self) -> bool {
        self.n.copy_data
    }

    /// Whether a flush still reaches the backend.
    pub fn flushes(&self) -> bool {
        self.n.flush.is_some()
    }

    /// Whether a discard still reaches the backend.
    pub fn discards(&self) -> bool {
        self.n.discard.is_some()
    }

    /// The sizes the data path was built with.
    pub fn geometry(&self) -> Geometry {
        self.tables.geometry()
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.inflight.as_ref().first().map_or(0, |t| t.waiting())
    }

    /// What to report since the last call (each thing once).
    pub fn take_notes(&mut self) -> BackendNotes {
        core::mem::take(&mut self.notes)
    }

    /// Counts a notification of the backend.
    pub fn notified(&mut self) {
        self.stats.notifications += 1;
    }

    /// Calls `f` with every grant reference held by a request in flight.
    pub fn for_each_grant_in_flight(&self, mut f: impl FnMut(GrantRef)) {
        for (id, s) in self.slots.as_ref().iter().enumerate() {
            if s.rq.is_none() {
                continue;
            }
            let g = self.tables.data_grants(id).iter();
            let i = self.tables.indirect_grants(id).iter();
            let g = g.take(s.nr_data_grants as usize);
            for h in g.chain(i.take(s.nr_indirect_pages as usize)) {
                if let Some(e) = self.pool.entry(*h) {
                    f(e.gref());
                }
            }
            let direct = self.tables.direct_grefs(id).iter();
            direct.take(s.nr_direct_grants as usize).for_each(|g| f(*g));
        }
    }

    /// Revokes idle persistent grants the backend no longer maps
    /// (`purge_persistent_grants`), at most every [`PURGE_INTERVAL_MS`];
    /// `now_ms` (a monotonic clock) is read every [`PURGE_CHECK_EVERY`]
    /// calls only. Run from the submission and completion paths.
    pub fn maybe_purge<M: Memory<Frame = F>>(&mut self, mem: &mut M, now_ms: impl FnOnce() -> u64) {
        if !self.n.persistent {
            return;
        }
        self.purge_countdown = self.purge_countdown.saturating_sub(1);
        if self.purge_countdown != 0 {
            return;
        }
        self.purge_countdown = PURGE_CHECK_EVERY;
        let now = now_ms();
        if now.saturating_sub(self.last_purge_ms) >= PURGE_INTERVAL_MS {
            self.last_purge_ms = now;
            self.pool.purge(mem);
        }
    }

    /// Revokes idle persistent grants the backend no longer maps, now.
    /// Returns how many.
    pub fn purge<M: Memory<Frame = F>>(&mut self, mem: &mut M) -> u32 {
        self.pool.purge(mem)
    }

    /// Takes the data path down: revokes every grant (those of the pool
    /// the backend still maps are ended with a deferred release) and hands
    /// every request still in flight to `rq`, untouched, for the caller to
    /// resubmit or fail; except those whose own pages the backend still
    /// maps, which stay held here (see [`DataPath::held`]): the caller
    /// keeps this data path until [`DataPath::retry_held`] ended them.
    /// Returns how many grants were deferred.
    pub fn take_down<M: Memory<Frame = F>>(&mut self, mem: &mut M, mut rq: impl FnMut(Rq)) -> u32 {
        for id in 0..self.slots.as_ref().len() {
            if self.slots.as_ref().get(id).is_some_and(|s| s.held) {
                continue;
            }
            if self.end_direct(mem, id).is_err() {
                self.hold(id);
                continue;
            }
            self.cancel_id(id as u32);
            if let Some(s) = self.slots.as_mut().get_mut(id) {
                if let Some(r) = s.rq.take() {
                    rq(r);
                }
                s.nr_data_grants = 0;
                s.nr_indirect_pages = 0;
                s.nr_copies = 0;
            }
        }
        // Every id but the held ones was cancelled above.
        self.pool.teardown(mem)
    }

    fn inflight(&mut self) -> Option<&mut InFlight<MAX_RING>> {
        self.inflight.as_mut().first_mut()
    }

    /// An id for a request of (response) operation `op` with
    /// `nr_segments` data segments.
    fn alloc_id(&mut self, op: u8, indirect: bool, nr_segments: u32) -> Result<u32, QueueError> {
        let id = self
            .inflight()
            .and_then(|t| t.alloc(op, indirect))
            .ok_or(QueueError::Busy)?;
        if let Some(s) = self.slots.as_mut().get_mut(id as usize) {
            s.nr_segments = nr_segments;
        }
        Ok(id)
    }

    fn cancel_id(&mut self, id: u32) {
        if let Some(t) = self.inflight() {
            t.cancel(id);
        }
    }
}

impl<F: Copy> CopySeg<F> {
    fn new(data: F, bounce: F, m: &MappedSegment<F>) -> Self {
        Self {
            data,
            bounce,
            off: m.offset_in_frame(),
            len: m.len(),
        }
    }
}
