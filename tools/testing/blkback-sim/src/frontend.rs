// SPDX-License-Identifier: GPL-2.0

//! A host frontend built only from blkcore's data path (ring, in-flight
//! table, grant pool, mapping), doing what the kernel glue does: map a
//! request, grant (and bounce) its frames, fill indirect pages, put it on
//! the ring; on a response validate it, copy read data back, give the
//! grants back.

use blkcore::blkif::{ring_size, IndirectPageBytes, BLKIF_MAX_RING_SIZE, SEGS_PER_INDIRECT_FRAME};
use blkcore::grants::{GrantError, GrantHandle, GrantMode, GrantPool, GrantStats, PoolEntry};
use blkcore::mapping::{
    encode_direct, encode_discard, encode_flush, encode_indirect, layout, map_pieces,
    write_indirect_page, Layout, MapError, MappedSegment, Piece, RwHeader, RwOp,
};
use blkcore::ring::{
    Completion, FrontRing, InFlight, ResponseError, RingError, SharedRing, SliceRing,
};

use crate::gnttab::{GrantTable, FRAME};

/// Frontend settings, as negotiation would produce them.
#[derive(Clone, Copy, Debug)]
pub struct FrontendConfig {
    /// Persistent grants negotiated.
    pub persistent: bool,
    /// `Negotiated::copy_data` (persistent || !trusted).
    pub copy_data: bool,
    /// Segments per request (`min(backend max, modparam)`; <= 11: no
    /// indirect).
    pub max_segments: u32,
    /// Ring pages.
    pub ring_pages: u32,
    /// Ring index to start at (must match the backend's).
    pub start_idx: u32,
}

/// `copy_data` as `blkcore::negotiate` computes it.
pub fn copy_data(persistent: bool, trusted: bool) -> bool {
    persistent || !trusted
}

/// A request as the block layer hands it over.
#[derive(Clone, Debug)]
pub enum BlockRequest {
    /// Read or write of `pieces` at `sector`.
    Rw {
        /// Read or write (flush/barrier with data allowed).
        op: RwOp,
        /// Start sector.
        sector: u64,
        /// The data: (first frame of a page, offset, len); a page may span
        /// several consecutive frames.
        pieces: Vec<Piece<usize>>,
    },
    /// Empty flush.
    Flush,
    /// Discard.
    Discard {
        /// Start sector.
        sector: u64,
        /// Sectors.
        nr_sectors: u64,
        /// Secure erase.
        secure: bool,
    },
}

/// Frontend errors (all but `Busy` disable the device in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontError {
    /// No free ring slot / id: try again after completions.
    Busy,
    /// Mapping refused the request.
    Map(MapError),
    /// Grant pool error (incl. a backend that keeps grants mapped).
    Grant(GrantError),
    /// Ring error (bad `rsp_prod`).
    Ring(RingError),
    /// Bad response.
    Response(ResponseError),
}

#[derive(Debug)]
struct Shadow {
    grants: Vec<GrantHandle>,
    /// (bounce frame, data frame, byte offset in frame, len) for reads to copy back.
    copy_back: Vec<(usize, usize, usize, usize)>,
    /// Indirect page frames to return (direct mode only).
    indirect_frames: Vec<usize>,
}

/// A completed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// What the ring said.
    pub completion: Completion,
}

/// The frontend.
pub struct Frontend {
    cfg: FrontendConfig,
    ring: FrontRing,
    ring_mem: Vec<u8>,
    ids: Box<InFlight<{ BLKIF_MAX_RING_SIZE as usize }>>,
    pool: GrantPool<usize, Vec<PoolEntry<usize>>>,
    shadows: Vec<Option<Shadow>>,
    /// Preallocated indirect pages for the no-copy mode.
    indirect_free: Vec<usize>,
    mapped: Vec<MappedSegment<usize>>,
    /// Notifications sent to the backend.
    pub notifies: u64,
}

