// SPDX-License-Identifier: GPL-2.0

//! blkcore's data path instantiated with the kernel's mechanisms: the
//! grant table and pages of `rust/xen` ([`Memory`]), slab or vmalloc
//! buffers ([`Storage`]), the granted ring pages ([`SharedRing`]) and blk-mq
//! requests. Every decision about a request is `blkcore::datapath`'s, the
//! code the host simulator and the fuzz targets also run.

use kernel::{
    alloc::{
        AllocError,
        KVec,
        VVec, //
    },
    page::PAGE_SIZE,
    prelude::*,
    time::{
        Instant,
        Monotonic, //
    }, //
};

use crate::blkcore::{
    blkif::{
        sring_entry_offset,
        RingEntryBytes,
        BLKIF_RESPONSE_SIZE,
        SRING_REQ_EVENT,
        SRING_REQ_PROD,
        SRING_RSP_EVENT,
        SRING_RSP_PROD,
        XEN_PAGE_SIZE, //
    },
    datapath::{
        BackendNotes,
        DataPath,
        Geometry,
        Memory,
        MemoryError,
        OutOfMemory,
        Storage, //
    },
    grants::{
        GrantError,
        GrantOps,
        GrantRef, //
    },
    negotiate::Negotiated,
    ring::{
        RingIdx,
        SharedRing, //
    },
};
use crate::xen::{
    grant::{
        Frame,
        GrantTable,
        XenPages, //
    },
    ring::SharedPages,
};

// A struct page is one Xen frame: `Memory::frame_in_page` below relies on it.
const _: () = assert!(kernel::page::PAGE_SIZE == XEN_PAGE_SIZE as usize);

/// A fixed-size buffer of the data path: up to a page from the slab, a
/// larger one (a ring's pool entries and copy records: tens of KiB each)
/// from `vmalloc`, which takes whole pages. `kmalloc`
/// (and so `kvmalloc`, which tries it first) hands a buffer over 8 KiB a
/// power-of-two number of pages: 25 KiB of pool entries took 32.
pub(crate) enum KBuf<T> {
    /// Up to a page.
    Slab(KVec<T>),
    /// Over a page.
    Pages(VVec<T>),
}

impl<T> KBuf<T> {
    /// An empty buffer with room for `len` values.
    pub(crate) fn with_capacity(len: usize) -> Result<Self, AllocError> {
        if len.saturating_mul(core::mem::size_of::<T>()) <= PAGE_SIZE {
            Ok(Self::Slab(KVec::with_capacity(len, GFP_KERNEL)?))
        } else {
            Ok(Self::Pages(VVec::with_capacity(len, GFP_KERNEL)?))
        }
    }

    /// Appends `v` within the room given at creation (never reallocates).
    pub(crate) fn push(&mut self, v: T) -> Result<(), AllocError> {
        match self {
            Self::Slab(b) => b.push_within_capacity(v),
            Self::Pages(b) => b.push_within_capacity(v),
        }
        .map_err(|_| AllocError)
    }
}

impl<T> AsRef<[T]> for KBuf<T> {
    fn as_ref(&self) -> &[T] {
        match self {
            Self::Slab(b) => b,
            Self::Pages(b) => b,
        }
    }
}

impl<T> AsMut<[T]> for KBuf<T> {
    fn as_mut(&mut self) -> &mut [T] {
        match self {
            Self::Slab(b) => b,
            Self::Pages(b) => b,
        }
    }
}

/// [`Storage`] in kernel memory (`GFP_KERNEL`: built in process context
/// when the backend connects).
pub(crate) struct KernelStorage;

impl Storage for KernelStorage {
    type Buf<T> = KBuf<T>;

