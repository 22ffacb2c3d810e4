// SPDX-License-Identifier: GPL-2.0

//! The block side: blk-mq operations over the rings (through
//! `rust/blkmq`), the gendisk, and the disk name from `virtual-device`.

use core::sync::atomic::{
    AtomicBool,
    AtomicU32,
    AtomicU64,
    AtomicUsize,
    Ordering, //
};

use kernel::{
    prelude::*,
    str::CString,
    sync::Arc, //
};

use crate::blkcore::{
    bitmap::{
        self,
        RangeError, //
    },
    datapath::{
        pregrant::PreGranted,
        QueueError,
        Request,
        Status, //
    },
    limits::QueueLimits,
    mapping::{
        map_piece,
        MapError,
        MappedSegment, //
    },
    naming::{
        self,
        DiskName,
        XEN_PARTS_PER_EXT_DISK, //
    },
    negotiate::Negotiated,
    stall::give_up_limit, //
};
use crate::blkmq::{
    self,
    BioRequeue,
    GenDisk,
    HwQueue,
    PageRunBuf,
    QueueDataRef,
    Rejected,
    ReqOp,
    TagSet, //
};
use crate::datapath::KernelStorage;
use crate::fault;
#[cfg(CONFIG_FAULT_INJECTION)]
use crate::fault::FaultInjector;
use crate::ring::{
    complete,
    BoundRing,
    Prepared,
    Ring,
    Scratch, //
};
use crate::xen::{
    grant::{
        request_frames,
        Frame,
        GrantTable, //
    },
    periodic::{
        Periodic,
        PeriodicFn, //
    },
    xenbus::Device, //
};

mod stats;

use stats::StatsView;

/// A request owned by the driver.
pub(crate) type Rq = blkmq::Request<BlkOps>;

/// What the ring is asked to do for a block request of operation `op`
/// (with `REQ_FUA` if `fua`) at `sector`; `None` for operations the
/// frontend does not implement.
pub(crate) fn ring_request(op: ReqOp, fua: bool, sector: u64, nr_sectors: u64) -> Option<Request> {
    Some(match op {
        ReqOp::Read => Request::Read { sector },
        ReqOp::Write => Request::Write { sector, fua },
        ReqOp::Flush => Request::Flush,
        ReqOp::Discard | ReqOp::SecureErase => Request::Discard {
            sector,
            nr_sectors,
            secure: op == ReqOp::SecureErase,
        },
        _ => return None,
    })
}

/// Queue data shared by all hardware queues of a disk.
pub(crate) struct Queues {
    /// One per hardware queue.
    rings: KVec<Arc<Ring<BlkOps>>>,
    /// How many of `rings` the backend serves (the first ones; 1 to
    /// `rings.len()`): see [`Queues::ring_for`].
    served: AtomicUsize,
    /// Data segments a request may have on the current connection (the
    /// queue's `max_segments`). A read or write with more was built under
    /// an earlier backend's wider limits: it is sent again as its bios,
    /// which the block layer splits to the current limits ([`BioRequeue`];
    /// upstream's `blkif_recover` resubmits the bios of every held request).
    max_segments: AtomicU32,
    /// Where such requests' bios wait to be submitted again.
    requeue: BioRequeue,
    /// How many requests were sent again as their bios.
    requeued_as_bios: AtomicU64,
    /// Of those, the batch ends fault injection sent (`resend-batch-end`),
    /// and how many of them left the batch's earlier requests unpublished
    /// (never, or the backend would not see them until the ring's next
    /// batch).
    resent_batch_ends: AtomicU64,
    batch_ends_unpublished: AtomicU64,
    /// Set when the disk's removal starts: from then on a ring silent for
    /// one `io_timeout` is given up on ([`give_up_limit`]), so that
    /// removal ends.
    removing: AtomicBool,
}

impl Queues {
    /// The ring of hardware queue `hctx`: its own, or, after a restore onto
    /// a backend that serves fewer rings, ring `hctx % served`. Rings are
    /// locked, so queues sharing one is only contention; a request that
    /// finds a ring not yet reconnected is retried (busy).
    fn ring_for(&self, hctx: HwQueue) -> Option<&Arc<Ring<BlkOps>>> {
        let served = self.served.load(Ordering::Relaxed).max(1);
        let i = hctx.index() as usize;
        // No division on the common path: this runs for every request,
        // and an integer division is among the slowest integer
        // instructions (on some architectures a library call).
        self.rings.get(if i < served { i } else { i % served })
    }
}

