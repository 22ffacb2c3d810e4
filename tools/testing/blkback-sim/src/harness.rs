// SPDX-License-Identifier: GPL-2.0

//! Random workloads through [`Frontend`] and [`Blkback`], checked against
//! a model of the disk, with event-channel semantics: each end sleeps after
//! its final check and only runs again when the other end notifies it, so
//! a wrong notification decision shows up as a stall.

use std::collections::HashMap;

use blkcore::datapath::{Request, Status};
use blkcore::mapping::Piece;

use crate::backend::{BackendConfig, Blkback};
use crate::frontend::{BlockRequest, FrontError, Frontend, FrontendConfig};
use crate::gnttab::{GrantTable, FRAME};

/// Frames per data page of the workload (8 KiB pages: pieces cross 4 KiB
/// frame boundaries).
pub const PAGE_FRAMES: usize = 2;

/// A small seeded PRNG (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }
}

/// Both ends' settings.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// Frontend.
    pub front: FrontendConfig,
    /// Backend.
    pub back: BackendConfig,
    /// Guest frames.
    pub guest_frames: usize,
}

enum Pending {
    Read {
        expected: Vec<u8>,
        pieces: Vec<Piece<usize>>,
    },
    Write {
        pieces: Vec<Piece<usize>>,
    },
    Other,
}

/// Workload counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct SimStats {
    /// Requests completed.
    pub completed: u64,
    /// Reads verified.
    pub reads_verified: u64,
    /// Indirect requests sent.
    pub indirect: u64,
}

/// Frontend + backend + grant table + disk model.
pub struct Sim {
    /// Grant table and guest memory.
    pub gt: GrantTable,
    /// The frontend.
    pub front: Frontend,
    /// The backend.
    pub back: Blkback,
    model: Vec<u8>,
    pending: HashMap<u32, Pending>,
    back_awake: bool,
    front_awake: bool,
    /// PRNG.
    pub rng: Rng,
    /// Counters.
    pub stats: SimStats,
}

impl Sim {
    /// Builds both ends.
    pub fn new(cfg: SimConfig, seed: u64) -> Self {
        let mut gt = GrantTable::new(cfg.guest_frames, 1 << 20);
        let back = Blkback::new(cfg.back);
        let front = Frontend::new(cfg.front, &back, &mut gt);
        Self {
            model: vec![0; back.disk().len()],
            gt,
            front,
            back,
            pending: HashMap::new(),
            back_awake: false,
            front_awake: false,
            rng: Rng::new(seed),
            stats: SimStats::default(),
        }
    }

    fn sectors(&self) -> u64 {
        self.back.config().sectors
    }

    /// A random read or write of at most `max_segs` segments.
    pub fn random_rw(&mut self, max_segs: u32) -> Option<BlockRequest> {
        let target = if self.rng.chance(1, 4) {
            max_segs
        } else {
            self.rng.range(1, u64::from(max_segs)) as u32
        };
        let mut pieces = Vec::new();
        let mut segs = 0u32;
        let mut bytes = 0u64;
        while segs < target {
            let page = self.gt.alloc_frames(PAGE_FRAMES)?;
            let page_bytes = (PAGE_FRAMES * FRAME) as u32;
            let offset = self.rng.range(0, u64::from(page_bytes / 512 - 1)) as u32 * 512;
            let mut len = self.rng.range(1, u64::from((page_bytes - offset) / 512)) as u32 * 512;
            let frames =
                |off: u32, len: u32| (off + len - 1) / FRAME as u32 - off / FRAME as u32 + 1;
            while frames(offset, len) > target - segs {
                len = (FRAME as u32 - offset % FRAME as u32).min(len);
            }
            segs += frames(offset, len);
            bytes += u64::from(len);
            pieces.push(Piece { page, offset, len });
        }
        let nsect = bytes / 512;
        if nsect > self.sectors() {
            self.free(&pieces);
            return None;
        }
        let sector = self.rng.range(0, self.sectors() - nsect);
        let req = if self.rng.chance(1, 2) {
            Request::Read { sector }
        } else {
            // No FUA: the queue limits advertise it only to a barrier
            // backend, and the model backend flushes.
            Request::Write { sector, fua: false }
        };
        Some(BlockRequest { req, pieces })
    }

