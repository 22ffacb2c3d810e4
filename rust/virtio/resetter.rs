// SPDX-License-Identifier: GPL-2.0

//! [`Resetter`]: a device reset on demand, for a driver that gives up on a
//! device that stopped answering.

use core::ptr::NonNull;

use kernel::{
    bindings,
    device, //
};

use super::{
    shim,
    Device,
    Reset, //
};

impl Device {
    /// A handle that can reset this device later, from process context
    /// outside the virtio core's callbacks (e.g. blk-mq's timeout work),
    /// for a driver that gives up on a device that stopped answering.
    pub fn resetter(&self) -> Resetter {
        let vdev = self.raw();
        // SAFETY: live device (type invariant); the reference taken here is
        // dropped by `Resetter::drop`.
        unsafe { bindings::get_device(shim::blkfront_rs_virtio_dev(vdev).cast()) };
        Resetter {
            // SAFETY: `raw` of a live device is not null.
            vdev: unsafe { NonNull::new_unchecked(vdev) },
        }
    }
}

/// Resets a virtio device on demand ([`Device::resetter`]).
///
/// # Invariants
///
/// `vdev` is a device with a reference held by this handle (it stays
/// allocated), bound to the driver whose data owns the handle: a driver
/// keeps it in its driver data (or in what that data owns), which
/// [`Registration`](super::Registration) drops before the device is unbound and its transport
/// unmapped. A handle must not be stored anywhere else.
pub struct Resetter {
    vdev: NonNull<shim::virtio_device>,
}

// SAFETY: the handle is a counted reference to a device; resetting it from
// any thread is what the virtio core does too.
unsafe impl Send for Resetter {}
// SAFETY: `reset` takes `&self` and the virtio core serialises the reset
// against the device's interrupts itself.
unsafe impl Sync for Resetter {}

impl Resetter {
    /// Reset the device now: its virtqueues are broken first (from then on
    /// no used entry is read and nothing can be added: adding fails with
    /// `EIO`), the callbacks already running are waited for, then the
    /// device is reset (`virtio_reset_device`): it stops using every
    /// buffer it was given. So no request ends, and no used entry is read,
    /// until the device is known to be reset. The virtqueues stay, with
    /// what was added to them: take it back with
    /// [`BlkVq::take_back_after_reset`](super::blk::BlkVq::take_back_after_reset). Process context; may sleep.
    pub fn reset(&self) -> Reset {
        // SAFETY: the device is alive and bound to our driver (type
        // invariant); the caller is in process context (as documented).
        unsafe { shim::blkfront_rs_virtio_fence_and_reset(self.vdev.as_ptr()) };
        Reset(())
    }
}

impl Resetter {
    /// The generic device (for `dev_*!` messages).
    pub fn as_dev(&self) -> &device::Device {
        // SAFETY: `&vdev->dev` lives as long as the reference this handle
        // holds (type invariant).
        unsafe {
            device::Device::from_raw(
                shim::blkfront_rs_virtio_dev(self.vdev.as_ptr()).cast::<bindings::device>(),
            )
        }
    }
}

impl Drop for Resetter {
    fn drop(&mut self) {
        // SAFETY: the reference taken by `Device::resetter` (type invariant).
        unsafe { bindings::put_device(shim::blkfront_rs_virtio_dev(self.vdev.as_ptr()).cast()) };
    }
}
