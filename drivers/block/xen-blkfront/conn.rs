// SPDX-License-Identifier: GPL-2.0

//! One connection to a backend ([`Conn`]: rings, disk, negotiated values)
//! as a state machine: its [`Phase`] changes only through its methods, one
//! per transition. Rings published: [`Conn::rings_published`]; the backend
//! connected: [`Conn::connected`] (a new disk) or [`Conn::reconnected`] (the
//! live one). And the ways it ends: the backend goes away while the disk
//! stays ([`Conn::release_backend`]), a connection attempt fails
//! ([`Conn::abandon`]), or the device goes ([`Conn::remove`]); and what is
//! in flight when the backend will not answer it ([`Conn::fail_in_flight`]).

use kernel::prelude::*;

use crate::blkcore::{
    limits::QueueLimits,
    negotiate::Negotiated, //
};
use crate::disk::{
    BlkOps,
    Disk, //
};
use crate::ring::BoundRing;
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

/// Mutable per-device state, under `Frontend::conn`.
pub(crate) struct Conn {
    phase: Phase,
    /// One per hardware queue of the disk (made at the first connection).
    rings: KVec<BoundRing<BlkOps>>,
    /// How many of `rings` the current backend serves (the first ones): all
    /// of them, unless the guest was restored onto a backend that allows
    /// fewer (the others stay down, their queues share the served ones).
    active_rings: usize,
    ring_pages: u32,
    negotiated: Option<Negotiated>,
    limits: Option<QueueLimits>,
    disk: Option<Disk>,
    /// The `feature-persistent` we published to the current backend: the
    /// parameter is writable, so negotiation uses what the backend was told,
    /// not what the parameter says by then (upstream's
    /// `feature_persistent_parm`).
    persistent_offered: bool,
}

impl Conn {
    /// A device just probed: no rings, no disk.
    pub(crate) fn new() -> Self {
        Self {
            phase: Phase::Disconnected,
            rings: KVec::new(),
            active_rings: 0,
            ring_pages: 0,
            negotiated: None,
            limits: None,
            disk: None,
            persistent_offered: false,
        }
    }

    /// Where the connection is.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// Every ring (one per hardware queue of the disk).
    pub(crate) fn rings(&self) -> &[BoundRing<BlkOps>] {
        &self.rings
    }

    /// The rings the current backend serves (the first ones).
    pub(crate) fn active_rings(&self) -> &[BoundRing<BlkOps>] {
        self.rings.get(..self.active_rings).unwrap_or(&[])
    }

    /// Pages of each ring, as published to the current backend.
    pub(crate) fn ring_pages(&self) -> u32 {
        self.ring_pages
    }

    /// What was negotiated with the backend last connected.
    pub(crate) fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// The queue limits the disk has.
    pub(crate) fn limits(&self) -> Option<&QueueLimits> {
        self.limits.as_ref()
    }

    /// The disk, once created (it outlives backends).
    pub(crate) fn disk(&self) -> Option<&Disk> {
        self.disk.as_ref()
    }

    /// The `feature-persistent` published to the current backend.
    pub(crate) fn persistent_offered(&self) -> bool {
        self.persistent_offered
    }

    /// The rings, to give them new shared pages and event channels for a
    /// new backend ([`BoundRing::reconnect`]).
    pub(crate) fn rings_mut(&mut self) -> &mut [BoundRing<BlkOps>] {
        &mut self.rings
    }

    /// One more ring (before the disk exists: its hardware queues are the
    /// rings made for the first backend).
    pub(crate) fn add_ring(&mut self, ring: BoundRing<BlkOps>) -> Result {
        self.rings.push(ring, GFP_KERNEL)?;
        Ok(())
    }

    /// The first `active_rings` rings, of `ring_pages` pages each, are
    /// published to the backend with `feature-persistent` = `persistent`:
    /// Initialised, waiting for the backend to connect.
    pub(crate) fn rings_published(
        &mut self,
        active_rings: usize,
        ring_pages: u32,
        persistent: bool,
    ) {
        self.active_rings = active_rings.min(self.rings.len());
        self.ring_pages = ring_pages;
        self.persistent_offered = persistent;
        self.phase = Phase::Initialised;
    }

