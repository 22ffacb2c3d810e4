// SPDX-License-Identifier: GPL-2.0

//! Submission: a request → grants, bounce copies, indirect pages → one
//! ring slot (`blkif_queue_request`).

use super::*;

impl<S: Storage, F: Copy, Rq> DataPath<S, F, Rq> {
    /// Puts one request on the ring (not yet visible to the backend: push
    /// with [`FrontRing::push_requests_and_check_notify`] once per batch).
    /// `pieces` are the request's data (reads and writes).
    ///
    /// On `Err` the request comes back untouched, nothing of it reached
    /// the ring, and every grant taken for it was given back.
    pub fn queue<M: Memory<Frame = F>, R: SharedRing>(
        &mut self,
        mem: &mut M,
        front: &mut FrontRing,
        ring: &mut R,
        rq: Rq,
        req: Request,
        pieces: &[Piece<F>],
    ) -> Result<(), (Rq, QueueError)> {
        if front.is_full() {
            self.stats.busy += 1;
            return Err((rq, QueueError::Busy));
        }
        let r = match req {
            Request::Flush => self.prepare_flush(),
            Request::Discard {
                sector,
                nr_sectors,
                secure,
            } => self.prepare_discard(sector, nr_sectors, secure),
            Request::Read { sector } => self.prepare_rw(mem, RwOp::Read, sector, pieces),
            Request::Write { sector, fua } => {
                let op = RwOp::for_data(true, fua, self.n.flush);
                self.prepare_rw(mem, op, sector, pieces)
            }
        };
        let r = r.and_then(|(id, entry)| {
            if front.put_request(ring, &entry).is_ok() {
                Ok(id)
            } else {
                self.release_unsent(mem, id);
                Err(QueueError::Busy)
            }
        });
        match r {
            Ok(id) => {
                if let Some(s) = self.slots.as_mut().get_mut(id as usize) {
                    s.rq = Some(rq);
                }
                self.stats.requests += 1;
                Ok(())
            }
            Err(e) => {
                if e == QueueError::Busy {
                    self.stats.busy += 1;
                }
                Err((rq, e))
            }
        }
    }

    fn prepare_flush(&mut self) -> Result<(u32, RingEntryBytes), QueueError> {
        let Some(kind) = self.n.flush else {
            return Err(QueueError::Nothing);
        };
        let barrier = kind == FlushKind::Barrier;
        let op = if barrier {
            BLKIF_OP_WRITE_BARRIER
        } else {
            BLKIF_OP_FLUSH_DISKCACHE
        };
        let id = self.alloc_id(op, false, 0)?;
        Ok((id, encode_flush(u64::from(id), self.handle, barrier)))
    }

    fn prepare_discard(
        &mut self,
        sector: u64,
        nr_sectors: u64,
        secure: bool,
    ) -> Result<(u32, RingEntryBytes), QueueError> {
        let Some(d) = self.n.discard else {
            return Err(QueueError::Io);
        };
        let id = self.alloc_id(BLKIF_OP_DISCARD, false, 0)?;
        match encode_discard(u64::from(id), sector, nr_sectors, secure && d.secure) {
            Ok(e) => Ok((id, e)),
            Err(_) => {
                self.cancel_id(id);
                Err(QueueError::Io)
            }
        }
    }

    /// Gives back the grants of a request that never reached the ring and
    /// frees its id. The backend was never told of them, so one it maps
    /// anyway is hostile: its release is deferred and it counts as a
    /// backend error.
    fn release_unsent<M: Memory<Frame = F>>(&mut self, mem: &mut M, id: u32) {
        if self.put_grants(mem, id as usize).is_err() {
            self.stats.errors += 1;
        }
        self.cancel_id(id);
    }

