// SPDX-License-Identifier: GPL-2.0

//! Event channels: allocation for a xenbus device, binding to an irq
//! handler with late EOI, notifying the backend.

use kernel::{
    error::to_result,
    prelude::*,
    sync::Arc, //
};

use super::{
    bindings,
    xenbus::Device, //
};

/// An unbound event channel allocated for a device's backend.
///
/// # Invariants
///
/// `port` was allocated by `xenbus_alloc_evtchn()` for `dev` and is freed on
/// drop unless [`EventChannel::bind`] consumed it.
pub struct EventChannel {
    port: u32,
    dev: *mut bindings::xenbus_device,
}

impl EventChannel {
    /// `xenbus_alloc_evtchn()`.
    pub fn alloc(dev: &Device) -> Result<Self> {
        let mut port = 0u32;
        // SAFETY: `dev` is live; `port` is valid for writes.
        to_result(unsafe { bindings::rxen_xenbus_alloc_evtchn(dev.raw(), &mut port) })?;
        Ok(Self {
            port,
            dev: dev.raw(),
        })
    }

    /// Binds the channel to `T::handle` with late EOI
    /// (`bind_evtchn_to_irqhandler_lateeoi`); `data` is passed to every
    /// call. The channel is closed when the returned binding is dropped.
    pub fn bind<T: Handler>(self, name: &'static CStr, data: Arc<T>) -> Result<BoundIrq<T>> {
        let port = self.port;
        let dev_id = Arc::as_ptr(&data).cast_mut().cast::<core::ffi::c_void>();
        // SAFETY: `dev_id` stays valid while the binding exists (the
        // `BoundIrq` holds `data` and unbinds before dropping it); `name` is
        // static.
        let r = unsafe {
            bindings::rxen_bind_evtchn_to_irqhandler_lateeoi(
                port,
                Some(irq_callback::<T>),
                name.as_char_ptr(),
                dev_id,
            )
        };
        if r <= 0 {
            // `self` drops here and frees the port.
            return Err(if r < 0 { Error::from_errno(r) } else { EINVAL });
        }
        core::mem::forget(self);
        Ok(BoundIrq {
            irq: r as u32,
            port,
            data,
        })
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: by the type invariant the port is ours and unbound; the
        // device outlives its event channels (they are released before
        // remove returns).
        unsafe { bindings::rxen_xenbus_free_evtchn(self.dev, self.port) };
    }
}

/// How the handler acknowledges an event (late EOI).
pub enum Eoi {
    /// Work was done: `xen_irq_lateeoi(irq, 0)`.
    Done,
    /// Nothing to do: `xen_irq_lateeoi(irq, XEN_EOI_FLAG_SPURIOUS)`.
    Spurious,
    /// No EOI at all: the channel stays masked (device in error state).
    None,
}

/// Interrupt handler of an event channel (hard irq context).
pub trait Handler: Send + Sync + 'static {
    /// Handles an event; the return value decides the EOI.
    fn handle(&self) -> Eoi;
}

/// An event channel bound to an irq handler.
///
/// # Invariants
///
/// `irq` is bound with `data` as `dev_id`; unbound (which also closes the
/// event channel) on drop, before `data` is released.
pub struct BoundIrq<T: Handler> {
    irq: u32,
    port: u32,
    data: Arc<T>,
}

impl<T: Handler> BoundIrq<T> {
    /// The event channel port.
    pub fn port(&self) -> u32 {
        self.port
    }

    /// A handle to notify the backend through this channel.
    pub fn notifier(&self) -> Notifier {
        Notifier(self.port)
    }
}

impl<T: Handler> Drop for BoundIrq<T> {
    fn drop(&mut self) {
        let dev_id = Arc::as_ptr(&self.data)
            .cast_mut()
            .cast::<core::ffi::c_void>();
        // SAFETY: by the type invariant `irq` is bound with `dev_id`; after
        // this no handler runs any more.
        unsafe { bindings::rxen_unbind_from_irqhandler(self.irq, dev_id) };
    }
}

/// Notifies the backend through an event channel port
/// (`notify_remote_via_evtchn`: the hypercall alone, without
/// `notify_remote_via_irq`'s lookup of the irq's port). Copyable. Xen
/// refuses an event on a closed port, and the other end of a port reused
/// meanwhile gets a spurious event, which every Xen driver must take; a
/// driver that notifies outside its locks keeps a copy from outliving
/// the binding (xen-blkfront: blk-mq's RCU dispatch section, see its
/// `Ring::with_state_then_notify`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Notifier(u32);

impl Notifier {
    /// Whether this notifier names a channel (the default names none and
    /// does nothing: Xen never hands out port 0).
    pub fn is_set(&self) -> bool {
        self.0 != 0
    }

    /// Sends an event to the backend.
    pub fn notify(&self) {
        if !self.is_set() {
            return;
        }
        // SAFETY: `EVTCHNOP_send` takes a port number by value; any port,
        // ours or not, is checked by Xen (see the type's doc).
        unsafe { bindings::rxen_notify_remote_via_evtchn(self.0) }
    }
}

/// The irq handler registered by [`EventChannel::bind`].
///
/// # Safety
///
/// Called by the irq core with the `dev_id` given to `bind`, while the
/// binding exists.
unsafe extern "C" fn irq_callback<T: Handler>(
    irq: kernel::ffi::c_int,
    dev_id: *mut core::ffi::c_void,
) -> bindings::irqreturn_t {
    // SAFETY: `dev_id` is the `Arc<T>` pointer registered in `bind`, kept
    // alive by the `BoundIrq` until after unbinding.
    let data = unsafe { &*dev_id.cast::<T>() };
    let irq = irq as u32;
    match data.handle() {
        // SAFETY: `irq` is the irq being handled.
        Eoi::Done => unsafe { bindings::rxen_irq_lateeoi(irq, false) },
        // SAFETY: as above.
        Eoi::Spurious => unsafe { bindings::rxen_irq_lateeoi(irq, true) },
        Eoi::None => {}
    }
    bindings::irqreturn_IRQ_HANDLED
}
