// SPDX-License-Identifier: GPL-2.0

//! One vbd's backend: its state, the event loop and the ring service here;
//! the xenbus handshake (xen-blkback's order of keys and states) in
//! `handshake`, where each misbehaviour strikes in `misbehave`.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io;
use std::time::{Duration, Instant};

use blkcore::blkif::{BlkifResponse, Request, BLKIF_OP_INDIRECT, BLKIF_OP_READ, BLKIF_OP_WRITE};

use crate::io::{Disk, Features, KeepNext, Late, Slowness, Stats};
use crate::ring::BackRing;
use crate::scenario::{self, Scenario, TRIGGER_AFTER};
use crate::xen::{
    wait_readable, EventChannels, GrantTable, XenStore, XsPermission, XS_PERM_NONE, XS_PERM_READ,
};

mod handshake;
mod misbehave;
mod predict;

const INITIALISING: u32 = 1;
const INIT_WAIT: u32 = 2;
const INITIALISED: u32 = 3;
const CONNECTED: u32 = 4;
const CLOSING: u32 = 5;
const CLOSED: u32 = 6;

/// How long a detach waits for the frontend to close before it removes
/// the vbd anyway (as `xl block-detach --force` would): libxl's own wait
/// (`LIBXL_DESTROY_TIMEOUT`).
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// stall-connected: how long the backend's nodes stay (Connected) after
/// the frontend's node was removed, before the backend leaves: the
/// frontend's removal reads the backend's state meanwhile.
const FORCED_REMOVAL_GAP: Duration = Duration::from_secs(5);

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
    /// Honest slowness.
    pub slow: Slowness,
    /// The vbd exists, left by a backend process that was killed: take it
    /// over (see `publish`).
    pub restart: bool,
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
            slow: Slowness::default(),
            restart: false,
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
    /// When the request kept reachable (late-write-*, late-read-*) is
    /// accessed.
    late_at: Option<Instant>,
    published: Stats,
    detach_since: Option<Instant>,
    /// Restarted, and the frontend has not left the Connected state it
    /// had with the process before.
    stale_frontend: bool,
    /// map-predicted-grants.
    predicted: predict::Predicted,
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
            // Without indirect segments, so that the frontend can offer FUA
            // (an indirect request cannot carry a barrier) and a forced
            // write goes out as a barrier carrying its data; with them it
            // is a plain write between empty barriers.
            Some(Scenario::BarrierOnly) => {
                features.flush = false;
                features.barrier = true;
                features.max_indirect = 0;
            }
            // Data grants are mapped per request only without persistent
            // grants (and only then are they the frontend's own pages).
            // Every data grant reference in the request itself, mapped
            // per request.
            Some(Scenario::MapPredictedGrants) => {
                features.persistent = false;
                features.max_indirect = 0;
            }
            Some(
                Scenario::KeepDataGrants
                | Scenario::NeverUnmaps
                | Scenario::NeverUnmapsForced
                | Scenario::LateWriteAfterResponse
                | Scenario::LateWriteCached
                | Scenario::LateWriteBounce
                | Scenario::LateReadAfterResponse,
            ) => features.persistent = false,
            // Its `feature-persistent` is "yes", which a frontend reads as
            // absent: this backend then behaves as one without them (the
            // garbage is in the keys, not in how it serves).
            Some(Scenario::GarbageOptionalKeys) => features.persistent = false,
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
            fail_flush: cfg.scenario == Some(Scenario::FlushError),
            refuse_discard: cfg.scenario == Some(Scenario::DiscardNotSupported),
            keep_data_grants: false,
            kept: Vec::new(),
            keep_next: None,
            late: None,
            slow: cfg.slow,
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
            late_at: None,
            published: Stats::default(),
            detach_since: None,
            stale_frontend: cfg.restart,
            predicted: predict::Predicted::default(),
            cfg,
        };
        b.publish()?;
        b.state = INIT_WAIT;
        Ok(b)
    }

    /// The event loop, until the vbd is detached.
    pub fn run(&mut self) -> io::Result<()> {
        self.xs.watch(&self.fe, "fe")?;
        self.xs.watch(&format!("{}/test-stop", self.be), "stop")?;
        loop {
            // Never blocks for long: what acts on time (`strike_timed`)
            // runs on every pass, quiet ring or not.
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
                return self.leave();
            }
            for q in 0..self.rings.len() {
                self.serve(q);
            }
            self.strike_timed();
            self.publish_stats();
            if self.detach_step() {
                return self.leave();
            }
        }
    }

    /// The vbd is gone: the process ends, unmapping what it still maps
    /// (`Drop`), or (never-unmaps*) stays with it mapped until killed.
    fn leave(&mut self) -> io::Result<()> {
        if !self
            .cfg
            .scenario
            .is_some_and(|s| scenario::LINGERS.contains(&s))
        {
            return Ok(());
        }
        log(&format!(
            "staying with {} data mapping(s) never unmapped, until killed",
            self.disk.kept.len()
        ));
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
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
                if self.stops_consuming() {
                    break;
                }
                // What the ring holds unanswered, read afresh as each
                // request is taken: a slow backend's ring fills between
                // two of them.
                let ring = &mut self.rings[q];
                let waiting = u64::from(ring.req_prod().wrapping_sub(ring.rsp_prod_pvt));
                self.disk.stats.most_waiting = self.disk.stats.most_waiting.max(waiting);
                let idx = self.rings[q].req_cons;
                let bytes = self.rings[q].request(idx);
                self.rings[q].req_cons = idx.wrapping_add(1);
                let req = Request::decode(&bytes);
                self.taken(&req);
                let status = self.disk.execute(&req);
                let rsp = BlkifResponse {
                    id: req.id(),
                    operation: req.response_operation(),
                    status,
                    ..Default::default()
                };
                self.answer(q, rsp, &req);
                // Slow on purpose: each answer goes out as it is made (a
                // ring full of requests is answered one at a time, not all
                // at once when the last is served).
                if !self.disk.slow.of(&req).is_zero() {
                    self.push(q);
                }
            }
            self.push(q);
            if self.stops_consuming() || !self.rings[q].more_requests() {
                return;
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
        // Detached before its late access: unmapped untouched.
        if let Some(Late::Mapped { map, .. }) = self.disk.late.take() {
            let _ = self.disk.gnt.unmap(map);
        }
    }
}