impl Frontend {
    /// Sets up the ring and pools, allocating frames from `gt` like
    /// blkfront's `fill_grant_buffer`.
    pub fn new(cfg: FrontendConfig, gt: &mut GrantTable) -> Self {
        let n = ring_size(cfg.ring_pages).expect("ring pages");
        let per_req_indirect = if cfg.max_segments > 11 {
            cfg.max_segments.div_ceil(SEGS_PER_INDIRECT_FRAME)
        } else {
            0
        };
        let per_req = cfg.max_segments.max(11) + per_req_indirect;
        let entries = (per_req * n) as usize;
        let storage: Vec<PoolEntry<usize>> = (0..entries)
            .map(|_| {
                let frame = if cfg.copy_data {
                    gt.alloc_frames(1).expect("guest memory for the pool")
                } else {
                    usize::MAX
                };
                PoolEntry::new(frame)
            })
            .collect();
        let pool = GrantPool::new(
            storage,
            GrantMode {
                persistent: cfg.persistent,
                copy_data: cfg.copy_data,
            },
        )
        .expect("grant mode");
        let indirect_free = if cfg.copy_data {
            Vec::new()
        } else {
            (0..per_req_indirect * n)
                .map(|_| gt.alloc_frames(1).expect("indirect pages"))
                .collect()
        };
        let mut ring_mem = vec![0u8; FrontRing::shared_bytes(cfg.ring_pages).unwrap()];
        let mut ring = FrontRing::attach(cfg.ring_pages, cfg.start_idx).unwrap();
        {
            let mut s = SliceRing::new(&mut ring_mem);
            if cfg.start_idx == 0 {
                ring.init_shared(&mut s);
            } else {
                s.store_req_prod(cfg.start_idx);
                s.store_rsp_prod(cfg.start_idx);
                s.store_req_event(cfg.start_idx.wrapping_add(1));
                s.store_rsp_event(cfg.start_idx.wrapping_add(1));
            }
        }
        Self {
            ids: Box::new(InFlight::new(n)),
            shadows: (0..n).map(|_| None).collect(),
            mapped: vec![
                MappedSegment {
                    page: 0,
                    frame_offset: 0,
                    first_sect: 0,
                    last_sect: 0
                };
                cfg.max_segments.max(11) as usize
            ],
            cfg,
            ring,
            ring_mem,
            pool,
            indirect_free,
            notifies: 0,
        }
    }

    /// The shared ring bytes (the backend reads and writes them).
    pub fn ring_mem(&mut self) -> &mut [u8] {
        &mut self.ring_mem
    }

    /// Grant-pool counters.
    pub fn grant_stats(&self) -> GrantStats {
        self.pool.stats()
    }

    /// The ring.
    pub fn ring(&self) -> &FrontRing {
        &self.ring
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.ids.waiting()
    }

    /// The configuration.
    pub fn config(&self) -> &FrontendConfig {
        &self.cfg
    }

    /// Grants handed out to requests in flight.
    pub fn grants_in_use(&self) -> std::collections::HashSet<u32> {
        self.shadows
            .iter()
            .flatten()
            .flat_map(|s| s.grants.iter())
            .filter_map(|h| self.pool.entry(*h).map(|e| e.gref()))
            .collect()
    }

    fn get(
        &mut self,
        gt: &mut GrantTable,
        frame: usize,
        readonly: bool,
        sh: &mut Shadow,
    ) -> Result<(u32, usize), FrontError> {
        let g = self
            .pool
            .get(gt, frame, readonly)
            .map_err(FrontError::Grant)?;
        sh.grants.push(g.handle);
        Ok((g.gref, g.frame))
    }

    /// Queues a request (not yet visible: call [`kick`](Self::kick)).
    pub fn submit(&mut self, gt: &mut GrantTable, req: &BlockRequest) -> Result<u32, FrontError> {
        if self.ring.is_full() {
            return Err(FrontError::Busy);
        }
        let mut sh = Shadow {
            grants: Vec::new(),
            copy_back: Vec::new(),
            indirect_frames: Vec::new(),
        };
        let (entry, id) = match req {
            BlockRequest::Flush => {
                let id = self
                    .ids
                    .alloc(blkcore::blkif::BLKIF_OP_FLUSH_DISKCACHE, false)
                    .ok_or(FrontError::Busy)?;
                (encode_flush(id.into(), 0, false), id)
            }
            BlockRequest::Discard {
                sector,
                nr_sectors,
                secure,
            } => {
                let id = self
                    .ids
                    .alloc(blkcore::blkif::BLKIF_OP_DISCARD, false)
                    .ok_or(FrontError::Busy)?;
                match encode_discard(id.into(), *sector, *nr_sectors, *secure) {
                    Ok(e) => (e, id),
                    Err(e) => {
                        self.ids.cancel(id);
                        return Err(FrontError::Map(e));
                    }
                }
            }
            BlockRequest::Rw { op, sector, pieces } => {
                let sum = map_pieces(pieces, self.cfg.max_segments, &mut self.mapped)
                    .map_err(FrontError::Map)?;
                let lay =
                    layout(sum.nr_segments, self.cfg.max_segments).map_err(FrontError::Map)?;
                let indirect = matches!(lay, Layout::Indirect { .. });
                let id = self
                    .ids
                    .alloc(op.wire(), indirect)
                    .ok_or(FrontError::Busy)?;
                match self.build_rw(gt, *op, *sector, id, sum.nr_segments, lay, &mut sh) {
                    Ok(e) => (e, id),
                    Err(e) => {
                        // Give back what was taken; nothing reached the backend.
                        for h in sh.grants.drain(..) {
                            let _ = self.pool.put(gt, h);
                        }
                        self.indirect_free.append(&mut sh.indirect_frames);
                        self.ids.cancel(id);
                        return Err(e);
                    }
                }
            }
        };
        let mut s = SliceRing::new(&mut self.ring_mem);
        self.ring
            .put_request(&mut s, &entry)
            .map_err(FrontError::Ring)?;
        self.shadows[id as usize] = Some(sh);
        Ok(id)
    }

