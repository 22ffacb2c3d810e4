// SPDX-License-Identifier: GPL-2.0

//! The disk across backends: a new backend under the live disk (after the
//! guest's restore, or a backend restart) gets the disk's rings and must
//! accept its sector size; its queue limits are followed; a later
//! Connected may resize the disk.

use kernel::prelude::*;

use super::{
    Connection,
    OrFatal,
    Reported, //
};
use crate::blkcore::{
    limits::QueueLimits,
    negotiate as neg, //
};
use crate::conn::Conn;
use crate::disk::Disk;
use crate::xen::xenbus::{
    Device,
    State, //
};
use crate::xenstore_keys::{
    shown_path,
    Snapshot, //
};

/// A new backend connected under the live disk (a restore onto another
/// host, a backend restart): the disk's requests that were in flight go
/// out again.
pub(super) fn reconnect_live_disk(
    dev: &Device,
    conn: &mut Conn,
    c: Connection,
) -> Result<(), Reported> {
    let Connection {
        name,
        negotiated: n,
        limits,
    } = c;
    dev.switch_state(State::Connected)
        .or_fatal(dev, fmt!("switching to Connected"))?;
    let resized = conn.negotiated().is_some_and(|o| o.sectors != n.sectors);
    if let (true, Some(disk)) = (resized, conn.disk()) {
        disk.set_capacity(n.sectors);
    }
    dev_info!(
        dev.as_device(),
        "{}: reconnected to {}: {} rings of {} pages; persistent grants: {}; resubmitting what was in flight\n",
        name.as_str(),
        shown_path(dev.otherend()),
        n.queues,
        n.ring_pages,
        if n.persistent { "enabled" } else { "disabled" },
    );
    conn.reconnected(n, limits);
    if let Some(disk) = conn.disk() {
        disk.resubmit();
    }
    Ok(())
}

/// A new backend's queue limits `new` on the live disk, whose limits were
/// `old`. Its sectors must be the disk's. Narrower limits (fewer indirect
/// segments) are followed: a read or write built under the old ones goes
/// out again as its bios, which the block layer splits to the new limits
/// (`Queues::max_segments`; upstream's `blkif_recover`). The new backend
/// may also flush, discard or write differently. Returns the limits the
/// disk has now.
pub(super) fn apply_new_limits(
    dev: &Device,
    disk: &Disk,
    old: &QueueLimits,
    new: QueueLimits,
) -> Result<QueueLimits, Reported> {
    if new.logical_block_size != old.logical_block_size {
        dev.fatal(
            EPROTO,
            fmt!(
                "the new backend's sector-size {} is not the disk's {}",
                new.logical_block_size,
                old.logical_block_size
            ),
        );
        return Err(Reported);
    }
    let narrower = new.admits_requests_of(old).err();
    if let Some(what) = narrower {
        dev_info!(
            dev.as_device(),
            "{}: the new backend's limits are narrower ({}: {} segments of {} per request): larger requests are split again\n",
            disk.name(),
            what,
            new.max_segments,
            old.max_segments
        );
    }
    disk.set_max_segments(new.max_segments);
    match disk.update_limits(&new) {
        Ok(()) => Ok(new),
        // Bios split to the old limits would not fit the new ones.
        Err(e) if narrower.is_some() => {
            dev.fatal(e, fmt!("applying the new backend's narrower queue limits"));
            Err(Reported)
        }
        Err(e) => {
            dev_warn!(
                dev.as_device(),
                "{}: keeping the old queue limits after reconnect: {:?}\n",
                disk.name(),
                e
            );
            Ok(*old)
        }
    }
}

/// A later Connected: the backend may have resized the disk
/// (`blkfront_connect` upstream, for a connected device).
pub(super) fn resize(dev: &Device, conn: &mut Conn) {
    let backend = match Snapshot::read(dev.otherend(), &[neg::KEY_SECTORS]) {
        Ok(b) => b,
        Err(_) => return,
    };
    let Ok(sectors) = neg::read_sectors(&backend) else {
        return;
    };
    let changed = conn.negotiated().is_some_and(|n| n.sectors != sectors);
    if let (true, Some(disk)) = (changed, conn.disk()) {
        dev_info!(dev.as_device(), "Setting capacity to {}\n", sectors);
        disk.set_capacity(sectors);
        conn.resized(sectors);
    }
}

/// The disk's rings for a new backend (with a live disk): new shared pages
/// and event channels. The disk's hardware queues stay (one ring each). A
/// backend that allows fewer rings (a restore onto another host, whose
/// blkback has a smaller `max_queues`) gets the first ones; the queues of
/// the others share them (upstream instead changes the number of hardware
/// queues). Returns how many it serves.
pub(super) fn reconnect_rings(
    dev: &Device,
    conn: &mut Conn,
    n: &neg::RingLayout,
) -> Result<usize, Reported> {
    let all = conn.rings().len();
    let served = n.queues as usize;
    if served == 0 || served > all {
        dev.fatal(
            EPROTO,
            fmt!(
                "the new backend allows {} rings, the disk has {}",
                n.queues,
                all
            ),
        );
        return Err(Reported);
    }
    for (i, h) in conn.rings_mut().iter_mut().enumerate().take(served) {
        h.reconnect(dev, n.ring_pages)
            .or_fatal(dev, fmt!("setting up ring {i}"))?;
    }
    if let Some(disk) = conn.disk() {
        disk.serve_with_rings(served);
        if served < all {
            dev_info!(
                dev.as_device(),
                "{}: the new backend allows {} of the disk's {} rings: its {} hardware queues share them\n",
                disk.name(),
                served,
                all,
                all
            );
        }
    }
    Ok(served)
}
