// SPDX-License-Identifier: GPL-2.0

//! Host implementations of the data path's mechanisms that need an
//! allocator (host only: tests, the simulator and the fuzz runner).

extern crate alloc;

use alloc::vec::Vec;

use super::datapath::{
    OutOfMemory,
    Storage, //
};

/// [`Storage`] on the host heap.
#[derive(Debug)]
pub struct VecStorage;

impl Storage for VecStorage {
    type Buf<T> = Vec<T>;

    fn buf<T>(len: usize, mut f: impl FnMut() -> T) -> Result<Vec<T>, OutOfMemory> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| OutOfMemory)?;
        v.extend((0..len).map(|_| f()));
        Ok(v)
    }
}
