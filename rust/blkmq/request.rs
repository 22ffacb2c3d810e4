// SPDX-License-Identifier: GPL-2.0

//! [`Request`]: the driver's handle on one block request, its data and
//! scatterlist.

use super::*;

/// Offset of the scatterlist behind `RequestData` in the PDU.
pub(super) const fn sg_offset<R>() -> usize {
    let a = align_of::<bindings::scatterlist>();
    size_of::<R>().div_ceil(a) * a
}

/// Owned handle on one request of a driver `T`.
///
/// # Invariants
///
/// `ptr` points to a live `struct request` allocated by a tag set of
/// `T` (so its PDU is a zeroed-then-driver-owned `T::RequestData` followed by
/// the tag set's scatterlist) that the block layer handed to the driver and
/// that has not been ended; at most one `Request` exists per request.
pub struct Request<T: Operations> {
    ptr: NonNull<bindings::request>,
    _p: PhantomData<T>,
}

// SAFETY: A request may be queued on one CPU and completed on another; the
// handle is unique, and `T::RequestData: Send`.
unsafe impl<T: Operations> Send for Request<T> {}

impl<T: Operations> Request<T> {
    /// # Safety
    ///
    /// `ptr` must satisfy the type invariants, and the caller gives up its
    /// own handle on the request.
    pub(super) unsafe fn from_ptr(ptr: *mut bindings::request) -> Self {
        Self {
            // SAFETY: blk-mq never passes a null request.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
            _p: PhantomData,
        }
    }

    pub(super) fn raw(&self) -> *mut bindings::request {
        self.ptr.as_ptr()
    }

    /// Give the handle away as an opaque token (e.g. a virtqueue cookie).
    pub fn into_raw(self) -> NonNull<c_void> {
        self.ptr.cast()
    }

    /// Take a handle back from [`Request::into_raw`].
    ///
    /// # Safety
    ///
    /// `token` must come from `into_raw` on a `Request<T>` and be used once.
    pub unsafe fn from_raw(token: NonNull<c_void>) -> Self {
        // INVARIANT: the token was a valid `Request<T>` handle, given back once.
        Self {
            ptr: token.cast(),
            _p: PhantomData,
        }
    }

    /// The operation.
    pub fn op(&self) -> ReqOp {
        // SAFETY: `self.raw()` is a live request (type invariant).
        let flags = unsafe { (*self.raw()).cmd_flags };
        let op = flags & ((1u32 << bindings::REQ_OP_BITS) - 1);
        match op {
            bindings::req_op_REQ_OP_READ => ReqOp::Read,
            bindings::req_op_REQ_OP_WRITE => ReqOp::Write,
            bindings::req_op_REQ_OP_FLUSH => ReqOp::Flush,
            bindings::req_op_REQ_OP_DISCARD => ReqOp::Discard,
            bindings::req_op_REQ_OP_SECURE_ERASE => ReqOp::SecureErase,
            bindings::req_op_REQ_OP_WRITE_ZEROES => ReqOp::WriteZeroes,
            bindings::req_op_REQ_OP_DRV_IN => ReqOp::DrvIn,
            bindings::req_op_REQ_OP_DRV_OUT => ReqOp::DrvOut,
            other => ReqOp::Other(other),
        }
    }

    /// `REQ_NOUNMAP`: a write-zeroes that must not deallocate.
    pub fn no_unmap(&self) -> bool {
        // SAFETY: `self.raw()` is a live request (type invariant).
        let flags = unsafe { (*self.raw()).cmd_flags };
        flags & (1u32 << bindings::req_flag_bits___REQ_NOUNMAP) != 0
    }

    /// `REQ_FUA`: the data must be on stable storage when the request
    /// completes (only sent when the queue advertises FUA).
    pub fn is_fua(&self) -> bool {
        // SAFETY: `self.raw()` is a live request (type invariant).
        let flags = unsafe { (*self.raw()).cmd_flags };
        flags & (1u32 << bindings::req_flag_bits___REQ_FUA) != 0
    }

    /// First sector (512 bytes) of the request (`blk_rq_pos`).
    pub fn sector(&self) -> u64 {
        // SAFETY: `self.raw()` is a live request (type invariant).
        unsafe { (*self.raw()).__sector }
    }

    /// Length in bytes (`blk_rq_bytes`).
    pub fn bytes(&self) -> u32 {
        // SAFETY: `self.raw()` is a live request (type invariant).
        unsafe { (*self.raw()).__data_len }
    }

    /// Length in 512-byte sectors (`blk_rq_sectors`).
    pub fn sectors(&self) -> u32 {
        self.bytes() >> 9
    }

