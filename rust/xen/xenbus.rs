// SPDX-License-Identifier: GPL-2.0

//! xenbus frontend drivers, devices and xenstore access.
//!
//! A [`Driver`] is registered with [`Registration`] (pinned, unregistered on
//! drop). Its per-device data is any [`ForeignOwnable`] (typically an
//! `Arc`), stored as the device's driver data between `probe` and `remove`.

use core::{
    ffi::c_void,
    fmt,
    marker::PhantomData,
    ptr, //
};

use kernel::{
    error::to_result,
    prelude::*,
    str::CString,
    types::{
        ForeignOwnable,
        Opaque, //
    }, //
};

use super::bindings;

/// xenbus states (`enum xenbus_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// `XenbusStateUnknown`.
    Unknown,
    /// `XenbusStateInitialising`.
    Initialising,
    /// `XenbusStateInitWait`: the backend waits for the frontend's details.
    InitWait,
    /// `XenbusStateInitialised`.
    Initialised,
    /// `XenbusStateConnected`.
    Connected,
    /// `XenbusStateClosing`.
    Closing,
    /// `XenbusStateClosed`.
    Closed,
    /// `XenbusStateReconfiguring`.
    Reconfiguring,
    /// `XenbusStateReconfigured`.
    Reconfigured,
    /// Anything else (a value outside the enum, from xenstore).
    Other(u32),
}

impl State {
    /// From the C value.
    pub fn from_raw(v: u32) -> Self {
        match v {
            0 => Self::Unknown,
            1 => Self::Initialising,
            2 => Self::InitWait,
            3 => Self::Initialised,
            4 => Self::Connected,
            5 => Self::Closing,
            6 => Self::Closed,
            7 => Self::Reconfiguring,
            8 => Self::Reconfigured,
            v => Self::Other(v),
        }
    }

    /// To the C value.
    pub fn to_raw(self) -> u32 {
        match self {
            Self::Unknown => 0,
            Self::Initialising => 1,
            Self::InitWait => 2,
            Self::Initialised => 3,
            Self::Connected => 4,
            Self::Closing => 5,
            Self::Closed => 6,
            Self::Reconfiguring => 7,
            Self::Reconfigured => 8,
            Self::Other(v) => v,
        }
    }
}

/// A xenbus device (`struct xenbus_device`), borrowed for the duration of a
/// driver callback.
///
/// # Invariants
///
/// `self.0` is a live `struct xenbus_device` bound to (or being probed by)
/// a driver registered through [`Registration`].
#[repr(transparent)]
pub struct Device(Opaque<bindings::xenbus_device>);

// SAFETY: the xenbus C API may be called on a device from any thread; the
// fields read here (`nodename`, `otherend`, `otherend_id`) are stable while
// the device is bound.
unsafe impl Sync for Device {}

