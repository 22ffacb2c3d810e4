// SPDX-License-Identifier: GPL-2.0

//! Disk indices (the letters come from `blkcore::naming`) and showing
//! blkcore's `Display` values with the kernel's formatting macros.

use super::*;
use crate::blkcore::bitmap;

/// Shows a `core::fmt::Display` value (blkcore's errors) with the kernel's
/// formatting macros.
pub(crate) struct Shown<T>(pub(crate) T);

impl<T: core::fmt::Display> kernel::fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.0, f)
    }
}

/// Bitmap of disk indices in use: 1024 disks (vda .. vdamj).
pub(crate) static DISK_INDICES: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// An allocated disk index, freed on drop.
pub(crate) struct DiskIndex(pub(crate) u32);

impl DiskIndex {
    pub(crate) fn alloc() -> Result<Self> {
        bitmap::alloc_lowest(&DISK_INDICES)
            .map(DiskIndex)
            .ok_or(ENOSPC)
    }
}

impl Drop for DiskIndex {
    fn drop(&mut self) {
        bitmap::release_range(&DISK_INDICES, self.0, 1);
    }
}
