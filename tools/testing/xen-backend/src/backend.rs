// SPDX-License-Identifier: GPL-2.0

//! One vbd's backend: the xenbus handshake (xen-blkback's order of keys and
//! states), the rings, the event loop, and where each misbehaviour strikes.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::time::{Duration, Instant};

use blkcore::blkif::{BlkifResponse, Request, BLKIF_OP_INDIRECT, BLKIF_OP_READ, BLKIF_OP_WRITE};

use crate::io::{Disk, Features, Stats};
use crate::ring::BackRing;
use crate::scenario::{self, Scenario, TRIGGER_AFTER};
use crate::xen::{
    wait_readable, EventChannels, GrantTable, XenStore, XsPermission, XS_PERM_NONE, XS_PERM_READ,
};

const INITIALISING: u32 = 1;
const INIT_WAIT: u32 = 2;
const INITIALISED: u32 = 3;
const CONNECTED: u32 = 4;
const CLOSING: u32 = 5;
const CLOSED: u32 = 6;

/// How long a detach waits for the frontend to close before it removes
/// the vbd anyway (as `xl block-detach --force` would).
const CLOSE_WAIT: Duration = Duration::from_secs(15);

/// The command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// The frontend's domain.
    pub domid: u32,
    /// The vbd's device number (`virtual-device`).
    pub devid: u32,
    /// The backing file.
    pub file: String,
    /// Create or resize the file to this many MiB.
    pub size_mib: Option<u64>,
    /// `multi-queue-max-queues`.
    pub max_queues: u32,
    /// `max-ring-page-order`.
    pub max_ring_order: u32,
    /// `physical-sector-size`.
    pub physical_sector_size: u32,
    /// `info` (`VDISK_CDROM` 1, `VDISK_REMOVABLE` 2, `VDISK_READONLY` 4).
    pub info: u32,
    /// What is offered.
    pub features: Features,
    /// The misbehaviour, if any.
    pub scenario: Option<Scenario>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            domid: 0,
            devid: 0,
            file: String::new(),
            size_mib: None,
            max_queues: 4,
            max_ring_order: 2,
            physical_sector_size: 512,
            info: 0,
            features: Features {
                flush: true,
                barrier: false,
                discard: true,
                persistent: true,
                max_indirect: 256,
            },
            scenario: None,
        }
    }
}

/// The vbd's backend.
pub struct Backend {
    cfg: Config,
    xs: XenStore,
    evt: EventChannels,
    disk: Disk,
    rings: Vec<BackRing>,
    fe: String,
    be: String,
    state: u32,
    fe_state: u32,
    /// The misbehaviour has struck.
    fired: Option<Instant>,
    /// Responses withheld (stall, late answers, closing, killed).
    holding: bool,
    held: Vec<(usize, BlkifResponse)>,
    last_answered: Option<BlkifResponse>,
    published: Stats,
    detach_since: Option<Instant>,
}

fn log(msg: &str) {
    eprintln!("blkif-backend: {msg}");
}