    /// I/O priority (`req_get_ioprio`).
    pub fn ioprio(&self) -> u16 {
        // SAFETY: `self.raw()` is a live request (type invariant), its `bio`
        // null or live.
        unsafe {
            let bio = (*self.raw()).bio;
            if bio.is_null() {
                0
            } else {
                (*bio).bi_ioprio
            }
        }
    }

    /// Number of data segments (`blk_rq_nr_phys_segments`).
    pub fn nr_phys_segments(&self) -> u32 {
        // SAFETY: `self.raw()` is a live request (type invariant).
        u32::from(unsafe { (*self.raw()).nr_phys_segments })
    }

    /// The driver's per-request data.
    pub fn data(&self) -> &T::RequestData {
        // SAFETY: the PDU starts with an initialised `T::RequestData`
        // (zeroed in `init_request`), owned by this unique handle.
        unsafe { &*bindings::blk_mq_rq_to_pdu(self.raw()).cast::<T::RequestData>() }
    }

    /// The driver's per-request data, mutably.
    pub fn data_mut(&mut self) -> &mut T::RequestData {
        // SAFETY: as in `data`; `&mut self` makes the access exclusive.
        unsafe { &mut *bindings::blk_mq_rq_to_pdu(self.raw()).cast::<T::RequestData>() }
    }

    /// The request's scatterlist (the tag set's `max_segments` entries,
    /// filled by [`Request::map_sg`]). For rust/ abstractions that hand it
    /// to hardware.
    pub fn sg_ptr(&self) -> *mut bindings::scatterlist {
        // SAFETY: the PDU is `cmd_size` bytes: `T::RequestData` padded to
        // `sg_offset`, then the scatterlist (see `TagSet::new`).
        unsafe {
            bindings::blk_mq_rq_to_pdu(self.raw())
                .cast::<u8>()
                .add(sg_offset::<T::RequestData>())
                .cast()
        }
    }

    /// Pointer to the driver data, for rust/ abstractions that hand parts of
    /// it to hardware (headers, status bytes).
    pub fn data_ptr(&self) -> *mut T::RequestData {
        // SAFETY: `self.raw()` is a live request (type invariant).
        unsafe { bindings::blk_mq_rq_to_pdu(self.raw()).cast() }
    }

    /// Map the data to the scatterlist (`blk_rq_map_sg`); returns the number
    /// of entries used (0 for a request without data).
    pub fn map_sg(&mut self) -> Result<u32> {
        if self.nr_phys_segments() == 0 {
            return Ok(0);
        }
        let mut last: *mut bindings::scatterlist = core::ptr::null_mut();
        // SAFETY: the request is live and owned; the scatterlist has
        // `max_segments` >= `nr_phys_segments` entries, initialised with
        // `sg_init_table` in `init_request`.
        let n = unsafe { bindings::__blk_rq_map_sg(self.raw(), self.sg_ptr(), &mut last) };
        u32::try_from(n).map_err(|_| code::EIO)
    }

    /// Give the request back to blk-mq from `queue_rq_or_reject` with
    /// `status` (blk-mq requeues or ends it; the driver must not).
    pub fn reject(self, status: Status) -> Rejected<T> {
        Rejected {
            rq: Some(self),
            status,
        }
    }

    /// Mark the request as started (`blk_mq_start_request`), before handing
    /// it to the device.
    pub fn start(&mut self) {
        // SAFETY: the request is live and owned.
        unsafe { bindings::blk_mq_start_request(self.raw()) }
    }

    /// The device is done with the request: schedule [`Operations::complete`]
    /// (`blk_mq_complete_request`, may run it on the submitting CPU).
    pub fn complete(self) {
        // SAFETY: the request is live; ownership passes to blk-mq, which
        // gives it back in `complete_callback`.
        unsafe { bindings::blk_mq_complete_request(self.raw()) };
    }

    /// Give the request back to blk-mq to be dispatched again later
    /// (`blk_mq_requeue_request`, without kicking): it waits on the
    /// queue's requeue list until [`GenDisk::kick_requeue_list`].
    pub fn requeue(self) {
        // SAFETY: the request is live and owned (started by the driver);
        // this consumes the handle, blk-mq owns the request again.
        unsafe { bindings::blk_mq_requeue_request(self.raw(), false) };
    }

    /// End the request with `status` (`blk_mq_end_request`).
    pub fn end(self, status: Status) {
        // SAFETY: the request is live and owned; this consumes the handle.
        unsafe { bindings::blk_mq_end_request(self.raw(), status.as_raw()) };
    }
}
