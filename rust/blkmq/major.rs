// SPDX-License-Identifier: GPL-2.0

//! [`BlockMajor`]: a block device major number held by the module.

use super::*;

/// A block device major number registered for a driver
/// (`register_blkdev`), so that `/proc/devices` names it and disks can use
/// fixed numbers under it ([`GenDisk::set_numbers`]).
///
/// # Invariants
///
/// `major` is registered under `name` until `self` is dropped.
pub struct BlockMajor {
    major: u32,
    name: &'static CStr,
}

impl BlockMajor {
    /// Registers `major` (0: a free one) under `name`; `EBUSY` if another
    /// driver holds it.
    pub fn register(major: u32, name: &'static CStr) -> Result<Self> {
        // SAFETY: `name` is NUL-terminated and static (the block layer
        // keeps a copy).
        let r = unsafe { bindings::__register_blkdev(major, name.as_char_ptr(), None) };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        let major = if major == 0 {
            u32::try_from(r).map_err(|_| code::EINVAL)?
        } else {
            major
        };
        // INVARIANT: registered just above.
        Ok(Self { major, name })
    }

    /// The major number.
    pub fn major(&self) -> u32 {
        self.major
    }
}

impl Drop for BlockMajor {
    fn drop(&mut self) {
        // SAFETY: by the type invariant `major` is registered as `name`.
        unsafe { bindings::unregister_blkdev(self.major, self.name.as_char_ptr()) };
    }
}