/// How often an idle disk revokes the persistent grants the backend
/// stopped mapping (upstream's `blkfront_delay_work`: every 10 s).
const IDLE_PURGE_MS: u32 = 10_000;

/// The idle-disk purge: without it, persistent grants (and their pages)
/// the backend dropped stay granted until the disk's next I/O.
struct IdlePurge;

impl PeriodicFn<Queues> for IdlePurge {
    fn call(q: &Queues) {
        for r in q.rings.iter() {
            r.with_state(|st| st.purge_idle());
            // Held requests end once the backend unmapped their pages.
            r.retry_held();
        }
    }
}

/// blk-mq operations of the frontend.
pub(crate) struct BlkOps;

#[vtable]
impl blkmq::Operations for BlkOps {
    type QueueData = Arc<Queues>;
    /// The status the request ends with, set when it completes.
    type RequestData = blkmq::Status;

    // Into blk-mq's entry (rust/blkmq's `OpsTable::queue_rq`), its only
    // caller: one call less per request.
    #[inline(always)]
    fn queue_rq(
        qd: QueueDataRef<'_, Self>,
        hctx: HwQueue,
        mut rq: Rq,
        last: bool,
    ) -> core::result::Result<(), Rejected<Self>> {
        let Some(ring) = qd.ring_for(hctx) else {
            return Err(rq.reject(blkmq::Status::IOERR));
        };
        let nr_sectors = u64::from(rq.sectors());
        let Some(req) = ring_request(rq.op(), rq.is_fua(), rq.sector(), nr_sectors) else {
            return Err(rq.reject(blkmq::Status::IOERR));
        };
        *rq.data_mut() = blkmq::Status::OK;
        rq.start();
        let rw = matches!(req, Request::Read { .. } | Request::Write { .. });
        let injected = rw && fault::resend_batch_end(last, || ring.has_unpublished());
        if injected || rw && rq.nr_phys_segments() > qd.max_segments.load(Ordering::Relaxed) {
            rq.requeue_bios(&qd.requeue);
            qd.requeued_as_bios.fetch_add(1, Ordering::Relaxed);
            // blk-mq calls commit_rqs only after a failed last request:
            // the batch's earlier requests (queued with `last` false)
            // are published here or never.
            if last {
                ring.with_state_then_notify(|st| ((), st.push()));
            }
            if injected {
                qd.resent_batch_ends.fetch_add(1, Ordering::Relaxed);
                if ring.has_unpublished() {
                    qd.batch_ends_unpublished.fetch_add(1, Ordering::Relaxed);
                }
            }
            return Ok(());
        }
        // The request's pages are mapped to per-frame segments (and,
        // without bounce frames, granted) before the ring lock is taken:
        // interrupts stay on while the bio is walked.
        let r = ring.with_scratch_then_state(|scratch, state| {
            let Scratch { segs, pre, gt } = scratch;
            if let Some(pre) = pre {
                pre.begin(gt, &req);
                if rw {
                    // About one grant per block-layer segment (a page).
                    gt.will_grant(rq.nr_phys_segments());
                }
                // Room first: nothing is granted for a request the ring
                // would send back (the backend could map a grant reference
                // it predicts while the pages go back to their owner).
                let granted = if rw {
                    state
                        .room()
                        .and_then(|()| grant_frames(&rq, pre, gt))
                        .inspect(|()| fault::delay_after_grant(|| state.room().is_err()))
                } else {
                    Ok(())
                };
                let r = match granted {
                    Ok(()) => {
                        state.queue(rq, last, |st, rq| st.queue(rq, req, Prepared::Granted(pre)))
                    }
                    Err(e) => Err((rq, e)),
                };
                // Grants that never reached a slot (the ring was down, full,
                // or the walk stopped half way).
                pre.end_unsent(gt);
                r
            } else {
                let mapped = !rw || map_frames(&rq, segs).is_ok();
                if !mapped && segs.capacity() == 0 {
                    // No room before the first connect: retry once connected.
                    Err((rq, QueueError::Busy))
                } else if mapped {
                    state.queue(rq, last, |st, rq| st.queue(rq, req, Prepared::Mapped(segs)))
                } else {
                    Err((rq, QueueError::Io))
                }
            }
        });
        let (rq, status) = match r {
            Ok(()) => return Ok(()),
            // A flush the backend cannot do.
            Err((rq, QueueError::CompleteWithoutSending)) => {
                complete(rq, Status::Ok);
                return Ok(());
            }
            Err((rq, QueueError::Busy)) => (rq, blkmq::Status::RESOURCE),
            Err((rq, QueueError::NotSupp)) => (rq, blkmq::Status::NOTSUPP),
            Err((rq, QueueError::Io)) => (rq, blkmq::Status::IOERR),
        };
        // blk-mq keeps the request: it retries it for RESOURCE, ends it
        // with the status otherwise.
        Err(rq.reject(status))
    }

