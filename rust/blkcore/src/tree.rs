// SPDX-License-Identifier: GPL-2.0

//! Module tree of blkcore. Kernel modules include this file with
//! `#[path = ".../rust/blkcore/src/tree.rs"] mod blkcore;`; paths below
//! resolve relative to this directory.

pub mod blkif;
/// Fuzz entry points (host only: tests and the `fuzzing` feature).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod grants;
pub mod limits;
pub mod mapping;
pub mod negotiate;
pub mod ring;
pub mod virtio;
pub mod xenstore;
