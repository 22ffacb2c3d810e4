// SPDX-License-Identifier: GPL-2.0

//! [`BioRequeue`]: requests sent again as their bios, split to the queue's
//! current limits.

use super::*;

/// A disk's queue of bios to submit again (the C shim's
/// `blkfront_rs_bio_requeue`: a locked bio list and a work item on
/// kblockd).
///
/// A request built under queue limits the device no longer has (a backend
/// reconnected with fewer segments per request) cannot be sent as it is:
/// [`Request::requeue_bios`] ends it without data and queues its bios
/// here; the work item submits them again (`submit_bio_noacct`), and the
/// block layer splits them to the current limits, as upstream
/// xen-blkfront's `blkif_recover` and nvme's multipath failover do.
///
/// # Invariants
///
/// `ptr` comes from `blkfront_rs_bio_requeue_alloc` and is freed only by
/// `Drop`.
pub struct BioRequeue {
    ptr: NonNull<shim::blkfront_rs_bio_requeue>,
}

// SAFETY: the C side locks its list; its work item runs on kblockd, and
// every entry point may be called from any context and CPU.
unsafe impl Send for BioRequeue {}
// SAFETY: as above: `requeue_rq` takes the list's spinlock.
unsafe impl Sync for BioRequeue {}

impl BioRequeue {
    /// An empty queue (sleeps: `GFP_KERNEL`).
    pub fn new() -> Result<Self> {
        // SAFETY: no preconditions; NULL only without memory.
        let ptr = unsafe { shim::blkfront_rs_bio_requeue_alloc() };
        // INVARIANT: freshly allocated by the shim.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// Waits until every bio queued so far was submitted again (before the
    /// disk is deleted: a bio submitted after that would find no queue).
    /// Sleeps.
    pub fn flush(&self) {
        // SAFETY: `ptr` is live (type invariant).
        unsafe { shim::blkfront_rs_bio_requeue_flush(self.ptr.as_ptr()) };
    }
}

impl Drop for BioRequeue {
    fn drop(&mut self) {
        // SAFETY: `ptr` is live and dropped once (type invariant); the shim
        // flushes the work item before freeing.
        unsafe { shim::blkfront_rs_bio_requeue_free(self.ptr.as_ptr()) };
    }
}

impl<T: Operations> Request<T> {
    /// Sends the request again as its bios (see [`BioRequeue`]): the
    /// request ends now without data, its bios are submitted again from
    /// `requeue`'s work item. For reads and writes only (a flush has no
    /// bios to carry it). Any context.
    pub fn requeue_bios(mut self, requeue: &BioRequeue) {
        self.release();
        // SAFETY: the request is live and owned (type invariant), `requeue`
        // is live; the shim takes the bios and ends the request, consuming
        // the handle.
        unsafe {
            shim::blkfront_rs_bio_requeue_rq(requeue.ptr.as_ptr(), self.raw().cast());
        }
    }
}
