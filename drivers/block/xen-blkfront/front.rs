// SPDX-License-Identifier: GPL-2.0

//! The xenbus side of the frontend: probe, the connect handshake with the
//! backend (Initialising -> Initialised -> Connected), negotiation through
//! `blkcore::negotiate`, closing and removal.

use core::fmt;

use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        ArcBorrow,
        Mutex, //
    }, //
};

use crate::blkcore::{
    limits::xen_limits,
    negotiate::{
        self as neg,
        FlushKind, //
    },
    xenstore::KeyError,
};
use crate::conn::{
    abandon,
    backend_serving,
    fail_in_flight,
    free_rings,
    mark_rings_dead,
    release_backend,
    Conn,
    Phase, //
};
use crate::fault::reconnect_held;
use crate::ring::RingHandle;
use crate::store::{
    handle_from_nodename,
    shown_path,
    Snapshot,
    BACKEND_KEYS,
    FRONTEND_KEYS, //
};
use crate::xen::xenbus::{
    self,
    Device,
    State,
    Xbt, //
};

/// `protocol` we write: the native x86_64 blkif ABI.
const PROTOCOL: &CStr = c"x86_64-abi";

/// The xenbus driver.
pub(crate) struct Blkfront;

/// Per-device data (the xenbus driver data).
#[pin_data]
pub(crate) struct Info {
    /// `virtual-device` (or `virtual-device-ext`).
    pub(crate) vdevice: u32,
    /// blkif handle: last component of our nodename.
    pub(crate) handle: u16,
    /// Backend domain.
    pub(crate) domid: u16,
    #[pin]
    pub(crate) conn: Mutex<Conn>,
}

/// A connect step failed and `xenbus_dev_fatal` has said which and why
/// (one message, naming the key and value for bad backend input): the
/// caller only cleans up.
#[derive(Debug)]
struct Reported;

/// Reports an error of a connect step with `xenbus_dev_fatal`.
trait OrFatal<T> {
    fn or_fatal(self, dev: &Device, step: fmt::Arguments<'_>) -> Result<T, Reported>;
}

impl<T> OrFatal<T> for Result<T> {
    fn or_fatal(self, dev: &Device, step: fmt::Arguments<'_>) -> Result<T, Reported> {
        self.map_err(|e| {
            dev.fatal(e, step);
            Reported
        })
    }
}

impl<T> OrFatal<T> for Result<T, KeyError> {
    fn or_fatal(self, dev: &Device, _step: fmt::Arguments<'_>) -> Result<T, Reported> {
        // The key error names the key and the value: that is the message.
        self.map_err(|e| {
            dev.fatal(EINVAL, fmt!("{}", crate::store::Show(&e)));
            Reported
        })
    }
}

fn read_vdevice(dev: &Device) -> Result<u32> {
    for key in [c"virtual-device", c"virtual-device-ext"] {
        if let Some(v) = xenbus::read(Xbt::NIL, dev.nodename(), key)? {
            let s = core::str::from_utf8(&v).map_err(|_| EINVAL)?;
            // `%i` upstream: decimal in practice; accept 0x-prefixed hex too.
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => crate::blkcore::xenstore::parse_u32(s).ok(),
            };
            return parsed.ok_or(EINVAL);
        }
    }
    Err(ENOENT)
}

impl xenbus::Driver for Blkfront {
    type Data = Arc<Info>;
    const NAME: &'static CStr = c"xen_blkfront_rs";
    const DEVICE_TYPE: &'static CStr = c"vbd";

