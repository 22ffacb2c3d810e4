// SPDX-License-Identifier: GPL-2.0

//! map-predicted-grants: a backend that maps the grant references it
//! predicts. A frontend that grants a request's pages before it knows the
//! ring has room, and sends the request back unsent when it has none,
//! ends those grants while this backend maps them; the request is sent
//! again later with new ones and ends, and its pages go back to their
//! owner while the backend still reaches them through the old mapping.

use std::collections::HashSet;

use super::*;
use crate::xen::Mapping;

/// How long the ring is left full (no request taken off it) once it
/// struck: the references are mapped meanwhile.
const PREDICT_FOR: Duration = Duration::from_secs(5);

/// Reads on the rings, not yet taken, that make it strike: the first
/// read after the trigger (the guest's readers start together once its
/// writes, one at a time, are done), so that the reads behind it fill the
/// ring and the next ones go back unsent. Their grants are writable.
const READS_WAITING: usize = 1;

/// What the scenario keeps.
#[derive(Default)]
pub(super) struct Predicted {
    /// Every data grant reference of a request served so far, the most
    /// recent last: those the frontend grants again, the most recently
    /// freed first.
    seen: Vec<u32>,
    /// Those mapped while no request on a ring carried them, and whether
    /// writable.
    mapped: Vec<(u32, Mapping, bool)>,
    /// How many were ever mapped so, and later came on a request (sent
    /// after all: unmapped before it was served).
    sent_later: u32,
    /// When the ring is served again ([`scenario::LATE_ACCESS_AFTER`]
    /// later, what is still mapped is written over and unmapped).
    until: Option<Instant>,
}

/// The data grant references `req` carries (no indirect segments are
/// offered with this scenario).
fn grefs(req: &Request) -> Vec<u32> {
    match req {
        Request::ReadWrite(r) => r
            .seg
            .iter()
            .take(usize::from(r.nr_segments))
            .map(|s| s.gref)
            .collect(),
        _ => Vec::new(),
    }
}

impl Backend {
    /// The requests on the rings, not yet taken.
    fn waiting(&mut self) -> Vec<Request> {
        let mut v = Vec::new();
        for r in self.rings.iter_mut() {
            let rp = r.req_prod();
            if rp.wrapping_sub(r.req_cons) > r.nr_ents {
                continue;
            }
            let mut i = r.req_cons;
            while i != rp {
                v.push(Request::decode(&r.request(i)));
                i = i.wrapping_add(1);
            }
        }
        v
    }

    /// map-predicted-grants: whether the rings are left alone now. It
    /// strikes once armed and [`READS_WAITING`] reads wait on the rings.
    pub(super) fn predicting(&mut self) -> bool {
        if self.cfg.scenario != Some(Scenario::MapPredictedGrants) {
            return false;
        }
        if self.fired.is_none() {
            if self.armed().is_none() {
                return false;
            }
            let reads = self
                .waiting()
                .iter()
                .filter(|r| matches!(r, Request::ReadWrite(x) if x.operation == BLKIF_OP_READ))
                .count();
            if reads < READS_WAITING {
                return false;
            }
            self.predicted.until = Some(Instant::now() + PREDICT_FOR);
            self.fire(&format!(
                "the rings left full for {PREDICT_FOR:?} from a read on; every grant \
                 reference seen before and on no request mapped meanwhile"
            ));
        }
        self.predicted.until.is_some_and(|t| Instant::now() < t)
    }

    /// A request is taken: its grants are recorded, and unmapped if they
    /// were mapped as predicted (it was sent after all).
    pub(super) fn taken(&mut self, req: &Request) {
        if self.cfg.scenario != Some(Scenario::MapPredictedGrants) {
            return;
        }
        for g in grefs(req) {
            self.predicted.seen.retain(|&x| x != g);
            self.predicted.seen.push(g);
            if let Some(i) = self.predicted.mapped.iter().position(|(m, _, _)| *m == g) {
                let (_, m, _) = self.predicted.mapped.swap_remove(i);
                let _ = self.disk.gnt.unmap(m);
                self.predicted.sent_later += 1;
            }
        }
    }

    /// On every pass while the rings are left alone: maps each reference
    /// seen before that no request on a ring carries (writable if it can).
    /// Then, [`scenario::LATE_ACCESS_AFTER`] after the rings are served
    /// again, writes over what is still mapped and unmaps it; the count
    /// goes to the `test-predicted` node.
    pub(super) fn map_predicted(&mut self) {
        let Some(until) = self.predicted.until else {
            return;
        };
        let now = Instant::now();
        if now < until {
            let on_rings: HashSet<u32> = self.waiting().iter().flat_map(grefs).collect();
            let candidates: Vec<u32> = self.predicted.seen.iter().rev().copied().collect();
            for g in candidates {
                if on_rings.contains(&g) || self.predicted.mapped.iter().any(|(m, _, _)| *m == g) {
                    continue;
                }
                let domid = self.cfg.domid;
                if let Ok(m) = self.disk.gnt.map(domid, &[g], true) {
                    self.predicted.mapped.push((g, m, true));
                } else if let Ok(m) = self.disk.gnt.map(domid, &[g], false) {
                    self.predicted.mapped.push((g, m, false));
                }
            }
            return;
        }
        if now < until + scenario::LATE_ACCESS_AFTER {
            return;
        }
        self.predicted.until = None;
        let (mut writable, mut n) = (0, 0);
        for (_, mut m, w) in std::mem::take(&mut self.predicted.mapped) {
            if w {
                m.bytes().fill(scenario::LATE_WRITE_BYTE);
                writable += 1;
            }
            n += 1;
            let _ = self.disk.gnt.unmap(m);
        }
        let what = format!(
            "{n} grant reference(s) mapped that no request carried ({writable} writable, written \
             {:#04x}); {} mapped so came on a request later",
            scenario::LATE_WRITE_BYTE,
            self.predicted.sent_later
        );
        log(&what);
        let _ = self.xs.write(&format!("{}/test-predicted", self.be), &what);
    }
}