    fn buf<T>(len: usize, mut f: impl FnMut() -> T) -> Result<KBuf<T>, OutOfMemory> {
        let mut v = KBuf::with_capacity(len).map_err(|_| OutOfMemory)?;
        for _ in 0..len {
            v.push(f()).map_err(|_| OutOfMemory)?;
        }
        Ok(v)
    }
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
        if let Some(off) = sring_entry_offset(slot) {
            self.write_bytes(off, entry);
        }
    }
    fn read_response(&self, slot: u32) -> [u8; BLKIF_RESPONSE_SIZE] {
        let mut b = [0u8; BLKIF_RESPONSE_SIZE];
        if let Some(off) = sring_entry_offset(slot) {
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

    #[inline(always)]
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

impl Memory for GrantTable {
    fn frame_in_page(&self, page: Frame, _frame_offset: u32) -> Frame {
        // PAGE_SIZE == XEN_PAGE_SIZE (asserted above): the offset is 0.
        page
    }

    fn copy(
        &mut self,
        src: Frame,
        src_off: u32,
        dst: Frame,
        dst_off: u32,
        len: u32,
    ) -> Result<(), MemoryError> {
        src.copy_to(src_off as usize, dst, dst_off as usize, len as usize)
            .map_err(|_| MemoryError)
    }

    fn write(&mut self, dst: Frame, off: u32, bytes: &[u8]) -> Result<(), MemoryError> {
        dst.write(off as usize, bytes).map_err(|_| MemoryError)
    }
}

/// The data path of a connected ring and what it runs on.
pub(crate) struct RingDataPath<Rq> {
    pub(crate) datapath: DataPath<KernelStorage, Frame, Rq>,
    pub(crate) grant_table: GrantTable,
    /// The frames handed to the data path (bounce frames, or a placeholder
    /// and the slots' indirect pages); freed after `datapath` and
    /// `grant_table`.
    _pages: XenPages,
    /// Start of the ring's clock ([`RingDataPath::clock_ms`]).
    epoch: Instant<Monotonic>,
}

/// Milliseconds since `epoch` (monotonic: never negative).
fn elapsed_ms(epoch: &Instant<Monotonic>) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(0)
}

impl<Rq> RingDataPath<Rq> {
    /// The data path for a ring of `size` slots after negotiation `n`,
    /// granting to domain `domid`; `wire_max` as
    /// [`crate::blkcore::datapath::wire_segments`].
    pub(crate) fn new(
        n: &Negotiated,
        handle: u16,
        domid: u16,
        size: u32,
        wire_max: u32,
    ) -> Result<KBox<Self>> {
        let geo = Geometry::new(n, size, wire_max);
        let count = geo.frames(n.copy_data);
        let pages = XenPages::new(count)?;
        // The data path keeps them in its own tables: this list goes.
        let mut frames = KBuf::with_capacity(count)?;
        for f in pages.frames() {
            frames.push(f)?;
        }
        let datapath = DataPath::new(n, geo, handle, frames.as_ref(), 0).map_err(|_| ENOMEM)?;
        Ok(KBox::new(
            RingDataPath {
                datapath,
                grant_table: GrantTable::new(domid),
                _pages: pages,
                epoch: Instant::now(),
            },
            GFP_KERNEL,
        )?)
    }

    /// The periodic purge of idle persistent grants (see
    /// [`DataPath::maybe_purge`]).
    pub(crate) fn maybe_purge(&mut self) {
        let epoch = &self.epoch;
        self.datapath
            .maybe_purge(&mut self.grant_table, || elapsed_ms(epoch));
    }

    /// Milliseconds since the ring connected: the clock of the purge and
    /// of the stall watch.
    pub(crate) fn clock_ms(&self) -> u64 {
        elapsed_ms(&self.epoch)
    }

    /// Revokes the idle persistent grants the backend no longer maps, now.
    pub(crate) fn purge_now(&mut self) -> u32 {
        self.datapath.purge(&mut self.grant_table)
    }

    /// Logs, once each, the features the backend withdrew and the first
    /// status blkif does not define; returns the features withdrawn.
    pub(crate) fn report_notes(&mut self, dev: &kernel::device::Device) -> Withdrawn {
        let BackendNotes {
            flush,
            discard,
            unknown_status,
        } = self.datapath.take_notes();
        if let Some(barrier) = flush {
            let what = if barrier {
                "a barrier"
            } else {
                "a cache flush"
            };
            dev_warn!(
                dev,
                "backend refused {}: flushes disabled (FUA writes go out as plain writes)\n",
                what
            );
        }
        if discard {
            dev_warn!(dev, "backend refused a discard: discards disabled\n");
        }
        if let Some((status, op)) = unknown_status {
            dev_warn!(
                dev,
                "backend answered operation {} with status {}, which blkif does not define: failed (said once)\n",
                op,
                status
            );
        }
        Withdrawn {
            discard,
            write_cache: flush.is_some(),
        }
    }
}

/// Features the backend withdrew (it refused a request), for the disk's
/// live queue limits: see [`crate::ring`]'s completion list.
#[derive(Clone, Copy, Default)]
pub(crate) struct Withdrawn {
    /// Discard (and secure erase).
    pub(crate) discard: bool,
    /// Flush and FUA: the volatile write cache.
    pub(crate) write_cache: bool,
}

/// Hooks for the KUnit suite: fabricated backend responses through the
/// kernel's instance of the data path, on a ring in plain memory (the same
/// `drain` the interrupt handler runs on the granted pages).
#[cfg(CONFIG_KUNIT)]
pub(crate) mod test_hooks {
    use super::*;
    use crate::blkcore::{
        blkif::BlkifResponse,
        datapath::{
            Drained,
            Fault,
            Status, //
        },
        grants::GrantStats,
        ring::{
            FrontRing,
            SliceRing, //
        },
    };

    /// A data path for a 1-page ring (32 slots) after negotiation `n`,
    /// with no blk-mq requests behind its slots.
    pub(crate) struct TestIo {
        io: KBox<RingDataPath<()>>,
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
                io: RingDataPath::new(n, 0, 0, 32, n.segments_per_request)?,
                front,
                mem,
            })
        }

        /// Marks a request id as in flight with response operation `op`
        /// and `nr_segments` data segments, and puts a slot for it on the
        /// ring (as `queue` would).
        pub(crate) fn alloc(&mut self, op: u8, nr_segments: u32) -> Option<u32> {
            let id = self.io.datapath.fake_in_flight(op, nr_segments, ())?;
            self.front
                .put_request(&mut SliceRing::new(&mut self.mem), &[0u8; 112])
                .ok()?;
            Some(id)
        }

        /// Requests in flight.
        pub(crate) fn in_flight(&self) -> u32 {
            self.io.datapath.in_flight()
        }

        /// Runs the completion path on `rsp` alone: the status the request
        /// ends with, or the fault a broken backend is disabled for.
        pub(crate) fn complete(&mut self, rsp: &BlkifResponse) -> Result<Status, Fault> {
            let io = &mut *self.io;
            io.datapath
                .complete(&mut io.grant_table, rsp, &mut |(), _| {})
        }

        /// The backend publishes `rsp` on the ring; then the interrupt
        /// handler's pass runs.
        pub(crate) fn respond_and_drain(&mut self, rsp: &BlkifResponse) -> Drained {
            let mut ring = SliceRing::new(&mut self.mem);
            let prod = ring.load_rsp_prod();
            let slot = prod & (self.front.size() - 1);
            ring.write_response(slot, rsp);
            ring.store_rsp_prod(prod.wrapping_add(1));
            let io = &mut *self.io;
            io.datapath.drain(
                &mut io.grant_table,
                &mut self.front,
                &mut ring,
                &mut |(), _| {},
            )
        }

        /// Whether a flush would still reach the backend.
        pub(crate) fn flushes(&self) -> bool {
            self.io.datapath.flushes()
        }

        /// Whether a discard would still reach the backend.
        pub(crate) fn discards(&self) -> bool {
            self.io.datapath.discards()
        }

        /// What the next `report_notes` would log.
        pub(crate) fn notes(&mut self) -> BackendNotes {
            self.io.datapath.take_notes()
        }

        /// Grant pool counters.
        pub(crate) fn grant_stats(&self) -> GrantStats {
            self.io.datapath.grant_stats()
        }
    }
}
