// SPDX-License-Identifier: GPL-2.0

//! blkback-sim: a host model of Linux xen-blkback, driven through blkcore's
//! real data path (ring, grant pool, request mapping).
//!
//! * [`gnttab`]: guest memory and a grant table both ends use (grant/end
//!   access on the frontend side, map/unmap on the backend side);
//! * [`backend`]: blkback semantics (persistent grants with the 1056 cap,
//!   indirect up to 256 segments, flush, discard, an in-memory disk);
//! * [`frontend`]: what the kernel glue does with blkcore;
//! * [`harness`]: random workloads checked against a disk model, with
//!   event-channel wake-ups modelled so notification bugs stall.

pub mod backend;
pub mod frontend;
pub mod gnttab;
pub mod harness;
