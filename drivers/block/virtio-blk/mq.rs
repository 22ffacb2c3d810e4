// SPDX-License-Identifier: GPL-2.0

//! blk-mq operations over the virtqueues.

use super::*;

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
}

/// State shared with blk-mq callbacks and interrupts.
pub(crate) struct Queues {
    /// Device byte order for request headers.
    pub(crate) le: bool,
    pub(crate) vqs: KVec<Pin<KBox<VqSlot>>>,
}

impl Queues {
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

impl blkmq::Operations for BlkOps {
    type QueueData = Arc<Queues>;
    type RequestData = BlkReq;

    fn queue_rq_or_reject(
        qd: ArcBorrow<'_, Queues>,
        hctx: HwQueue,
        mut rq: Request<Self>,
        last: bool,
    ) -> core::result::Result<(), Rejected<Self>> {
        let Some(cmd) = command_of(rq.op(), rq.no_unmap()) else {
            return Err(rq.reject(Status::NOTSUPP));
        };
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return Err(rq.reject(Status::IOERR));
        };
        if let Err(status) = vblk::prepare(&mut rq, cmd, qd.le) {
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

    fn complete(_qd: QueueDataRef<'_, Self>, rq: Request<Self>) {
        let status = rq.data().status();
        rq.end(status);
    }

    fn poll(qd: ArcBorrow<'_, Queues>, hctx: HwQueue) -> u32 {
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return 0;
        };
        let mut found = 0u32;
        // Under the lock, as upstream's `virtblk_poll`: a polled request
        // completes in this task, and ending it reruns the queue only
        // asynchronously, so `queue_rq` cannot be re-entered here.
        let mut vq = slot.vq.lock();
        while let Some(rq) = vq.complete_one() {
            rq.complete();
            found = found.saturating_add(1);
        }
        drop(vq);
        // blk-mq polls in a loop, mostly finding nothing: leave the shared
        // counter's cache line alone then.
        if found != 0 {
            slot.polled.fetch_add(u64::from(found), Ordering::Relaxed);
        }
        found
    }
}
