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
    limits::{
        xen_limits,
        QueueLimits, //
    },
    naming::DiskName,
    negotiate::{
        self as neg,
        FlushKind, //
    },
    xenstore::KeyError,
};
use crate::conn::{
    Conn,
    Phase, //
};
use crate::fault::reconnect_held;

mod live_disk;

use crate::ring::BoundRing;
use crate::xen::xenbus::{
    self,
    Device,
    State,
    Xbt, //
};
use crate::xenstore_keys::{
    handle_from_nodename,
    shown_path,
    Snapshot,
    BACKEND_KEYS,
    FRONTEND_KEYS,
    RING_KEYS, //
};
use live_disk::{
    apply_new_limits,
    reconnect_live_disk,
    reconnect_rings,
    resize, //
};

/// `protocol` we write: the native x86_64 blkif ABI.
const PROTOCOL: &CStr = c"x86_64-abi";

/// The xenbus driver.
pub(crate) struct Blkfront;

/// One vbd's frontend (the xenbus driver data).
#[pin_data]
pub(crate) struct Frontend {
    /// `virtual-device` (or `virtual-device-ext`).
    pub(crate) vdevice: u32,
    /// blkif handle: last component of our nodename.
    pub(crate) handle: u16,
    /// Backend domain.
    pub(crate) domid: u16,
    #[pin]
    pub(crate) conn: Mutex<Conn>,
}

/// What a backend connected with: the disk's name, the values negotiated
/// and the queue limits they give.
struct Connection {
    name: DiskName,
    negotiated: neg::Negotiated,
    limits: QueueLimits,
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
            dev.fatal(EINVAL, fmt!("{}", core::format_args!("{e}")));
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
    type Data = Arc<Frontend>;
    const NAME: &'static CStr = c"xen_blkfront_rs";
    const DEVICE_TYPE: &'static CStr = c"vbd";

    fn probe(dev: &Device) -> Result<Arc<Frontend>> {
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
                dev_info!(
                    dev.as_device(),
                    "not binding: {}\n",
                    core::format_args!("{r}")
                );
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
            pin_init!(Frontend {
                vdevice,
                handle,
                domid: dev.otherend_id(),
                conn <- new_mutex!(Conn::new()),
            }),
            GFP_KERNEL,
        )
    }

    fn otherend_changed(dev: &Device, frontend: ArcBorrow<'_, Frontend>, state: State) {
        match state {
            State::InitWait => {
                match dev.state() {
                    State::Initialising => {}
                    // The backend started again (a userspace backend's
                    // process, a driver domain) and waits for us: it has
                    // no rings. Reconnect as after a restore: the rings
                    // are taken down (what the old backend still maps is
                    // held until it unmaps), what was in flight is sent
                    // again once it is Connected. Upstream ignores it, and
                    // its requests in flight wait for ever. (Initialised:
                    // blkback's own InitWait again after a rebind, when it
                    // saw us Initialising; our rings are published: wait.)
                    State::Connected => {
                        dev_notice!(
                            dev.as_device(),
                            "backend {} went back to InitWait: reconnecting, requests in flight are sent again\n",
                            shown_path(dev.otherend())
                        );
                    }
                    _ => return,
                }
                let _ = frontend.talk_to_blkback(dev);
            }
            State::Connected => {
                let s = dev.state();
                if s != State::Initialised
                    && s != State::Connected
                    && frontend.talk_to_blkback(dev).is_err()
                {
                    return;
                }
                frontend.connect(dev);
            }
            // Closed while we are (back to) Initialising: the backend has
            // not yet seen our reconnect; it will come back via InitWait.
            State::Closed if dev.state() == State::Initialising => {}
            State::Closing => frontend.closing(dev),
            State::Closed => {
                if dev.state() != State::Closed {
                    frontend.closing(dev);
                }
                frontend.backend_gone(dev);
            }
            _ => {}
        }
    }

    /// The guest was restored: the rings' grants and event channels are
    /// gone with the old backend. Requests in flight go back to blk-mq
    /// (they are resubmitted when the new backend connects), the disk
    /// stays; the new backend's InitWait then runs `talk_to_blkback`.
    fn resume(dev: &Device, frontend: ArcBorrow<'_, Frontend>) -> Result {
        let mut conn = frontend.conn.lock();
        let n = conn.release_backend();
        if let Some(disk) = conn.disk() {
            dev_info!(
                dev.as_device(),
                "{}: resuming: {} requests in flight will be resubmitted\n",
                disk.name(),
                n
            );
        }
        Ok(())
    }

    /// The device goes (unbind, detach, unload): [`Conn::remove`].
    fn remove(dev: &Device, frontend: Arc<Frontend>) {
        frontend.conn.lock().remove(dev);
    }
}

