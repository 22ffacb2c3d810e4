// SPDX-License-Identifier: GPL-2.0

//! One blkif ring (hardware queue): the shared ring, its event channel, the
//! requests in flight and the grant pool. Index logic, id bookkeeping,
//! response validation, request encoding and grant policy are all
//! `blkcore` (`ring`, `mapping`, `grants`); this is the glue that feeds them
//! the kernel objects from `rust/xen`.

use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{
        Arc,
        SpinLockIrq, //
    },
    time::{
        Instant,
        Monotonic, //
    }, //
};

use crate::blkcore::{
    blkif::{
        indirect_pages,
        BlkifRequestSegment,
        BlkifResponse,
        RingEntryBytes,
        BLKIF_MAX_RING_SIZE,
        BLKIF_OP_DISCARD,
        BLKIF_OP_FLUSH_DISKCACHE,
        BLKIF_OP_READ,
        BLKIF_OP_WRITE_BARRIER,
        BLKIF_RESPONSE_SIZE,
        BLKIF_RING_ENTRY_SIZE,
        BLKIF_SEGMENT_SIZE,
        SRING_REQ_EVENT,
        SRING_REQ_PROD,
        SRING_RSP_EVENT,
        SRING_RSP_PROD,
        XEN_PAGE_SIZE, //
    },
    grants::{
        GrantError,
        GrantHandle,
        GrantMode,
        GrantOps,
        GrantPool,
        GrantRef,
        GrantStats,
        PoolEntry, //
    },
    mapping::{
        encode_direct,
        encode_discard,
        encode_flush,
        encode_indirect,
        layout,
        map_pieces,
        write_indirect_page,
        Layout,
        MappedSegment,
        Piece,
        RwHeader,
        RwOp, //
    },
    negotiate::{
        FlushKind,
        Negotiated, //
    },
    ring::{
        DrainError,
        FrontRing,
        InFlight,
        RingIdx,
        SharedRing,
        Verdict, //
    },
};
use crate::xen::{
    evtchn::{
        BoundIrq,
        Eoi,
        EventChannel,
        Handler,
        Notifier, //
    },
    grant::{
        Frame,
        GrantTable,
        XenPage, //
    },
    ring::SharedPages,
    xenbus::{
        self,
        Device,
        Xbt, //
    },
};

/// Idle persistent grants are purged at most this often (upstream: 10 s).
const PURGE_INTERVAL_MS: i64 = 10_000;

/// Submission/completion passes between two looks at the clock for the
/// purge: a Xen PV guest's clock read may trap (emulated TSC), so not on
/// every request.
const PURGE_CHECK_EVERY: u32 = 256;

const MAX_RING: usize = BLKIF_MAX_RING_SIZE as usize;

/// Segments one indirect request may carry on the wire: twice the block
/// layer's limit (a block-layer segment that straddles a page needs two
/// frames, and `QueueLimits` has no `seg_boundary_mask` to prevent it),
/// within the backend's `feature-max-indirect-segments` and the protocol.
/// Without indirect descriptors: the direct limit.
pub(crate) fn wire_segments(n: &Negotiated, backend_max_indirect: u32) -> u32 {
    if n.indirect_segments == 0 {
        return n.segments_per_request;
    }
    n.indirect_segments
        .saturating_mul(2)
        .min(backend_max_indirect)
        .min(crate::blkcore::negotiate::MAX_INDIRECT_SEGMENTS)
        .max(n.indirect_segments)
}

impl SharedRing for SharedPages {
    fn load_req_prod(&self) -> RingIdx {
        self.load_u32(SRING_REQ_PROD)
    }
    fn store_req_prod(&mut self, v: RingIdx) {
        self.store_u32(SRING_REQ_PROD, v)
    }
    fn load_req_event(&self) -> RingIdx {
        self.load_u32(SRING_REQ_EVENT)
    }
    fn load_rsp_prod(&self) -> RingIdx {
        self.load_u32(SRING_RSP_PROD)
    }
    fn store_rsp_event(&mut self, v: RingIdx) {
        self.store_u32(SRING_RSP_EVENT, v)
    }
    fn store_req_event(&mut self, v: RingIdx) {
        self.store_u32(SRING_REQ_EVENT, v)
    }
    fn store_rsp_prod(&mut self, v: RingIdx) {
        self.store_u32(SRING_RSP_PROD, v)
    }
    fn write_entry(&mut self, slot: u32, entry: &RingEntryBytes) {
        if let Some(off) = crate::blkcore::blkif::sring_entry_offset(slot) {
            self.write_bytes(off, entry);
        }
    }
    fn read_response(&self, slot: u32) -> [u8; BLKIF_RESPONSE_SIZE] {
        let mut b = [0u8; BLKIF_RESPONSE_SIZE];
        if let Some(off) = crate::blkcore::blkif::sring_entry_offset(slot) {
            self.read_bytes(off, &mut b);
        }
        b
    }
    fn wmb(&mut self) {
        SharedPages::wmb(self)
    }
    fn rmb(&mut self) {
        SharedPages::rmb(self)
    }
    fn mb(&mut self) {
        SharedPages::mb(self)
    }
}

impl GrantOps for GrantTable {
    type Frame = Frame;

    fn grant(&mut self, frame: Frame, readonly: bool) -> Result<GrantRef, GrantError> {
        GrantTable::grant(self, frame, readonly).map_err(|_| GrantError::NoGrantRefs)
    }
    fn try_end_access(&mut self, gref: GrantRef) -> bool {
        self.try_end(gref)
    }
    fn end_access(&mut self, gref: GrantRef) {
        self.end(gref)
    }
}

const _: () = assert!(BLKIF_RING_ENTRY_SIZE == 112);

/// What a block request asks the ring to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IoKind {
    /// Read into the request's pages.
    Read,
    /// Write the request's pages; `fua` asks for forced unit access.
    Write {
        /// `REQ_FUA`.
        fua: bool,
    },
    /// Empty cache flush.
    Flush,
    /// Discard (or secure erase) of a sector range.
    Discard {
        /// Secure erase.
        secure: bool,
    },
}

