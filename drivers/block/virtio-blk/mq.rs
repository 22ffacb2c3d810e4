// SPDX-License-Identifier: GPL-2.0

//! blk-mq operations over the virtqueues.

use core::sync::atomic::{
    AtomicBool,
    AtomicU64,
    Ordering, //
};

use kernel::{
    new_spinlock,
    new_spinlock_irq,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow,
        SpinLock,
        SpinLockIrq, //
    },
    time::{
        Instant,
        Monotonic, //
    }, //
};

use crate::blkcore::stall::{
    give_up_limit,
    Silence,
    StallWatch, //
};
use crate::blkmq::{
    self,
    HwQueue,
    QueueDataRef,
    Rejected,
    ReqOp,
    Request,
    RqBatch,
    RqList,
    Status,
    Timeout, //
};
use crate::virtio::{
    self,
    blk::{
        self as vblk,
        BlkReq,
        BlkVq,
        Command,
        STATUS_NOT_WRITTEN, //
    },
};

/// One request virtqueue and its counters.
#[pin_data]
pub(crate) struct VqSlot {
    #[pin]
    pub(crate) vq: SpinLockIrq<BlkVq<BlkOps>>,
    /// Requests added.
    pub(crate) requests: AtomicU64,
    /// Device notifications sent.
    pub(crate) notifies: AtomicU64,
    /// Requests sent back to blk-mq because the ring was full.
    pub(crate) ring_full: AtomicU64,
    /// Requests reaped by polling (poll queues only).
    pub(crate) polled: AtomicU64,
    /// Requests whose segments did not fit the inline scatterlist.
    pub(crate) chained: AtomicU64,
    /// Batches of requests added under one lock hold (`queue_rqs`).
    pub(crate) batches: AtomicU64,
    /// Requests the device answered through the interrupt, or that a
    /// request timeout found answered ([`BlkOps::timeout`]).
    pub(crate) answered: AtomicU64,
    /// Request timeouts ([`BlkOps::timeout`]): each a request that
    /// waited a whole `io_timeout`.
    pub(crate) timeouts: AtomicU64,
    /// Slow or stalled, from the request timeouts.
    #[pin]
    pub(crate) stall: SpinLock<StallWatch>,
}

impl VqSlot {
    /// A slot for `vq`, its counters at zero.
    pub(crate) fn new(vq: BlkVq<BlkOps>) -> impl PinInit<Self> {
        pin_init!(VqSlot {
            vq <- new_spinlock_irq!(vq, "virtio_blk_rs:vq"),
            requests: AtomicU64::new(0),
            notifies: AtomicU64::new(0),
            ring_full: AtomicU64::new(0),
            polled: AtomicU64::new(0),
            chained: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            stall <- new_spinlock!(StallWatch::new(), "virtio_blk_rs:stall"),
        })
    }

    /// Ends the requests the device answered that nobody took yet, under
    /// the lock (as upstream's `virtblk_poll`): returns how many.
    fn reap(&self) -> u32 {
        let mut found = 0u32;
        let mut vq = self.vq.lock();
        while let Some(rq) = vq.complete_one() {
            rq.complete();
            found = found.saturating_add(1);
        }
        found
    }
}

/// State shared with blk-mq callbacks and interrupts.
pub(crate) struct Queues {
    /// Device byte order for request headers.
    pub(crate) le: bool,
    pub(crate) vqs: KVec<Pin<KBox<VqSlot>>>,
    /// Resets the device when a queue stops answering ([`Queues::give_up`]);
    /// `None` for the KUnit cases' queues, which have no device.
    pub(crate) resetter: Option<virtio::Resetter>,
    /// Set once the device was given up on (reset, its requests failed).
    pub(crate) given_up: AtomicBool,
    /// Set when the disk's removal starts: from then on a queue silent for
    /// one `io_timeout` is given up on ([`give_up_limit`]), so that
    /// removal ends.
    pub(crate) removing: AtomicBool,
    /// Start of the stall watch's clock.
    epoch: Instant<Monotonic>,
    /// Set once an undefined status byte was named ([`BlkOps::complete`]).
    pub(crate) undefined_status_named: AtomicBool,
    /// Set once a broken virtqueue was named ([`Queues::name_broken_queue`]).
    pub(crate) broken_named: AtomicBool,
}

