// SPDX-License-Identifier: GPL-2.0

//! [`RqBatch`] and [`RqList`]: requests handed over in batches (blk-mq's
//! `queue_rqs`), and lists of them that own their requests.

use super::*;

/// A singly linked list of requests through `rq_next` (`struct rq_list`),
/// owning them: each must leave it by [`RqList::pop`].
///
/// # Invariants
///
/// Every request in `raw` is owned by the list (as a [`Request<T>`] is) and
/// belongs to a tag set of `T`.
pub struct RqList<T: Operations> {
    raw: bindings::rq_list,
    _p: PhantomData<T>,
}

impl<T: Operations> RqList<T> {
    /// An empty list.
    pub fn new() -> Self {
        Self {
            raw: bindings::rq_list {
                head: core::ptr::null_mut(),
                tail: core::ptr::null_mut(),
            },
            _p: PhantomData,
        }
    }

    /// Whether the list holds no request.
    pub fn is_empty(&self) -> bool {
        self.raw.head.is_null()
    }

    /// Add `rq` at the tail (`rq_list_add_tail`).
    pub fn push(&mut self, rq: Request<T>) {
        let rq = rq.into_raw().as_ptr().cast::<bindings::request>();
        // SAFETY: `rq` is a live request we own (taken from a `Request`);
        // `rq_next` is free while blk-mq has handed the request to us, and
        // `tail` is null or a request of this list (type invariant).
        unsafe {
            (*rq).__bindgen_anon_1.rq_next = core::ptr::null_mut();
            if self.raw.tail.is_null() {
                self.raw.head = rq;
            } else {
                (*self.raw.tail).__bindgen_anon_1.rq_next = rq;
            }
        }
        self.raw.tail = rq;
    }

    /// Take the request at the head (`rq_list_pop`).
    pub fn pop(&mut self) -> Option<Request<T>> {
        // SAFETY: the list holds live requests we own (type invariant).
        let rq = unsafe { unlink_head(&mut self.raw) }?;
        // SAFETY: unlinked from our list: ownership moves to the handle.
        Some(unsafe { Request::from_ptr(rq) })
    }
}

/// Unlinks the head of `list` (`rq_list_pop`).
///
/// # Safety
///
/// `list` links live requests through `rq_next`.
unsafe fn unlink_head(list: &mut bindings::rq_list) -> Option<*mut bindings::request> {
    let rq = list.head;
    if rq.is_null() {
        return None;
    }
    // SAFETY: `rq` is a live request of the list (function contract).
    unsafe {
        list.head = (*rq).__bindgen_anon_1.rq_next;
        if list.head.is_null() {
            list.tail = core::ptr::null_mut();
        }
        (*rq).__bindgen_anon_1.rq_next = core::ptr::null_mut();
    }
    Some(rq)
}

impl<T: Operations> Default for RqList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Operations> Drop for RqList<T> {
    /// A request still in the list would be lost to blk-mq for ever: end
    /// it with an I/O error (a driver bug, said once per list).
    fn drop(&mut self) {
        let mut n = 0u32;
        while let Some(rq) = self.pop() {
            rq.end(Status::IOERR);
            n += 1;
        }
        if n != 0 {
            pr_warn!(
                "{} requests left in a request list: ended with an I/O error\n",
                n
            );
        }
    }
}

/// The requests of one `queue_rqs` call: blk-mq flushed a plug of requests
/// for one of our queues (no I/O scheduler) and hands them over together.
/// The driver takes each with [`RqBatch::pop`] and either sends it or gives
/// it back unstarted with [`RqBatch::give_back`]; blk-mq then queues those
/// one by one through `queue_rq`.
pub struct RqBatch<'a, T: Operations> {
    /// blk-mq's list: requests not taken yet, then, when the call returns,
    /// those given back.
    list: &'a mut bindings::rq_list,
    given_back: RqList<T>,
}

impl<'a, T: Operations> RqBatch<'a, T> {
    /// # Safety
    ///
    /// `list` holds requests of a queue of a `TagSet<T>` that blk-mq hands
    /// to the driver (`queue_rqs`), and stays valid for `'a`.
    pub(super) unsafe fn new(list: &'a mut bindings::rq_list) -> Self {
        Self {
            list,
            given_back: RqList::new(),
        }
    }

    /// The queue data of the batch's queue, if the batch is not empty.
    pub(super) fn queue_data(&self) -> Option<QueueDataRef<'a, T>> {
        let rq = self.list.head;
        if rq.is_null() {
            return None;
        }
        // SAFETY: `rq` is a request of one of our queues (see `new`), whose
        // `queuedata` is the tag set's data (set by `GenDisk::new`), alive
        // while the queue is, which outlives this call.
        Some(unsafe { T::QueueData::borrow((*(*rq).q).queuedata) })
    }

    /// Take the next request and the hardware queue it is for.
    pub fn pop(&mut self) -> Option<(HwQueue, Request<T>)> {
        // SAFETY: blk-mq's list of requests handed to us (see `new`).
        let rq = unsafe { unlink_head(self.list) }?;
        // SAFETY: unlinked from that list, so ours: ownership moves to the
        // handle. Its `mq_hctx` is set (blk-mq mapped it to a queue).
        unsafe {
            let index = (*(*rq).mq_hctx).queue_num;
            Some((HwQueue { index }, Request::from_ptr(rq)))
        }
    }

    /// Give back a request taken with [`RqBatch::pop`] and not started:
    /// blk-mq queues it through `queue_rq` after this batch.
    pub fn give_back(&mut self, mut rq: Request<T>) {
        rq.release();
        self.given_back.push(rq);
    }

    /// Hand blk-mq what is left: requests not taken, then those given back.
    pub(super) fn finish(mut self) {
        while let Some((_, rq)) = self.pop() {
            self.given_back.push(rq);
        }
        *self.list = self.given_back.raw;
        self.given_back.raw = bindings::rq_list {
            head: core::ptr::null_mut(),
            tail: core::ptr::null_mut(),
        };
    }
}