impl Device {
    /// # Safety
    ///
    /// `ptr` must point to a live xenbus device for the lifetime `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::xenbus_device) -> &'a Self {
        // SAFETY: `Device` is a transparent wrapper; the caller guarantees
        // validity for `'a`.
        unsafe { &*ptr.cast::<Self>() }
    }

    fn as_raw(&self) -> *mut bindings::xenbus_device {
        self.0.get()
    }

    /// The device's own xenstore directory (e.g. `device/vbd/51712`).
    pub fn nodename(&self) -> &CStr {
        // SAFETY: by the type invariant the device is live; `nodename` is a
        // NUL-terminated string owned by the device while it is bound.
        unsafe { CStr::from_char_ptr(bindings::rxen_dev_nodename(self.as_raw())) }
    }

    /// The backend's xenstore directory.
    pub fn otherend(&self) -> &CStr {
        // SAFETY: as in `nodename`; `otherend` is set before `probe` and
        // stays valid while the device is bound.
        unsafe { CStr::from_char_ptr(bindings::rxen_dev_otherend(self.as_raw())) }
    }

    /// The backend's domain id.
    pub fn otherend_id(&self) -> u16 {
        // SAFETY: by the type invariant the device is live.
        let id = unsafe { bindings::rxen_dev_otherend_id(self.as_raw()) };
        u16::try_from(id).unwrap_or(u16::MAX)
    }

    /// Our (the frontend's) xenbus state.
    pub fn state(&self) -> State {
        // SAFETY: by the type invariant the device is live.
        let s = unsafe { bindings::rxen_dev_state(self.as_raw()) };
        State::from_raw(u32::try_from(s).unwrap_or(u32::MAX))
    }

    /// `xenbus_switch_state()`.
    pub fn switch_state(&self, state: State) -> Result {
        let raw = i32::try_from(state.to_raw()).map_err(|_| EINVAL)?;
        // SAFETY: by the type invariant the device is live.
        to_result(unsafe { bindings::rxen_xenbus_switch_state(self.as_raw(), raw) })
    }

    /// `xenbus_dev_fatal()`: logs, writes the error to xenstore and moves
    /// the device to Closing. May sleep.
    pub fn fatal(&self, err: Error, msg: fmt::Arguments<'_>) {
        let text = CString::try_from_fmt(msg);
        let p = match &text {
            Ok(s) => s.as_char_ptr(),
            Err(_) => c"(message lost: out of memory)".as_char_ptr(),
        };
        // SAFETY: the device is live; `p` is a NUL-terminated string that
        // outlives the call.
        unsafe { bindings::rxen_xenbus_dev_fatal(self.as_raw(), err.to_errno(), p) };
    }

    /// `xenbus_frontend_closed()`: switch to Closed and wake remove().
    pub fn frontend_closed(&self) {
        // SAFETY: by the type invariant the device is live.
        unsafe { bindings::rxen_xenbus_frontend_closed(self.as_raw()) };
    }

    /// The embedded `struct device` (e.g. the parent of a disk).
    pub fn as_device(&self) -> &kernel::device::Device {
        // SAFETY: by the type invariant the xenbus device, and so its
        // embedded `struct device`, is live for the borrow of `self`.
        unsafe { kernel::device::Device::from_raw(bindings::rxen_dev_device(self.as_raw()).cast()) }
    }

    pub(crate) fn raw(&self) -> *mut bindings::xenbus_device {
        self.as_raw()
    }
}

/// A xenbus frontend driver.
pub trait Driver {
    /// Per-device data, owned by the device between `probe` and `remove`.
    type Data: ForeignOwnable + Send + Sync + 'static;

    /// Driver name in sysfs.
    const NAME: &'static CStr;
    /// xenbus device type handled (e.g. `c"vbd"`).
    const DEVICE_TYPE: &'static CStr;

    /// A device of our type appeared.
    fn probe(dev: &Device) -> Result<Self::Data>;

    /// The backend changed state to `state`.
    fn otherend_changed(
        dev: &Device,
        data: <Self::Data as ForeignOwnable>::Borrowed<'_>,
        state: State,
    );

    /// The device is going away (or the driver is unloaded).
    fn remove(dev: &Device, data: Self::Data);

    /// The guest was restored (or migrated) and the device has a new
    /// backend: xenbus has put us back to Initialising and re-reads the
    /// backend's state after this returns (`xenbus_driver.resume`). The
    /// default keeps nothing: the driver sees the new backend's InitWait.
    fn resume(dev: &Device, data: <Self::Data as ForeignOwnable>::Borrowed<'_>) -> Result {
        let _ = (dev, data);
        Ok(())
    }
}

#[repr(C)]
struct DriverStorage {
    drv: bindings::xenbus_driver,
    ids: [bindings::xenbus_device_id; 2],
}

/// A registered xenbus frontend driver.
///
/// # Invariants
///
/// While `self` exists, `inner.drv` is registered with xenbus and points at
/// `inner.ids`; both stay at a fixed address (pinned).
#[pin_data(PinnedDrop)]
pub struct Registration<T: Driver> {
    #[pin]
    inner: Opaque<DriverStorage>,
    _p: PhantomData<T>,
}

// SAFETY: the registration is only touched at creation and drop; xenbus
// serialises the callbacks itself.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: no `&self` method touches the C structure.
unsafe impl<T: Driver> Sync for Registration<T> {}