    fn commit_rqs(qd: QueueDataRef<'_, Self>, hctx: HwQueue) {
        if let Some(ring) = qd.ring_for(hctx) {
            ring.with_state_then_notify(|st| ((), st.push()));
        }
    }

    fn complete(_qd: QueueDataRef<'_, Self>, rq: Rq) {
        let status = *rq.data();
        rq.end(status);
    }

    /// A request waited the queue's `io_timeout`: its ring takes what is
    /// already answered and waits on, as upstream, unless it answered
    /// nothing for `give_up_after_ms`, or for one `io_timeout` while the
    /// disk is removed ([`Ring::timed_out`]).
    fn timeout(qd: QueueDataRef<'_, Self>, hctx: HwQueue, timeout_ms: u32) -> blkmq::Timeout {
        let removing = qd.removing.load(Ordering::Relaxed);
        let limit = give_up_limit(
            crate::params::give_up_after_ms.value(),
            timeout_ms,
            removing,
        );
        match qd.ring_for(hctx) {
            Some(ring) if ring.timed_out(limit, removing) => blkmq::Timeout::Done,
            _ => blkmq::Timeout::ResetTimer,
        }
    }
}

/// Grants the frames of `rq`'s data into `pre` (the data path without
/// bounce frames), before the ring lock: blkcore's grant loop over the
/// walk of the request's bios. `Err`: why the request cannot go now (out
/// of grant references: busy; a piece the ring cannot carry or a failed
/// walk: I/O error); what was granted stays in `pre`.
fn grant_frames(
    rq: &Rq,
    pre: &mut PreGranted<KernelStorage>,
    gt: &mut GrantTable,
) -> core::result::Result<(), QueueError> {
    let mut buf = PageRunBuf::new();
    let frames = request_frames(rq, &mut buf).map_err(|_| QueueError::Io)?;
    pre.grant_pieces(gt, frames)
}

/// Maps the frames of `rq`'s data to per-frame segments in `segs` (the
/// data path with bounce frames, granted under the ring lock), before
/// the ring lock. `Err` if one does not fit in `segs`' capacity or the
/// walk failed (which piece is not reported: any failure fails the
/// request).
fn map_frames(rq: &Rq, segs: &mut KVec<MappedSegment<Frame>>) -> Result {
    segs.clear();
    let full = MapError::TooManySegments {
        max: u32::try_from(segs.capacity()).unwrap_or(u32::MAX),
    };
    let mut buf = PageRunBuf::new();
    for piece in request_frames(rq, &mut buf)? {
        map_piece(&piece?, 0, |seg| {
            segs.push_within_capacity(seg).map_err(|_| full)
        })
        .map_err(|_| EIO)?;
    }
    Ok(())
}

/// A live disk.
pub(crate) struct Disk {
    /// Stopped first: it borrows the rings.
    _idle_purge: Periodic<Queues>,
    queues: Arc<Queues>,
    gd: GenDisk<BlkOps>,
    #[cfg(CONFIG_FAULT_INJECTION)]
    _inject: Option<Pin<KBox<kernel::debugfs::File<FaultInjector<BlkOps>>>>>,
    _stats: Option<Pin<KBox<kernel::debugfs::File<StatsView>>>>,
    _dir: kernel::debugfs::Dir,
    /// Released after the disk (fields drop in order).
    _minors: Option<Minors>,
}

/// Upstream's `XENVBD_MAJOR`: disks are `202:<minor>` like the C driver's
/// when this module holds the major (see `xen_blkfront.rs`).
pub(crate) use crate::blkcore::naming::XENVBD_MAJOR;

/// Whether this module registered [`XENVBD_MAJOR`] (not while the C
/// xen-blkfront holds it: our disks then get dynamic numbers).
pub(crate) static HAVE_XENVBD_MAJOR: AtomicBool = AtomicBool::new(false);

/// The classic minors under [`XENVBD_MAJOR`]: those of every
/// non-extended `virtual-device` (xvd*, and sd*/hd* translated). Extended
/// ids (libxl's from the 17th disk on) take 256 minors each above them.
const FIXED_MINORS: u32 = 4096;

