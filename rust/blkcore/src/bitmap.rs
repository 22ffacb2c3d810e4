// SPDX-License-Identifier: GPL-2.0

//! Lock-free bitmaps of ids in use over `AtomicU64` words: the disk
//! indices of virtio_blk_rs (`vda`, `vdb`, ...) and the fixed minors of
//! xen_blkfront_rs (`xlbd_reserve_minors` upstream). The drivers keep the
//! words in a `static` and wrap these calls in RAII guards.

use core::sync::atomic::{
    AtomicU64,
    Ordering, //
};

/// Why a range could not be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeError {
    /// Empty, past the bitmap, or not inside one 64-bit word.
    Invalid,
    /// Some id of the range is in use.
    Busy,
}

/// The word and mask of `count` ids from `first`, which must lie in one
/// word (true for upstream's minor ranges: 16 aligned to 16, or 1).
fn word_mask(words: &[AtomicU64], first: u32, count: u32) -> Option<(&AtomicU64, u64)> {
    let bit = first % 64;
    if count == 0 || count > 64 - bit {
        return None;
    }
    let mask = if count == 64 {
        u64::MAX
    } else {
        ((1u64 << count) - 1) << bit
    };
    Some((words.get((first / 64) as usize)?, mask))
}

/// Marks ids `first..first + count` in use, all or none.
pub fn reserve_range(words: &[AtomicU64], first: u32, count: u32) -> Result<(), RangeError> {
    let (word, mask) = word_mask(words, first, count).ok_or(RangeError::Invalid)?;
    let prev = word.fetch_or(mask, Ordering::AcqRel);
    if prev & mask != 0 {
        // Give back only the bits this call set.
        word.fetch_and(!(mask & !prev), Ordering::AcqRel);
        return Err(RangeError::Busy);
    }
    Ok(())
}

/// Frees ids `first..first + count` (a range [`reserve_range`] gave).
pub fn release_range(words: &[AtomicU64], first: u32, count: u32) {
    if let Some((word, mask)) = word_mask(words, first, count) {
        word.fetch_and(!mask, Ordering::AcqRel);
    }
}

/// Takes the lowest free id; `None` when all are in use.
pub fn alloc_lowest(words: &[AtomicU64]) -> Option<u32> {
    for (w, word) in words.iter().enumerate() {
        let mut cur = word.load(Ordering::Relaxed);
        while cur != u64::MAX {
            let bit = (!cur).trailing_zeros();
            match word.compare_exchange(cur, cur | (1 << bit), Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return u32::try_from(w).ok()?.checked_mul(64)?.checked_add(bit),
                Err(now) => cur = now,
            }
        }
    }
    None
}
