// SPDX-License-Identifier: GPL-2.0

//! Submission: a request → grants, bounce copies, indirect pages → one
//! ring slot (`blkif_queue_request`).

use super::*;

impl<S: Storage, F: Copy, Rq> DataPath<S, F, Rq> {
    /// Puts one request on the ring (not yet visible to the backend: push
    /// with [`FrontRing::push_requests_and_check_notify`] once per batch).
    /// `segs` are the request's data (reads and writes), already split
    /// into per-frame segments by
    /// [`map_piece`](super::super::mapping::map_piece) or [`map_request`]: the
    /// caller maps them before it takes the lock this runs under. Reads
    /// and writes take this way with bounce frames only (`copy_data`):
    /// without, they are granted before the lock and queued with
    /// [`queue_granted`](Self::queue_granted) (this data path then has no
    /// room for pool grants of data and fails them with `Io`).
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
        segs: &[MappedSegment<F>],
    ) -> Result<(), (Rq, QueueError)> {
        if front.is_full() {
            self.stats.busy += 1;
            return Err((rq, QueueError::Busy));
        }
        let mut entry = [0u8; BLKIF_RING_ENTRY_SIZE];
        let r = match req {
            Request::Flush => self.prepare_flush(&mut entry),
            Request::Discard {
                sector,
                nr_sectors,
                secure,
            } => self.prepare_discard(sector, nr_sectors, secure, &mut entry),
            Request::Read { sector } => self.prepare_rw(mem, RwOp::Read, sector, segs, &mut entry),
            Request::Write { sector, fua } => {
                let op = RwOp::for_data(true, fua, self.n.flush);
                self.prepare_rw(mem, op, sector, segs, &mut entry)
            }
        };
        self.finish_queue(mem, front, ring, rq, r, &entry)
    }

    /// Puts a prepared request (`r`: its id; `entry`: its ring entry) on
    /// the ring and hands its slot the request; on `Err` the request comes
    /// back with the reason and its slot's grants were given back.
    #[inline(always)]
    pub(super) fn finish_queue<M: Memory<Frame = F>, R: SharedRing>(
        &mut self,
        mem: &mut M,
        front: &mut FrontRing,
        ring: &mut R,
        rq: Rq,
        r: Result<u32, QueueError>,
        entry: &RingEntryBytes,
    ) -> Result<(), (Rq, QueueError)> {
        let r = r.and_then(|id| {
            if front.put_request(ring, entry).is_ok() {
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

    fn prepare_flush(&mut self, entry: &mut RingEntryBytes) -> Result<u32, QueueError> {
        let Some(kind) = self.n.flush else {
            return Err(QueueError::CompleteWithoutSending);
        };
        let barrier = kind == FlushKind::Barrier;
        let op = if barrier {
            BLKIF_OP_WRITE_BARRIER
        } else {
            BLKIF_OP_FLUSH_DISKCACHE
        };
        let id = self.alloc_id(op, false, 0)?;
        *entry = encode_flush(u64::from(id), self.handle, barrier);
        Ok(id)
    }

    fn prepare_discard(
        &mut self,
        sector: u64,
        nr_sectors: u64,
        secure: bool,
        entry: &mut RingEntryBytes,
    ) -> Result<u32, QueueError> {
        let Some(d) = self.n.discard else {
            return Err(QueueError::NotSupp);
        };
        let id = self.alloc_id(BLKIF_OP_DISCARD, false, 0)?;
        match encode_discard(u64::from(id), sector, nr_sectors, secure && d.secure) {
            Ok(e) => {
                *entry = e;
                Ok(id)
            }
            Err(_) => {
                self.cancel_id(id);
                Err(QueueError::Io)
            }
        }
    }

    /// Gives back the grants of a request that never reached the ring and
    /// frees its id. The backend was never told of them, so one it maps
    /// anyway is hostile: its release is deferred (the request is the
    /// caller's to end, and the slot is reused) and it counts as a backend
    /// error.
    pub(super) fn release_unsent<M: Memory<Frame = F>>(&mut self, mem: &mut M, id: u32) {
        let released = self.put_grants(mem, id as usize);
        if released.pages_held {
            self.defer_direct(mem, id as usize);
        }
        if released.still_mapped.is_some() {
            self.stats.errors += 1;
        }
        self.cancel_id(id);
    }

    fn prepare_rw<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        op: RwOp,
        sector: u64,
        segs: &[MappedSegment<F>],
        entry: &mut RingEntryBytes,
    ) -> Result<u32, QueueError> {
        let nr = u32::try_from(segs.len()).map_err(|_| QueueError::Io)?;
        let (lay, indirect) = self.rw_layout(op, nr)?;
        // The response echoes `indirect_op` for indirect requests.
        let id = self.alloc_id(op.wire(), indirect, nr)?;
        self.grant_segments(mem, op, id, segs)
            .and_then(|()| self.encode_rw(mem, &self.rw_header(op, id, sector), nr, lay, entry))
            .inspect_err(|_| self.release_unsent(mem, id))
            .map(|()| id)
    }

    /// The layout of a read or write of `nr` segments, and whether it is
    /// indirect; `Io` for one no request can carry.
    pub(super) fn rw_layout(&self, op: RwOp, nr: u32) -> Result<(Layout, bool), QueueError> {
        let max = self.geometry().wire_max;
        if nr == 0 || nr > max {
            return Err(QueueError::Io);
        }
        let indirect_max = if self.n.indirect_segments != 0 {
            max
        } else {
            0
        };
        let lay = layout(nr, indirect_max).map_err(|_| QueueError::Io)?;
        let indirect = matches!(lay, Layout::Indirect { .. });
        // An indirect request carries no barrier or flush.
        if indirect && !matches!(op, RwOp::Read | RwOp::Write) {
            return Err(QueueError::Io);
        }
        Ok((lay, indirect))
    }

    /// The header of read or write `id` of this data path's device.
    pub(super) fn rw_header(&self, op: RwOp, id: u32, sector: u64) -> RwHeader {
        RwHeader {
            op,
            id: u64::from(id),
            handle: self.handle,
            sector,
        }
    }

    /// Encodes the read or write `hdr` of `nr` segments, whose descriptors
    /// are in `desc`, in layout `lay`, into `entry`.
    #[inline(always)]
    pub(super) fn encode_rw<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        hdr: &RwHeader,
        nr: u32,
        lay: Layout,
        entry: &mut RingEntryBytes,
    ) -> Result<(), QueueError> {
        match lay {
            Layout::Indirect { pages } => self.fill_indirect(mem, hdr, nr, pages, entry),
            Layout::Direct => {
                let desc = self.desc.as_ref().get(..nr as usize * BLKIF_SEGMENT_SIZE);
                let desc = desc.ok_or(QueueError::Io)?;
                encode_direct_wire(hdr, desc, entry).map_err(|_| QueueError::Io)
            }
        }
    }

    /// Grants the segments of request `id` (bouncing writes, recording
    /// reads to copy back) and writes their wire descriptors to `desc`.
    ///
    /// The loop every segment of every request goes through, under the
    /// ring lock, once: the slot and its shares of the slot tables are
    /// looked up before it (each cut to `segs.len()` entries,
    /// `nr <= wire_max` being checked by the caller), its counts are kept
    /// in locals and written to the slot once, and each descriptor is
    /// written where the ring entry or the indirect pages take it from.
    fn grant_segments<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        op: RwOp,
        id: u32,
        segs: &[MappedSegment<F>],
    ) -> Result<(), QueueError> {
        let idu = id as usize;
        let nr = segs.len();
        let readonly = op.backend_reads_only();
        let copy_data = self.n.copy_data;
        let Self {
            pool,
            slots,
            tables,
            desc,
            stats,
            ..
        } = self;
        let io = QueueError::Io;
        let slot = slots.as_mut().get_mut(idu).ok_or(io)?;
        let desc = desc.as_mut().get_mut(..nr * BLKIF_SEGMENT_SIZE).ok_or(io)?;
        // Reads copied back on completion: at most one per segment (the
        // buffer exists with `copy_data` only).
        let (handles, copies) = tables.first_data_grants_and_copies_mut(idu, nr).ok_or(io)?;
        // What the loop did, for the slot even when it stops half way:
        // the grants it took are given back with the slot's others.
        let mut granted = 0u32;
        let mut to_copy_back = 0u32;
        let mut copied = 0u64;
        let r = (|| {
            for ((m, handle), d) in segs
                .iter()
                .zip(handles.iter_mut())
                .zip(desc.chunks_exact_mut(BLKIF_SEGMENT_SIZE))
            {
                // The caller's segment: a sector range inside one frame.
                let wire = m.to_blkif(0);
                if wire.byte_len().is_none() {
                    return Err(io);
                }
                let data = mem.frame_in_page(m.page, m.frame_offset);
                let g = pool
                    .get(mem, data, readonly)
                    .map_err(|e| out_of_grants(stats, e))?;
                *handle = g.handle;
                granted += 1;
                if copy_data {
                    let cs = CopySeg::new(data, g.frame, m);
                    if readonly {
                        mem.copy(data, cs.off, g.frame, cs.off, cs.len)
                            .map_err(|_| io)?;
                        copied += u64::from(cs.len);
                    } else {
                        *copies.get_mut(to_copy_back as usize).ok_or(io)? = cs;
                        to_copy_back += 1;
                    }
                }
                BlkifRequestSegment {
                    gref: g.gref,
                    ..wire
                }
                .encode_into(d);
            }
            Ok(())
        })();
        slot.nr_data_grants = granted;
        slot.nr_copies = to_copy_back;
        if copied != 0 {
            let _ = pool.account_copy(copied);
        }
        r
    }

    /// Grants the `pages` indirect pages of request `hdr`, copies the
    /// segment descriptors into them and encodes the ring entry into
    /// `entry`. Out of line: the direct requests' path stays short.
    #[inline(never)]
    fn fill_indirect<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        hdr: &RwHeader,
        nr: u32,
        pages: u32,
        entry: &mut RingEntryBytes,
    ) -> Result<(), QueueError> {
        let id = u32::try_from(hdr.id).map_err(|_| QueueError::Io)?;
        let idu = id as usize;
        let placeholder = self.tables.placeholder().ok_or(QueueError::Io)?;
        // Only the descriptors in use go to the pages (the backend reads
        // `nr_segments` of them): 8 bytes each, not whole pages.
        let used = self
            .desc
            .as_ref()
            .get(..nr as usize * BLKIF_SEGMENT_SIZE)
            .ok_or(QueueError::Io)?;
        let mut chunks = used.chunks(XEN_PAGE_SIZE as usize);
        let (own_frames, handles) = self.tables.indirect_mut(idu);
        for p in 0..pages as usize {
            // Without copy_data each slot owns its indirect pages; with it
            // the pool's bounce frame is used.
            let own = if self.n.copy_data {
                placeholder
            } else {
                *own_frames.get(p).ok_or(QueueError::Io)?
            };
            let g = match self.pool.get(mem, own, true) {
                Ok(g) => g,
                Err(e) => return Err(out_of_grants(&mut self.stats, e)),
            };
            let s = self.slots.as_mut().get_mut(idu).ok_or(QueueError::Io)?;
            *handles.get_mut(p).ok_or(QueueError::Io)? = g.handle;
            s.nr_indirect_pages += 1;
            *self
                .indirect_grefs
                .as_mut()
                .get_mut(p)
                .ok_or(QueueError::Io)? = g.gref;
            let chunk = chunks.next().ok_or(QueueError::Io)?;
            mem.write(g.frame, 0, chunk).map_err(|_| QueueError::Io)?;
        }
        let grefs = self
            .indirect_grefs
            .as_ref()
            .get(..pages as usize)
            .unwrap_or(&[]);
        *entry = encode_indirect(hdr, nr, grefs, self.geometry().wire_max)
            .map_err(|_| QueueError::Io)?;
        self.stats.indirect_requests += 1;
        Ok(())
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
