// SPDX-License-Identifier: GPL-2.0

//! Module tree of blkcore. Kernel modules include this file with
//! `#[path = ".../rust/blkcore/src/tree.rs"] mod blkcore;`; paths below
//! resolve relative to this directory.

pub mod bitmap;
pub mod blkif;
pub mod datapath;
/// Fuzz entry points (host only: tests and the `fuzzing` feature).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub mod grants;
/// Host implementations needing an allocator (tests, simulator, fuzzing).
#[cfg(any(test, feature = "host"))]
pub mod host;
pub mod limits;
pub mod mapping;
pub mod naming;
pub mod negotiate;
pub mod ring;
pub mod stall;
pub mod virtio;
pub mod xenstore;
