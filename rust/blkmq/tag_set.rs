// SPDX-License-Identifier: GPL-2.0

//! [`TagSet`]: the `blk_mq_tag_set`, with the driver's [`Operations`]
//! as its C operations table.

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
    pub(super) poll_queues: u32,
    /// Device whose interrupt affinity maps CPUs to queues, or null for
    /// blk-mq's default spread. Outlives the tag set (see `with_irq_affinity`).
    pub(super) irq_dev: *mut bindings::device,
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
        // Poll queues only for a driver that reaps them.
        let valid = nr_hw_queues != 0
            && queue_depth != 0
            && poll_queues < nr_hw_queues
            && (poll_queues == 0 || T::HAS_POLL);
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
                    (*slot).ops = operations::OpsTable::<T>::OPS;
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