    fn probe(dev: &Device) -> Result<Arc<Info>> {
        let vdevice = match read_vdevice(dev) {
            Ok(v) => v,
            Err(e) => {
                dev.fatal(e, fmt!("reading virtual-device"));
                return Err(e);
            }
        };
        if crate::xen::hvm_domain() {
            let device_type = xenbus::read(Xbt::NIL, dev.nodename(), c"device-type")?;
            let refusal = crate::blkcore::naming::hvm_refusal(
                vdevice,
                crate::xen::pv_and_legacy_disks(),
                device_type.as_deref(),
            );
            if let Some(r) = refusal {
                dev_info!(dev.as_device(), "not binding: {}\n", crate::store::Show(&r));
                return Err(ENODEV);
            }
        }
        let handle = handle_from_nodename(dev.nodename().to_bytes()).ok_or(EINVAL)?;
        // Rebinding after an unbind (or after another frontend driver let
        // go): the device was left Closed. Going back to Initialising makes
        // xen-blkback "prepare for reconnect" and return to InitWait.
        if dev.state() != State::Initialising {
            dev.switch_state(State::Initialising)?;
        }
        Arc::pin_init(
            pin_init!(Info {
                vdevice,
                handle,
                domid: dev.otherend_id(),
                conn <- new_mutex!(Conn {
                    active_rings: 0,
                    phase: Phase::Disconnected,
                    rings: KVec::new(),
                    ring_pages: 0,
                    negotiated: None,
                    limits: None,
                    disk: None,
                    persistent_offered: false,
                }),
            }),
            GFP_KERNEL,
        )
    }

    fn otherend_changed(dev: &Device, info: ArcBorrow<'_, Info>, state: State) {
        match state {
            State::InitWait => {
                if dev.state() != State::Initialising {
                    return;
                }
                let _ = info.talk_to_blkback(dev);
            }
            State::Connected => {
                let s = dev.state();
                if s != State::Initialised
                    && s != State::Connected
                    && info.talk_to_blkback(dev).is_err()
                {
                    return;
                }
                info.connect(dev);
            }
            // Closed while we are (back to) Initialising: the backend has
            // not yet seen our reconnect; it will come back via InitWait.
            State::Closed if dev.state() == State::Initialising => {}
            State::Closing => info.closing(dev),
            State::Closed => {
                if dev.state() != State::Closed {
                    info.closing(dev);
                }
                info.backend_gone(dev);
            }
            _ => {}
        }
    }

    /// The guest was restored: the rings' grants and event channels are
    /// gone with the old backend. Requests in flight go back to blk-mq
    /// (they are resubmitted when the new backend connects), the disk
    /// stays; the new backend's InitWait then runs `talk_to_blkback`.
    fn resume(dev: &Device, info: ArcBorrow<'_, Info>) -> Result {
        let mut conn = info.conn.lock();
        let n = release_backend(&mut conn);
        if let Some(disk) = &conn.disk {
            dev_info!(
                dev.as_device(),
                "{}: resuming: {} requests in flight will be resubmitted\n",
                disk.name(),
                n
            );
        }
        Ok(())
    }

    /// The device goes (unbind, detach, unload). Connected, the disk is
    /// deleted while the rings still serve it (its last writeback reaches
    /// the backend). Otherwise (between a resume and the new backend's
    /// Connected, or after a failed connect) there is nobody to serve it:
    /// like [`abandon`], new requests and those waiting on the requeue
    /// list fail, so deleting the disk never waits for a backend that is
    /// not there.
    fn remove(dev: &Device, info: Arc<Info>) {
        let mut conn = info.conn.lock();
        if conn.phase != Phase::Connected {
            abandon(&mut conn);
            return;
        }
        // A backend that left without going Closed (its process died and
        // the toolstack removed its node: the hostile backend's "killed")
        // answers nothing more: what is in flight fails now and new
        // requests fail, or deleting the disk waits for them forever.
        if !backend_serving(dev) {
            mark_rings_dead(&conn);
            fail_in_flight(dev, &conn);
        }
        if let Some(disk) = conn.disk.take() {
            disk.remove();
        }
        free_rings(&mut conn);
        conn.phase = Phase::Disconnected;
    }
}

/// The backend's and our own xenstore directory, read once per step.
fn read_snapshots(dev: &Device) -> Result<(Snapshot, Snapshot), Reported> {
    let read = |dir: &CStr, keys| {
        Snapshot::read(dir, keys).or_fatal(dev, fmt!("reading {}", shown_path(dir)))
    };
    let backend = read(dev.otherend(), BACKEND_KEYS)?;
    let own = read(dev.nodename(), FRONTEND_KEYS)?;
    Ok((backend, own))
}

