// SPDX-License-Identifier: GPL-2.0

//! Test-only fault injection (debugfs `xen_blkfront_rs-<disk>/inject`,
//! only in kernels with `CONFIG_FAULT_INJECTION`): writing `break` breaks
//! every ring of the disk as a bad backend response would; writing
//! `hold-reconnect` keeps the next reconnect of a live disk (after a
//! resume) from happening, as if the new backend never came: the disk then
//! stays in the reconnect window until it is removed.

#[cfg(CONFIG_FAULT_INJECTION)]
use core::sync::atomic::{
    AtomicBool,
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
        let mut buf = [0u8; 16];
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
            _ => Err(EINVAL),
        }
    }
}
