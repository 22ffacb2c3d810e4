// SPDX-License-Identifier: GPL-2.0

//! The pure core of blkfront-rs: wire formats, negotiation, queue limits,
//! grant policy and request mapping. No kernel types and no allocator, so the
//! same code runs inside the modules and under `cargo test` on the host.
//!
//! The kernel modules include `tree.rs` directly as a module (`#[path]`), so
//! this file only carries the crate-level attributes.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

#[path = "tree.rs"]
mod tree;
pub use tree::*;
