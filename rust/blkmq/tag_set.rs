// SPDX-License-Identifier: GPL-2.0

//! [`TagSet`]: the `blk_mq_tag_set` and the C operations table that calls
//! the driver's [`Operations`].

use super::request::{
    pdu,
    sg_offset, //
};
use super::*;

/// A `blk_mq_tag_set` for driver `T`.
///
/// # Invariants
///
/// `inner` was initialised by `blk_mq_alloc_tag_set`, its `driver_data` holds
/// a `T::QueueData` converted with `into_foreign`, and its `ops` point to
/// `OpsTable::<T>::OPS`. Freed in `drop`. `irq_dev` is null or a device
/// that outlives the tag set.
#[pin_data(PinnedDrop)]
#[repr(C)]
pub struct TagSet<T: Operations> {
    /// First field: `map_queues` finds the `TagSet` from the C pointer.
    #[pin]
    inner: Opaque<bindings::blk_mq_tag_set>,
    /// Scatterlist entries inline in each request's PDU (read per request
    /// by `Request::map_sg`).
    pub(super) inline_sg: u32,
    /// The last `poll_queues` hardware queues are polled (blk-mq's
    /// `HCTX_TYPE_POLL` map); the others take interrupts.
    poll_queues: u32,
    /// Device whose interrupt affinity maps CPUs to queues, or null for
    /// blk-mq's default spread. Outlives the tag set (see `with_irq_affinity`).
    irq_dev: *mut bindings::device,
    /// Chained scatterlist tables taken by requests and not yet given back
    /// (`Request::map_sg`, `Request::release_sg`): 0 when the tag set goes.
    pub(super) sg_chains_out: AtomicUsize,
    _p: PhantomData<T>,
}

// SAFETY: the tag set is only touched by blk-mq (which synchronises itself)
// and by `drop`; `T::QueueData` is `Send + Sync`.
unsafe impl<T: Operations> Send for TagSet<T> {}
// SAFETY: see `Send`; `&TagSet` offers no mutation.
unsafe impl<T: Operations> Sync for TagSet<T> {}

impl<T: Operations> TagSet<T> {
    /// A tag set with `nr_hw_queues` queues of `queue_depth` requests each,
    /// `inline_sg` inline scatterlist entries per request (a request
    /// with more segments chains a table for its time in flight: see
    /// [`Request::map_sg`]; 0 for a driver that walks a request's pages
    /// with [`Request::page_runs`] and maps no scatterlist), and
    /// `data` shared by every callback.
    pub fn new(
        nr_hw_queues: u32,
        queue_depth: u32,
        inline_sg: u32,
        data: T::QueueData,
    ) -> impl PinInit<Self, Error> {
        Self::build(
            nr_hw_queues,
            0,
            queue_depth,
            inline_sg,
            data,
            core::ptr::null_mut(),
        )
    }

    /// Like [`TagSet::new`], but CPUs are mapped to hardware queues by the
    /// interrupt affinity of `dev`'s queue interrupts
    /// (`blk_mq_map_hw_queues`, e.g. one virtqueue per CPU group), falling
    /// back to blk-mq's default spread when the bus has no affinity; and the
    /// last `poll_queues` of the `nr_hw_queues` (fewer than all) have no
    /// interrupt: they serve polled I/O (`HCTX_TYPE_POLL`, io_uring's
    /// `IORING_SETUP_IOPOLL`), reaped by [`Operations::poll`].
    ///
    /// # Safety
    ///
    /// `dev` must stay alive until the tag set is dropped (a device driver's
    /// own device, with the tag set freed in its `remove`).
    pub unsafe fn with_irq_affinity(
        nr_hw_queues: u32,
        poll_queues: u32,
        queue_depth: u32,
        inline_sg: u32,
        data: T::QueueData,
        dev: &Device,
    ) -> impl PinInit<Self, Error> {
        Self::build(
            nr_hw_queues,
            poll_queues,
            queue_depth,
            inline_sg,
            data,
            core::ptr::from_ref(dev).cast_mut().cast(),
        )
    }

