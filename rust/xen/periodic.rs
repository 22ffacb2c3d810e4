// SPDX-License-Identifier: GPL-2.0

//! [`Periodic`]: a function called every so often in process context until
//! the handle is dropped (a self-requeueing `delayed_work`; the 7.3 kernel
//! crate's workqueue cannot cancel one, so it could not be stopped safely
//! before the module goes).

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    sync::Arc, //
};

use super::bindings;

/// Calls `f(&data)` every `period_ms` on the system workqueue. Dropping it
/// waits for a call in progress and stops the calls.
///
/// # Invariants
///
/// `work` came from `rxen_periodic_start` with a context pointer from
/// `Arc::into_raw(data)` that the work only borrows; `data` is that `Arc`,
/// given back in `drop` after `rxen_periodic_stop`, once no call can run.
pub struct Periodic<T: Send + Sync + 'static> {
    work: NonNull<bindings::rxen_periodic>,
    data: *const T,
}

// SAFETY: the handle only stops the work; `T` is `Send + Sync` and is only
// shared (`&T`) with the work.
unsafe impl<T: Send + Sync + 'static> Send for Periodic<T> {}
// SAFETY: see `Send`; `&Periodic` offers nothing.
unsafe impl<T: Send + Sync + 'static> Sync for Periodic<T> {}

impl<T: Send + Sync + 'static> Periodic<T> {
    /// Starts calling `F::call(&data)` every `period_ms` (first call after
    /// one period).
    pub fn start<F: PeriodicFn<T>>(data: Arc<T>, period_ms: u32) -> Result<Self> {
        let raw = Arc::into_raw(data);
        // SAFETY: `trampoline::<T, F>` takes a context made by
        // `Arc::into_raw` of an `Arc<T>`, which lives until `drop` stops the
        // work.
        let work = unsafe {
            bindings::rxen_periodic_start(
                Some(trampoline::<T, F>),
                raw.cast_mut().cast(),
                period_ms,
            )
        };
        match NonNull::new(work) {
            // INVARIANT: started with `raw`, kept until `drop`.
            Some(work) => Ok(Self { work, data: raw }),
            None => {
                // SAFETY: `raw` came from `Arc::into_raw` above and the work
                // was not started.
                drop(unsafe { Arc::from_raw(raw) });
                Err(ENOMEM)
            }
        }
    }
}

impl<T: Send + Sync + 'static> Drop for Periodic<T> {
    fn drop(&mut self) {
        // SAFETY: `work` is live (type invariant); after this returns no call
        // runs or is pending, so `data` can be given back.
        unsafe {
            bindings::rxen_periodic_stop(self.work.as_ptr());
            drop(Arc::from_raw(self.data));
        }
    }
}

/// What a [`Periodic`] calls (process context, may sleep).
pub trait PeriodicFn<T> {
    /// One call.
    fn call(data: &T);
}

/// # Safety
///
/// `ctx` must come from `Arc::<T>::into_raw` of an `Arc` alive during the
/// call.
unsafe extern "C" fn trampoline<T: Send + Sync + 'static, F: PeriodicFn<T>>(
    ctx: *mut kernel::ffi::c_void,
) {
    // SAFETY: per the function's contract (the `Periodic` keeps the `Arc`).
    let data = unsafe { &*ctx.cast_const().cast::<T>() };
    F::call(data);
}
