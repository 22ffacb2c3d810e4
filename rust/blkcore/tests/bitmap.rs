// SPDX-License-Identifier: GPL-2.0

//! The id bitmaps behind disk indices and fixed minors.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use blkcore::bitmap::{alloc_lowest, release_range, reserve_range, RangeError};
use proptest::prelude::*;

fn words(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

#[test]
fn ranges_reserve_all_or_nothing() {
    let w = words(4);
    assert_eq!(reserve_range(&w, 16, 16), Ok(()));
    assert_eq!(reserve_range(&w, 16, 16), Err(RangeError::Busy));
    // Overlapping by one: refused, and the free part is left free.
    assert_eq!(reserve_range(&w, 31, 2), Err(RangeError::Busy));
    assert_eq!(reserve_range(&w, 32, 1), Ok(()));
    release_range(&w, 16, 16);
    assert_eq!(reserve_range(&w, 16, 16), Ok(()));
    // Across a word, empty, or past the end.
    assert_eq!(reserve_range(&w, 60, 8), Err(RangeError::Invalid));
    assert_eq!(reserve_range(&w, 0, 0), Err(RangeError::Invalid));
    assert_eq!(reserve_range(&w, 256, 1), Err(RangeError::Invalid));
    assert_eq!(reserve_range(&w, 192, 64), Ok(()));
}

#[test]
fn lowest_free_id_is_taken_and_reused() {
    let w = words(2);
    assert_eq!(alloc_lowest(&w), Some(0));
    assert_eq!(alloc_lowest(&w), Some(1));
    release_range(&w, 0, 1);
    assert_eq!(alloc_lowest(&w), Some(0));
    for i in 2..128 {
        assert_eq!(alloc_lowest(&w), Some(i));
    }
    assert_eq!(alloc_lowest(&w), None);
}

#[test]
fn concurrent_allocations_never_share_an_id() {
    let w = Arc::new(words(16));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let w = w.clone();
            std::thread::spawn(move || {
                (0..128)
                    .filter_map(|_| alloc_lowest(&w))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<u32> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n, "an id was handed out twice");
    assert_eq!(n, 1024);
}

proptest! {
    /// Against a model: any sequence of reserves and releases of aligned
    /// ranges leaves exactly the model's ids in use.
    #[test]
    fn matches_a_model(ops in prop::collection::vec((any::<bool>(), 0u32..16, prop::sample::select(vec![1u32, 16])), 0..200)) {
        let w = words(4);
        let mut model = [false; 256];
        for (reserve, slot, count) in ops {
            let first = slot * 16;
            let range = first as usize..(first + count) as usize;
            if reserve {
                let free = model[range.clone()].iter().all(|b| !b);
                let r = reserve_range(&w, first, count);
                prop_assert_eq!(r.is_ok(), free);
                if free {
                    model[range].iter_mut().for_each(|b| *b = true);
                }
            } else if model[range.clone()].iter().all(|b| *b) {
                release_range(&w, first, count);
                model[range].iter_mut().for_each(|b| *b = false);
            }
        }
        for (i, &used) in model.iter().enumerate() {
            let bit = w[i / 64].load(std::sync::atomic::Ordering::Relaxed) >> (i % 64) & 1;
            prop_assert_eq!(bit == 1, used);
        }
    }
}