/// Why a request was not put on the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueError {
    /// Out of ring slots, ids or grants: retry later.
    Busy,
    /// The request can't be expressed (or the device is broken): fail it.
    Io,
    /// Complete it successfully without sending it (flush without a
    /// backend flush feature, like upstream).
    Nothing,
}

/// A finished request, handed back to the block glue.
pub(crate) struct Done {
    pub(crate) rq: crate::disk::Rq,
    pub(crate) status: crate::disk::Status,
}

/// A data segment as recorded for the copy back of a read.
#[derive(Clone, Copy)]
struct CopySeg {
    /// The request's frame and the byte offset of the data in it.
    data: Frame,
    data_off: u32,
    /// The bounce frame and the offset in it.
    bounce: Frame,
    bounce_off: u32,
    len: u32,
}

/// Per-id state of a request in flight (`struct blk_shadow`).
struct Shadow {
    rq: Option<crate::disk::Rq>,
    op: u8,
    nr_segments: u32,
    grants: KVec<GrantHandle>,
    indirect: KVec<GrantHandle>,
    copies: KVec<CopySeg>,
    /// Indirect pages owned by this slot (only without `copy_data`; with it
    /// indirect pages come from the pool's bounce frames).
    own_indirect: KVec<XenPage>,
}

/// Counters of one ring.
#[derive(Clone, Copy, Default)]
pub(crate) struct RingStats {
    pub(crate) requests: u64,
    pub(crate) indirect_requests: u64,
    pub(crate) notifications: u64,
    /// Requests sent back to blk-mq to retry (ring full, no id, no grant).
    pub(crate) busy: u64,
    /// Of those, the grant table had no free reference.
    pub(crate) out_of_grants: u64,
    pub(crate) errors: u64,
    /// Calls of the interrupt handler, and those that found no response
    /// (acknowledged as spurious: two in a row delay the next event, see
    /// `xen_irq_lateeoi`).
    pub(crate) interrupts: u64,
    pub(crate) spurious_interrupts: u64,
}

impl RingStats {
    /// Adds another ring's counters (per-disk totals).
    pub(crate) fn add(&mut self, o: &RingStats) {
        self.requests += o.requests;
        self.indirect_requests += o.indirect_requests;
        self.notifications += o.notifications;
        self.busy += o.busy;
        self.out_of_grants += o.out_of_grants;
        self.errors += o.errors;
        self.interrupts += o.interrupts;
        self.spurious_interrupts += o.spurious_interrupts;
    }
}

/// Storage of a grant pool (`blkcore::grants` wants `AsRef`/`AsMut` slices).
struct PoolStore(KVec<PoolEntry<Frame>>);

impl AsRef<[PoolEntry<Frame>]> for PoolStore {
    fn as_ref(&self) -> &[PoolEntry<Frame>] {
        &self.0
    }
}

impl AsMut<[PoolEntry<Frame>]> for PoolStore {
    fn as_mut(&mut self) -> &mut [PoolEntry<Frame>] {
        &mut self.0
    }
}

/// The data path state, built when the backend connects.
struct Io {
    n: Negotiated,
    /// Most segments one request may carry on the wire (>= the block
    /// layer's `max_segments`, see [`wire_segments`]).
    wire_max: u32,
    handle: u16,
    gt: GrantTable,
    pool: GrantPool<Frame, PoolStore>,
    /// Bounce frames of the pool (copy mode) or one placeholder frame.
    _frames: KVec<XenPage>,
    inflight: KBox<InFlight<MAX_RING>>,
    shadow: KVec<Shadow>,
    // Scratch storage, reused under the lock (no allocation in atomic
    // context).
    pieces: KVec<Piece<Frame>>,
    mapped: KVec<MappedSegment<Frame>>,
    segs: KVec<BlkifRequestSegment>,
    indirect_grefs: KVec<GrantRef>,
    page_buf: KVec<u8>,
    last_purge: Instant<Monotonic>,
    /// Passes since the clock was last read for the purge.
    purge_countdown: u32,
    stats: RingStats,
}

/// Ring state under the ring lock.
pub(crate) struct RingState {
    pages: SharedPages,
    front: FrontRing,
    notifier: Notifier,
    io: Option<KBox<Io>>,
    /// Bad backend input seen: nothing more is queued or completed.
    broken: bool,
    /// The backend is closing: new requests fail (`blk_mark_disk_dead`
    /// upstream), those in flight still complete.
    dead: bool,
    /// A batch has requests not yet pushed to the backend.
    pending_push: bool,
}

/// One ring.
#[pin_data]
pub(crate) struct Ring {
    pub(crate) index: u32,
    #[pin]
    pub(crate) state: SpinLockIrq<RingState>,
}

/// A ring with its bound event channel (owned by the device).
pub(crate) struct RingHandle {
    irq: Option<BoundIrq<Ring>>,
    ring: Arc<Ring>,
}

impl RingHandle {
    /// Allocates the shared ring (`nr_pages` pages) and event channel of
    /// ring `index` and binds the channel to the ring's handler.
    pub(crate) fn new(dev: &Device, index: u32, nr_pages: u32) -> Result<Self> {
        let (pages, front) = new_shared_ring(dev, nr_pages)?;
        let ring = Arc::pin_init(
            pin_init!(Ring {
                index,
                state <- new_spinlock_irq!(RingState {
                    pages,
                    front,
                    notifier: Notifier::default(),
                    io: None,
                    broken: false,
                    dead: false,
                    pending_push: false,
                }),
            }),
            GFP_KERNEL,
        )?;
        let mut h = Self { irq: None, ring };
        h.bind_irq(dev)?;
        Ok(h)
    }