impl Queues {
    /// Queues over `vqs` for a device of byte order `le` (little-endian),
    /// reset by `resetter` when given up on (`None`: the KUnit cases'
    /// queues, which have no device).
    pub(crate) fn new(
        le: bool,
        vqs: KVec<Pin<KBox<VqSlot>>>,
        resetter: Option<virtio::Resetter>,
    ) -> Self {
        Queues {
            le,
            vqs,
            resetter,
            given_up: AtomicBool::new(false),
            removing: AtomicBool::new(false),
            epoch: Instant::now(),
            undefined_status_named: AtomicBool::new(false),
            broken_named: AtomicBool::new(false),
        }
    }

    /// Queue `index` answered nothing for `silent_ms`, the limit the user
    /// set (`give_up_after_ms`) or removal's: the device is stalled, or
    /// its ring is broken (e.g. after an answer the virtio core refused).
    /// Upstream waits for ever, and with it every task waiting for the
    /// disk, its removal included. Reset the device (fenced first: no used
    /// entry is read after this decision; reset: it no longer uses any
    /// buffer, so ending the requests hands back no page it could still
    /// write), end every request it held with an I/O error, and from then
    /// on fail every request at once. One line names the queue. False if
    /// it was done before (no request is left in flight then) or cannot be
    /// done (no device: the KUnit cases' queues).
    fn give_up(&self, index: usize, silent_ms: u64) -> bool {
        let Some(resetter) = &self.resetter else {
            return false;
        };
        if self.given_up.swap(true, Ordering::AcqRel) {
            return false;
        }
        let reset = resetter.reset();
        let mut failed = 0u64;
        for slot in self.vqs.iter() {
            // One at a time: each request is ended outside the lock.
            while let Some(rq) = slot.vq.lock().take_back_after_reset(&reset) {
                rq.end(Status::IOERR);
                failed += 1;
            }
        }
        // A broken virtqueue was named when it refused its first request:
        // this is the end that line announced.
        if !self.broken_named.load(Ordering::Relaxed) {
            let (when, after) = if self.removing.load(Ordering::Relaxed) {
                (" at its removal", "")
            } else {
                ("", "; I/O fails until it is removed")
            };
            dev_err!(
                resetter.as_dev(),
                "request queue {} answered nothing for {} ms: device reset{}, {} requests failed{}\n",
                index,
                silent_ms,
                when,
                failed,
                after
            );
        }
        true
    }

    /// The virtio core refused a request of queue `index` because it
    /// stopped the virtqueue (the device broke the ring's rules, e.g. an
    /// answer for a descriptor that is not a request's head). Named once
    /// per device: the core's own line names only the descriptor, and
    /// without this one a request that fails at once says nothing of why.
    /// What the device still holds ends when it is given up on
    /// ([`Queues::give_up`]).
    fn name_broken_queue(&self, index: usize) {
        let Some(r) = self.resetter.as_ref() else {
            return;
        };
        if self.given_up.load(Ordering::Acquire) || self.broken_named.swap(true, Ordering::Relaxed)
        {
            return;
        }
        dev_err!(
            r.as_dev(),
            "request queue {}: the device broke the virtqueue's rules and the virtio core stopped it: new requests fail at once, those it holds when it is given up on (give_up_after_ms, or its removal); I/O fails until it is removed\n",
            index
        );
    }

    /// A status byte virtio-blk does not define fails its request, as
    /// upstream; unlike upstream, the first one per device is named (a
    /// device that never writes the byte, or one that breaks the protocol,
    /// is otherwise seen only as I/O errors).
    fn name_undefined_status(&self, byte: u8) {
        let Some(r) = self.resetter.as_ref() else {
            return;
        };
        if self.undefined_status_named.swap(true, Ordering::Relaxed) {
            return;
        }
        let never_written = if byte == STATUS_NOT_WRITTEN {
            " (the byte was never written)"
        } else {
            ""
        };
        dev_err!(
            r.as_dev(),
            "the device answered a request with status {:#04x}, which virtio-blk does not define{}: failed as an I/O error (later ones are not named)\n",
            byte,
            never_written
        );
    }

