// SPDX-License-Identifier: GPL-2.0

//! [`Operations`]: the callbacks a blk-mq driver implements, and
//! [`OpsTable`], the C `blk_mq_ops` table that calls them (upstream's
//! `kernel::block::mq::operations`).

use super::request::{
    pdu,
    sg_offset, //
};
use super::*;
use kernel::error::VTABLE_DEFAULT_ERROR;

/// Borrowed queue data of a driver.
pub type QueueDataRef<'a, T> = <<T as Operations>::QueueData as ForeignOwnable>::Borrowed<'a>;

/// The callbacks of a blk-mq driver.
///
/// `queue_rq`, `commit_rqs` and `complete` are required. The others are
/// optional, as in upstream's `kernel::block::mq::Operations`: `#[vtable]`
/// records which a driver implements (`HAS_QUEUE_RQS`, `HAS_POLL`,
/// `HAS_TIMEOUT`), and the C operations table leaves out those it does
/// not, so blk-mq sees what a C driver without them shows (no `queue_rqs`
/// batches, no `io_timeout` attribute). `release` is not a blk-mq callback:
/// its default frees nothing.
#[vtable]
pub trait Operations: Sized + 'static {
    /// Data shared by all queues of a tag set; every callback borrows it.
    type QueueData: ForeignOwnable + Send + Sync;
    /// Per-request driver data, zero-initialised once when blk-mq allocates
    /// the request. At most 8-byte alignment.
    type RequestData: Send + Zeroable;

    /// Queue one request on hardware queue `hctx`. `last` is false when more
    /// requests follow immediately (then `commit_rqs` or a later `last`
    /// call must notify the device). A failure gives the request back
    /// ([`Request::reject`]) with the status blk-mq acts on:
    /// [`Status::RESOURCE`]/[`Status::DEV_RESOURCE`] retry it later, other
    /// values end it with that status. So a request can never be both owned
    /// by the driver (or hardware) and returned to blk-mq.
    fn queue_rq(
        qd: QueueDataRef<'_, Self>,
        hctx: HwQueue,
        rq: Request<Self>,
        last: bool,
    ) -> core::result::Result<(), Rejected<Self>>;

    /// Notify the device about requests queued without `last`.
    fn commit_rqs(qd: QueueDataRef<'_, Self>, hctx: HwQueue);

    /// Finish a request handed to [`Request::complete`] (softirq context,
    /// or the polling task for a polled request).
    fn complete(qd: QueueDataRef<'_, Self>, rq: Request<Self>);

    /// Free what `data` holds for one dispatch of its request (e.g. a
    /// buffer allocated while queueing it): called whenever the request goes
    /// back to blk-mq (ended, requeued, rejected or given back). Default:
    /// nothing.
    fn release(data: &mut Self::RequestData) {
        let _ = data;
    }

    /// Queue a batch of requests (blk-mq's `queue_rqs`: a plug flushed to
    /// one of our queues without an I/O scheduler, e.g. io_uring or libaio
    /// submitting several at once). Take each with [`RqBatch::pop`]: send
    /// it (a request the device cannot take after it was started goes to
    /// [`Request::requeue_and_kick`]) or give it back unstarted with
    /// [`RqBatch::give_back`] (blk-mq then queues it through `queue_rq`).
    /// Without it blk-mq queues every request through `queue_rq`.
    fn queue_rqs(qd: QueueDataRef<'_, Self>, batch: &mut RqBatch<'_, Self>) {
        let _ = (qd, batch);
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Reap the completions of polled hardware queue `hctx` (one of the tag
    /// set's poll queues: no interrupt): hand each finished request to
    /// [`Request::complete`] and return how many there were. Required for a
    /// tag set made with poll queues.
    fn poll(qd: QueueDataRef<'_, Self>, hctx: HwQueue) -> u32 {
        let _ = (qd, hctx);
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// A request on hardware queue `hctx` has been with the driver longer
    /// than the queue's timeout, `timeout_ms`
    /// (`/sys/block/DEV/queue/io_timeout`; blk-mq's
    /// timeout work: process context, may sleep). The request itself stays
    /// the driver's (it is wherever the driver put it): [`Timeout::Done`]
    /// when the driver has ended it or will end it without another timeout,
    /// [`Timeout::ResetTimer`] to wait one more period. Without it blk-mq
    /// waits on.
    fn timeout(qd: QueueDataRef<'_, Self>, hctx: HwQueue, timeout_ms: u32) -> Timeout {
        let _ = (qd, hctx, timeout_ms);
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}

/// What blk-mq does with a request that timed out ([`Operations::timeout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// The driver ends the request: no new timer.
    Done,
    /// Another full timeout period.
    ResetTimer,
}

/// A request `queue_rq` gives back to blk-mq with a status:
/// retried later for [`Status::RESOURCE`]/[`Status::DEV_RESOURCE`], else
/// ended with it. Made by [`Request::reject`].
pub struct Rejected<T: Operations> {
    pub(super) rq: Request<T>,
    pub(super) status: Status,
}

impl<T: Operations> Rejected<T> {
    /// The status blk-mq gets.
    pub fn status(&self) -> Status {
        self.status
    }
}

/// A hardware queue, identified by its index in the tag set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HwQueue {
    pub(super) index: u32,
}

impl HwQueue {
    /// Index of this hardware queue (0-based).
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// The C operations table of driver `T`.
pub(super) struct OpsTable<T>(PhantomData<T>);

impl<T: Operations> OpsTable<T> {
    pub(super) const OPS: &'static bindings::blk_mq_ops = &bindings::blk_mq_ops {
        queue_rq: Some(Self::queue_rq),
        queue_rqs: if T::HAS_QUEUE_RQS {
            Some(Self::queue_rqs)
        } else {
            None
        },
        commit_rqs: Some(Self::commit_rqs),
        complete: Some(Self::complete),
        init_request: Some(Self::init_request),
        map_queues: Some(Self::map_queues),
        poll: if T::HAS_POLL { Some(Self::poll) } else { None },
        timeout: if T::HAS_TIMEOUT {
            Some(Self::timeout)
        } else {
            None
        },
        // SAFETY: all-zero is a valid `blk_mq_ops` (every other callback absent).
        ..unsafe { core::mem::MaybeUninit::zeroed().assume_init() }
    };

    /// # Safety
    ///
    /// Called by blk-mq with a live hardware context of a `TagSet<T>` queue.
    unsafe fn hctx_parts<'a>(hctx: *mut bindings::blk_mq_hw_ctx) -> (QueueDataRef<'a, T>, HwQueue) {
        // SAFETY: per the function's contract; `queuedata` is the tag set's
        // `driver_data` (set by `GenDisk::new`), alive while the queue is.
        unsafe {
            let q = (*hctx).queue;
            (
                T::QueueData::borrow((*q).queuedata),
                HwQueue {
                    index: (*hctx).queue_num,
                },
            )
        }
    }

    /// blk-mq's `queue_rq`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with a live `hctx` of a queue made by
    /// [`GenDisk::new`] and `bd` pointing to a request of that queue.
    unsafe extern "C" fn queue_rq(
        hctx: *mut bindings::blk_mq_hw_ctx,
        bd: *const bindings::blk_mq_queue_data,
    ) -> bindings::blk_status_t {
        // SAFETY: blk-mq calls this with a live hctx of our queue and `bd`.
        let (qd, hq) = unsafe { Self::hctx_parts(hctx) };
        // SAFETY: `bd->rq` is a request of our tag set handed to the driver.
        let (rq, last) = unsafe { (Request::<T>::from_ptr((*bd).rq), (*bd).last) };
        match T::queue_rq(qd, hq, rq, last) {
            Ok(()) => Status::OK.as_raw(),
            // The handle is dropped without ending the request: blk-mq owns
            // it again, to end it or dispatch it anew.
            Err(Rejected { mut rq, status }) => {
                rq.release();
                status.as_raw()
            }
        }
    }

    /// blk-mq's `queue_rqs`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with a list of requests of one of our queues
    /// (made by [`GenDisk::new`]) handed to the driver.
    unsafe extern "C" fn queue_rqs(list: *mut bindings::rq_list) {
        // SAFETY: blk-mq passes a valid list, ours for the call.
        let mut batch = unsafe { RqBatch::<T>::new(&mut *list) };
        if let Some(qd) = batch.queue_data() {
            T::queue_rqs(qd, &mut batch);
        }
        batch.finish();
    }

    /// blk-mq's `commit_rqs`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with a live `hctx` of one of our queues.
    unsafe extern "C" fn commit_rqs(hctx: *mut bindings::blk_mq_hw_ctx) {
        // SAFETY: blk-mq calls this with a live hctx of our queue.
        let (qd, hq) = unsafe { Self::hctx_parts(hctx) };
        T::commit_rqs(qd, hq);
    }

    /// blk-mq's `complete`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with a request of our queue that
    /// [`Request::complete`] handed to it.
    unsafe extern "C" fn complete(rq: *mut bindings::request) {
        // SAFETY: `rq` is a request of our queue, given back by blk-mq after
        // `Request::complete`; `queuedata` lives as long as the queue.
        let (qd, rq) = unsafe {
            (
                T::QueueData::borrow((*(*rq).q).queuedata),
                Request::<T>::from_ptr(rq),
            )
        };
        T::complete(qd, rq);
    }

    /// blk-mq's `poll`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with a live `hctx` of one of our poll queues.
    unsafe extern "C" fn poll(
        hctx: *mut bindings::blk_mq_hw_ctx,
        _iob: *mut bindings::io_comp_batch,
    ) -> kernel::ffi::c_int {
        // SAFETY: blk-mq calls this with a live hctx of our queue.
        let (qd, hq) = unsafe { Self::hctx_parts(hctx) };
        kernel::ffi::c_int::try_from(T::poll(qd, hq)).unwrap_or(kernel::ffi::c_int::MAX)
    }

    /// blk-mq's `timeout`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq's timeout work, with an in-flight request of
    /// one of our queues (its queue and hardware context live).
    unsafe extern "C" fn timeout(rq: *mut bindings::request) -> bindings::blk_eh_timer_return {
        // SAFETY: per the function's contract; the request is not touched
        // beyond its hardware context and its queue's timeout.
        let ((qd, hq), timeout) =
            unsafe { (Self::hctx_parts((*rq).mq_hctx), (*(*rq).q).rq_timeout) };
        // SAFETY: a plain conversion, callable from any context.
        let timeout_ms = unsafe { bindings::jiffies64_to_msecs(timeout.into()) };
        match T::timeout(qd, hq, u32::try_from(timeout_ms).unwrap_or(u32::MAX)) {
            Timeout::Done => bindings::blk_eh_timer_return_BLK_EH_DONE,
            Timeout::ResetTimer => bindings::blk_eh_timer_return_BLK_EH_RESET_TIMER,
        }
    }

    /// blk-mq's `map_queues`: with poll queues, the interrupt-driven ones
    /// first (`HCTX_TYPE_DEFAULT`, by interrupt affinity), no read queues,
    /// the polled ones last (`HCTX_TYPE_POLL`, blk-mq's spread: they have
    /// no interrupt), as virtio_blk maps them.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with `set` pointing into a live [`TagSet<T>`].
    unsafe extern "C" fn map_queues(set: *mut bindings::blk_mq_tag_set) {
        const DEFAULT: usize = bindings::hctx_type_HCTX_TYPE_DEFAULT as usize;
        const READ: usize = bindings::hctx_type_HCTX_TYPE_READ as usize;
        const POLL: usize = bindings::hctx_type_HCTX_TYPE_POLL as usize;
        // SAFETY: `set` is the first field of a `#[repr(C)]` `TagSet<T>` (the
        // only users of these ops), alive while blk-mq maps its queues;
        // `irq_dev` is null or alive (type invariant); `nr_maps` is 1 or
        // `HCTX_MAX_TYPES` (with `poll_queues < nr_hw_queues`, checked at
        // build), so every map indexed here exists.
        unsafe {
            let ts = set.cast::<TagSet<T>>();
            let poll = (*ts).poll_queues;
            if (*set).nr_maps > 1 {
                let irq = (*set).nr_hw_queues - poll;
                (*set).map[DEFAULT].nr_queues = irq;
                (*set).map[DEFAULT].queue_offset = 0;
                (*set).map[READ].nr_queues = 0;
                (*set).map[READ].queue_offset = irq;
                (*set).map[POLL].nr_queues = poll;
                (*set).map[POLL].queue_offset = irq;
                bindings::blk_mq_map_queues(&raw mut (*set).map[POLL]);
            }
            let map = &raw mut (*set).map[DEFAULT];
            if (*ts).irq_dev.is_null() {
                bindings::blk_mq_map_queues(map);
            } else {
                bindings::blk_mq_map_hw_queues(map, (*ts).irq_dev, 0);
            }
        }
    }

    /// blk-mq's `init_request`.
    ///
    /// # Safety
    ///
    /// Called only by blk-mq, with `set` of a live [`TagSet<T>`] and `rq`
    /// whose PDU is the tag set's `cmd_size` bytes.
    unsafe extern "C" fn init_request(
        set: *mut bindings::blk_mq_tag_set,
        rq: *mut bindings::request,
        _hctx_idx: kernel::ffi::c_uint,
        _numa_node: kernel::ffi::c_int,
    ) -> kernel::ffi::c_int {
        let off = sg_offset::<T::RequestData>();
        // SAFETY: `set` is our tag set and `rq` one of its requests, whose
        // PDU is `cmd_size` bytes: zero it (valid `RequestData`, see the
        // `Operations` contract; a null `SgChain`: no chained table) and
        // initialise the scatterlist behind it (the tag set's `inline_sg`
        // entries: what `cmd_size` has room for behind `off`).
        unsafe {
            let cmd_size = (*set).cmd_size as usize;
            let pdu = pdu(rq);
            core::ptr::write_bytes(pdu, 0, cmd_size);
            let nsg = ((cmd_size - off) / size_of::<bindings::scatterlist>()) as u32;
            if nsg > 0 {
                bindings::sg_init_table(pdu.add(off).cast(), nsg);
            }
        }
        0
    }
}