    /// A new event channel bound to the ring's handler; the ring notifies
    /// through it.
    fn bind_irq(&mut self, dev: &Device) -> Result {
        let irq = EventChannel::alloc(dev)?.bind(c"blkif", self.ring.clone())?;
        self.ring.state.lock().notifier = irq.notifier();
        self.irq = Some(irq);
        Ok(())
    }

    /// Writes `ring-ref`/`ring-ref%u` and `event-channel` under `dir`.
    pub(crate) fn publish(&self, xbt: Xbt, dir: &CStr) -> Result {
        // Copy the references out: xenstore writes sleep, the lock spins.
        let mut refs = [0u32; crate::xen::ring::MAX_RING_PAGES];
        let n = {
            let st = self.ring.state.lock();
            let grefs = st.pages.grefs();
            for (d, s) in refs.iter_mut().zip(grefs) {
                *d = *s;
            }
            grefs.len()
        };
        let grefs = refs.get(..n).unwrap_or(&[]);
        if let [only] = grefs {
            xenbus::printf(xbt, dir, c"ring-ref", fmt!("{only}"))?;
        } else {
            for (i, g) in grefs.iter().enumerate() {
                let node = kernel::str::CString::try_from_fmt(fmt!("ring-ref{i}"))?;
                xenbus::printf(xbt, dir, &node, fmt!("{g}"))?;
            }
        }
        let port = self.irq.as_ref().map_or(0, |i| i.port());
        xenbus::printf(xbt, dir, c"event-channel", fmt!("{port}"))
    }

    /// The ring.
    pub(crate) fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// Unbinds the interrupt, then revokes every grant and fails whatever
    /// is still in flight. The shared pages go with the last `Arc<Ring>`.
    pub(crate) fn shutdown(mut self) {
        for rq in self.suspend() {
            crate::disk::complete(rq, crate::disk::Status::IoErr);
        }
    }

    /// The backend is gone but the disk stays (guest save/restore, a
    /// backend restart): unbinds the interrupt, revokes every grant and
    /// returns the requests that were in flight, for the caller to resubmit
    /// once [`RingHandle::reconnect`] and [`Ring::start`] ran. Until then the
    /// ring refuses new requests as busy.
    pub(crate) fn suspend(&mut self) -> KVec<crate::disk::Rq> {
        // Data path and notifier first, under the lock: from then on the
        // handler finds nothing to do and nobody notifies through the
        // channel that is unbound next.
        let rqs = self.ring.take_down();
        drop(self.irq.take());
        rqs
    }

    /// Gives a suspended ring new shared pages (`nr_pages`) and a new event
    /// channel, for a new backend; publish them with
    /// [`RingHandle::publish`].
    pub(crate) fn reconnect(&mut self, dev: &Device, nr_pages: u32) -> Result {
        let (pages, front) = new_shared_ring(dev, nr_pages)?;
        let old_pages = {
            let mut st = self.ring.state.lock();
            st.front = front;
            st.broken = false;
            st.dead = false;
            st.pending_push = false;
            core::mem::replace(&mut st.pages, pages)
        };
        // Ends the old ring grants and frees the pages, outside the lock.
        drop(old_pages);
        self.bind_irq(dev)
    }
}

/// `nr_pages` granted shared pages with an empty front ring on them.
fn new_shared_ring(dev: &Device, nr_pages: u32) -> Result<(SharedPages, FrontRing)> {
    let mut pages = SharedPages::new(dev, nr_pages)?;
    let mut front = FrontRing::new(nr_pages).map_err(|_| EINVAL)?;
    front.init_shared(&mut pages);
    Ok((pages, front))
}

impl Ring {
    /// Builds the data path once the backend connected: grant pool sized
    /// like upstream (`(segments + indirect pages) * ring size`), bounce
    /// frames when `copy_data`, per-slot storage.
    ///
    /// `wire_max` is the most segments one request may carry on the wire
    /// (see [`wire_segments`]).
    pub(crate) fn start(&self, dev: &Device, n: &Negotiated, handle: u16, wire_max: u32) -> Result {
        let size = self.state.lock().front.size();
        let io = Io::new(n, handle, dev.otherend_id(), size, wire_max)?;
        let mut st = self.state.lock();
        st.io = Some(io);
        st.broken = false;
        st.dead = false;
        Ok(())
    }
}

