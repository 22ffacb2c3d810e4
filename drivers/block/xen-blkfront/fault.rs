// SPDX-License-Identifier: GPL-2.0

//! Test-only fault injection (debugfs `xen_blkfront_rs-<disk>/inject`,
//! only in kernels with `CONFIG_FAULT_INJECTION`): writing `break` breaks
//! every ring of the disk as a bad backend response would; writing
//! `hold-reconnect` keeps the next reconnect of a live disk (after a
//! resume) from happening, as if the new backend never came: the disk then
//! stays in the reconnect window until it is removed; writing
//! `resend-batch-end` sends the next 8 requests that end a batch with
//! earlier requests not yet published out again as bios, as a request too
//! wide for a narrower backend is (the path where the batch must still be
//! published); writing `grant-delay` has the next request whose pages
//! are granted while its ring has no room for it wait 2 s before it goes
//! back unsent (busy: `queue_rq` may not sleep), the window a backend that
//! maps the grant references it predicts needs (blkif-backend's
//! map-predicted-grants). The driver asks the ring for room before it
//! grants, so this never happens but in a driver that grants first.

#[cfg(CONFIG_FAULT_INJECTION)]
use core::sync::atomic::{
    AtomicBool,
    AtomicU32,
    Ordering, //
};

#[cfg(CONFIG_FAULT_INJECTION)]
use kernel::{
    prelude::*,
    sync::Arc, //
};

#[cfg(CONFIG_FAULT_INJECTION)]
use crate::ring::{
    BlockOps,
    Ring, //
};

/// `hold-reconnect` was written: the next reconnect is not made.
#[cfg(CONFIG_FAULT_INJECTION)]
static HOLD_NEXT_RECONNECT: AtomicBool = AtomicBool::new(false);

/// Requests `resend-batch-end` arms: enough for a few batches of a short
/// fio run, few enough that the re-sent bios' own requests are queued
/// normally soon.
#[cfg(CONFIG_FAULT_INJECTION)]
const RESEND_BATCH_ENDS_ARMED: u32 = 8;

/// Batch ends still to be sent again as bios (`resend-batch-end`).
#[cfg(CONFIG_FAULT_INJECTION)]
static RESEND_BATCH_ENDS: AtomicU32 = AtomicU32::new(0);

/// `grant-delay` was written: the next request granted without room
/// waits.
#[cfg(CONFIG_FAULT_INJECTION)]
static GRANT_DELAY: AtomicBool = AtomicBool::new(false);

/// A request's pages were just granted: if `grant-delay` is armed and
/// `no_room()` (asked only then: it takes the ring lock) says the ring
/// cannot take it, wait 2 s (once).
pub(crate) fn delay_after_grant(no_room: impl FnOnce() -> bool) {
    #[cfg(CONFIG_FAULT_INJECTION)]
    if GRANT_DELAY.load(Ordering::Relaxed) && no_room() && GRANT_DELAY.swap(false, Ordering::AcqRel)
    {
        // `udelay` takes at most 5 ms (MAX_UDELAY_MS) at a time.
        for _ in 0..400 {
            kernel::time::delay::udelay(kernel::time::Delta::from_millis(5));
        }
    }
    #[cfg(not(CONFIG_FAULT_INJECTION))]
    let _ = no_room;
}

/// Whether fault injection has this request, the `last` of its batch, go
/// out again as bios: if `resend-batch-end` is armed and `unpublished()`
/// says earlier requests of the batch wait to be published (asked only
/// when armed: it takes the ring lock).
pub(crate) fn resend_batch_end(last: bool, unpublished: impl FnOnce() -> bool) -> bool {
    #[cfg(CONFIG_FAULT_INJECTION)]
    {
        last && RESEND_BATCH_ENDS.load(Ordering::Relaxed) != 0
            && unpublished()
            && RESEND_BATCH_ENDS
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
    }
    #[cfg(not(CONFIG_FAULT_INJECTION))]
    {
        let _ = (last, unpublished);
        false
    }
}

/// Whether fault injection asked to hold this reconnect (once).
pub(crate) fn reconnect_held() -> bool {
    #[cfg(CONFIG_FAULT_INJECTION)]
    {
        HOLD_NEXT_RECONNECT.swap(false, Ordering::AcqRel)
    }
    #[cfg(not(CONFIG_FAULT_INJECTION))]
    {
        false
    }
}

/// The `inject` file of one disk.
#[cfg(CONFIG_FAULT_INJECTION)]
pub(crate) struct FaultInjector<O: BlockOps> {
    pub(crate) rings: KVec<Arc<Ring<O>>>,
}

#[cfg(CONFIG_FAULT_INJECTION)]
impl<O: BlockOps> kernel::debugfs::Reader for FaultInjector<O> {
    fn read_from_slice(&self, reader: &mut kernel::uaccess::UserSliceReader) -> Result {
        let mut buf = [0u8; 24];
        let n = reader.len().min(buf.len());
        reader.read_slice(buf.get_mut(..n).ok_or(EINVAL)?)?;
        match buf.get(..n).map(|b| b.trim_ascii_end()) {
            Some(b"break") => {
                for r in self.rings.iter() {
                    r.inject_break();
                }
                Ok(())
            }
            Some(b"hold-reconnect") => {
                HOLD_NEXT_RECONNECT.store(true, Ordering::Release);
                Ok(())
            }
            Some(b"resend-batch-end") => {
                RESEND_BATCH_ENDS.store(RESEND_BATCH_ENDS_ARMED, Ordering::Release);
                Ok(())
            }
            Some(b"grant-delay") => {
                GRANT_DELAY.store(true, Ordering::Release);
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }
}
