// SPDX-License-Identifier: GPL-2.0

//! Where each misbehaviour strikes: on a response, on the response
//! producer index, on a timer or in xenstore (see `crate::scenario`).

use super::*;

impl Backend {
    pub(super) fn armed(&self) -> Option<Scenario> {
        self.scenario_pending()
            .filter(|_| self.disk.stats.requests >= TRIGGER_AFTER && !self.rings.is_empty())
    }

    pub(super) fn scenario_pending(&self) -> Option<Scenario> {
        self.cfg.scenario.filter(|_| self.fired.is_none())
    }

    pub(super) fn fire(&mut self, what: &str) {
        self.fired = Some(Instant::now());
        log(&format!(
            "misbehaving now ({}): {what}",
            self.cfg.scenario.map_or("?", scenario::name)
        ));
        // The guest's check waits for this node before it detaches.
        let _ = self.xs.write(&format!("{}/test-fired", self.be), what);
    }

    /// stall-connected: once armed, no request is taken off the ring any
    /// more (their grants are never mapped); the state stays Connected.
    pub(super) fn stops_consuming(&mut self) -> bool {
        if self.predicting() {
            return true;
        }
        if self.cfg.scenario != Some(Scenario::StallConnected) {
            return false;
        }
        if self.fired.is_none() {
            if self.armed().is_none() {
                return false;
            }
            self.fire("requests left on the ring from now on, the state Connected");
        }
        true
    }

    /// Writes one response, or what the scenario makes of it.
    pub(super) fn answer(&mut self, q: usize, mut rsp: BlkifResponse, req: &Request) {
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
                Scenario::KeepDataGrants | Scenario::NeverUnmaps => {
                    self.disk.keep_data_grants = true;
                    self.fire("data grants stay mapped after their responses from now on");
                }
                // Armed by the first answer after the trigger, struck by
                // the next request of the kind served (answered OKAY below,
                // as if its pages were let go).
                Scenario::LateWriteAfterResponse
                | Scenario::LateWriteCached
                | Scenario::LateWriteBounce
                | Scenario::LateWritePersistent
                | Scenario::LateReadAfterResponse => {
                    if self.disk.late.is_some() {
                        self.late_at = Some(Instant::now() + scenario::LATE_ACCESS_AFTER);
                        let what = match s {
                            Scenario::LateReadAfterResponse => format!(
                                "write id {:#x} answered with its data grants still mapped: \
                                 read again in {:?}, then unmapped",
                                rsp.id,
                                scenario::LATE_ACCESS_AFTER
                            ),
                            Scenario::LateWritePersistent => format!(
                                "read id {:#x} answered: {:#04x} written over its persistent \
                                 frames in {:?}",
                                rsp.id,
                                scenario::LATE_WRITE_BYTE,
                                scenario::LATE_ACCESS_AFTER
                            ),
                            _ => format!(
                                "read id {:#x} answered with its data grants still mapped: \
                                 {:#04x} written over them in {:?}, then unmapped",
                                rsp.id,
                                scenario::LATE_WRITE_BYTE,
                                scenario::LATE_ACCESS_AFTER
                            ),
                        };
                        self.fire(&what);
                    } else if self.disk.keep_next.is_none() {
                        self.disk.keep_next = Some(match s {
                            Scenario::LateReadAfterResponse => KeepNext::WriteMapping,
                            Scenario::LateWritePersistent => KeepNext::ReadPersistent,
                            _ => KeepNext::ReadMapping,
                        });
                    }
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
    pub(super) fn push(&mut self, q: usize) {
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
        // The responses are there, the notification is not; Closing
        // follows (`strike_timed`).
        if armed == Some(Scenario::ClosingAfterAnswering) && ring.rsp_prod_pvt != ring.rsp_prod() {
            let n = ring.rsp_prod_pvt.wrapping_sub(ring.rsp_prod());
            ring.set_rsp_prod(good);
            self.fire(&format!(
                "{n} response(s) published without a notification; Closing in 1 s"
            ));
            self.holding = true;
            return;
        }
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
    pub(super) fn strike_timed(&mut self) {
        self.late_access();
        self.map_predicted();
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
            (Some(Scenario::ClosingAfterAnswering), Some(t))
                if t > Duration::from_secs(1) && self.state == CONNECTED =>
            {
                log("Closing, every request consumed answered (without a notification)");
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

    /// The late access of late-write-* and late-read-after-response, once
    /// its time has come. A read's pages are written over (then unmapped;
    /// persistent frames stay mapped): a frontend that ended the read at
    /// its response has given them back to their owner by now, who sees
    /// them change. A write's pages are read again and compared with what
    /// was written to the disk (the verdict in `test-late-read`), then
    /// unmapped.
    fn late_access(&mut self) {
        if self.late_at.is_none_or(|t| Instant::now() < t) {
            return;
        }
        self.late_at = None;
        let Some(late) = self.disk.late.take() else {
            return;
        };
        let ago = scenario::LATE_ACCESS_AFTER;
        match late {
            Late::Mapped {
                mut map,
                written: None,
            } => {
                // A read's grants are mapped writable.
                let bytes = map.bytes();
                bytes.fill(scenario::LATE_WRITE_BYTE);
                let pages = bytes.len() / 4096;
                let unmapped = unmap_outcome(self.disk.gnt.unmap(map));
                log(&format!(
                    "wrote {:#04x} over the {pages} page(s) of a read answered {ago:?} ago; \
                     unmap: {unmapped}",
                    scenario::LATE_WRITE_BYTE,
                ));
            }
            Late::Mapped {
                mut map,
                written: Some(written),
            } => {
                let now = map.bytes();
                let differ = now.iter().zip(&written).filter(|(a, b)| a != b).count();
                let verdict = if differ == 0 {
                    format!("unchanged: the {} byte(s) written", written.len())
                } else {
                    format!(
                        "changed: {differ} of the {} byte(s) written differ",
                        written.len()
                    )
                };
                let unmapped = unmap_outcome(self.disk.gnt.unmap(map));
                log(&format!(
                    "read again the pages of a write answered {ago:?} ago: {verdict}; unmap: {unmapped}"
                ));
                let _ = self
                    .xs
                    .write(&format!("{}/test-late-read", self.be), &verdict);
            }
            Late::Persistent(grefs) => {
                let mut frames = 0;
                for g in &grefs {
                    if let Some(m) = self.disk.persistent.get_mut(g) {
                        m.bytes().fill(scenario::LATE_WRITE_BYTE);
                        frames += 1;
                    }
                }
                log(&format!(
                    "wrote {:#04x} over {frames} persistent frame(s) of a read answered {ago:?} ago",
                    scenario::LATE_WRITE_BYTE,
                ));
            }
        }
    }

    /// Writes the withheld responses (answer-after-disconnect) while the
    /// rings are still mapped.
    pub(super) fn answer_late(&mut self) {
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

fn unmap_outcome(r: io::Result<()>) -> String {
    match r {
        Ok(()) => "done".to_string(),
        Err(e) => e.to_string(),
    }
}