impl Io {
    /// Data path state for a ring of `size` slots after negotiation `n`.
    fn new(
        n: &Negotiated,
        handle: u16,
        domid: u16,
        size: u32,
        wire_max: u32,
    ) -> Result<KBox<Self>> {
        let wire_max = wire_max.max(n.segments_per_request);
        let ind_pages = if n.indirect_segments != 0 {
            indirect_pages(wire_max)
        } else {
            0
        };
        // The pool is sized for the block layer's limit, like upstream; a
        // request that needs more frames (segments straddling pages) may
        // find it exhausted and is retried (Busy), never failed.
        let per_req = (n.segments_per_request
            + indirect_pages(n.segments_per_request) * u32::from(ind_pages != 0))
            as usize;
        let segs = wire_max;
        let entries = per_req * size as usize;
        let mut frames = KVec::new();
        let mut pool_entries = KVec::with_capacity(entries, GFP_KERNEL)?;
        if n.copy_data {
            frames.reserve(entries, GFP_KERNEL)?;
            for _ in 0..entries {
                let p = XenPage::new()?;
                pool_entries.push(PoolEntry::new(p.frame()), GFP_KERNEL)?;
                frames.push(p, GFP_KERNEL)?;
            }
        } else {
            let p = XenPage::new()?;
            for _ in 0..entries {
                pool_entries.push(PoolEntry::new(p.frame()), GFP_KERNEL)?;
            }
            frames.push(p, GFP_KERNEL)?;
        }
        let pool = GrantPool::new(
            PoolStore(pool_entries),
            GrantMode {
                persistent: n.persistent,
                copy_data: n.copy_data,
            },
        )
        .map_err(|_| EINVAL)?;
        let mut shadow = KVec::with_capacity(size as usize, GFP_KERNEL)?;
        for _ in 0..size {
            let mut own_indirect = KVec::new();
            if !n.copy_data {
                for _ in 0..ind_pages {
                    own_indirect.push(XenPage::new()?, GFP_KERNEL)?;
                }
            }
            shadow.push(
                Shadow {
                    rq: None,
                    op: 0,
                    nr_segments: 0,
                    grants: KVec::with_capacity(segs as usize, GFP_KERNEL)?,
                    indirect: KVec::with_capacity(ind_pages as usize, GFP_KERNEL)?,
                    copies: KVec::with_capacity(
                        if n.copy_data { segs as usize } else { 0 },
                        GFP_KERNEL,
                    )?,
                    own_indirect,
                },
                GFP_KERNEL,
            )?;
        }
        let inflight = KBox::new(InFlight::new(size), GFP_KERNEL)?;
        // Output slots for `map_pieces`, filled once (the frame is a
        // placeholder until a request's mapping overwrites it).
        let mut mapped = KVec::with_capacity(segs as usize, GFP_KERNEL)?;
        if let Some(f) = frames.first() {
            let unset = MappedSegment {
                page: f.frame(),
                frame_offset: 0,
                first_sect: 0,
                last_sect: 0,
            };
            for _ in 0..segs {
                mapped.push(unset, GFP_KERNEL)?;
            }
        }
        let mut page_buf = KVec::new();
        page_buf.extend_from_slice(&[0u8; 512], GFP_KERNEL)?;
        while page_buf.len() < XEN_PAGE_SIZE as usize {
            page_buf.extend_from_slice(&[0u8; 512], GFP_KERNEL)?;
        }
        Ok(KBox::new(
            Io {
                n: *n,
                wire_max,
                handle,
                gt: GrantTable::new(domid),
                pool,
                _frames: frames,
                inflight,
                shadow,
                // A block-layer segment may span two pages when unaligned.
                pieces: KVec::with_capacity(2 * segs as usize, GFP_KERNEL)?,
                mapped,
                segs: KVec::with_capacity(segs as usize, GFP_KERNEL)?,
                indirect_grefs: KVec::with_capacity(ind_pages as usize, GFP_KERNEL)?,
                page_buf,
                last_purge: Instant::now(),
                purge_countdown: PURGE_CHECK_EVERY,
                stats: RingStats::default(),
            },
            GFP_KERNEL,
        )?)
    }
}

impl Ring {
    /// Takes the data path down: revokes all grants (those the backend
    /// still maps are ended with a deferred release) and returns the
    /// requests still in flight, untouched.
    fn take_down(&self) -> KVec<crate::disk::Rq> {
        let mut rqs = KVec::new();
        let io = {
            let mut st = self.state.lock();
            // The event channel is unbound (or about to be): nothing may
            // notify through it any more, and a batch left unpushed goes
            // with the requests handed back.
            st.notifier = Notifier::default();
            st.pending_push = false;
            st.io.take()
        };
        let Some(mut io) = io else {
            return rqs;
        };
        let io = &mut *io;
        // Without memory for the list a request fails rather than leaks.
        let _ = rqs.reserve(io.shadow.len(), GFP_KERNEL);
        for s in io.shadow.iter_mut() {
            if let Some(rq) = s.rq.take() {
                if let Err(e) = rqs.push_within_capacity(rq) {
                    crate::disk::complete(e.0, crate::disk::Status::IoErr);
                }
            }
            s.grants.clear();
            s.indirect.clear();
            s.copies.clear();
        }
        let deferred = io.pool.teardown(&mut io.gt);
        // The record an admin (and the tests) read after unload: every grant
        // made is revoked; those the backend still mapped are ended with a
        // deferred release, which frees them once the backend unmaps.
        let st = io.pool.stats();
        pr_info!(
            "ring torn down: {} grants granted, {} revoked ({} released when the backend unmaps them)\n",
            st.granted,
            st.revoked,
            deferred
        );
        rqs
    }

    /// The backend is gone for good (it went Closed): no response will
    /// come, so every request still in flight fails now instead of hanging
    /// removal. Returns how many failed.
    pub(crate) fn fail_in_flight(&self) -> u32 {
        let mut done = DoneList::new();
        let failed = {
            let mut st = self.state.lock();
            st.io
                .as_deref_mut()
                .map_or(0, |io| fail_in_flight(io, &mut done))
        };
        done.finish();
        failed
    }

    /// Test-only fault injection: the ring breaks as if the backend had
    /// sent a bad response.
    #[cfg(CONFIG_FAULT_INJECTION)]
    pub(crate) fn inject_break(&self) {
        let mut done = DoneList::new();
        {
            let mut st = self.state.lock();
            if let Some(io) = st.io.as_deref_mut() {
                disable(io, &mut done, fmt!("fault injected on ring {}", self.index));
                st.broken = true;
            }
        }
        done.finish();
    }

    /// Lock-protected access for the block glue.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut RingState) -> R) -> R {
        let mut st = self.state.lock();
        f(&mut st)
    }
}

impl RingState {
    /// Entries of the ring (queue depth).
    pub(crate) fn size(&self) -> u32 {
        self.front.size()
    }

    /// Bad backend input was seen on this ring, or the backend is closing.
    pub(crate) fn broken(&self) -> bool {
        self.broken || self.dead
    }

    /// The backend is going away: fail new requests from now on.
    pub(crate) fn mark_dead(&mut self) {
        self.dead = true;
    }

    /// Whether the data path is up and healthy.
    pub(crate) fn usable(&self) -> bool {
        self.io.is_some() && !self.broken
    }

    /// Counters (ring + grant pool) for statistics.
    pub(crate) fn stats(&self) -> Option<(RingStats, GrantStats, bool)> {
        self.io
            .as_ref()
            .map(|io| (io.stats, io.pool.stats(), io.n.copy_data))
    }