/// Classic minors in use (`xlbd_reserve_minors` upstream): two vbds that
/// translate to the same minor must not both take it.
static MINORS_IN_USE: [AtomicU64; (FIXED_MINORS / 64) as usize] =
    [const { AtomicU64::new(0) }; (FIXED_MINORS / 64) as usize];

/// Extended disks in use, a bit per 256 minors: up to the 20 minor bits,
/// 4096 disks (the first 16 bits stand for the classic range, unused).
static EXT_DISKS_IN_USE: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// A reserved range of minors, released on drop.
pub(crate) struct Minors {
    words: &'static [AtomicU64],
    first: u32,
    count: u32,
}

impl Minors {
    /// Reserves the `count` minors from `first` that [`xvd_minors`] gave:
    /// classic ones in one 64-minor word (upstream's ranges: 16 aligned to
    /// 16, or 1), or an extended disk's 256.
    pub(crate) fn reserve(first: u32, count: u32) -> Result<Self> {
        let (words, first, count): (&'static [AtomicU64], u32, u32) = if first < FIXED_MINORS {
            (&MINORS_IN_USE, first, count)
        } else if count == XEN_PARTS_PER_EXT_DISK && first % count == 0 {
            (&EXT_DISKS_IN_USE, first / count, 1)
        } else {
            return Err(EINVAL);
        };
        match bitmap::reserve_range(words, first, count) {
            Ok(()) => Ok(Self {
                words,
                first,
                count,
            }),
            Err(RangeError::Busy) => Err(EBUSY),
            Err(RangeError::Invalid) => Err(EINVAL),
        }
    }
}

impl Drop for Minors {
    fn drop(&mut self) {
        bitmap::release_range(self.words, self.first, self.count);
    }
}

/// First minor and number of minors upstream gives the disk of `vdevice`
/// under [`XENVBD_MAJOR`] (`xlvbd_alloc_gendisk`): a whole disk gets its
/// partitions' minors too (16, or 256 for an extended id), a vbd that
/// names a partition of a classic disk gets one. `None`: dynamic numbers
/// (a partition of an extended disk, an extended id in the classic range).
pub(crate) fn xvd_minors(vdevice: u32) -> Option<(u32, u32)> {
    naming::xvd_minors(vdevice, FIXED_MINORS)
        .or_else(|| naming::xvd_ext_minors(vdevice, FIXED_MINORS))
}

