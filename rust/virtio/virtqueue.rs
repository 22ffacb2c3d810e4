// SPDX-License-Identifier: GPL-2.0

//! Virtqueues: exposing buffers, notifying the device, taking back used
//! buffers. Split out of virtio.rs; the lifetime rules are in its
//! [`Registration`](super::Registration) docs.

use core::{
    ffi::c_void,
    ptr::NonNull, //
};

use kernel::{
    bindings,
    prelude::*, //
};

use super::{
    shim,
    Reset, //
};

/// A virtqueue. Operations other than [`Notifier::notify`] must be
/// serialised by the driver (keep it in a lock).
///
/// # Invariants
///
/// `vq` is a virtqueue found by
/// [`Device::find_vqs`](super::Device::find_vqs), alive until the device's
/// virtqueues are deleted, which [`Registration`](super::Registration) does
/// only after the driver stopped using it: after `remove` or a failed probe
/// (the driver data, and with it every `Virtqueue`, is dropped next), or after
/// a freeze once the driver handed every `Virtqueue` back
/// ([`Driver::surrender_vqs`](super::Driver::surrender_vqs)).
pub struct Virtqueue {
    vq: NonNull<shim::virtqueue>,
}

// SAFETY: virtqueue functions may be called from any CPU when serialised.
unsafe impl Send for Virtqueue {}

impl Virtqueue {
    /// Wraps a virtqueue `find_vqs` returned (see the type invariants).
    pub(super) fn new(vq: NonNull<shim::virtqueue>) -> Self {
        Self { vq }
    }

    fn raw(&self) -> *mut shim::virtqueue {
        self.vq.as_ptr()
    }

    /// Free descriptors.
    pub fn num_free(&self) -> u32 {
        // SAFETY: live virtqueue.
        unsafe { shim::blkfront_rs_vq_num_free(self.raw()) }
    }

    /// Expose a buffer chain: `sgs[..out]` device-readable, `sgs[out..]`
    /// device-writable, identified by `token` (returned by `get_buf`).
    ///
    /// # Safety
    ///
    /// Every scatterlist in `sgs` must be valid for the call (the ring
    /// copies their addresses and lengths into its descriptors and keeps
    /// what unmapping needs in its own records, so they may live on the
    /// caller's stack, as upstream virtio_blk's header entries do); the
    /// memory they describe must stay valid and untouched by the CPU until
    /// `token` comes back from [`Virtqueue::get_buf`] or the device is
    /// reset.
    pub(crate) unsafe fn add_sgs(
        &mut self,
        sgs: &mut [*mut bindings::scatterlist],
        out: u32,
        token: NonNull<c_void>,
    ) -> Result {
        let in_ = sgs.len() as u32 - out;
        // SAFETY: live virtqueue, serialised by `&mut self`; see the
        // function's contract for the buffers.
        kernel::error::to_result(unsafe {
            shim::blkfront_rs_vq_add_sgs(
                self.raw(),
                sgs.as_mut_ptr().cast(),
                out,
                in_,
                token.as_ptr(),
            )
        })
    }

    /// Prepare a notification; `Some` when the device wants one. Call
    /// [`Notifier::notify`] after dropping the lock.
    pub fn kick_prepare(&mut self) -> Option<Notifier> {
        // SAFETY: live virtqueue, serialised by `&mut self`.
        if unsafe { shim::blkfront_rs_vq_kick_prepare(self.raw()) } {
            Some(Notifier { vq: self.vq })
        } else {
            None
        }
    }

    /// Take back a used buffer's token and the length the device wrote.
    pub(crate) fn get_buf(&mut self) -> Option<(NonNull<c_void>, u32)> {
        let mut len = 0u32;
        // SAFETY: live virtqueue, serialised by `&mut self`.
        let t = unsafe { shim::blkfront_rs_vq_get_buf(self.raw(), &mut len) };
        NonNull::new(t).map(|t| (t, len))
    }

    /// Disable used-buffer interrupts.
    pub fn disable_cb(&mut self) {
        // SAFETY: live virtqueue, serialised by `&mut self`.
        unsafe { shim::blkfront_rs_vq_disable_cb(self.raw()) }
    }

    /// After a reset: take back the token of one buffer the device still
    /// held (`virtqueue_detach_unused_buf`, which also frees the ring's
    /// bookkeeping for it, e.g. an indirect descriptor table).
    pub(crate) fn detach_unused_buf(&mut self, _reset: &Reset) -> Option<NonNull<c_void>> {
        // SAFETY: live virtqueue, serialised by `&mut self`; the device was
        // reset (`Reset`), so the queue is not active.
        NonNull::new(unsafe { shim::blkfront_rs_vq_detach_unused_buf(self.raw()) })
    }

    /// Re-enable used-buffer interrupts; false when buffers arrived
    /// meanwhile (process them and try again).
    pub fn enable_cb(&mut self) -> bool {
        // SAFETY: live virtqueue, serialised by `&mut self`.
        unsafe { shim::blkfront_rs_vq_enable_cb(self.raw()) }
    }
}

/// A pending notification of a virtqueue, to be sent outside its lock.
///
/// # Invariants
///
/// `vq` is alive (from a live [`Virtqueue`], used in the same call chain:
/// a blk-mq dispatch, which [`Driver::freeze`](super::Driver::freeze) waits for, or probe).
#[must_use = "a prepared kick must be sent"]
pub struct Notifier {
    vq: NonNull<shim::virtqueue>,
}

impl Notifier {
    /// `virtqueue_notify`: false if the device is broken.
    pub fn notify(self) -> bool {
        // SAFETY: live virtqueue (type invariant); notify needs no lock.
        unsafe { shim::blkfront_rs_vq_notify(self.vq.as_ptr()) }
    }
}