    /// Scratch list the block glue fills with the request's pieces before
    /// calling [`RingState::queue`].
    pub(crate) fn pieces(&mut self) -> Option<&mut KVec<Piece<Frame>>> {
        self.io.as_mut().map(|io| {
            io.pieces.clear();
            &mut io.pieces
        })
    }

    /// Puts one request on the ring (not yet visible to the backend: see
    /// [`RingState::push`]). The request's data pieces are those left in
    /// [`RingState::pieces`].
    pub(crate) fn queue(
        &mut self,
        rq: crate::disk::Rq,
        kind: IoKind,
        sector: u64,
        nr_sectors: u64,
    ) -> Result<(), (crate::disk::Rq, QueueError)> {
        if self.broken || self.dead {
            return Err((rq, QueueError::Io));
        }
        let Some(io) = self.io.as_deref_mut() else {
            return Err((rq, QueueError::Busy));
        };
        if self.front.is_full() {
            io.stats.busy += 1;
            return Err((rq, QueueError::Busy));
        }
        // Busy below: out of ids or grants (the request is retried).
        let r = match kind {
            IoKind::Flush => queue_flush(io, &mut self.front, &mut self.pages, rq),
            IoKind::Discard { secure } => queue_discard(
                io,
                &mut self.front,
                &mut self.pages,
                rq,
                sector,
                nr_sectors,
                secure,
            ),
            IoKind::Read | IoKind::Write { .. } => {
                queue_rw(io, &mut self.front, &mut self.pages, rq, kind, sector)
            }
        };
        match &r {
            Ok(()) => {
                self.pending_push = true;
                io.stats.requests += 1;
            }
            Err((_, QueueError::Busy)) => io.stats.busy += 1,
            Err(_) => {}
        }
        r
    }

    /// Publishes queued requests and notifies the backend if it asked
    /// (`RING_PUSH_REQUESTS_AND_CHECK_NOTIFY`): once per batch.
    pub(crate) fn push(&mut self) {
        if !self.pending_push {
            return;
        }
        self.pending_push = false;
        if let Some(io) = self.io.as_deref_mut() {
            maybe_purge(io);
        }
        if self.front.push_requests_and_check_notify(&mut self.pages) {
            self.notifier.notify();
            if let Some(io) = self.io.as_deref_mut() {
                io.stats.notifications += 1;
            }
        }
    }

    /// Consumes the backend's responses (`blkif_interrupt`); finished
    /// requests are appended to `done` (capacity reserved by the caller is
    /// used first; nothing is allocated in the handler beyond it).
    ///
    /// Bad backend input disables the ring for good: one line names the
    /// fault, every request still in flight fails (`BLK_STS_IOERR`) right
    /// away, and the event channel stays masked. Upstream leaves those
    /// requests on the ring, where they hang removal and unload forever.
    fn complete(&mut self, done: &mut DoneList) -> Eoi {
        if self.broken {
            return Eoi::None;
        }
        let Some(io) = self.io.as_deref_mut() else {
            return Eoi::Spurious;
        };
        match drain(io, &mut self.front, &mut self.pages, done) {
            Drained::Some => Eoi::Done,
            Drained::Nothing => Eoi::Spurious,
            Drained::Broken => {
                self.broken = true;
                Eoi::None
            }
        }
    }
}

/// What one pass over the responses found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drained {
    /// Responses were consumed.
    Some,
    /// None were pending (a spurious event).
    Nothing,
    /// The backend broke the protocol; every request in flight was failed.
    Broken,
}

/// One pass of the completion loop over `front` on `pages` (the kernel's
/// granted pages, or a test buffer). See [`FrontRing::drain_responses`]
/// for the bound.
fn drain<S: SharedRing>(
    io: &mut Io,
    front: &mut FrontRing,
    pages: &mut S,
    done: &mut DoneList,
) -> Drained {
    let r = front.drain_responses(pages, |rsp| complete_one(io, &rsp, done).map(|_| ()));
    io.stats.interrupts += 1;
    match r {
        Ok(0) => {
            io.stats.spurious_interrupts += 1;
            maybe_purge(io);
            Drained::Nothing
        }
        Ok(_) => {
            maybe_purge(io);
            Drained::Some
        }
        Err(DrainError::Ring(e)) => disable(io, done, fmt!("bad response producer: {e:?}")),
        Err(DrainError::Response(msg)) => disable(io, done, fmt!("{msg}")),
        Err(DrainError::Budget) => {
            disable(io, done, fmt!("more responses than ring slots in one pass"))
        }
    }
}

/// The backend broke the protocol (`why`): one line says so, and every
/// request in flight fails. The caller marks the ring broken.
fn disable(io: &mut Io, done: &mut DoneList, why: core::fmt::Arguments<'_>) -> Drained {
    io.stats.errors += 1;
    let failed = fail_in_flight(io, done);
    pr_alert!(
        "{}; disabled for further use, {} requests in flight failed\n",
        why,
        failed
    );
    Drained::Broken
}

/// Fails every request in flight (`BLK_STS_IOERR`) and gives its grants
/// back; those the backend still maps are released when it unmaps them
/// (deferred, so no page goes back while the backend can reach it).
/// Returns how many requests there were.
fn fail_in_flight(io: &mut Io, done: &mut DoneList) -> u32 {
    let mut failed = 0u32;
    for id in 0..io.shadow.len() {
        let Some(s) = io.shadow.get_mut(id) else {
            break;
        };
        let rq = s.rq.take();
        s.copies.clear();
        // Grants of this slot, still mapped or not: the pool defers what
        // the backend holds.
        let _ = put_grants(io, id);
        if let Ok(id) = u32::try_from(id) {
            io.inflight.cancel(id);
        }
        if let Some(rq) = rq {
            failed = failed.saturating_add(1);
            done.push(Done {
                rq,
                status: crate::disk::Status::IoErr,
            });
        }
    }
    failed
}