    fn free(&mut self, pieces: &[Piece<usize>]) {
        for p in pieces {
            self.gt.free_frames(p.page, PAGE_FRAMES);
        }
    }

    fn piece_bytes(&self, p: &Piece<usize>) -> Vec<u8> {
        let mut v = Vec::with_capacity(p.len as usize);
        let mut pos = p.offset as usize;
        let end = pos + p.len as usize;
        while pos < end {
            let f = p.page + pos / FRAME;
            let o = pos % FRAME;
            let n = (FRAME - o).min(end - pos);
            v.extend_from_slice(&self.gt.frame(f)[o..o + n]);
            pos += n;
        }
        v
    }

    fn fill_piece(&mut self, p: &Piece<usize>) -> Vec<u8> {
        let mut pos = p.offset as usize;
        let end = pos + p.len as usize;
        let mut v = Vec::with_capacity(p.len as usize);
        while pos < end {
            let f = p.page + pos / FRAME;
            let o = pos % FRAME;
            let n = (FRAME - o).min(end - pos);
            let seed = self.rng.next_u64();
            let frame = self.gt.frame_mut(f);
            for (i, b) in frame[o..o + n].iter_mut().enumerate() {
                *b = (seed >> ((i % 8) * 8)) as u8 ^ (i / 8) as u8;
            }
            v.extend_from_slice(&frame[o..o + n]);
            pos += n;
        }
        v
    }

    /// Submits `req`, updating the model in submission order (the backend
    /// processes in ring order). On `Busy` the request's pages are freed.
    pub fn submit(&mut self, req: BlockRequest) -> Result<(), FrontError> {
        // Prepare data and expectations before the frontend sees the request.
        let mut update: Option<(usize, Vec<u8>)> = None;
        let pieces = &req.pieces;
        let pending = match req.req {
            Request::Read { sector } | Request::Write { sector, .. } => {
                let start = (sector * 512) as usize;
                if matches!(req.req, Request::Read { .. }) {
                    let len: usize = pieces.iter().map(|p| p.len as usize).sum();
                    // Poison the buffers: stale data must not pass.
                    for p in pieces {
                        for f in 0..PAGE_FRAMES {
                            self.gt.frame_mut(p.page + f).fill(0xa5);
                        }
                    }
                    Pending::Read {
                        expected: self.model[start..start + len].to_vec(),
                        pieces: pieces.clone(),
                    }
                } else {
                    let mut data = Vec::new();
                    for p in pieces {
                        data.extend(self.fill_piece(p));
                    }
                    update = Some((start, data));
                    Pending::Write {
                        pieces: pieces.clone(),
                    }
                }
            }
            Request::Discard {
                sector, nr_sectors, ..
            } => {
                let s = (sector * 512) as usize;
                let e = ((sector + nr_sectors) * 512) as usize;
                update = Some((s, vec![0; e - s]));
                Pending::Other
            }
            Request::Flush => Pending::Other,
        };
        match self.front.submit(&mut self.gt, &req) {
            Ok(id) => {
                if let Some((start, data)) = update {
                    self.model[start..start + data.len()].copy_from_slice(&data);
                }
                if !req.pieces.is_empty() {
                    let segs: u32 = req
                        .pieces
                        .iter()
                        .map(|p| {
                            (p.offset + p.len - 1) / FRAME as u32 - p.offset / FRAME as u32 + 1
                        })
                        .sum();
                    if segs > 11 {
                        self.stats.indirect += 1;
                    }
                }
                self.pending.insert(id, pending);
                Ok(())
            }
            Err(e) => {
                self.free(&req.pieces);
                Err(e)
            }
        }
    }

    /// Whether a request can be submitted now.
    pub fn has_room(&self) -> bool {
        !self.front.ring().is_full() && self.front.in_flight() < self.front.ring().size()
    }

    /// Kicks the backend if the frontend says a notification is due.
    pub fn kick(&mut self) {
        if self.front.kick() {
            self.back_awake = true;
        }
    }

    /// Runs the backend (if awake) on at most `limit` requests.
    pub fn run_backend(&mut self, limit: u32) {
        if !self.back_awake {
            return;
        }
        let r = self
            .back
            .process(self.front.ring_mem(), &mut self.gt, limit);
        if r.handled < limit {
            // Drained and re-armed req_event: sleeps until notified.
            self.back_awake = false;
        }
        if r.notify {
            self.front_awake = true;
        }
    }

