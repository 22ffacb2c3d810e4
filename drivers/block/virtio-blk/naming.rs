// SPDX-License-Identifier: GPL-2.0

//! Disk names (`vda`, `vdaa`), their indices, and sizes for the dmesg line.

use super::*;

/// Disk name for index `i`: vda..vdz, vdaa.. (upstream `virtblk_name_format`).
pub(crate) fn disk_letters(mut index: u32, buf: &mut [u8; 8]) -> &str {
    let mut p = buf.len();
    loop {
        p -= 1;
        buf[p] = b'a' + (index % 26) as u8;
        index /= 26;
        if index == 0 || p == 0 {
            break;
        }
        index -= 1;
    }
    core::str::from_utf8(&buf[p..]).unwrap_or("?")
}

/// `string_get_size()`-like "1.07 GB" / "1.00 GiB" rendering of `bytes`.
pub(crate) struct HumanSize {
    pub(crate) bytes: u64,
    pub(crate) binary: bool,
}

impl kernel::fmt::Display for HumanSize {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const DEC: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
        const BIN: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let div: u64 = if self.binary { 1024 } else { 1000 };
        let (mut unit, mut scale) = (0usize, 1u64);
        while self.bytes / scale >= div && unit < 6 {
            scale *= div;
            unit += 1;
        }
        let units = if self.binary { &BIN } else { &DEC };
        if unit == 0 {
            return write!(f, "{} B", self.bytes);
        }
        // Three significant digits, rounded (no 128-bit division: the
        // kernel has no __udivti3).
        let (mut i, rem) = (self.bytes / scale, self.bytes % scale);
        let mut frac = (rem + scale / 200) / (scale / 100);
        if frac >= 100 {
            i += 1;
            frac -= 100;
        }
        if i >= 100 {
            write!(f, "{} {}", i + u64::from(frac >= 50), units[unit])
        } else if i >= 10 {
            let mut tenths = (frac + 5) / 10;
            if tenths == 10 {
                i += 1;
                tenths = 0;
            }
            write!(f, "{}.{} {}", i, tenths, units[unit])
        } else {
            write!(f, "{}.{:02} {}", i, frac, units[unit])
        }
    }
}

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
        for (w, word) in DISK_INDICES.iter().enumerate() {
            let mut cur = word.load(Ordering::Relaxed);
            while cur != u64::MAX {
                let bit = (!cur).trailing_zeros();
                match word.compare_exchange(
                    cur,
                    cur | (1 << bit),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok(DiskIndex(w as u32 * 64 + bit)),
                    Err(now) => cur = now,
                }
            }
        }
        Err(ENOSPC)
    }
}

impl Drop for DiskIndex {
    fn drop(&mut self) {
        if let Some(word) = DISK_INDICES.get((self.0 / 64) as usize) {
            word.fetch_and(!(1u64 << (self.0 % 64)), Ordering::AcqRel);
        }
    }
}