/// Revokes idle persistent grants the backend no longer maps
/// (`purge_persistent_grants`), at most every [`PURGE_INTERVAL_MS`]. Run
/// from the submission and completion paths: the 7.3 Rust workqueue has no
/// cancel, so a periodic work item could outlive the module.
fn maybe_purge(io: &mut Io) {
    if !io.n.persistent {
        return;
    }
    io.purge_countdown = io.purge_countdown.saturating_sub(1);
    if io.purge_countdown != 0 {
        return;
    }
    io.purge_countdown = PURGE_CHECK_EVERY;
    if io.last_purge.elapsed().as_millis() >= PURGE_INTERVAL_MS {
        io.last_purge = Instant::now();
        io.pool.purge(&mut io.gt);
    }
}

/// Finished requests collected by the interrupt handler, completed after
/// the ring lock is dropped.
pub(crate) struct DoneList {
    items: [Option<Done>; 32],
    len: usize,
    overflow: KVec<Done>,
}

impl DoneList {
    fn new() -> Self {
        Self {
            items: [const { None }; 32],
            len: 0,
            overflow: KVec::new(),
        }
    }

    fn push(&mut self, d: Done) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = Some(d);
            self.len += 1;
        } else if self.overflow.reserve(1, GFP_ATOMIC).is_ok() {
            let _ = self.overflow.push_within_capacity(d);
        } else {
            // Out of memory in the handler: complete right away.
            crate::disk::complete(d.rq, d.status);
        }
    }

    fn finish(self) {
        for d in self.items.into_iter().flatten() {
            crate::disk::complete(d.rq, d.status);
        }
        crate::disk::finish(self.overflow);
    }
}

fn put_grants(io: &mut Io, id: usize) -> Result<(), &'static str> {
    let Some(s) = io.shadow.get_mut(id) else {
        return Err("shadow id out of range");
    };
    let mut bad = false;
    for h in Iterator::chain(s.grants.drain_all(), s.indirect.drain_all()) {
        match io.pool.put(&mut io.gt, h) {
            Ok(_) => {}
            Err(GrantError::StillMapped(_)) => bad = true,
            Err(_) => bad = true,
        }
    }
    if bad {
        Err("backend has not unmapped a non-persistent grant")
    } else {
        Ok(())
    }
}

/// Gives back the grants of a request that never reached the ring. The
/// backend was never told of them, so one it maps anyway is hostile: its
/// release is deferred (the pool ends it like teardown does, the frame
/// stays with the grant table) and it counts as a backend error.
fn release_unsent(io: &mut Io, id: usize) {
    if put_grants(io, id).is_err() {
        io.stats.errors += 1;
    }
    if let Some(s) = io.shadow.get_mut(id) {
        s.copies.clear();
    }
}

/// Completes the request `rsp` answers; returns the status it ends with.
/// `Err` is the backend's protocol error (the caller disables the ring).
fn complete_one(
    io: &mut Io,
    rsp: &BlkifResponse,
    done: &mut DoneList,
) -> Result<crate::disk::Status, &'static str> {
    let c = io.inflight.complete(rsp).map_err(|e| match e {
        crate::blkcore::ring::ResponseError::BadId(_) => "response has incorrect id",
        crate::blkcore::ring::ResponseError::NotInFlight(_) => {
            "response references no pending request"
        }
        crate::blkcore::ring::ResponseError::WrongOperation { .. } => {
            "response has wrong operation"
        }
    })?;
    let id = c.id as usize;
    let verdict = Verdict::of(&c, io.shadow.get(id).map_or(0, |s| s.nr_segments));
    // Reads through bounce frames: copy the data back before the grants go.
    if verdict == Verdict::Ok && c.operation == BLKIF_OP_READ && io.n.copy_data {
        let mut copied = 0u64;
        if let Some(s) = io.shadow.get(id) {
            for cs in s.copies.iter() {
                if cs
                    .bounce
                    .copy_to(
                        cs.bounce_off as usize,
                        cs.data,
                        cs.data_off as usize,
                        cs.len as usize,
                    )
                    .is_ok()
                {
                    copied += u64::from(cs.len);
                }
            }
        }
        let _ = io.pool.account_copy(copied);
    }
    let grants = put_grants(io, id);
    let Some(s) = io.shadow.get_mut(id) else {
        return Err("shadow id out of range");
    };
    s.copies.clear();
    let rq = s.rq.take();
    let status = match verdict {
        Verdict::Ok => crate::disk::Status::Ok,
        Verdict::IoError => crate::disk::Status::IoErr,
        Verdict::FlushWithdrawn { with_data } => {
            // Once per ring: later flushes no longer reach the backend.
            if io.n.flush.take().is_some() {
                let what = if c.operation == BLKIF_OP_WRITE_BARRIER {
                    "a barrier"
                } else {
                    "a cache flush"
                };
                pr_warn!(
                    "backend refused {}: flushes disabled (FUA writes go out as plain writes)\n",
                    what
                );
            }
            if with_data {
                crate::disk::Status::IoErr
            } else {
                crate::disk::Status::Ok
            }
        }
        Verdict::DiscardWithdrawn => {
            if io.n.discard.take().is_some() {
                pr_warn!("backend refused a discard: discards disabled\n");
            }
            crate::disk::Status::NotSupp
        }
    };
    if let Some(rq) = rq {
        done.push(Done { rq, status });
    }
    // The request is ended either way; a grant the backend kept (without
    // persistent grants) is a protocol error that disables the ring.
    grants.map(|()| status)
}

fn put_entry(front: &mut FrontRing, pages: &mut SharedPages, entry: &RingEntryBytes) -> bool {
    front.put_request(pages, entry).is_ok()
}