    fn build(
        nr_hw_queues: u32,
        poll_queues: u32,
        queue_depth: u32,
        inline_sg: u32,
        data: T::QueueData,
        irq_dev: *mut bindings::device,
    ) -> impl PinInit<Self, Error> {
        const { assert!(align_of::<T::RequestData>() <= 8) };
        let cmd_size = inline_sg
            .checked_mul(size_of::<bindings::scatterlist>() as u32)
            .and_then(|s| s.checked_add(sg_offset::<T::RequestData>() as u32));
        let valid = nr_hw_queues != 0 && queue_depth != 0 && poll_queues < nr_hw_queues;
        let nr_maps = if poll_queues == 0 {
            1
        } else {
            bindings::hctx_type_HCTX_MAX_TYPES
        };
        // `irq_dev` first: `blk_mq_alloc_tag_set` calls `map_queues`, which
        // reads it (pin-init initialises fields in the order written here).
        try_pin_init!(Self {
            irq_dev,
            poll_queues,
            inline_sg,
            sg_chains_out: AtomicUsize::new(0),
            inner <- Opaque::try_ffi_init(move |slot: *mut bindings::blk_mq_tag_set| {
                let cmd_size = cmd_size.ok_or(code::EINVAL)?;
                if !valid {
                    return Err(code::EINVAL);
                }
                let data = data.into_foreign();
                // SAFETY: `slot` is valid for writes; an all-zero tag set is
                // the documented starting point (`memset` in C drivers).
                unsafe {
                    slot.write(pin_init::zeroed());
                    (*slot).ops = OpsTable::<T>::OPS;
                    (*slot).nr_hw_queues = nr_hw_queues;
                    (*slot).queue_depth = queue_depth;
                    (*slot).numa_node = bindings::NUMA_NO_NODE;
                    (*slot).cmd_size = cmd_size;
                    (*slot).nr_maps = nr_maps;
                    (*slot).driver_data = data;
                }
                // SAFETY: `slot` is an initialised tag set.
                let ret = to_result(unsafe { bindings::blk_mq_alloc_tag_set(slot) });
                if ret.is_err() {
                    // SAFETY: `data` came from `into_foreign` above and blk-mq
                    // did not keep the tag set.
                    drop(unsafe { T::QueueData::from_foreign(data) });
                }
                ret
            }),
            _p: PhantomData,
        })
    }

    pub(super) fn raw(&self) -> *mut bindings::blk_mq_tag_set {
        self.inner.get()
    }

    /// The shared queue data.
    pub fn queue_data(&self) -> QueueDataRef<'_, T> {
        // SAFETY: `driver_data` holds `into_foreign` data until `drop`
        // (type invariant), which cannot run while `self` is borrowed.
        unsafe { T::QueueData::borrow((*self.raw()).driver_data) }
    }
}

#[pinned_drop]
impl<T: Operations> PinnedDrop for TagSet<T> {
    fn drop(self: Pin<&mut Self>) {
        let set = self.raw();
        let out = self.sg_chains_out.load(Ordering::Relaxed);
        if out != 0 {
            pr_warn!("{} chained scatterlist tables not given back\n", out);
        }
        // SAFETY: allocated in `new` (type invariant); no disk uses it any
        // more (`GenDisk` holds an `Arc` on the tag set).
        unsafe {
            let data = (*set).driver_data;
            bindings::blk_mq_free_tag_set(set);
            drop(T::QueueData::from_foreign(data));
        }
    }
}

struct OpsTable<T>(PhantomData<T>);

impl<T: Operations> OpsTable<T> {
    const OPS: &'static bindings::blk_mq_ops = &bindings::blk_mq_ops {
        queue_rq: Some(Self::queue_rq),
        queue_rqs: if T::QUEUE_RQS {
            Some(Self::queue_rqs)
        } else {
            None
        },
        commit_rqs: Some(Self::commit_rqs),
        complete: Some(Self::complete),
        init_request: Some(Self::init_request),
        map_queues: Some(Self::map_queues),
        poll: Some(Self::poll),
        timeout: Some(Self::timeout),
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
        match T::queue_rq_or_reject(qd, hq, rq, last) {
            Ok(()) => Status::OK.as_raw(),
            // The handle (if any) is dropped without ending the request:
            // blk-mq owns it again, to end it or dispatch it anew.
            Err(r) => {
                if let Some(mut rq) = r.rq {
                    rq.release();
                }
                r.status.as_raw()
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