impl<T: Driver> Registration<T> {
    /// Registers `T` with xenbus (`xenbus_register_frontend()`).
    pub fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(|slot: *mut DriverStorage| {
                // SAFETY: `slot` is valid for writes of a `DriverStorage`
                // and pinned; all-zero is a valid `xenbus_driver` and id.
                unsafe { ptr::write_bytes(slot, 0, 1) };
                let name = T::DEVICE_TYPE.to_bytes_with_nul();
                // SAFETY: `slot` is valid and initialised (zeroed) above.
                let ids = unsafe { &mut (*slot).ids };
                if name.len() > ids[0].devicetype.len() {
                    return Err(EINVAL);
                }
                for (d, s) in ids[0].devicetype.iter_mut().zip(name) {
                    *d = *s;
                }
                // SAFETY: `slot` is valid; the ids outlive the registration
                // (same allocation, pinned).
                unsafe {
                    (*slot).drv.ids = (*slot).ids.as_ptr();
                    (*slot).drv.name = T::NAME.as_char_ptr();
                    (*slot).drv.probe = Some(probe_callback::<T>);
                    (*slot).drv.otherend_changed = Some(otherend_changed_callback::<T>);
                    (*slot).drv.remove = Some(remove_callback::<T>);
                    (*slot).drv.resume = Some(resume_callback::<T>);
                    to_result(bindings::rxen_xenbus_register_frontend(&raw mut (*slot).drv))
                }
            }),
            _p: PhantomData,
        })
    }
}

#[pinned_drop]
impl<T: Driver> PinnedDrop for Registration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: by the type invariant the driver is registered.
        unsafe { bindings::rxen_xenbus_unregister_driver(&raw mut (*self.inner.get()).drv) };
    }
}

