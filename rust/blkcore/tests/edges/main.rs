// SPDX-License-Identifier: GPL-2.0

//! Edges of the pure core's rules, one module per area: the value at
//! which each check turns, each flag or field on its own, and accessors
//! read back after a state change. One test binary for all of them.

mod blkif;
mod grants;
mod limits;
mod negotiate;
mod ring;
mod virtio;
mod virtio_clamps;
mod virtio_limits;
mod virtio_ring;
mod xenstore;
