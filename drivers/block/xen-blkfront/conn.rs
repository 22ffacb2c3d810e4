// SPDX-License-Identifier: GPL-2.0

//! The state of one connection to a backend ([`Conn`]: rings, disk,
//! negotiated values) and the three ways it ends: the backend goes away
//! while the disk stays ([`release_backend`]), a connection attempt fails
//! ([`abandon`]), or the rings are torn down ([`free_rings`]); and what is
//! in flight when the backend will not answer it ([`fail_in_flight`]).

use kernel::prelude::*;

use crate::blkcore::{
    limits::QueueLimits,
    negotiate::Negotiated, //
};
use crate::disk::BlkOps;
use crate::ring::RingHandle;
use crate::xen::xenbus::{
    self,
    Device,
    Xbt, //
};

/// Where the device is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Nothing set up (probe done, or torn down after an error).
    Disconnected,
    /// Rings allocated and published; waiting for the backend to connect.
    Initialised,
    /// Disk live.
    Connected,
}

/// Mutable per-device state, under `Info::conn`.
pub(crate) struct Conn {
    pub(crate) phase: Phase,
    /// One per hardware queue of the disk (made at the first connection).
    pub(crate) rings: KVec<RingHandle<BlkOps>>,
    /// How many of `rings` the current backend serves (the first ones): all
    /// of them, unless the guest was restored onto a backend that allows
    /// fewer (the others stay down, their queues share the served ones).
    pub(crate) active_rings: usize,
    pub(crate) ring_pages: u32,
    pub(crate) negotiated: Option<Negotiated>,
    pub(crate) limits: Option<QueueLimits>,
    pub(crate) disk: Option<crate::disk::Disk>,
    /// The `feature-persistent` we published to the current backend: the
    /// parameter is writable, so negotiation uses what the backend was told,
    /// not what the parameter says by then (upstream's
    /// `feature_persistent_parm`).
    pub(crate) persistent_offered: bool,
}

/// Lets go of the current backend before talking to a (new) one. Without a
/// disk the rings go. With one they stay (their number is the disk's
/// hardware queues): each takes its data path down and the requests that
/// were in flight go on the disk's requeue list, dispatched again when the
/// next backend connects ([`crate::disk::Disk::resubmit`]). Returns how
/// many were requeued.
pub(crate) fn release_backend(conn: &mut Conn) -> usize {
    conn.phase = Phase::Disconnected;
    if conn.disk.is_none() {
        free_rings(conn);
        return 0;
    }
    let mut n = 0;
    for h in conn.rings.iter_mut() {
        for rq in h.suspend() {
            rq.requeue();
            n += 1;
        }
    }
    n
}

/// New requests fail on every ring from now on (the backend is gone or
/// going).
pub(crate) fn mark_rings_dead(conn: &Conn) {
    for h in conn.rings.iter() {
        h.ring().with_state(|st| st.mark_dead());
    }
}

/// A connection attempt failed: requests fail from now on (also those
/// waiting for a reconnect), then the disk and the rings go.
pub(crate) fn abandon(conn: &mut Conn) {
    mark_rings_dead(conn);
    if let Some(disk) = conn.disk.take() {
        disk.resubmit();
        disk.remove();
    }
    free_rings(conn);
    conn.phase = Phase::Disconnected;
}

/// Tears the rings down: interrupts first, then grants, then the shared
/// pages (dropped with the last reference to each ring).
pub(crate) fn free_rings(conn: &mut Conn) {
    for h in conn.rings.drain_all() {
        h.shutdown();
    }
}

/// Fails every request in flight on the rings (the backend will not answer
/// them), with one line if there were any.
pub(crate) fn fail_in_flight(dev: &Device, conn: &Conn) {
    let mut failed = 0u32;
    for h in conn.rings.iter() {
        failed = failed.saturating_add(h.ring().fail_in_flight());
    }
    if failed != 0 {
        if let Some(disk) = &conn.disk {
            dev_warn!(
                dev.as_device(),
                "{}: backend closed or gone with {} requests in flight: failed\n",
                disk.name(),
                failed
            );
        }
    }
}

/// Whether the backend still serves the rings: its state node exists and
/// says Connected or Closing (a Closing backend answers what is in flight
/// before it disconnects).
pub(crate) fn backend_serving(dev: &Device) -> bool {
    matches!(
        xenbus::read(Xbt::NIL, dev.otherend(), c"state"),
        Ok(Some(v)) if v.as_slice() == b"4" || v.as_slice() == b"5"
    )
}