fn queue_flush(
    io: &mut Io,
    front: &mut FrontRing,
    pages: &mut SharedPages,
    rq: crate::disk::Rq,
) -> Result<(), (crate::disk::Rq, QueueError)> {
    let Some(kind) = io.n.flush else {
        return Err((rq, QueueError::Nothing));
    };
    let barrier = kind == FlushKind::Barrier;
    let op = if barrier {
        BLKIF_OP_WRITE_BARRIER
    } else {
        BLKIF_OP_FLUSH_DISKCACHE
    };
    let Some(id) = io.inflight.alloc(op, false) else {
        return Err((rq, QueueError::Busy));
    };
    let entry = encode_flush(u64::from(id), io.handle, barrier);
    finish_queue(io, front, pages, rq, id, op, 0, &entry)
}

#[expect(
    clippy::too_many_arguments,
    reason = "disjoint borrows of the ring state, kept explicit"
)]
fn finish_queue(
    io: &mut Io,
    front: &mut FrontRing,
    pages: &mut SharedPages,
    rq: crate::disk::Rq,
    id: u32,
    op: u8,
    nr_segments: u32,
    entry: &RingEntryBytes,
) -> Result<(), (crate::disk::Rq, QueueError)> {
    if !put_entry(front, pages, entry) {
        release_unsent(io, id as usize);
        io.inflight.cancel(id);
        return Err((rq, QueueError::Busy));
    }
    if let Some(s) = io.shadow.get_mut(id as usize) {
        s.rq = Some(rq);
        s.op = op;
        s.nr_segments = nr_segments;
    }
    Ok(())
}

fn queue_discard(
    io: &mut Io,
    front: &mut FrontRing,
    pages: &mut SharedPages,
    rq: crate::disk::Rq,
    sector: u64,
    nr_sectors: u64,
    secure: bool,
) -> Result<(), (crate::disk::Rq, QueueError)> {
    let Some(d) = io.n.discard else {
        return Err((rq, QueueError::Io));
    };
    let Some(id) = io.inflight.alloc(BLKIF_OP_DISCARD, false) else {
        return Err((rq, QueueError::Busy));
    };
    let entry = match encode_discard(u64::from(id), sector, nr_sectors, secure && d.secure) {
        Ok(e) => e,
        Err(_) => {
            io.inflight.cancel(id);
            return Err((rq, QueueError::Io));
        }
    };
    finish_queue(io, front, pages, rq, id, BLKIF_OP_DISCARD, 0, &entry)
}

/// A grant the pool could not give: the grant table is out of references
/// or the pool of entries is (the request is retried when blk-mq reruns
/// the queue), anything else is a bug that retrying would not fix.
fn out_of_grants(io: &mut Io, e: GrantError) -> QueueError {
    match e {
        GrantError::NoGrantRefs => {
            io.stats.out_of_grants += 1;
            QueueError::Busy
        }
        GrantError::Exhausted => QueueError::Busy,
        _ => QueueError::Io,
    }
}

fn queue_rw(
    io: &mut Io,
    front: &mut FrontRing,
    pages: &mut SharedPages,
    rq: crate::disk::Rq,
    kind: IoKind,
    sector: u64,
) -> Result<(), (crate::disk::Rq, QueueError)> {
    let max = io.wire_max;
    let Some(placeholder) = io._frames.first().map(|p| p.frame()) else {
        return Err((rq, QueueError::Io));
    };
    // Map pieces -> per-frame segments (`mapped` keeps its full length: the
    // first `nr` entries are this request's).
    let summary = match map_pieces(&io.pieces, max, &mut io.mapped) {
        Ok(s) => s,
        Err(_) => return Err((rq, QueueError::Io)),
    };
    let nr = summary.nr_segments;
    let op = match kind {
        IoKind::Write { fua } => RwOp::for_data(true, fua, io.n.flush),
        _ => RwOp::for_data(false, false, io.n.flush),
    };
    let lay = match layout(nr, if io.n.indirect_segments != 0 { max } else { 0 }) {
        Ok(l) => l,
        Err(_) => return Err((rq, QueueError::Io)),
    };
    let indirect = matches!(lay, Layout::Indirect { .. });
    if indirect && !matches!(op, RwOp::Read | RwOp::Write) {
        return Err((rq, QueueError::Io));
    }
    // The response echoes `indirect_op` for indirect requests.
    let rsp_op = op.wire();
    let Some(id) = io.inflight.alloc(rsp_op, indirect) else {
        return Err((rq, QueueError::Busy));
    };
    let idu = id as usize;
    let readonly = op.backend_reads_only();
    let write = !matches!(op, RwOp::Read);
    io.segs.clear();
    let mut copied = 0u64;
    // Why the request cannot go out now: no grant (`Busy`, retried) or
    // anything else (`Io`: retrying would fail the same way).
    let mut failed: Option<QueueError> = None;
    for i in 0..nr as usize {
        let Some(&m) = io.mapped.get(i) else {
            failed = Some(QueueError::Io);
            break;
        };
        let g = match io.pool.get(&mut io.gt, m.page, readonly) {
            Ok(g) => g,
            Err(e) => {
                failed = Some(out_of_grants(io, e));
                break;
            }
        };
        let Some(s) = io.shadow.get_mut(idu) else {
            failed = Some(QueueError::Io);
            break;
        };
        if s.grants.push_within_capacity(g.handle).is_err() {
            failed = Some(QueueError::Io);
            break;
        }
        if io.n.copy_data {
            let off = m.offset_in_frame();
            let cs = CopySeg {
                data: m.page,
                data_off: m.frame_offset + off,
                bounce: g.frame,
                bounce_off: off,
                len: m.len(),
            };
            if write {
                if m.page
                    .copy_to(cs.data_off as usize, g.frame, off as usize, cs.len as usize)
                    .is_err()
                {
                    failed = Some(QueueError::Io);
                    break;
                }
                copied += u64::from(cs.len);
            } else if s.copies.push_within_capacity(cs).is_err() {
                failed = Some(QueueError::Io);
                break;
            }
        }
        if io.segs.push_within_capacity(m.to_blkif(g.gref)).is_err() {
            failed = Some(QueueError::Io);
            break;
        }
    }
    let hdr = RwHeader {
        op,
        id: u64::from(id),
        handle: io.handle,
        sector,
    };
    let entry = if let Some(e) = failed {
        Err(e)
    } else if let Layout::Indirect { pages: np } = lay {
        io.indirect_grefs.clear();
        for p in 0..np {
            let frame = match io
                .shadow
                .get(idu)
                .and_then(|s| s.own_indirect.get(p as usize))
            {
                Some(pg) => pg.frame(),
                None => placeholder,
            };
            let g = match io.pool.get(&mut io.gt, frame, true) {
                Ok(g) => g,
                Err(e) => {
                    failed = Some(out_of_grants(io, e));
                    break;
                }
            };
            let pushed = io
                .shadow
                .get_mut(idu)
                .is_some_and(|s| s.indirect.push_within_capacity(g.handle).is_ok());
            if !pushed || io.indirect_grefs.push_within_capacity(g.gref).is_err() {
                failed = Some(QueueError::Io);
                break;
            }
            // Only the descriptors in use go to the page (the backend reads
            // `nr_segments` of them): 8 bytes each, not the whole page.
            let written = match write_indirect_page(&io.segs, p, &mut io.page_buf) {
                Ok(n) => n as usize * BLKIF_SEGMENT_SIZE,
                Err(_) => {
                    failed = Some(QueueError::Io);
                    break;
                }
            };
            let used = io.page_buf.get(..written).unwrap_or(&[]);
            if g.frame.write(0, used).is_err() {
                failed = Some(QueueError::Io);
                break;
            }
        }
        match failed {
            Some(e) => Err(e),
            None => encode_indirect(&hdr, nr, &io.indirect_grefs, max).map_err(|_| QueueError::Io),
        }
    } else {
        encode_direct(&hdr, &io.segs).map_err(|_| QueueError::Io)
    };
    let entry = match entry {
        Ok(entry) => entry,
        Err(e) => {
            release_unsent(io, idu);
            io.inflight.cancel(id);
            return Err((rq, e));
        }
    };
    if copied != 0 {
        let _ = io.pool.account_copy(copied);
    }
    if indirect {
        io.stats.indirect_requests += 1;
    }
    finish_queue(io, front, pages, rq, id, rsp_op, nr, &entry)
}