    /// Counters summed over all queues.
    pub(crate) fn totals(&self) -> QueueTotals {
        let sum = |c: fn(&VqSlot) -> &AtomicU64| {
            self.vqs
                .iter()
                .map(|s| c(s).load(Ordering::Relaxed))
                .sum::<u64>()
        };
        QueueTotals {
            requests: sum(|s| &s.requests),
            notifies: sum(|s| &s.notifies),
            ring_full: sum(|s| &s.ring_full),
            polled: sum(|s| &s.polled),
            chained: sum(|s| &s.chained),
            batches: sum(|s| &s.batches),
            timeouts: sum(|s| &s.timeouts),
        }
    }
}

/// [`Queues::totals`]: what the removal line reports.
pub(crate) struct QueueTotals {
    pub(crate) requests: u64,
    pub(crate) notifies: u64,
    pub(crate) ring_full: u64,
    pub(crate) polled: u64,
    pub(crate) chained: u64,
    pub(crate) batches: u64,
    pub(crate) timeouts: u64,
}

/// The virtio-blk command for a block-layer operation (`no_unmap`: the
/// write-zeroes request must not deallocate), or `None` for one the device
/// has no command for (upstream's `virtblk_setup_cmd`).
pub(crate) fn command_of(op: ReqOp, no_unmap: bool) -> Option<Command> {
    Some(match op {
        ReqOp::Read => Command::Read,
        ReqOp::Write => Command::Write,
        ReqOp::Flush => Command::Flush,
        ReqOp::Discard => Command::Discard,
        ReqOp::WriteZeroes => Command::WriteZeroes { unmap: !no_unmap },
        ReqOp::SecureErase => Command::SecureErase,
        _ => return None,
    })
}

/// blk-mq operations of a virtio-blk disk.
pub(crate) struct BlkOps;

#[vtable]
impl blkmq::Operations for BlkOps {
    type QueueData = Arc<Queues>;
    type RequestData = BlkReq;

    fn queue_rq(
        qd: ArcBorrow<'_, Queues>,
        hctx: HwQueue,
        mut rq: Request<Self>,
        last: bool,
    ) -> core::result::Result<(), Rejected<Self>> {
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return Err(rq.reject(Status::IOERR));
        };
        if let Err(status) = prepare(&qd, &mut rq) {
            return Err(rq.reject(status));
        }
        let chained = rq.sg_chained();