impl Backend {
    /// Opens the handles and the file, and publishes the vbd (InitWait).
    pub fn new(cfg: Config) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&cfg.file)?;
        if let Some(mib) = cfg.size_mib {
            file.set_len(mib << 20)?;
        }
        let sectors = file.metadata()?.len() / 512;
        let mut features = cfg.features;
        match cfg.scenario {
            Some(Scenario::BarrierOnly) => {
                features.flush = false;
                features.barrier = true;
            }
            // Data grants are mapped per request only without persistent
            // grants.
            Some(Scenario::KeepDataGrants) => features.persistent = false,
            _ => {}
        }
        let disk = Disk {
            file,
            sectors,
            gnt: GrantTable::open(4096)?,
            domid: cfg.domid,
            features,
            persistent_on: false,
            persistent: HashMap::new(),
            stats: Stats::default(),
            refuse_flush: cfg.scenario == Some(Scenario::FlushNotSupported),
            keep_data_grants: false,
            kept: Vec::new(),
        };
        let fe = format!("/local/domain/{}/device/vbd/{}", cfg.domid, cfg.devid);
        let be = format!(
            "/local/domain/0/backend/vbd-user/{}/{}",
            cfg.domid, cfg.devid
        );
        let mut b = Self {
            xs: XenStore::open()?,
            evt: EventChannels::open()?,
            disk,
            rings: Vec::new(),
            fe,
            be,
            state: INITIALISING,
            fe_state: 0,
            fired: None,
            holding: false,
            held: Vec::new(),
            last_answered: None,
            published: Stats::default(),
            detach_since: None,
            cfg,
        };
        b.publish()?;
        b.state = INIT_WAIT;
        Ok(b)
    }

    /// The backend node with xen-blkback's keys, then the frontend node
    /// that makes the guest probe it: each in one transaction.
    fn publish(&self) -> io::Result<()> {
        let (c, f) = (&self.cfg, &self.disk.features);
        self.xs.rm(&self.fe);
        self.xs.rm(&self.be);
        let mut nodes: Vec<(&str, String)> = vec![
            ("frontend", self.fe.clone()),
            ("frontend-id", c.domid.to_string()),
            ("online", "1".into()),
            ("mode", "w".into()),
            ("params", c.file.clone()),
            ("type", "file".into()),
            ("sectors", self.disk.sectors.to_string()),
            ("info", c.info.to_string()),
            ("sector-size", "512".into()),
            ("physical-sector-size", c.physical_sector_size.to_string()),
            ("feature-persistent", u8::from(f.persistent).to_string()),
            ("max-ring-page-order", c.max_ring_order.to_string()),
            ("multi-queue-max-queues", c.max_queues.to_string()),
        ];
        if f.flush {
            nodes.push(("feature-flush-cache", "1".into()));
        }
        if f.barrier {
            nodes.push(("feature-barrier", "1".into()));
        }
        if f.max_indirect > 0 {
            nodes.push(("feature-max-indirect-segments", f.max_indirect.to_string()));
        }
        if f.discard {
            nodes.extend([
                ("feature-discard", "1".into()),
                ("discard-granularity", "4096".into()),
                ("discard-alignment", "0".into()),
                ("discard-secure", "0".into()),
            ]);
        }
        match c.scenario {
            Some(Scenario::GarbageOptionalKeys) => overwrite(
                &mut nodes,
                &[
                    ("feature-max-indirect-segments", "lots"),
                    ("physical-sector-size", "4096x"),
                    ("discard-granularity", "-1"),
                    ("feature-persistent", "yes"),
                    ("multi-queue-max-queues", "99999999999999999999"),
                    ("max-ring-page-order", "0x10"),
                    ("feature-flush-cache", "on"),
                ],
            ),
            Some(Scenario::HugeValues) => {
                let huge = "9".repeat(3000);
                overwrite(
                    &mut nodes,
                    &[
                        ("sectors", &huge),
                        ("physical-sector-size", &huge),
                        ("info", &huge),
                    ],
                );
            }
            _ => {}
        }
        nodes.push(("state", INIT_WAIT.to_string()));
        let be_perms = [
            XsPermission {
                id: 0,
                perms: XS_PERM_NONE,
            },
            XsPermission {
                id: c.domid,
                perms: XS_PERM_READ,
            },
        ];
        self.xs.create_dir(&self.be, &be_perms, &nodes)?;
        let fe_perms = [
            XsPermission {
                id: c.domid,
                perms: XS_PERM_NONE,
            },
            XsPermission {
                id: 0,
                perms: XS_PERM_READ,
            },
        ];
        let fe_nodes = [
            ("backend", self.be.clone()),
            ("backend-id", "0".into()),
            ("virtual-device", c.devid.to_string()),
            ("device-type", "disk".into()),
            ("state", INITIALISING.to_string()),
        ];
        self.xs.create_dir(&self.fe, &fe_perms, &fe_nodes)?;
        log(&format!(
            "vbd {}/{} on {} ({} sectors), {}",
            c.domid,
            c.devid,
            c.file,
            self.disk.sectors,
            c.scenario.map_or("well-behaved", scenario::name)
        ));
        Ok(())
    }

    fn set_state(&mut self, s: u32) {
        self.state = s;
        if let Err(e) = self.xs.write(&format!("{}/state", self.be), &s.to_string()) {
            log(&format!("state {s}: {e}"));
        }
    }

    fn fe_read(&self, key: &str) -> Option<String> {
        self.xs.read(&format!("{}/{key}", self.fe))
    }

    fn fe_num(&self, key: &str) -> io::Result<Option<u32>> {
        match self.fe_read(key) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("frontend {key} '{v}'"))
            }),
        }
    }

    /// The frontend is Initialised: map its rings, bind its event
    /// channels, go Connected.
    fn connect(&mut self) -> io::Result<()> {
        let nq = self.fe_num("multi-queue-num-queues")?.unwrap_or(1);
        let order = self.fe_num("ring-page-order")?.unwrap_or(0);
        if nq == 0 || nq > self.cfg.max_queues || order > self.cfg.max_ring_order {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frontend asks {nq} queues of order {order}"),
            ));
        }
        self.disk.persistent_on = self.disk.features.persistent
            && self.fe_read("feature-persistent").as_deref() == Some("1");
        for q in 0..nq {
            let base = if nq == 1 {
                String::new()
            } else {
                format!("queue-{q}/")
            };
            let pages = 1u32 << order;
            let mut refs = Vec::new();
            for i in 0..pages {
                let key = if order == 0 {
                    format!("{base}ring-ref")
                } else {
                    format!("{base}ring-ref{i}")
                };
                refs.push(
                    self.fe_num(&key)?
                        .ok_or_else(|| io::Error::other(format!("no {key}")))?,
                );
            }
            let port = self
                .fe_num(&format!("{base}event-channel"))?
                .ok_or_else(|| io::Error::other("no event-channel"))?;
            let map = self.disk.gnt.map(self.cfg.domid, &refs, true)?;
            let local = self.evt.bind(self.cfg.domid, port)?;
            let ring =
                BackRing::new(map, pages, local).ok_or_else(|| io::Error::other("ring size"))?;
            self.rings.push(ring);
        }
        log(&format!(
            "connected: {nq} ring(s) of {} page(s), persistent grants {}",
            1u32 << order,
            if self.disk.persistent_on { "on" } else { "off" }
        ));
        self.set_state(CONNECTED);
        Ok(())
    }

    /// Unbinds and unmaps (or, misbehaving, keeps everything mapped).
    fn disconnect(&mut self) {
        if self.rings.is_empty() && self.disk.persistent.is_empty() {
            return;
        }
        let keep = self.cfg.scenario == Some(Scenario::KeepAllAtTeardown);
        for r in self.rings.drain(..) {
            self.evt.unbind(r.port);
            let m = r.into_mapping();
            if keep {
                self.disk.kept.push(m);
            } else {
                let _ = self.disk.gnt.unmap(m);
            }
        }
        self.disk.release_persistent(keep);
        if keep {
            log(&format!(
                "disconnected, {} mapping(s) kept mapped on purpose",
                self.disk.kept.len()
            ));
        }
    }

    /// The event loop, until the vbd is detached.
    pub fn run(&mut self) -> io::Result<()> {
        self.xs.watch(&self.fe, "fe")?;
        self.xs.watch(&format!("{}/test-stop", self.be), "stop")?;
        loop {
            let ready = wait_readable(&[self.xs.fd(), self.evt.fd()], 20);
            if ready.first() == Some(&true) {
                self.xs.fired();
            }
            // Every ring is served below whatever fired: drain the ports
            // (a read of /dev/xen/evtchn blocks when nothing is pending).
            if ready.get(1) == Some(&true) {
                while self.evt.pending().is_some()
                    && wait_readable(&[self.evt.fd()], 0).first() == Some(&true)
                {}
            }
            if !self.frontend_changed()? {
                return Ok(());
            }
            for q in 0..self.rings.len() {
                self.serve(q);
            }
            self.strike_timed();
            self.publish_stats();
            if self.detach_step() {
                return Ok(());
            }
        }
    }

    /// Follows the frontend's state; false once its node is gone.
    fn frontend_changed(&mut self) -> io::Result<bool> {
        let Some(s) = self.fe_read("state") else {
            log("frontend node removed");
            self.disconnect();
            self.xs.rm(&self.be);
            return Ok(false);
        };
        let fs: u32 = s.trim().parse().unwrap_or(0);
        if fs != self.fe_state {
            log(&format!(
                "frontend state {} -> {fs} (backend {})",
                self.fe_state, self.state
            ));
            self.fe_state = fs;
        }
        match (fs, self.state) {
            (INITIALISED | CONNECTED, INIT_WAIT) => {
                if let Err(e) = self.connect() {
                    log(&format!("connect: {e}"));
                    self.disconnect();
                    self.set_state(CLOSING);
                }
            }
            (CLOSING, s) if s != CLOSING && s != CLOSED => {
                self.answer_late();
                self.disconnect();
                self.set_state(CLOSING);
            }
            (CLOSED, s) if s != CLOSED => {
                self.answer_late();
                self.disconnect();
                self.set_state(CLOSED);
            }
            (INITIALISING, CLOSED) if self.detach_since.is_none() => {
                log("frontend reconnects");
                self.set_state(INIT_WAIT);
            }
            _ => {}
        }
        Ok(true)
    }

    /// `test-stop`: Closing, then once the frontend has closed (or after
    /// `CLOSE_WAIT`) the nodes go. True when done.
    fn detach_step(&mut self) -> bool {
        if self.detach_since.is_none() {
            if self.xs.read(&format!("{}/test-stop", self.be)).is_none() {
                return false;
            }
            log("detach requested");
            self.detach_since = Some(Instant::now());
            self.set_state(CLOSING);
        }
        let closed = matches!(
            self.fe_read("state").as_deref().map(str::trim),
            Some("6") | None
        );
        let late = self.detach_since.is_some_and(|t| t.elapsed() > CLOSE_WAIT);
        if !closed && !late {
            return false;
        }
        if late {
            log(&format!(
                "frontend still in state {:?} after {CLOSE_WAIT:?}: removing the vbd anyway",
                self.fe_read("state")
            ));
        }
        self.answer_late();
        self.disconnect();
        self.set_state(CLOSED);
        self.xs.rm(&self.fe);
        self.xs.rm(&self.be);
        self.publish_final();
        true
    }

    fn publish_stats(&mut self) {
        if self.disk.stats != self.published {
            self.published = self.disk.stats;
            let _ = self
                .xs
                .write(&format!("{}/test-stats", self.be), &self.published.line());
        }
    }

    fn publish_final(&self) {
        log(&format!("detached; stats {}", self.disk.stats.line()));
    }

    fn armed(&self) -> Option<Scenario> {
        self.scenario_pending()
            .filter(|_| self.disk.stats.requests >= TRIGGER_AFTER && !self.rings.is_empty())
    }

    fn scenario_pending(&self) -> Option<Scenario> {
        self.cfg.scenario.filter(|_| self.fired.is_none())
    }

    fn fire(&mut self, what: &str) {
        self.fired = Some(Instant::now());
        log(&format!(
            "misbehaving now ({}): {what}",
            self.cfg.scenario.map_or("?", scenario::name)
        ));
    }

    /// Consumes and serves the ring's requests, then publishes responses.
    fn serve(&mut self, q: usize) {
        loop {
            let rp = self.rings[q].req_prod();
            let ring = &mut self.rings[q];
            if rp.wrapping_sub(ring.req_cons) > ring.nr_ents {
                log(&format!(
                    "frontend req_prod {rp} more than a ring past {}",
                    ring.req_cons
                ));
                return;
            }
            while self.rings[q].req_cons != rp {
                let idx = self.rings[q].req_cons;
                let bytes = self.rings[q].request(idx);
                self.rings[q].req_cons = idx.wrapping_add(1);
                let req = Request::decode(&bytes);
                let status = self.disk.execute(&req);
                let rsp = BlkifResponse {
                    id: req.id(),
                    operation: req.response_operation(),
                    status,
                    ..Default::default()
                };
                self.answer(q, rsp, &req);
            }
            self.push(q);
            if !self.rings[q].more_requests() {
                return;
            }
        }
    }

    /// Writes one response, or what the scenario makes of it.
    fn answer(&mut self, q: usize, mut rsp: BlkifResponse, req: &Request) {
        if self.holding {
            self.held.push((q, rsp));
            return;
        }
        if let Some(s) = self.armed() {
            match s {
                Scenario::IdOutOfRange => {
                    rsp.id ^= 0x7fff_dead_0000_0000;
                    self.fire(&format!("response id {:#x}", rsp.id));
                }
                Scenario::IdNotInFlight => {
                    if let Some(prev) = self.last_answered {
                        self.rings[q].put_response(&rsp);
                        self.fire(&format!(
                            "a second response for id {:#x}, answered before",
                            prev.id
                        ));
                        rsp = prev;
                    }
                }
                Scenario::DuplicateId => {
                    self.rings[q].put_response(&rsp);
                    self.fire(&format!("two responses for id {:#x}", rsp.id));
                }
                Scenario::WrongOperation => {
                    rsp.operation = if rsp.operation == BLKIF_OP_READ {
                        BLKIF_OP_WRITE
                    } else {
                        BLKIF_OP_READ
                    };
                    self.fire(&format!("operation {} in the response", rsp.operation));
                }
                Scenario::UnknownStatus => {
                    rsp.status = 7;
                    self.fire("status 7");
                }
                Scenario::IndirectBadOperation if matches!(req, Request::Indirect(_)) => {
                    rsp.operation = BLKIF_OP_INDIRECT;
                    self.fire("an indirect request answered with BLKIF_OP_INDIRECT");
                }
                Scenario::MapUnsentGrant => {
                    if let Request::ReadWrite(r) = req {
                        let g = r.seg[0].gref;
                        let mut ok = 0;
                        for d in 1..=16u32 {
                            if let Ok(m) =
                                self.disk
                                    .gnt
                                    .map(self.cfg.domid, &[g.wrapping_add(d)], false)
                            {
                                ok += 1;
                                let _ = self.disk.gnt.unmap(m);
                            }
                        }
                        self.fire(&format!(
                            "mapped {ok} of 16 grant references after {g} not in this request"
                        ));
                    }
                }
                Scenario::KeepDataGrants => {
                    self.disk.keep_data_grants = true;
                    self.fire("data grants stay mapped after their responses from now on");
                }
                Scenario::Stall
                | Scenario::AnswerAfterDisconnect
                | Scenario::ClosingMidIo
                | Scenario::Killed => {
                    self.holding = true;
                    self.held.push((q, rsp));
                    self.fire("responses withheld from now on");
                    return;
                }
                _ => {}
            }
        }
        self.rings[q].put_response(&rsp);
        self.last_answered = Some(rsp);
    }

    /// Publishes responses and notifies, or corrupts `rsp_prod`.
    fn push(&mut self, q: usize) {
        let armed = self.armed();
        let ring = &mut self.rings[q];
        let good = ring.rsp_prod_pvt;
        let bad = match armed {
            Some(Scenario::RspProdPastReqProd) => Some(ring.req_prod().wrapping_add(3)),
            Some(Scenario::RspProdRingAhead) => Some(good.wrapping_add(ring.nr_ents + 1)),
            Some(Scenario::RspProdStorm) => {
                for k in 0..4000u32 {
                    ring.set_rsp_prod(if k % 2 == 0 {
                        good.wrapping_sub(k % 7 + 1)
                    } else {
                        good.wrapping_add(k % 5)
                    });
                    if k % 16 == 0 {
                        self.evt.notify(ring.port);
                    }
                }
                Some(good)
            }
            _ => None,
        };
        if let Some(v) = bad {
            let ring = &mut self.rings[q];
            ring.set_rsp_prod(v);
            self.evt.notify(ring.port);
            let s = self.cfg.scenario;
            self.fire(&format!("rsp_prod {v} (responses {good})"));
            // After a bad index the ring is not trusted by either end: no
            // more responses (a storm ends on the right value and goes on).
            self.holding = s != Some(Scenario::RspProdStorm);
            return;
        }
        if self.rings[q].push() {
            let port = self.rings[q].port;
            self.evt.notify(port);
        }
    }

    /// The misbehaviours that act on time or on xenstore, not on a
    /// response.
    fn strike_timed(&mut self) {
        let since = self.fired.map(|t| t.elapsed());
        match (self.cfg.scenario, since) {
            (Some(Scenario::ClosingMidIo), Some(t))
                if t > Duration::from_secs(1) && self.state == CONNECTED =>
            {
                log(&format!(
                    "Closing with {} request(s) unanswered",
                    self.held.len()
                ));
                self.set_state(CLOSING);
            }
            (Some(Scenario::Killed), Some(t)) if t > Duration::from_secs(1) => {
                log(&format!(
                    "exiting with {} request(s) unanswered",
                    self.held.len()
                ));
                std::process::exit(137);
            }
            _ => {}
        }
        let Some(s) = self.armed() else { return };
        let be = &self.be;
        let change: &[(&str, &str)] = match s {
            Scenario::SectorSizeChange => &[("sector-size", "4096")],
            Scenario::PersistentFlip => &[(
                "feature-persistent",
                if self.disk.features.persistent {
                    "0"
                } else {
                    "1"
                },
            )],
            Scenario::SectorsShrink => &[("sectors", "8")],
            _ => return,
        };
        for (k, v) in change {
            let _ = self.xs.write(&format!("{be}/{k}"), v);
        }
        // Rewriting Connected fires the frontend's watch, as blkback's
        // resize does.
        let _ = self
            .xs
            .write(&format!("{be}/state"), &CONNECTED.to_string());
        self.fire(&format!("{change:?} after Connected"));
    }

    /// Writes the withheld responses (answer-after-disconnect) while the
    /// rings are still mapped.
    fn answer_late(&mut self) {
        if self.cfg.scenario != Some(Scenario::AnswerAfterDisconnect) || self.held.is_empty() {
            return;
        }
        log(&format!(
            "answering {} request(s) after the frontend disconnected",
            self.held.len()
        ));
        for (q, rsp) in std::mem::take(&mut self.held) {
            if let Some(r) = self.rings.get_mut(q) {
                r.put_response(&rsp);
            }
        }
        for q in 0..self.rings.len() {
            if self.rings[q].push() {
                let port = self.rings[q].port;
                self.evt.notify(port);
            }
        }
    }
}

fn overwrite(nodes: &mut Vec<(&str, String)>, with: &[(&'static str, &str)]) {
    for (k, v) in with {
        nodes.retain(|(n, _)| n != k);
        nodes.push((k, (*v).to_string()));
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        for m in self.disk.kept.drain(..) {
            let _ = self.disk.gnt.unmap(m);
        }
    }
}
