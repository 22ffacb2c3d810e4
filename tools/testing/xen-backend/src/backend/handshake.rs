// SPDX-License-Identifier: GPL-2.0

//! The xenbus side of the backend: the nodes it publishes (xen-blkback's
//! keys, or garbage when asked), the frontend's rings and event channels
//! at connect, the state machine, and the detach.

use super::*;

impl Backend {
    /// The backend node with xen-blkback's keys, then the frontend node
    /// that makes the guest probe it: each in one transaction.
    ///
    /// Restarted (`--restart`): the vbd is there, left by the process
    /// before (killed): the backend node's keys are written again, state
    /// InitWait last, and the frontend node is left alone.
    pub(super) fn publish(&self) -> io::Result<()> {
        let (c, f) = (&self.cfg, &self.disk.features);
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
        if c.restart {
            for (k, v) in &nodes {
                self.xs.write(&format!("{}/{k}", self.be), v)?;
            }
            // The guest's record that this backend came back.
            self.xs.write(&format!("{}/test-restarted", self.be), "1")?;
            log(&format!(
                "vbd {}/{} on {}: started again, InitWait",
                c.domid, c.devid, c.file
            ));
            return Ok(());
        }
        self.xs.rm(&self.fe);
        self.xs.rm(&self.be);
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
        let mut fe_nodes = vec![
            ("backend", self.be.clone()),
            ("backend-id", "0".into()),
            ("virtual-device", c.devid.to_string()),
            ("device-type", "disk".into()),
            ("state", INITIALISING.to_string()),
        ];
        // What a toolstack writes for a backend it does not trust (libxl's
        // `trusted` disk option): the frontend bounces its data.
        if c.scenario == Some(Scenario::LateWriteBounce) {
            fe_nodes.push(("trusted", "0".into()));
        }
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

    pub(super) fn set_state(&mut self, s: u32) {
        self.state = s;
        if let Err(e) = self.xs.write(&format!("{}/state", self.be), &s.to_string()) {
            log(&format!("state {s}: {e}"));
        }
    }

    pub(super) fn fe_read(&self, key: &str) -> Option<String> {
        self.xs.read(&format!("{}/{key}", self.fe))
    }

    pub(super) fn fe_num(&self, key: &str) -> io::Result<Option<u32>> {
        match self.fe_read(key) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, format!("frontend {key} '{v}'"))
            }),
        }
    }

    /// The frontend is Initialised: map its rings, bind its event
    /// channels, go Connected.
    pub(super) fn connect(&mut self) -> io::Result<()> {
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
    pub(super) fn disconnect(&mut self) {
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

    /// Follows the frontend's state; false once its node is gone.
    pub(super) fn frontend_changed(&mut self) -> io::Result<bool> {
        if self.serving_forced() {
            return Ok(true);
        }
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
        // Restarted: the frontend still says Connected to the process
        // before; its rings are not for this one. It reconnects through
        // Initialised.
        if fs != CONNECTED {
            self.stale_frontend = false;
        }
        match (fs, self.state) {
            (INITIALISED | CONNECTED, INIT_WAIT) if !self.stale_frontend => {
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

    /// never-unmaps-forced: the frontend's node was removed less than
    /// [`scenario::FORCED_SERVE`] ago; the backend serves on, Connected.
    fn serving_forced(&self) -> bool {
        self.cfg.scenario == Some(Scenario::NeverUnmapsForced)
            && self
                .detach_since
                .is_some_and(|t| t.elapsed() < scenario::FORCED_SERVE)
    }

    /// `test-stop`: Closing, then once the frontend has closed (or after
    /// `CLOSE_WAIT`) the nodes go. True when done.
    pub(super) fn detach_step(&mut self) -> bool {
        if self.detach_since.is_none() {
            if self.xs.read(&format!("{}/test-stop", self.be)).is_none() {
                return false;
            }
            log("detach requested");
            self.detach_since = Some(Instant::now());
            match self.cfg.scenario {
                Some(Scenario::StallConnected) => log("staying Connected"),
                Some(Scenario::NeverUnmapsForced) => {
                    self.xs.rm(&self.fe);
                    self.disk.keep_data_grants = true;
                    self.fire(&format!(
                        "frontend node removed, the state Connected: served {:?} more, \
                         each data grant kept mapped, never unmapped",
                        scenario::FORCED_SERVE
                    ));
                }
                _ => self.set_state(CLOSING),
            }
        }
        if self.serving_forced() {
            return false;
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
        if self.cfg.scenario == Some(Scenario::StallConnected) {
            // The frontend's node goes first, its backend's state still
            // Connected (as `xl block-detach --force` leaves it): the
            // frontend's removal finds the backend serving and must not
            // wait for its requests.
            self.xs.rm(&self.fe);
            log("frontend node removed, the state Connected");
            std::thread::sleep(FORCED_REMOVAL_GAP);
        }
        self.answer_late();
        self.disconnect();
        self.set_state(CLOSED);
        self.xs.rm(&self.fe);
        self.xs.rm(&self.be);
        self.publish_final();
        true
    }
}