/// `xenbus_driver.probe` of `T`.
///
/// # Safety
///
/// Called by xenbus with a live device of our type.
unsafe extern "C" fn probe_callback<T: Driver>(
    dev: *mut bindings::xenbus_device,
    _id: *const bindings::xenbus_device_id,
) -> kernel::ffi::c_int {
    // SAFETY: xenbus calls probe with a live device.
    let d = unsafe { Device::from_raw(dev) };
    match T::probe(d) {
        Ok(data) => {
            let p = data.into_foreign();
            // SAFETY: the device is live; `p` is owned by the device until
            // `remove_callback` takes it back.
            unsafe { bindings::rxen_dev_set_drvdata(dev, p.cast()) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `xenbus_driver.otherend_changed` of `T`.
///
/// # Safety
///
/// Called by xenbus with a live device bound to `T` (or being probed).
unsafe extern "C" fn otherend_changed_callback<T: Driver>(
    dev: *mut bindings::xenbus_device,
    state: bindings::xenbus_state,
) {
    // SAFETY: xenbus calls this with a live device.
    let d = unsafe { Device::from_raw(dev) };
    // SAFETY: the device is live.
    let p: *mut c_void = unsafe { bindings::rxen_dev_get_drvdata(dev) }.cast();
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from `into_foreign` in probe and is only reclaimed in
    // remove, which xenbus does not run concurrently with this callback.
    let data = unsafe { T::Data::borrow(p) };
    #[expect(clippy::unnecessary_cast, reason = "enum width depends on bindgen")]
    T::otherend_changed(d, data, State::from_raw(state as u32));
}

/// `xenbus_driver.resume` of `T`.
///
/// # Safety
///
/// Called by xenbus with a live device bound to `T`.
unsafe extern "C" fn resume_callback<T: Driver>(
    dev: *mut bindings::xenbus_device,
) -> kernel::ffi::c_int {
    // SAFETY: xenbus calls resume with a live device.
    let d = unsafe { Device::from_raw(dev) };
    // SAFETY: the device is live.
    let p: *mut c_void = unsafe { bindings::rxen_dev_get_drvdata(dev) }.cast();
    if p.is_null() {
        return 0;
    }
    // SAFETY: `p` came from `into_foreign` in probe and is only reclaimed in
    // remove, which xenbus does not run concurrently with resume.
    let data = unsafe { T::Data::borrow(p) };
    match T::resume(d, data) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `xenbus_driver.remove` of `T`.
///
/// # Safety
///
/// Called by xenbus with a live device bound to `T`, once.
unsafe extern "C" fn remove_callback<T: Driver>(dev: *mut bindings::xenbus_device) {
    // SAFETY: xenbus calls remove with a live device.
    let d = unsafe { Device::from_raw(dev) };
    // SAFETY: the device is live.
    let p: *mut c_void = unsafe { bindings::rxen_dev_get_drvdata(dev) }.cast();
    if p.is_null() {
        return;
    }
    // SAFETY: the device is live; clear before giving the data back.
    unsafe { bindings::rxen_dev_set_drvdata(dev, ptr::null_mut()) };
    // SAFETY: `p` came from `into_foreign` in probe; this is the only place
    // it is reclaimed.
    let data = unsafe { T::Data::from_foreign(p) };
    T::remove(d, data);
}

/// A xenstore transaction, or none ([`Xbt::NIL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Xbt(u32);

impl Xbt {
    /// No transaction (`XBT_NIL`).
    pub const NIL: Xbt = Xbt(0);
}

/// `xenbus_read()`: the node's bytes (without the NUL), or `None` if the
/// node does not exist.
pub fn read(xbt: Xbt, dir: &CStr, node: &CStr) -> Result<Option<KVec<u8>>> {
    let mut out: *mut kernel::ffi::c_char = ptr::null_mut();
    let mut len: kernel::ffi::c_uint = 0;
    // SAFETY: `dir`/`node` are NUL-terminated; `out`/`len` are valid.
    let err = unsafe {
        bindings::rxen_xenbus_read(
            xbt.0,
            dir.as_char_ptr(),
            node.as_char_ptr(),
            &mut out,
            &mut len,
        )
    };
    if err == -(kernel::bindings::ENOENT as i32) {
        return Ok(None);
    }
    to_result(err)?;
    if out.is_null() {
        return Err(EIO);
    }
    let n = usize::try_from(len).unwrap_or(0);
    // SAFETY: on success `out` holds `len` bytes (plus a NUL) that we own.
    let bytes = unsafe { core::slice::from_raw_parts(out.cast::<u8>(), n) };
    let mut v = KVec::new();
    let r = v.extend_from_slice(bytes, GFP_KERNEL);
    // SAFETY: `out` was allocated by xenbus_read with kmalloc.
    unsafe { bindings::rxen_kfree(out.cast()) };
    r?;
    Ok(Some(v))
}

/// `xenbus_write()`.
pub fn write(xbt: Xbt, dir: &CStr, node: &CStr, value: &CStr) -> Result {
    // SAFETY: all strings are NUL-terminated and outlive the call.
    to_result(unsafe {
        bindings::rxen_xenbus_write(
            xbt.0,
            dir.as_char_ptr(),
            node.as_char_ptr(),
            value.as_char_ptr(),
        )
    })
}

/// `xenbus_rm()`: removes `dir/node` and everything below it. A node that
/// does not exist is not an error.
pub fn rm(xbt: Xbt, dir: &CStr, node: &CStr) -> Result {
    // SAFETY: both strings are NUL-terminated and outlive the call.
    let err = unsafe { bindings::rxen_xenbus_rm(xbt.0, dir.as_char_ptr(), node.as_char_ptr()) };
    if err == -(kernel::bindings::ENOENT as i32) {
        return Ok(());
    }
    to_result(err)
}

/// `xenbus_printf()`: writes the formatted `value`.
pub fn printf(xbt: Xbt, dir: &CStr, node: &CStr, value: fmt::Arguments<'_>) -> Result {
    let v = CString::try_from_fmt(value)?;
    write(xbt, dir, node, &v)
}

/// Runs `f` inside a xenstore transaction, retrying the whole transaction
/// when xenstore reports a conflict (`-EAGAIN`). If `f` fails the
/// transaction is aborted and `f`'s error returned.
pub fn transaction<R>(mut f: impl FnMut(Xbt) -> Result<R>) -> Result<R> {
    loop {
        let mut id: u32 = 0;
        // SAFETY: `id` is valid for writes.
        to_result(unsafe { bindings::rxen_xenbus_transaction_start(&mut id) })?;
        let xbt = Xbt(id);
        match f(xbt) {
            Ok(r) => {
                // SAFETY: `id` is an open transaction.
                let err = unsafe { bindings::rxen_xenbus_transaction_end(id, false) };
                if err == -(kernel::bindings::EAGAIN as i32) {
                    continue;
                }
                to_result(err)?;
                return Ok(r);
            }
            Err(e) => {
                // SAFETY: `id` is an open transaction.
                unsafe { bindings::rxen_xenbus_transaction_end(id, true) };
                return Err(e);
            }
        }
    }
}