        let mut vq = slot.vq.lock();
        if let Err((rq, e)) = vq.submit(rq) {
            // Ring full: let the device see what is queued, retry when a
            // request completes.
            let kick = vq.kick_prepare();
            drop(vq);
            if let Some(k) = kick {
                k.notify();
                slot.notifies.fetch_add(1, Ordering::Relaxed);
            }
            return Err(rq.reject(if e == ENOSPC {
                slot.ring_full.fetch_add(1, Ordering::Relaxed);
                Status::DEV_RESOURCE
            } else if e == ENOMEM {
                Status::RESOURCE
            } else {
                if e == EIO {
                    qd.name_broken_queue(hctx.index() as usize);
                }
                Status::IOERR
            }));
        }
        let kick = if last { vq.kick_prepare() } else { None };
        drop(vq);
        slot.requests.fetch_add(1, Ordering::Relaxed);
        if chained {
            slot.chained.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(k) = kick {
            k.notify();
            slot.notifies.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Upstream's `virtio_queue_rqs`: each request prepared, the run of
    /// requests for one virtqueue added under one lock hold and the device
    /// notified once per run; a request that cannot be prepared goes back
    /// to blk-mq, one the ring cannot take is requeued.
    fn queue_rqs(qd: ArcBorrow<'_, Queues>, batch: &mut RqBatch<'_, Self>) {
        let mut run = RqList::new();
        let mut run_queue = None;
        while let Some((hctx, mut rq)) = batch.pop() {
            if run_queue.is_some_and(|q| q != hctx) {
                add_run(&qd, run_queue, &mut run);
            }
            run_queue = Some(hctx);
            if qd.vqs.get(hctx.index() as usize).is_some() && prepare(&qd, &mut rq).is_ok() {
                run.push(rq);
            } else {
                batch.give_back(rq);
            }
        }
        add_run(&qd, run_queue, &mut run);
    }

    fn commit_rqs(qd: ArcBorrow<'_, Queues>, hctx: HwQueue) {
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return;
        };
        let kick = slot.vq.lock().kick_prepare();
        if let Some(k) = kick {
            k.notify();
            slot.notifies.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn release(data: &mut BlkReq) {
        vblk::release(data);
    }

    fn complete(qd: QueueDataRef<'_, Self>, rq: Request<Self>) {
        let data = rq.data();
        let status = data.status();
        // Only a failed request can carry an undefined status byte: the
        // successful ones, nearly all, skip the check.
        if status != Status::OK {
            if let Some(byte) = data.undefined_status() {
                qd.name_undefined_status(byte);
            }
        }
        rq.end(status);
    }

    /// A request waited the queue's `io_timeout`. What the device answered
    /// and nobody took yet ends now (a lost interrupt; a poll queue whose
    /// polling task is stopped). Then the queue waits on, as upstream,
    /// unless it answered nothing for `give_up_after_ms`, or for one
    /// `io_timeout` while the disk is removed ([`Queues::give_up`]).
    fn timeout(qd: ArcBorrow<'_, Queues>, hctx: HwQueue, timeout_ms: u32) -> Timeout {
        let index = hctx.index() as usize;
        let Some(slot) = qd.vqs.get(index) else {
            return Timeout::ResetTimer;
        };
        slot.timeouts.fetch_add(1, Ordering::Relaxed);
        let found = slot.reap();
        if found != 0 {
            slot.answered.fetch_add(u64::from(found), Ordering::Relaxed);
        }
        let answers = slot
            .answered
            .load(Ordering::Relaxed)
            .wrapping_add(slot.polled.load(Ordering::Relaxed));
        let limit = give_up_limit(
            crate::params::give_up_after_ms.value(),
            timeout_ms,
            qd.removing.load(Ordering::Relaxed),
        );
        let now_ms = u64::try_from(qd.epoch.elapsed().as_millis()).unwrap_or(0);
        let silence = slot.stall.lock().timed_out(answers, now_ms, limit);
        match silence {
            Silence::Tolerated => Timeout::ResetTimer,
            // Every request the device held was ended by the reset: the
            // timed out one among them.
            Silence::TooLong { silent_ms } if qd.give_up(index, silent_ms) => Timeout::Done,
            Silence::TooLong { .. } => Timeout::ResetTimer,
        }
    }

    fn poll(qd: ArcBorrow<'_, Queues>, hctx: HwQueue) -> u32 {
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return 0;
        };
        // A polled request completes in this task, and ending it reruns
        // the queue only asynchronously, so `queue_rq` cannot be
        // re-entered under the lock.
        let found = slot.reap();
        // blk-mq polls in a loop, mostly finding nothing: leave the shared
        // counter's cache line alone then.
        if found != 0 {
            slot.polled.fetch_add(u64::from(found), Ordering::Relaxed);
        }
        found
    }
}

/// The virtio-blk command for `rq`, its header and data mapped, the request
/// started (`NOTSUPP` for an operation without a command).
fn prepare(qd: &Queues, rq: &mut Request<BlkOps>) -> core::result::Result<(), Status> {
    let cmd = command_of(rq.op(), rq.no_unmap()).ok_or(Status::NOTSUPP)?;
    vblk::prepare(rq, cmd, qd.le)
}

/// Adds the prepared requests of `run` to the virtqueue of `hctx` under one
/// lock hold and notifies the device once; a request the ring cannot take
/// is requeued (blk-mq sends it again through `queue_rq`).
fn add_run(qd: &Queues, hctx: Option<HwQueue>, run: &mut RqList<BlkOps>) {
    let Some(slot) = hctx.and_then(|h| qd.vqs.get(h.index() as usize)) else {
        return;
    };
    if run.is_empty() {
        return;
    }
    let (mut added, mut chained, mut full) = (0u64, 0u64, 0u64);
    let mut vq = slot.vq.lock();
    while let Some(rq) = run.pop() {
        let is_chained = rq.sg_chained();
        match vq.submit(rq) {
            Ok(()) => {
                added += 1;
                chained += u64::from(is_chained);
            }
            Err((rq, e)) => {
                full += u64::from(e == ENOSPC);
                rq.requeue_and_kick();
            }
        }
    }
    let kick = vq.kick_prepare();
    drop(vq);
    if let Some(k) = kick {
        k.notify();
        slot.notifies.fetch_add(1, Ordering::Relaxed);
    }
    slot.requests.fetch_add(added, Ordering::Relaxed);
    slot.chained.fetch_add(chained, Ordering::Relaxed);
    slot.ring_full.fetch_add(full, Ordering::Relaxed);
    slot.batches.fetch_add(1, Ordering::Relaxed);
}