/// Our negotiation inputs: the module parameters, our own `trusted` node,
/// and, with a live disk, no more rings than the disk has hardware queues.
fn params(dev: &Device, own: &Snapshot, conn: &Conn) -> Result<neg::FrontendParams, Reported> {
    let trusted = neg::frontend_trusted(own, crate::params::trusted.value())
        .or_fatal(dev, fmt!("trusted"))?;
    let mut p = crate::frontend_params(trusted, conn.persistent_offered);
    if conn.disk.is_some() {
        p.max_queues = p
            .max_queues
            .min(u32::try_from(conn.rings.len()).unwrap_or(u32::MAX));
    }
    Ok(p)
}

/// Ring count and size for this connection (`negotiate_mq` and
/// `max-ring-page-order` upstream).
fn negotiate_rings(dev: &Device, conn: &Conn) -> Result<neg::RingLayout, Reported> {
    let (backend, own) = read_snapshots(dev)?;
    Ok(neg::negotiate_rings(&backend, &params(dev, &own, conn)?))
}

impl Info {
    /// InitWait: allocate rings and event channels, publish them and our
    /// features, switch to Initialised (`talk_to_blkback`).
    ///
    /// With a live disk (a new backend after the guest's restore, or a
    /// backend restart) the disk and its rings stay: the rings get new
    /// shared pages and event channels, and the requests that were in
    /// flight wait on the disk's requeue list until the backend connects
    /// (`blkfront_resume` upstream).
    fn talk_to_blkback(&self, dev: &Device) -> Result<(), Reported> {
        let mut conn = self.conn.lock();
        release_backend(&mut conn);
        if let Some(disk) = conn.disk.as_ref().filter(|_| reconnect_held()) {
            dev_info!(
                dev.as_device(),
                "{}: fault injection: not reconnecting to {}\n",
                disk.name(),
                shown_path(dev.otherend())
            );
            return Ok(());
        }
        let r = self.setup_rings(dev, &mut conn);
        if r.is_err() {
            abandon(&mut conn);
        }
        r
    }

    fn setup_rings(&self, dev: &Device, conn: &mut Conn) -> Result<(), Reported> {
        let n = negotiate_rings(dev, conn)?;
        if let Some(disk) = &conn.disk {
            // The disk's hardware queues stay (one ring each). A backend
            // that allows fewer rings (a restore onto another host, whose
            // blkback has a smaller `max_queues`) gets the first ones; the
            // queues of the others share them (upstream instead changes
            // the number of hardware queues).
            let served = n.queues as usize;
            if served == 0 || served > conn.rings.len() {
                dev.fatal(
                    EPROTO,
                    fmt!(
                        "the new backend allows {} rings, the disk has {}",
                        n.queues,
                        conn.rings.len()
                    ),
                );
                return Err(Reported);
            }
            for (i, h) in conn.rings.iter_mut().enumerate().take(served) {
                h.reconnect(dev, n.ring_pages)
                    .or_fatal(dev, fmt!("setting up ring {i}"))?;
            }
            disk.serve_with_rings(served);
            if served < conn.rings.len() {
                dev_info!(
                    dev.as_device(),
                    "{}: the new backend allows {} of the disk's {} rings: its {} hardware queues share them\n",
                    disk.name(),
                    served,
                    conn.rings.len(),
                    conn.rings.len()
                );
            }
            conn.active_rings = served;
        } else {
            for i in 0..n.queues {
                let h = RingHandle::new(dev, i, n.ring_pages)
                    .or_fatal(dev, fmt!("setting up ring {i}"))?;
                conn.rings
                    .push(h, GFP_KERNEL)
                    .map_err(Error::from)
                    .or_fatal(dev, fmt!("setting up ring {i}"))?;
            }
            conn.active_rings = conn.rings.len();
        }
        conn.ring_pages = n.ring_pages;

        let persistent = crate::params::feature_persistent.value();
        let rings = conn.rings.get(..conn.active_rings).unwrap_or(&[]);
        let r = xenbus::transaction(|xbt| {
            let node = dev.nodename();
            // blkback reads `ring-page-order` and `multi-queue-num-queues`
            // whenever they exist: left over from an earlier connection on
            // this device (ours with other parameters, or another
            // frontend), they would make it map that connection's grant
            // references as this connection's ring.
            if n.ring_pages > 1 {
                xenbus::printf(xbt, node, c"ring-page-order", fmt!("{}", n.ring_page_order))?;
            } else {
                xenbus::rm(xbt, node, c"ring-page-order")?;
            }
            if rings.len() == 1 {
                xenbus::rm(xbt, node, c"multi-queue-num-queues")?;
                if let Some(h) = rings.first() {
                    h.publish(xbt, node)?;
                }
            } else {
                xenbus::printf(
                    xbt,
                    node,
                    c"multi-queue-num-queues",
                    fmt!("{}", rings.len()),
                )?;
                for (i, h) in rings.iter().enumerate() {
                    let dir = kernel::str::CString::try_from_fmt(fmt!(
                        "{}/queue-{i}",
                        node.to_str().map_err(|_| EINVAL)?
                    ))?;
                    h.publish(xbt, &dir)?;
                }
            }
            xenbus::write(xbt, node, c"protocol", PROTOCOL)?;
            xenbus::printf(
                xbt,
                node,
                c"feature-persistent",
                fmt!("{}", u32::from(persistent)),
            )?;
            Ok(())
        });
        r.or_fatal(dev, fmt!("writing ring details"))?;
        conn.persistent_offered = persistent;
        conn.phase = Phase::Initialised;
        dev.switch_state(State::Initialised)
            .or_fatal(dev, fmt!("switching to Initialised"))
    }