    #[allow(clippy::too_many_arguments)]
    fn build_rw(
        &mut self,
        gt: &mut GrantTable,
        op: RwOp,
        sector: u64,
        id: u32,
        nr: u32,
        lay: Layout,
        sh: &mut Shadow,
    ) -> Result<blkcore::blkif::RingEntryBytes, FrontError> {
        let readonly = op.backend_reads_only();
        let mut segs = Vec::with_capacity(nr as usize);
        for i in 0..nr as usize {
            let m = self.mapped[i];
            let data_frame = m.page + (m.frame_offset as usize) / FRAME;
            let (gref, frame) = self.get(gt, data_frame, readonly, sh)?;
            if self.cfg.copy_data {
                let (off, len) = (m.offset_in_frame() as usize, m.len() as usize);
                if readonly {
                    // Write: bounce the data in now.
                    let src = gt.frame(data_frame)[off..off + len].to_vec();
                    gt.frame_mut(frame)[off..off + len].copy_from_slice(&src);
                    self.pool
                        .account_copy(len as u64)
                        .map_err(FrontError::Grant)?;
                } else {
                    sh.copy_back.push((frame, data_frame, off, len));
                }
            }
            segs.push(m.to_blkif(gref));
        }
        let hdr = RwHeader {
            op,
            id: id.into(),
            handle: 0,
            sector,
        };
        match lay {
            Layout::Direct => encode_direct(&hdr, &segs).map_err(FrontError::Map),
            Layout::Indirect { pages } => {
                let mut grefs = Vec::with_capacity(pages as usize);
                for p in 0..pages {
                    let own = if self.cfg.copy_data {
                        usize::MAX
                    } else {
                        let f = self.indirect_free.pop().expect("indirect page");
                        sh.indirect_frames.push(f);
                        f
                    };
                    // Indirect pages are only read by the backend.
                    let (gref, frame) = self.get(gt, own, true, sh)?;
                    let page: &mut IndirectPageBytes = gt.frame_mut(frame);
                    write_indirect_page(&segs, p, page).map_err(FrontError::Map)?;
                    grefs.push(gref);
                }
                encode_indirect(&hdr, nr, &grefs, self.cfg.max_segments).map_err(FrontError::Map)
            }
        }
    }

    /// `RING_PUSH_REQUESTS_AND_CHECK_NOTIFY`; counts a notification.
    pub fn kick(&mut self) -> bool {
        let mut s = SliceRing::new(&mut self.ring_mem);
        let notify = self.ring.push_requests_and_check_notify(&mut s);
        if notify {
            self.notifies += 1;
        }
        notify
    }

    /// The interrupt handler: consumes every response, validates it,
    /// completes the request. Stops at the first error (device broken).
    pub fn poll(&mut self, gt: &mut GrantTable) -> Result<Vec<Done>, FrontError> {
        let mut done = Vec::new();
        loop {
            let rp = {
                let mut s = SliceRing::new(&mut self.ring_mem);
                self.ring.response_prod(&mut s).map_err(FrontError::Ring)?
            };
            loop {
                let rsp = {
                    let s = SliceRing::new(&mut self.ring_mem);
                    self.ring.take_response(&s, rp)
                };
                let Some(rsp) = rsp else { break };
                let c = self.ids.complete(&rsp).map_err(FrontError::Response)?;
                let sh = self.shadows[c.id as usize]
                    .take()
                    .expect("shadow of a waiting id");
                // Reads: copy back from the bounce frames before the grants
                // can be reused.
                for &(bounce, data, off, len) in &sh.copy_back {
                    let src = gt.frame(bounce)[off..off + len].to_vec();
                    gt.frame_mut(data)[off..off + len].copy_from_slice(&src);
                    self.pool
                        .account_copy(len as u64)
                        .map_err(FrontError::Grant)?;
                }
                let mut err = None;
                for h in sh.grants {
                    if let Err(e) = self.pool.put(gt, h) {
                        err.get_or_insert(FrontError::Grant(e));
                    }
                }
                self.indirect_free.extend(sh.indirect_frames);
                if let Some(e) = err {
                    return Err(e);
                }
                done.push(Done { completion: c });
            }
            let mut s = SliceRing::new(&mut self.ring_mem);
            if !self.ring.final_check_for_responses(&mut s) {
                break;
            }
        }
        Ok(done)
    }

    /// The periodic purge work.
    pub fn purge(&mut self, gt: &mut GrantTable) -> u32 {
        self.pool.purge(gt)
    }

    /// Device removal: revokes every grant; returns the deferred ones.
    pub fn teardown(&mut self, gt: &mut GrantTable) -> u32 {
        for s in self.shadows.iter_mut() {
            *s = None;
        }
        self.pool.teardown(gt)
    }
}
