// SPDX-License-Identifier: GPL-2.0

//! Test-only fault injection in the virtio core's callbacks (kernels with
//! `CONFIG_FAULT_INJECTION`; a driver offers it through its own debugfs
//! file).

use kernel::{
    alloc::AllocError,
    prelude::*, //
};

#[cfg(CONFIG_FAULT_INJECTION)]
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};

/// The next freeze fails as if its allocation had
/// ([`fail_next_freeze_allocation`]).
#[cfg(CONFIG_FAULT_INJECTION)]
static FAIL_NEXT_FREEZE_ALLOCATION: AtomicBool = AtomicBool::new(false);

/// The next freeze of any device of this module fails with `ENOMEM` at the
/// allocation it makes before it stops anything, the path a system sleep
/// takes under memory pressure. Once.
#[cfg(CONFIG_FAULT_INJECTION)]
pub fn fail_next_freeze_allocation() {
    FAIL_NEXT_FREEZE_ALLOCATION.store(true, Ordering::Release);
}

/// The vector a freeze allocates before it stops anything, or the failure
/// [`fail_next_freeze_allocation`] asked for.
pub(crate) fn freeze_vec_with_capacity<T>(n: usize) -> Result<KVec<T>, AllocError> {
    #[cfg(CONFIG_FAULT_INJECTION)]
    if FAIL_NEXT_FREEZE_ALLOCATION.swap(false, Ordering::AcqRel) {
        return Err(AllocError);
    }
    KVec::with_capacity(n, GFP_KERNEL)
}