impl Handler for Ring {
    fn handle(&self) -> Eoi {
        let mut done = DoneList::new();
        let eoi = {
            let mut st = self.state.lock();
            st.complete(&mut done)
        };
        done.finish();
        eoi
    }
}

/// Hooks for the KUnit suite: feed fabricated backend responses to the
/// completion glue of a data path on a ring in plain memory (the same
/// `drain` the interrupt handler runs on the granted pages).
#[cfg(CONFIG_KUNIT)]
pub(crate) mod test_hooks {
    use super::*;
    use crate::blkcore::ring::SliceRing;

    /// A data path for a 1-page ring (32 slots) after negotiation `n`.
    pub(crate) struct TestIo {
        io: KBox<Io>,
        front: FrontRing,
        mem: KVec<u8>,
    }

    impl TestIo {
        pub(crate) fn new(n: &Negotiated) -> Result<Self> {
            let mut mem = KVec::new();
            mem.extend_from_slice(&[0u8; XEN_PAGE_SIZE as usize], GFP_KERNEL)?;
            let mut front = FrontRing::new(1).map_err(|_| EINVAL)?;
            front.init_shared(&mut SliceRing::new(&mut mem));
            Ok(Self {
                io: Io::new(n, 0, 0, 32, n.segments_per_request)?,
                front,
                mem,
            })
        }

        /// Marks a request id as in flight with response operation `op`
        /// and `nr_segments` data segments, and puts a slot for it on the
        /// ring (as `queue` would).
        pub(crate) fn alloc(&mut self, op: u8, nr_segments: u32) -> Option<u32> {
            let id = self.io.inflight.alloc(op, false)?;
            self.io.shadow.get_mut(id as usize)?.nr_segments = nr_segments;
            self.front
                .put_request(&mut SliceRing::new(&mut self.mem), &[0u8; 112])
                .ok()?;
            Some(id)
        }

        /// Requests in flight.
        pub(crate) fn in_flight(&self) -> u32 {
            self.io.inflight.waiting()
        }

        /// Runs the completion glue on `rsp` alone: the status the request
        /// ends with, or the one message a broken backend gets before the
        /// ring is disabled.
        pub(crate) fn complete(
            &mut self,
            rsp: &BlkifResponse,
        ) -> Result<crate::disk::Status, &'static str> {
            let mut done = DoneList::new();
            complete_one(&mut self.io, rsp, &mut done)
        }

        /// The backend publishes `rsp` on the ring; then the interrupt
        /// handler's pass runs.
        pub(crate) fn respond_and_drain(&mut self, rsp: &BlkifResponse) -> Drained {
            let ring = SliceRing::new(&mut self.mem);
            let prod = ring.load_rsp_prod();
            let slot = prod & (self.front.size() - 1);
            if let Some(off) = crate::blkcore::blkif::sring_entry_offset(slot) {
                if let Some(b) = self.mem.get_mut(off..off + 16) {
                    b.copy_from_slice(&rsp.encode());
                }
            }
            let mut ring = SliceRing::new(&mut self.mem);
            ring.store_rsp_prod(prod.wrapping_add(1));
            let mut done = DoneList::new();
            drain(&mut self.io, &mut self.front, &mut ring, &mut done)
        }

        /// Whether a flush would still reach the backend.
        pub(crate) fn flushes(&self) -> bool {
            self.io.n.flush.is_some()
        }

        /// Whether a discard would still reach the backend.
        pub(crate) fn discards(&self) -> bool {
            self.io.n.discard.is_some()
        }

        /// Grant pool counters.
        pub(crate) fn grant_stats(&self) -> GrantStats {
            self.io.pool.stats()
        }
    }
}