    /// The backend connected and `disk` was made and added for it:
    /// Connected.
    pub(crate) fn connected(&mut self, negotiated: Negotiated, limits: QueueLimits, disk: Disk) {
        self.disk = Some(disk);
        self.reconnected(negotiated, limits);
    }

    /// A new backend connected under the live disk, whose queue limits are
    /// now `limits` (the old ones if the new could not be applied):
    /// Connected.
    pub(crate) fn reconnected(&mut self, negotiated: Negotiated, limits: QueueLimits) {
        self.negotiated = Some(negotiated);
        self.limits = Some(limits);
        self.phase = Phase::Connected;
    }

    /// The backend resized the disk to `sectors`.
    pub(crate) fn resized(&mut self, sectors: u64) {
        if let Some(n) = self.negotiated.as_mut() {
            n.sectors = sectors;
        }
    }

    /// Lets go of the current backend before talking to a (new) one. Without a
    /// disk the rings go. With one they stay (their number is the disk's
    /// hardware queues): each takes its data path down and the requests that
    /// were in flight go on the disk's requeue list, dispatched again when the
    /// next backend connects ([`crate::disk::Disk::resubmit`]). Returns how
    /// many were requeued.
    pub(crate) fn release_backend(&mut self) -> usize {
        self.phase = Phase::Disconnected;
        if self.disk.is_none() {
            self.free_rings();
            return 0;
        }
        let mut n = 0;
        for h in self.rings.iter_mut() {
            for rq in h.suspend() {
                rq.requeue();
                n += 1;
            }
        }
        n
    }

    /// New requests fail on every ring from now on (the backend is gone or
    /// going).
    pub(crate) fn mark_rings_dead(&self) {
        for h in self.rings.iter() {
            h.ring().with_state(|st| st.mark_dead());
        }
    }

    /// A connection attempt failed: requests fail from now on (also those
    /// waiting for a reconnect), then the disk and the rings go.
    pub(crate) fn abandon(&mut self) {
        self.mark_rings_dead();
        if let Some(disk) = self.disk.take() {
            disk.resubmit();
            disk.remove();
        }
        self.free_rings();
        self.phase = Phase::Disconnected;
    }

    /// The device goes (unbind, detach, unload). Connected, the disk is
    /// deleted while the rings still serve it (its last writeback reaches
    /// the backend). Otherwise (between a resume and the new backend's
    /// Connected, or after a failed connect) there is nobody to serve it:
    /// like [`Conn::abandon`], new requests and those waiting on the
    /// requeue list fail, so deleting the disk never waits for a backend
    /// that is not there.
    pub(crate) fn remove(&mut self, dev: &Device) {
        if self.phase != Phase::Connected {
            self.abandon();
            return;
        }
        // A backend that left without going Closed (its process died and
        // the toolstack removed its node: the hostile backend's "killed")
        // answers nothing more: what is in flight fails now and new
        // requests fail, or deleting the disk waits for them forever.
        if !backend_serving(dev) {
            self.mark_rings_dead();
            self.fail_in_flight(dev);
        }
        if let Some(disk) = self.disk.take() {
            disk.remove();
        }
        self.free_rings();
        self.phase = Phase::Disconnected;
    }

    /// Tears the rings down: interrupts first, then grants, then the shared
    /// pages (dropped with the last reference to each ring).
    fn free_rings(&mut self) {
        for h in self.rings.drain_all() {
            h.shutdown();
        }
    }

    /// Fails every request in flight on the rings (the backend will not
    /// answer them), with one line if there were any.
    pub(crate) fn fail_in_flight(&self, dev: &Device) {
        let mut failed = 0u32;
        for h in self.rings.iter() {
            failed = failed.saturating_add(h.ring().fail_in_flight());
        }
        if failed != 0 {
            if let Some(disk) = &self.disk {
                dev_warn!(
                    dev.as_device(),
                    "{}: backend closed or gone with {} requests in flight: failed\n",
                    disk.name(),
                    failed
                );
            }
        }
    }
}

/// Whether the backend still serves the rings: its state node exists and
/// says Connected or Closing (a Closing backend answers what is in flight
/// before it disconnects).
fn backend_serving(dev: &Device) -> bool {
    matches!(
        xenbus::read(Xbt::NIL, dev.otherend(), c"state"),
        Ok(Some(v)) if v.as_slice() == b"4" || v.as_slice() == b"5"
    )
}
