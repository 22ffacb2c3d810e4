// SPDX-License-Identifier: GPL-2.0

//! blkback-sim: a host model of Linux xen-blkback, driven by the frontend's
//! own data path (`blkcore::datapath`, the code the kernel driver runs).
//!
//! * [`gnttab`]: guest memory and a grant table both ends use (grant/end
//!   access on the frontend side, map/unmap on the backend side);
//! * [`backend`]: blkback semantics (persistent grants with the 1056 cap,
//!   indirect up to 256 segments, flush, discard, an in-memory disk);
//! * [`frontend`]: `blkcore::negotiate` and `blkcore::datapath` on the
//!   model's memory and a ring in host memory (no data path of its own);
//! * [`harness`]: random workloads checked against a disk model, with
//!   event-channel wake-ups modelled so notification bugs stall.

pub mod backend;
pub mod frontend;
pub mod gnttab;
pub mod harness;
