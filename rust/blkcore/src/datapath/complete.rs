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
                return Drained::NonePending;
            }
            Ok(n) => {
                self.stats.responses += u64::from(n);
                return Drained::Responses;
            }
            Err(DrainError::Ring(e)) => Fault::Producer(e),
            Err(DrainError::Response(f)) => f,
            Err(DrainError::Budget) => Fault::Storm,
        };
        self.break_ring(mem, fault, done)
    }

    /// A request timed out at `now_ms` (it waited a whole `io_timeout`):
    /// whether the ring answered nothing for at least `limit_ms`
    /// ([`crate::stall::give_up_limit`]; `None`: wait for ever, as
    /// upstream). The caller drains the responses already on the ring
    /// first, and breaks a ring given up on ([`Fault::Unanswered`]).
    pub fn timed_out(&mut self, now_ms: u64, limit_ms: Option<u64>) -> Silence {
        self.stats.timeouts += 1;
        self.stall.timed_out(self.stats.responses, now_ms, limit_ms)
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
    /// grants back. A request whose own pages the backend still maps is
    /// held instead (see [`DataPath::retry_held`]); a bounce or indirect
    /// frame it still maps is retired from the pool. Returns how many
    /// requests failed now.
    pub fn fail_in_flight<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        done: &mut impl FnMut(Rq, Status),
    ) -> u32 {
        let mut failed = 0u32;
        for id in 0..self.geometry().ring_size as usize {
            if self.slots.as_ref().get(id).is_none_or(|s| s.held) {
                continue;
            }
            if self.put_grants(mem, id).pages_held {
                self.hold(id);
                continue;
            }
            self.cancel_id(id as u32);
            if let Some(rq) = self.slots.as_mut().get_mut(id).and_then(|s| s.rq.take()) {
                failed = failed.saturating_add(1);
                done(rq, Status::IoErr);
            }
        }
        failed
    }

    /// Requests held because the backend still maps their pages.
    pub fn held(&self) -> u32 {
        self.inflight.as_ref().first().map_or(0, |t| t.held())
    }

    /// Tries again to end the grants of every held request; those the
    /// backend has let go of end now with [`Status::IoErr`] (a read's
    /// data may have changed after the answer; a write's outcome is the
    /// backend's word, which broke the protocol). Returns how many ended.
    pub fn retry_held<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        done: &mut impl FnMut(Rq, Status),
    ) -> u32 {
        if self.held() == 0 {
            return 0;
        }
        self.end_held(mem, done, false)
    }

    /// Ends every held request with [`Status::IoErr`] although the backend
    /// may still map its pages: the grants it maps are ended with a
    /// deferred release (the grant table keeps each page until the backend
    /// unmaps it: a leak while it does not, never a page freed under it).
    /// For a removal, which cannot wait for ever for a backend that never
    /// unmaps. Returns how many ended.
    pub fn abandon_held<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        done: &mut impl FnMut(Rq, Status),
    ) -> u32 {
        self.end_held(mem, done, true)
    }

    /// Ends the held requests whose grants end now ([`DataPath::retry_held`]),
    /// or all of them, still-mapped grants deferred (`abandon`:
    /// [`DataPath::abandon_held`]), with [`Status::IoErr`].
    fn end_held<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        done: &mut impl FnMut(Rq, Status),
        abandon: bool,
    ) -> u32 {
        let mut ended = 0u32;
        for id in 0..self.slots.as_ref().len() {
            if !self.slots.as_ref().get(id).is_some_and(|s| s.held) {
                continue;
            }
            if abandon {
                self.defer_direct(mem, id);
            } else if self.end_direct(mem, id).is_err() {
                continue;
            }
            let rq = self.slots.as_mut().get_mut(id).and_then(|s| {
                s.held = false;
                s.rq.take()
            });
            if let Some(t) = self.inflight() {
                t.unhold(id as u32);
            }
            if let Some(rq) = rq {
                ended = ended.saturating_add(1);
                done(rq, Status::IoErr);
            }
        }
        ended
    }

    /// Holds slot `id`: its request is not ended and its id not reused
    /// until [`DataPath::retry_held`] finds the backend let go.
    pub(super) fn hold(&mut self, id: usize) {
        if let Some(s) = self.slots.as_mut().get_mut(id) {
            s.held = true;
        }
        if let Some(t) = self.inflight() {
            t.hold(id as u32);
        }
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
        let (nr_segments, copies) = self
            .slots
            .as_ref()
            .get(id)
            .map_or((0, 0), |s| (s.nr_segments, s.nr_copies as usize));
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
            for cs in self.tables.copies(id).iter().take(copies) {
                if mem.copy(cs.bounce, cs.off, cs.data, cs.off, cs.len).is_ok() {
                    copied += u64::from(cs.len);
                }
            }
            let _ = self.pool.account_copy(copied);
        }
        let released = self.put_grants(mem, id);
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
        if released.pages_held {
            // The backend answered but still maps the request's own pages:
            // ending it would give them back to their owner (the page
            // cache, an O_DIRECT buffer) while the backend can write them.
            self.hold(id);
        } else if let Some(rq) = self.slots.as_mut().get_mut(id).and_then(|s| s.rq.take()) {
            done(rq, status);
        }
        // A grant the backend kept (without persistent grants) is a
        // protocol error: the caller breaks the ring.
        match released.still_mapped {
            Some(g) => Err(Fault::StillMapped(g)),
            None => Ok(status),
        }
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

    /// Gives back every grant of slot `id` (data and indirect). The
    /// pool's (bounce and indirect frames) are ended, and retired if the
    /// backend still maps them (see [`GrantPool::put`]); the caller's own
    /// pages, granted directly, are ended if the backend let go, else
    /// kept for a retry (see [`DataPath::end_direct`]).
    pub(super) fn put_grants<M: Memory<Frame = F>>(&mut self, mem: &mut M, id: usize) -> Released {
        let Some(s) = self.slots.as_mut().get_mut(id) else {
            return Released::default();
        };
        let (ng, ni) = (s.nr_data_grants as usize, s.nr_indirect_pages as usize);
        s.nr_data_grants = 0;
        s.nr_indirect_pages = 0;
        s.nr_copies = 0;
        let direct = self.end_direct(mem, id).err();
        let mut released = Released {
            still_mapped: direct,
            pages_held: direct.is_some(),
        };
        let data = self.tables.data_grants(id);
        let ind_pages = self.tables.indirect_grants(id);
        let data = data.get(..ng).unwrap_or(data);
        let ind_pages = ind_pages.get(..ni).unwrap_or(ind_pages);
        for h in data.iter().chain(ind_pages) {
            match self.pool.put(mem, *h) {
                Ok(_) => {}
                Err(GrantError::StillMapped(g)) => {
                    released.still_mapped.get_or_insert(g);
                }
                Err(_) => {
                    released.still_mapped.get_or_insert(INVALID_GRANT_REF);
                }
            }
        }
        released
    }
}

/// What [`DataPath::put_grants`] found.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Released {
    /// The first grant the backend still mapped (a protocol error without
    /// persistent grants).
    pub(super) still_mapped: Option<GrantRef>,
    /// One of them is the caller's own page: the request must be held.
    pub(super) pages_held: bool,
}