/// `backend_keys` of the backend's directory and our own keys, read once
/// per step.
fn read_snapshots(
    dev: &Device,
    backend_keys: &[&'static str],
) -> Result<(Snapshot, Snapshot), Reported> {
    let read = |dir: &CStr, keys| {
        Snapshot::read(dir, keys).or_fatal(dev, fmt!("reading {}", shown_path(dir)))
    };
    let backend = read(dev.otherend(), backend_keys)?;
    let own = read(dev.nodename(), FRONTEND_KEYS)?;
    Ok((backend, own))
}

/// Our negotiation inputs: the module parameters, our own `trusted` node,
/// and, with a live disk, no more rings than the disk has hardware queues.
fn params(dev: &Device, own: &Snapshot, conn: &Conn) -> Result<neg::FrontendParams, Reported> {
    let trusted = neg::frontend_trusted(own, crate::params::trusted.value())
        .or_fatal(dev, fmt!("trusted"))?;
    let mut p = crate::frontend_params(trusted, conn.persistent_offered());
    if conn.disk().is_some() {
        p.max_queues = p
            .max_queues
            .min(u32::try_from(conn.rings().len()).unwrap_or(u32::MAX));
    }
    Ok(p)
}

/// Ring count and size for this connection (`negotiate_mq` and
/// `max-ring-page-order` upstream).
fn negotiate_rings(dev: &Device, conn: &Conn) -> Result<neg::RingLayout, Reported> {
    let (backend, own) = read_snapshots(dev, RING_KEYS)?;
    Ok(neg::negotiate_rings(&backend, &params(dev, &own, conn)?))
}

impl Frontend {
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
        conn.release_backend();
        if let Some(disk) = conn.disk().filter(|_| reconnect_held()) {
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
            conn.abandon();
        }
        r
    }

    fn setup_rings(&self, dev: &Device, conn: &mut Conn) -> Result<(), Reported> {
        let n = negotiate_rings(dev, conn)?;
        let served = if conn.disk().is_some() {
            reconnect_rings(dev, conn, &n)?
        } else {
            for i in 0..n.queues {
                let h = BoundRing::new(dev, i, n.ring_pages)
                    .or_fatal(dev, fmt!("setting up ring {i}"))?;
                conn.add_ring(h)
                    .or_fatal(dev, fmt!("setting up ring {i}"))?;
            }
            conn.rings().len()
        };
        let persistent = crate::params::feature_persistent.value();
        let rings = conn.rings().get(..served).unwrap_or(&[]);
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
        conn.rings_published(served, n.ring_pages, persistent);
        dev.switch_state(State::Initialised)
            .or_fatal(dev, fmt!("switching to Initialised"))
    }

    /// Backend Connected: negotiate, set up the data path, create the disk
    /// or resubmit to the live one (`blkfront_connect`). A later Connected
    /// re-reads `sectors` (resize).
    fn connect(&self, dev: &Device) {
        let mut conn = self.conn.lock();
        match conn.phase() {
            Phase::Connected => resize(dev, &mut conn),
            Phase::Initialised => {
                if self.start_connection(dev, &mut conn).is_err() {
                    conn.abandon();
                }
            }
            Phase::Disconnected => {}
        }
    }

    /// Negotiates with the backend, starts the rings published to it and
    /// connects the disk: a new one, or the live one after a restore.
    fn start_connection(&self, dev: &Device, conn: &mut Conn) -> Result<(), Reported> {
        let (backend, own) = read_snapshots(dev, BACKEND_KEYS)?;
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
        // The rings are those InitWait set up and published: the ring keys
        // are read once, as upstream. A backend that changed them since
        // is told nothing new (and, on a restore, the live disk stays).
        let pages = conn.ring_pages();
        let set_up = neg::RingLayout {
            queues: u32::try_from(conn.active_rings().len()).unwrap_or(u32::MAX),
            ring_page_order: pages.trailing_zeros(),
            ring_pages: pages,
        };
        if n.rings() != set_up {
            dev_warn!(
                dev.as_device(),
                "backend changed its ring limits after InitWait ({} rings of {} pages set up, now {} of {}): the rings set up are kept\n",
                set_up.queues,
                set_up.ring_pages,
                n.queues,
                n.ring_pages
            );
        }
        let n = n.with_rings(set_up);
        let limits = xen_limits(&n);
        if let Err(what) = limits.check_invariants() {
            dev.fatal(EINVAL, fmt!("queue limits rejected: {what}"));
            return Err(Reported);
        }
        // Before the rings start, so that no request is built or sent
        // under the old limits from then on.
        let limits = match (conn.limits(), conn.disk()) {
            (Some(old), Some(disk)) => apply_new_limits(dev, disk, old, limits)?,
            _ => limits,
        };
        let backend_max =
            crate::blkcore::xenstore::read_u32(&backend, neg::KEY_FEATURE_MAX_INDIRECT_SEGMENTS)
                .ok()
                .flatten()
                .unwrap_or(0);
        let wire_max = crate::blkcore::datapath::wire_segments(&n, backend_max);
        for (i, h) in conn.active_rings().iter().enumerate() {
            h.ring()
                .start(dev, &n, self.handle, wire_max)
                .or_fatal(dev, fmt!("starting ring {i}"))?;
        }
        let name = crate::disk::disk_name(self.vdevice)
            .or_fatal(dev, fmt!("naming virtual-device {}", self.vdevice))?;
        let connection = Connection {
            name,
            negotiated: n,
            limits,
        };
        if conn.disk().is_some() {
            reconnect_live_disk(dev, conn, connection)
        } else {
            self.create_disk(dev, conn, connection)
        }
    }

    /// The first backend connected: the disk is made on the rings and
    /// added.
    fn create_disk(&self, dev: &Device, conn: &mut Conn, c: Connection) -> Result<(), Reported> {
        let Connection {
            name,
            negotiated: n,
            limits,
        } = c;
        let mut disk = crate::disk::Disk::new(dev, self.vdevice, &name, &n, &limits, conn.rings())
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
        disk.add(dev)
            .or_fatal(dev, fmt!("adding disk {}", name.as_str()))?;
        conn.connected(n, limits, disk);
        Ok(())
    }
    /// The backend went Closed: it has disconnected from the rings, so a
    /// request still in flight would never be answered. They fail now
    /// (upstream leaves them, and removal then hangs).
    fn backend_gone(&self, dev: &Device) {
        self.conn.lock().fail_in_flight(dev);
    }

    /// Backend Closing/Closed (`blkfront_closing`).
    fn closing(&self, dev: &Device) {
        if dev.state() == State::Closing {
            return;
        }
        // No more requests (upstream: blk_mark_disk_dead, which rust/blkmq
        // does not offer): the rings fail new ones.
        self.conn.lock().mark_rings_dead();
        dev.frontend_closed();
    }
}