    /// Runs the frontend's interrupt handler (if notified) and verifies
    /// completed reads.
    pub fn run_frontend(&mut self) -> Result<u32, FrontError> {
        if !self.front_awake {
            return Ok(0);
        }
        self.front_awake = false;
        let done = self.front.poll(&mut self.gt).map_err(|(e, _)| e)?;
        for d in &done {
            assert_eq!(d.status, Status::Ok, "request {d:?} failed");
            match self.pending.remove(&d.tag).expect("pending request") {
                Pending::Read { expected, pieces } => {
                    let mut got = Vec::with_capacity(expected.len());
                    for p in &pieces {
                        got.extend(self.piece_bytes(p));
                    }
                    assert!(got == expected, "read data differs from the model");
                    self.stats.reads_verified += 1;
                    self.free(&pieces);
                }
                Pending::Write { pieces } => self.free(&pieces),
                Pending::Other => {}
            }
            self.stats.completed += 1;
        }
        self.check_grants();
        Ok(done.len() as u32)
    }

    /// Every live grant is in use by a request in flight, or still mapped
    /// by the backend (persistent), or ended-but-deferred.
    pub fn check_grants(&self) {
        let in_use = self.front.grants_in_use();
        for (gref, mapped) in self.gt.live() {
            assert!(
                mapped || in_use.contains(&gref),
                "grant {gref} accessible after completion without a backend mapping"
            );
        }
        if !self.front.negotiated().persistent {
            assert_eq!(self.back.persistent_grants(), 0);
        }
    }

    /// Runs both ends until nothing is in flight; a lost wake-up panics.
    pub fn drain(&mut self) -> Result<(), FrontError> {
        for _ in 0..10_000 {
            if self.front.in_flight() == 0 {
                return Ok(());
            }
            assert!(
                self.back_awake || self.front_awake,
                "stall: {} requests in flight, both ends asleep",
                self.front.in_flight()
            );
            self.run_backend(u32::MAX);
            self.run_frontend()?;
        }
        panic!("no progress");
    }

    /// One round of random traffic: a batch of requests, a partial backend
    /// pass, a frontend pass.
    pub fn step(&mut self, max_batch: u32) -> Result<(), FrontError> {
        let max_segs = self.front.negotiated().segments_per_request;
        let batch = self.rng.range(1, u64::from(max_batch));
        for _ in 0..batch {
            if !self.has_room() {
                break;
            }
            let r = self.rng.range(0, 99);
            let req = if r < 3 && self.back.config().flush {
                BlockRequest {
                    req: Request::Flush,
                    pieces: Vec::new(),
                }
            } else if r < 6 && self.back.config().discard {
                let nr = self.rng.range(1, 64);
                let sector = self.rng.range(0, self.sectors() - nr);
                BlockRequest {
                    req: Request::Discard {
                        sector,
                        nr_sectors: nr,
                        secure: self.rng.chance(1, 2),
                    },
                    pieces: Vec::new(),
                }
            } else {
                match self.random_rw(max_segs) {
                    Some(r) => r,
                    None => break,
                }
            };
            self.submit(req)?;
        }
        self.kick();
        let limit = self.rng.range(1, u64::from(self.front.ring().size()) + 4) as u32;
        self.run_backend(limit);
        self.run_frontend()?;
        Ok(())
    }

    /// Fills every ring slot with a request of `segs` segments (grant-pool
    /// warm-up), then drains.
    pub fn fill_ring(&mut self, segs: u32) -> Result<(), FrontError> {
        while self.has_room() {
            let mut pieces = Vec::new();
            for _ in 0..segs {
                let page = self.gt.alloc_frames(PAGE_FRAMES).expect("memory");
                pieces.push(Piece {
                    page,
                    offset: 0,
                    len: FRAME as u32,
                });
            }
            let sector = self.rng.range(0, self.sectors() - u64::from(segs) * 8);
            self.submit(BlockRequest {
                req: Request::Write { sector, fua: false },
                pieces,
            })?;
        }
        self.kick();
        self.drain()
    }

    /// Requests not yet completed.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The backend's disk equals the model.
    pub fn check_disk(&self) {
        assert!(
            self.back.disk() == self.model.as_slice(),
            "disk differs from the model"
        );
    }
}
