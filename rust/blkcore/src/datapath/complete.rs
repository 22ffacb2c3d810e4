// SPDX-License-Identifier: GPL-2.0

//! Completion: responses → validation → copy back → grants released →
//! the request's status (`blkif_interrupt`, `blkif_completion`); and the
//! way out when the backend breaks the protocol.

use super::*;

impl<S: Storage, F: Copy, Rq> DataPath<S, F, Rq> {
    /// One pass of the completion loop over `front` on `ring`: finished
    /// requests go to `done` with their status. Bounded by the ring size
    /// (see [`FrontRing::drain_responses`]).
    ///
    /// Bad backend input breaks the ring: every request still in flight
    /// ends with [`Status::IoErr`] right away (upstream leaves them on the
    /// ring, where they hang removal and unload forever).
    pub fn drain<M: Memory<Frame = F>, R: SharedRing>(
        &mut self,
        mem: &mut M,
        front: &mut FrontRing,
        ring: &mut R,
        done: &mut impl FnMut(Rq, Status),
    ) -> Drained {
        let r = front.drain_responses(ring, |rsp| self.complete(mem, &rsp, done).map(|_| ()));
        self.stats.interrupts += 1;
        let fault = match r {
            Ok(0) => {
                self.stats.spurious_interrupts += 1;
                return Drained::Nothing;
            }
            Ok(_) => return Drained::Some,
            Err(DrainError::Ring(e)) => Fault::Producer(e),
            Err(DrainError::Response(f)) => f,
            Err(DrainError::Budget) => Fault::Storm,
        };
        self.break_ring(mem, fault, done)
    }

    /// The backend broke the protocol (`fault`): every request in flight
    /// fails. Also the fault-injection entry of the kernel's tests.
    pub fn break_ring<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        fault: Fault,
        done: &mut impl FnMut(Rq, Status),
    ) -> Drained {
        self.stats.errors += 1;
        let failed = self.fail_in_flight(mem, done);
        Drained::Broken { fault, failed }
    }

    /// Fails every request in flight ([`Status::IoErr`]) and gives its
    /// grants back; those the backend still maps are released when it
    /// unmaps them. Returns how many requests there were.
    pub fn fail_in_flight<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        done: &mut impl FnMut(Rq, Status),
    ) -> u32 {
        let mut failed = 0u32;
        for id in 0..self.geo.ring_size as usize {
            let rq = self.slots.as_mut().get_mut(id).and_then(|s| s.rq.take());
            // Grants of this slot, still mapped or not: the pool defers
            // what the backend holds.
            let _ = self.put_grants(mem, id);
            self.cancel_id(id as u32);
            if let Some(rq) = rq {
                failed = failed.saturating_add(1);
                done(rq, Status::IoErr);
            }
        }
        failed
    }

    /// Completes the request `rsp` answers: its status goes to `done`
    /// (with its request, if the slot holds one) and is returned. `Err` is
    /// the backend's protocol error: the request (if any) is ended, the
    /// caller breaks the ring.
    pub fn complete<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        rsp: &BlkifResponse,
        done: &mut impl FnMut(Rq, Status),
    ) -> Result<Status, Fault> {
        let c = self
            .inflight()
            .ok_or(Fault::Response(ResponseError::BadId(rsp.id)))?
            .complete(rsp)
            .map_err(Fault::Response)?;
        let id = c.id as usize;
        let wire = self.geo.wire_max as usize;
        let (nr_segments, copies) = self
            .slots
            .as_ref()
            .get(id)
            .map_or((0, 0), |s| (s.nr_segments, s.copies as usize));
        let verdict = Verdict::of(&c, nr_segments);
        if let RspStatus::Unknown(s) = c.status {
            if !self.unknown_status_seen {
                self.unknown_status_seen = true;
                self.notes.unknown_status = Some((s, c.operation));
            }
        }
        // Reads through bounce frames: copy the data back before the
        // grants go.
        if verdict == Verdict::Ok && c.operation == BLKIF_OP_READ && self.n.copy_data {
            let mut copied = 0u64;
            for cs in self.copies.as_ref().iter().skip(id * wire).take(copies) {
                if mem.copy(cs.bounce, cs.off, cs.data, cs.off, cs.len).is_ok() {
                    copied += u64::from(cs.len);
                }
            }
            let _ = self.pool.account_copy(copied);
        }
        let grants = self.put_grants(mem, id);
        let rq = self.slots.as_mut().get_mut(id).and_then(|s| s.rq.take());
        let status = match verdict {
            Verdict::Ok => Status::Ok,
            Verdict::IoError => Status::IoErr,
            Verdict::FlushWithdrawn { with_data } => {
                // Once: later flushes no longer reach the backend.
                if self.n.flush.take().is_some() {
                    self.notes.flush = Some(c.operation == BLKIF_OP_WRITE_BARRIER);
                }
                if with_data {
                    Status::IoErr
                } else {
                    Status::Ok
                }
            }
            Verdict::DiscardWithdrawn => {
                if self.n.discard.take().is_some() {
                    self.notes.discard = true;
                }
                Status::NotSupp
            }
        };
        if let Some(rq) = rq {
            done(rq, status);
        }
        // The request is ended either way; a grant the backend kept
        // (without persistent grants) is a protocol error.
        grants.map(|()| status)
    }

    /// Marks request `rq` of (response) operation `op` with `nr_segments`
    /// segments as in flight without building it, and returns its id: the
    /// KUnit suite and the fuzz targets feed the completion path this way.
    pub fn fake_in_flight(&mut self, op: u8, nr_segments: u32, rq: Rq) -> Option<u32> {
        let id = self.alloc_id(op, false, nr_segments).ok()?;
        if let Some(s) = self.slots.as_mut().get_mut(id as usize) {
            s.rq = Some(rq);
        }
        Some(id)
    }

    /// Gives back every grant of slot `id` (data and indirect). `Err` if
    /// the backend still maps one without persistent grants: the grant's
    /// release is deferred (the kernel's grant table keeps a reference on
    /// the page until the backend unmaps it, so the memory is not freed),
    /// but the frame's owner, the request or the pool, has it back while
    /// the backend can still write it. Holding the request until the
    /// release instead is the open fix.
    pub(super) fn put_grants<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        id: usize,
    ) -> Result<(), Fault> {
        let (wire, ind) = (self.geo.wire_max as usize, self.geo.indirect_pages as usize);
        let Some(s) = self.slots.as_mut().get_mut(id) else {
            return Err(Fault::Response(ResponseError::BadId(id as u64)));
        };
        let (ng, ni, direct) = (s.grants as usize, s.indirect as usize, s.direct);
        s.grants = 0;
        s.indirect = 0;
        s.copies = 0;
        let mut still_mapped = if direct != 0 {
            self.end_direct(mem, id).err()
        } else {
            None
        };
        let data = self.grants.as_ref().get(id * wire..).unwrap_or(&[]);
        let ind_pages = self.indirect.as_ref().get(id * ind..).unwrap_or(&[]);
        let data = data.get(..ng).unwrap_or(data);
        let ind_pages = ind_pages.get(..ni).unwrap_or(ind_pages);
        for h in data.iter().chain(ind_pages) {
            match self.pool.put(mem, *h) {
                Ok(_) => {}
                Err(GrantError::StillMapped(g)) => {
                    still_mapped.get_or_insert(g);
                }
                Err(_) => {
                    still_mapped.get_or_insert(INVALID_GRANT_REF);
                }
            }
        }
        match still_mapped {
            Some(g) => Err(Fault::StillMapped(g)),
            None => Ok(()),
        }
    }
}