    /// Backend Connected: negotiate, set up the data path, create the disk
    /// (`blkfront_connect`). A later Connected re-reads `sectors` (resize).
    fn connect(&self, dev: &Device) {
        let mut conn = self.conn.lock();
        if conn.phase == Phase::Connected {
            let backend = match Snapshot::read(dev.otherend(), &[neg::KEY_SECTORS]) {
                Ok(b) => b,
                Err(_) => return,
            };
            if let Ok(sectors) = neg::read_sectors(&backend) {
                let changed = conn
                    .negotiated
                    .as_ref()
                    .is_some_and(|n| n.sectors != sectors);
                if let (true, Some(disk)) = (changed, &conn.disk) {
                    dev_info!(dev.as_device(), "Setting capacity to {}\n", sectors);
                    disk.set_capacity(sectors);
                    if let Some(n) = conn.negotiated.as_mut() {
                        n.sectors = sectors;
                    }
                }
            }
            return;
        }
        if conn.phase != Phase::Initialised {
            return;
        }
        if self.do_connect(dev, &mut conn).is_err() {
            abandon(&mut conn);
        }
    }

    fn do_connect(&self, dev: &Device, conn: &mut Conn) -> Result<(), Reported> {
        let (backend, own) = read_snapshots(dev)?;
        let n = neg::negotiate(&backend, &params(dev, &own, conn)?)
            .or_fatal(dev, fmt!("negotiating"))?;
        if let Some(first) = n.ignored.first {
            dev_warn!(
                dev.as_device(),
                "ignoring {} optional backend key(s), defaults used; the first: {}\n",
                n.ignored.count,
                // blkcore's `KeyError` implements `core::fmt::Display`.
                core::format_args!("{first}")
            );
        }
        if n.queues as usize != conn.active_rings || n.ring_pages != conn.ring_pages {
            dev.fatal(EPROTO, fmt!(
                "backend changed its ring limits after InitWait ({} rings of {} pages set up, now {} of {})",
                conn.active_rings,
                conn.ring_pages,
                n.queues,
                n.ring_pages
            ));
            return Err(Reported);
        }
        let limits = xen_limits(&n);
        if let Err(what) = limits.check_invariants() {
            dev.fatal(EINVAL, fmt!("queue limits rejected: {what}"));
            return Err(Reported);
        }
        // A new backend under the live disk (a restore onto another host):
        // its sectors must be the disk's. Narrower limits (fewer indirect
        // segments) are followed: a read or write built under the old ones
        // goes out again as its bios, which the block layer splits to the
        // new limits (`Queues::max_segments`; upstream's `blkif_recover`).
        if let (Some(old), Some(disk)) = (conn.limits, &conn.disk) {
            if limits.logical_block_size != old.logical_block_size {
                dev.fatal(
                    EPROTO,
                    fmt!(
                        "the new backend's sector-size {} is not the disk's {}",
                        limits.logical_block_size,
                        old.logical_block_size
                    ),
                );
                return Err(Reported);
            }
            let narrower = limits.admits_requests_of(&old).err();
            if let Some(what) = narrower {
                dev_info!(
                    dev.as_device(),
                    "{}: the new backend's limits are narrower ({}: {} segments of {} per request): larger requests are split again\n",
                    disk.name(),
                    what,
                    limits.max_segments,
                    old.max_segments
                );
            }
            // Before the rings start, so that no request is built or sent
            // under the old limits from then on. The new backend may also
            // flush, discard or write differently (`blkif_recover`
            // upstream).
            disk.set_max_segments(limits.max_segments);
            match disk.update_limits(&limits) {
                Ok(()) => conn.limits = Some(limits),
                // Bios split to the old limits would not fit the new ones.
                Err(e) if narrower.is_some() => {
                    dev.fatal(e, fmt!("applying the new backend's narrower queue limits"));
                    return Err(Reported);
                }
                Err(e) => dev_warn!(
                    dev.as_device(),
                    "{}: keeping the old queue limits after reconnect: {:?}\n",
                    disk.name(),
                    e
                ),
            }
        }
        let backend_max =
            crate::blkcore::xenstore::read_u32(&backend, neg::KEY_FEATURE_MAX_INDIRECT_SEGMENTS)
                .ok()
                .flatten()
                .unwrap_or(0);
        let wire_max = crate::blkcore::datapath::wire_segments(&n, backend_max);
        for (i, h) in conn.rings.iter().enumerate().take(conn.active_rings) {
            h.ring()
                .start(dev, &n, self.handle, wire_max)
                .or_fatal(dev, fmt!("starting ring {i}"))?;
        }
        let name = crate::disk::disk_name(self.vdevice)
            .or_fatal(dev, fmt!("naming virtual-device {}", self.vdevice))?;
        if let Some(disk) = &conn.disk {
            dev.switch_state(State::Connected)
                .or_fatal(dev, fmt!("switching to Connected"))?;
            if conn
                .negotiated
                .as_ref()
                .is_some_and(|o| o.sectors != n.sectors)
            {
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
            conn.negotiated = Some(n);
            conn.phase = Phase::Connected;
            disk.resubmit();
            return Ok(());
        }
        let mut disk = crate::disk::Disk::new(dev, self.vdevice, &name, &n, &limits, &conn.rings)
            .or_fatal(dev, fmt!("creating disk {}", name.as_str()))?;
        let flush = match n.flush {
            Some(FlushKind::Barrier) => "barrier: enabled;",
            Some(FlushKind::Flush) => "flush diskcache: enabled;",
            None => "barrier or flush: disabled;",
        };
        let onoff = |b: bool| if b { "enabled" } else { "disabled" };
        // Upstream's line, word for word (`blkfront: xvda: flush diskcache:
        // ...`), plus io_min/io_opt; on the device like the others.
        dev_info!(
            dev.as_device(),
            "blkfront: {}: {} persistent grants: {}; indirect descriptors: {}; bounce buffer: {}; io_min: {}; io_opt: {}\n",
            name.as_str(),
            flush,
            onoff(n.persistent),
            onoff(n.indirect_segments != 0),
            onoff(n.copy_data),
            limits.io_min,
            limits.io_opt,
        );
        dev.switch_state(State::Connected)
            .or_fatal(dev, fmt!("switching to Connected"))?;
        conn.negotiated = Some(n);
        conn.limits = Some(limits);
        conn.phase = Phase::Connected;
        disk.add(dev)
            .or_fatal(dev, fmt!("adding disk {}", name.as_str()))?;
        conn.disk = Some(disk);
        Ok(())
    }

    /// The backend went Closed: it has disconnected from the rings, so a
    /// request still in flight would never be answered. They fail now
    /// (upstream leaves them, and removal then hangs).
    fn backend_gone(&self, dev: &Device) {
        fail_in_flight(dev, &self.conn.lock());
    }

    /// Backend Closing/Closed (`blkfront_closing`).
    fn closing(&self, dev: &Device) {
        if dev.state() == State::Closing {
            return;
        }
        // No more requests (upstream: blk_mark_disk_dead, which rust/blkmq
        // does not offer): the rings fail new ones.
        mark_rings_dead(&self.conn.lock());
        dev.frontend_closed();
    }
}
