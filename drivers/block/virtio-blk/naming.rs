// SPDX-License-Identifier: GPL-2.0

//! Disk indices (the letters come from `blkcore::naming`).

use core::sync::atomic::AtomicU64;

use kernel::prelude::*;

use crate::blkcore::bitmap;

/// Disk indices, as many as upstream virtio_blk allocates
/// (`minor_to_index(1 << MINORBITS)`: 16 minors per disk in the 20-bit
/// minor space): vda .. vdcrxp. Ours take dynamic device numbers, but a
/// guest that upstream serves with this many disks must get them all here.
pub(crate) const MAX_DISKS: u32 = 1 << (20 - 4);

/// Bitmap of disk indices in use (8 KiB).
pub(crate) static DISK_INDICES: [AtomicU64; (MAX_DISKS / 64) as usize] =
    [const { AtomicU64::new(0) }; (MAX_DISKS / 64) as usize];

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