impl Disk {
    /// Allocates the tag set and disk over `rings` with `limits`.
    pub(crate) fn new(
        dev: &Device,
        vdevice: u32,
        name: &DiskName,
        n: &Negotiated,
        limits: &QueueLimits,
        rings: &[BoundRing<BlkOps>],
    ) -> Result<Self> {
        let mut rs = KVec::with_capacity(rings.len(), GFP_KERNEL)?;
        let mut depth = u32::MAX;
        for h in rings.iter() {
            depth = depth.min(h.ring().with_state(|st| st.size()));
            rs.push(h.ring().clone(), GFP_KERNEL)?;
        }
        let nr = u32::try_from(rs.len()).map_err(|_| EINVAL)?;
        let queues = Arc::new(
            Queues {
                served: AtomicUsize::new(rs.len()),
                rings: rs,
                max_segments: AtomicU32::new(limits.max_segments),
                requeue: BioRequeue::new()?,
                requeued_as_bios: AtomicU64::new(0),
                resent_batch_ends: AtomicU64::new(0),
                batch_ends_unpublished: AtomicU64::new(0),
                removing: AtomicBool::new(false),
            },
            GFP_KERNEL,
        )?;
        let queues_for_purge = queues.clone();
        let queues_for_disk = queues.clone();
        let tagset = Arc::pin_init(
            // No inline scatterlist: `queue_rq` walks the request's pages.
            TagSet::new(nr, depth, 0, queues),
            GFP_KERNEL,
        )?;
        let mut gd = GenDisk::new(tagset, limits, fmt!("{}", name.as_str()), n.sectors)?;
        // Partitioning tools see the geometry upstream gives (255/63), and
        // the CD-ROM ioctls and removable flag follow the backend's `info`
        // as upstream's (`blkif_ioctl`, `xlvbd_alloc_gendisk`).
        gd.set_xen_geometry();
        gd.set_xen_ioctls(n.cdrom());
        if n.removable() {
            gd.set_removable()?;
        }
        // Upstream's numbers when we hold the major and the minors are
        // free; dynamic ones otherwise (the name is the same either way).
        let minors = match xvd_minors(vdevice) {
            Some((first, count)) if HAVE_XENVBD_MAJOR.load(Ordering::Acquire) => {
                match Minors::reserve(first, count) {
                    Ok(m) => {
                        gd.set_numbers(XENVBD_MAJOR, first, count)?;
                        Some(m)
                    }
                    Err(_) => {
                        dev_warn!(
                            dev.as_device(),
                            "{}: minors {}..{} of major {} in use: dynamic device numbers\n",
                            name.as_str(),
                            first,
                            first.saturating_add(count),
                            XENVBD_MAJOR
                        );
                        None
                    }
                }
            }
            _ => None,
        };
        let dname = CString::try_from_fmt(fmt!("xen_blkfront_rs-{}", name.as_str()))?;
        let dir = kernel::debugfs::Dir::new(&dname);
        let ring_list = || -> Result<KVec<Arc<Ring<BlkOps>>>> {
            let mut v = KVec::with_capacity(rings.len(), GFP_KERNEL)?;
            for h in rings.iter() {
                v.push(h.ring().clone(), GFP_KERNEL)?;
            }
            Ok(v)
        };
        // Statistics are best effort: no debugfs is not an error.
        let stats = KBox::pin_init(
            dir.read_only_file(c"stats", StatsView::new(queues_for_disk.clone())),
            GFP_KERNEL,
        )
        .ok();
        #[cfg(CONFIG_FAULT_INJECTION)]
        let inject = KBox::pin_init(
            dir.write_only_file(
                c"inject",
                FaultInjector {
                    rings: ring_list()?,
                },
            ),
            GFP_KERNEL,
        )
        .ok();
        Ok(Self {
            _idle_purge: Periodic::start::<IdlePurge>(queues_for_purge, IDLE_PURGE_MS)?,
            queues: queues_for_disk,
            gd,
            #[cfg(CONFIG_FAULT_INJECTION)]
            _inject: inject,
            _stats: stats,
            _dir: dir,
            _minors: minors,
        })
    }

    /// Makes the disk visible under the xenbus device.
    pub(crate) fn add(&mut self, dev: &Device) -> Result {
        self.gd.add(dev.as_device())
    }

    /// The disk name.
    pub(crate) fn name(&self) -> &CStr {
        self.gd.name()
    }

    /// The backend serves the first `served` rings (1 to the number of
    /// hardware queues): every queue's requests go to one of them.
    pub(crate) fn serve_with_rings(&self, served: usize) {
        let served = served.clamp(1, self.queues.rings.len().max(1));
        self.queues.served.store(served, Ordering::Relaxed);
    }

    /// Dispatches the requests a ring gave back while it reconnected
    /// (`blk_mq_kick_requeue_list`).
    pub(crate) fn resubmit(&self) {
        self.gd.kick_requeue_list();
    }

    /// Requests with more data segments than `max_segments` go out again
    /// as their bios (see [`Queues::max_segments`]); set before the rings
    /// of a new connection start.
    pub(crate) fn set_max_segments(&self, max_segments: u32) {
        self.queues
            .max_segments
            .store(max_segments, Ordering::Relaxed);
    }

    /// Applies a reconnected backend's limits (segments, flush, FUA,
    /// discard, read-only) to the live queue.
    pub(crate) fn update_limits(&self, limits: &QueueLimits) -> Result {
        self.gd.update_limits(limits)
    }

    /// Current capacity in sectors.
    pub(crate) fn set_capacity(&self, sectors: u64) {
        self.gd.set_capacity_and_notify(sectors);
    }

    /// Deletes the disk (waits for the queue to drain, held requests too).
    /// Bios waiting to be sent again are submitted first (they fail at once
    /// if the rings are dead); the queue's drain covers any requeued after.
    pub(crate) fn remove(self) {
        self.queues.removing.store(true, Ordering::Relaxed);
        self.queues.requeue.flush();
        for r in self.queues.rings.iter() {
            r.wait_held();
        }
        drop(self);
    }
}

/// The name upstream xen-blkfront gives the disk of `vdevice`
/// (`xlvbd_alloc_gendisk` + `encode_disk_name`).
pub(crate) fn disk_name(vdevice: u32) -> Result<DiskName> {
    naming::xen_disk_name(vdevice).ok_or(ENODEV)
}