    fn prepare_rw<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        op: RwOp,
        sector: u64,
        pieces: &[Piece<F>],
    ) -> Result<(u32, RingEntryBytes), QueueError> {
        let max = self.geo.wire_max;
        // Pieces -> per-frame segments (the first `nr` of `mapped`).
        let summary = map_pieces(pieces, max, self.mapped.as_mut()).map_err(|_| QueueError::Io)?;
        let nr = summary.nr_segments;
        let lay = layout(
            nr,
            if self.n.indirect_segments != 0 {
                max
            } else {
                0
            },
        )
        .map_err(|_| QueueError::Io)?;
        let indirect = matches!(lay, Layout::Indirect { .. });
        // An indirect request carries no barrier or flush.
        if indirect && !matches!(op, RwOp::Read | RwOp::Write) {
            return Err(QueueError::Io);
        }
        // The response echoes `indirect_op` for indirect requests.
        let id = self.alloc_id(op.wire(), indirect, nr)?;
        let r = self.grant_segments(mem, op, id, nr).and_then(|()| {
            let hdr = RwHeader {
                op,
                id: u64::from(id),
                handle: self.handle,
                sector,
            };
            let segs = self.segs.as_ref().get(..nr as usize).unwrap_or(&[]);
            match lay {
                Layout::Indirect { pages } => self.fill_indirect(mem, id, nr, pages, &hdr),
                Layout::Direct => encode_direct(&hdr, segs).map_err(|_| QueueError::Io),
            }
        });
        match r {
            Ok(entry) => {
                if indirect {
                    self.stats.indirect_requests += 1;
                }
                Ok((id, entry))
            }
            Err(e) => {
                self.release_unsent(mem, id);
                Err(e)
            }
        }
    }

    /// Grants the `nr` mapped segments of request `id` (bouncing writes,
    /// recording reads to copy back) and fills `segs`.
    ///
    /// The loop every segment of every request goes through, under the
    /// ring lock: the slot and the request's ranges of the flat buffers
    /// are looked up once, not per segment.
    fn grant_segments<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        op: RwOp,
        id: u32,
        nr: u32,
    ) -> Result<(), QueueError> {
        let (idu, nr) = (id as usize, nr as usize);
        let base = idu * self.geo.wire_max as usize;
        let readonly = op.backend_reads_only();
        let copy_data = self.n.copy_data;
        let Self {
            pool,
            slots,
            grants,
            copies,
            mapped,
            segs,
            stats,
            ..
        } = self;
        let io = QueueError::Io;
        let slot = slots.as_mut().get_mut(idu).ok_or(io)?;
        let mapped = mapped.as_ref().get(..nr).ok_or(io)?;
        let handles = grants.as_mut().get_mut(base..).ok_or(io)?;
        let copies = copies.as_mut().get_mut(base..).unwrap_or(&mut []);
        let segs = segs.as_mut().get_mut(..nr).ok_or(io)?;
        if handles.len() < nr {
            return Err(io);
        }
        let mut copied = 0u64;
        for ((m, handle), seg) in mapped.iter().zip(handles.iter_mut()).zip(segs.iter_mut()) {
            let data = mem.frame_in_page(m.page, m.frame_offset);
            let g = pool
                .get(mem, data, readonly)
                .map_err(|e| out_of_grants(stats, e))?;
            // Recorded before anything else can fail, so that the grant is
            // given back with the slot's others.
            *handle = g.handle;
            slot.grants += 1;
            if copy_data {
                let cs = CopySeg::new(data, g.frame, m);
                if readonly {
                    mem.copy(data, cs.off, g.frame, cs.off, cs.len)
                        .map_err(|_| io)?;
                    copied += u64::from(cs.len);
                } else {
                    *copies.get_mut(slot.copies as usize).ok_or(io)? = cs;
                    slot.copies += 1;
                }
            }
            *seg = m.to_blkif(g.gref);
        }
        if copied != 0 {
            let _ = pool.account_copy(copied);
        }
        Ok(())
    }

    /// Grants request `id`'s `pages` indirect pages, writes the segment
    /// descriptors into them and encodes the ring entry.
    fn fill_indirect<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        id: u32,
        nr: u32,
        pages: u32,
        hdr: &RwHeader,
    ) -> Result<RingEntryBytes, QueueError> {
        let idu = id as usize;
        let ind = self.geo.indirect_pages as usize;
        let placeholder = *self.frames.as_ref().first().ok_or(QueueError::Io)?;
        for p in 0..pages as usize {
            // Without copy_data each slot owns its indirect pages (after the
            // placeholder); with it the pool's bounce frame is used.
            let own = if self.n.copy_data {
                placeholder
            } else {
                *self
                    .frames
                    .as_ref()
                    .get(1 + idu * ind + p)
                    .ok_or(QueueError::Io)?
            };
            let g = match self.pool.get(mem, own, true) {
                Ok(g) => g,
                Err(e) => return Err(out_of_grants(&mut self.stats, e)),
            };
            let s = self.slots.as_mut().get_mut(idu).ok_or(QueueError::Io)?;
            *self
                .indirect
                .as_mut()
                .get_mut(idu * ind + p)
                .ok_or(QueueError::Io)? = g.handle;
            s.indirect += 1;
            *self
                .indirect_grefs
                .as_mut()
                .get_mut(p)
                .ok_or(QueueError::Io)? = g.gref;
            // Only the descriptors in use go to the page (the backend reads
            // `nr_segments` of them): 8 bytes each, not the whole page.
            let segs = self.segs.as_ref().get(..nr as usize).unwrap_or(&[]);
            let n = write_indirect_page(segs, p as u32, self.page_buf.as_mut())
                .map_err(|_| QueueError::Io)?;
            let used = self
                .page_buf
                .as_ref()
                .get(..n as usize * BLKIF_SEGMENT_SIZE)
                .ok_or(QueueError::Io)?;
            mem.write(g.frame, 0, used).map_err(|_| QueueError::Io)?;
        }
        let grefs = self
            .indirect_grefs
            .as_ref()
            .get(..pages as usize)
            .unwrap_or(&[]);
        encode_indirect(hdr, nr, grefs, self.geo.wire_max).map_err(|_| QueueError::Io)
    }
}

/// A grant the pool could not give: the grant table is out of references
/// or the pool of entries is (the request is retried when blk-mq reruns the
/// queue), anything else is a bug that retrying would not fix.
fn out_of_grants(stats: &mut RingStats, e: GrantError) -> QueueError {
    match e {
        GrantError::NoGrantRefs => {
            stats.out_of_grants += 1;
            QueueError::Busy
        }
        GrantError::Exhausted => QueueError::Busy,
        _ => QueueError::Io,
    }
}
