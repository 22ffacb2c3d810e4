// SPDX-License-Identifier: GPL-2.0

//! The frontend of the simulation: the kernel driver's own code
//! (`blkcore::negotiate` on the backend's xenstore keys, then
//! `blkcore::datapath::DataPath`) on the simulated grant table and a ring
//! in host memory. Nothing here builds, validates or completes a request:
//! this file only owns the ring memory and hands out request tags.

use blkcore::datapath::{
    map_request,
    pregrant::PreGranted,
    wire_segments,
    DataPath,
    Drained,
    Fault,
    Geometry,
    QueueError,
    Request,
    RingStats,
    Status, //
};
use blkcore::grants::{GrantRef, GrantStats};
use blkcore::host::VecStorage;
use blkcore::mapping::{merged, MappedSegment, Piece};
use blkcore::negotiate::{negotiate, FrontendParams, Negotiated};
use blkcore::ring::{FrontRing, SharedRing, SliceRing};
use blkcore::xenstore::SliceValues;

use crate::backend::Blkback;
use crate::gnttab::GrantTable;

/// The frontend's module parameters and where its ring starts.
#[derive(Clone, Copy, Debug)]
pub struct FrontendConfig {
    /// `max_indirect_segments`.
    pub max_indirect_segments: u32,
    /// `feature_persistent`.
    pub feature_persistent: bool,
    /// `trusted` (an untrusted backend always gets bounce copies).
    pub trusted: bool,
    /// Ring pages (`max_ring_page_order` = log2).
    pub ring_pages: u32,
    /// Ring index to start at (must match the backend's).
    pub start_idx: u32,
}

/// A request as the block layer hands it over.
#[derive(Clone, Debug)]
pub struct BlockRequest {
    /// What to do.
    pub req: Request,
    /// The data (reads and writes): (first frame of a page, offset, len);
    /// a page may span several consecutive frames.
    pub pieces: Vec<Piece<usize>>,
}

/// Why the frontend did not take a request, or stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontError {
    /// No ring slot, id or grant: try again after completions.
    Busy,
    /// The request cannot be expressed (the kernel fails it with EIO).
    Io,
    /// Completed without reaching the backend (flush without a flush
    /// feature).
    CompleteWithoutSending,
    /// Not supported (a discard without the backend's discard feature).
    NotSupp,
    /// The backend broke the protocol: the ring is disabled and every
    /// request in flight ended with an I/O error.
    Broken(Fault),
}

/// A finished request: the tag [`Frontend::submit`] returned, and how it
/// ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// The request's tag.
    pub tag: u32,
    /// Its status.
    pub status: Status,
}

/// The frontend.
pub struct Frontend {
    cfg: FrontendConfig,
    n: Negotiated,
    ring: FrontRing,
    ring_mem: Vec<u8>,
    dp: DataPath<VecStorage, usize, u32>,
    /// The request being submitted, mapped (with bounce frames) or
    /// granted (without) before the ring lock, as the kernel does.
    mapped: Vec<MappedSegment<usize>>,
    pre: PreGranted<VecStorage>,
    next_tag: u32,
    broken: Option<Fault>,
    /// Notifications sent to the backend.
    pub notifies: u64,
}

impl Frontend {
    /// Negotiates with `back` from its xenstore keys as the kernel does,
    /// then sets up the ring and the data path, allocating its frames from
    /// `gt`.
    pub fn new(cfg: FrontendConfig, back: &Blkback, gt: &mut GrantTable) -> Self {
        let keys = back.xenstore_keys();
        let pairs: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let params = FrontendParams {
            max_indirect_segments: cfg.max_indirect_segments,
            max_queues: 1,
            max_ring_page_order: cfg.ring_pages.trailing_zeros(),
            feature_persistent: cfg.feature_persistent,
            trusted: cfg.trusted,
        };
        let n = negotiate(&SliceValues(&pairs), &params).expect("backend keys negotiate");
        assert_eq!(n.ring_pages, cfg.ring_pages, "ring pages negotiated");
        let mut ring = FrontRing::attach(cfg.ring_pages, cfg.start_idx).expect("ring pages");
        let mut ring_mem = vec![0u8; FrontRing::shared_bytes(cfg.ring_pages).expect("ring")];
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
        let geo = Geometry::new(
            &n,
            ring.size(),
            wire_segments(&n, back.config().max_indirect_segments),
        );
        let frames: Vec<usize> = (0..geo.frames(n.copy_data))
            .map(|_| gt.alloc_frames(1).expect("guest memory for the data path"))
            .collect();
        let dp = DataPath::new(&n, geo, 0, &frames, 0).expect("data path");
        let pre = dp.new_pregranted().expect("scratch of the data path");
        let unset = MappedSegment {
            page: 0,
            frame_offset: 0,
            first_sect: 0,
            last_sect: 0,
        };
        Self {
            cfg,
            n,
            ring,
            ring_mem,
            dp,
            mapped: vec![unset; geo.wire_max as usize],
            pre,
            next_tag: 0,
            broken: None,
            notifies: 0,
        }
    }

    /// The shared ring bytes (the backend reads and writes them).
    pub fn ring_mem(&mut self) -> &mut [u8] {
        &mut self.ring_mem
    }

    /// Grant-pool counters.
    pub fn grant_stats(&self) -> GrantStats {
        self.dp.grant_stats()
    }

    /// Ring counters.
    pub fn ring_stats(&self) -> RingStats {
        self.dp.stats()
    }

    /// The ring.
    pub fn ring(&self) -> &FrontRing {
        &self.ring
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.dp.in_flight()
    }

    /// The configuration.
    pub fn config(&self) -> &FrontendConfig {
        &self.cfg
    }

    /// What negotiation decided.
    pub fn negotiated(&self) -> &Negotiated {
        &self.n
    }

    /// Grants handed out to requests in flight.
    pub fn grants_in_use(&self) -> std::collections::HashSet<GrantRef> {
        let mut s = std::collections::HashSet::new();
        self.dp.for_each_grant_in_flight(|g| {
            s.insert(g);
        });
        s
    }

    /// Queues a request (not yet visible: call [`kick`](Self::kick));
    /// returns its tag.
    pub fn submit(&mut self, gt: &mut GrantTable, r: &BlockRequest) -> Result<u32, FrontError> {
        if let Some(f) = self.broken {
            return Err(FrontError::Broken(f));
        }
        let tag = self.next_tag;
        let mut ring = SliceRing::new(&mut self.ring_mem);
        let rw = matches!(r.req, Request::Read { .. } | Request::Write { .. });
        let queued = if self.dp.grants_before_lock() && rw && !self.dp.has_room(&self.ring) {
            // As the kernel: room first, nothing granted for a request
            // the ring would send back.
            Err((tag, QueueError::Busy))
        } else if self.dp.grants_before_lock() {
            let pre = &mut self.pre;
            pre.begin(gt, &r.req);
            match pre.grant_pieces(gt, merged(r.pieces.iter().map(|p| Ok::<_, ()>(*p)))) {
                Ok(()) => self
                    .dp
                    .queue_granted(gt, &mut self.ring, &mut ring, tag, r.req, pre),
                Err(e) => {
                    pre.end_unsent(gt);
                    Err((tag, e))
                }
            }
        } else {
            let segs = map_request(&r.pieces, &mut self.mapped).map_err(|_| FrontError::Io)?;
            self.dp
                .queue(gt, &mut self.ring, &mut ring, tag, r.req, segs)
        };
        match queued {
            Ok(()) => {
                self.next_tag = self.next_tag.wrapping_add(1);
                Ok(tag)
            }
            Err((_, QueueError::Busy)) => Err(FrontError::Busy),
            Err((_, QueueError::Io)) => Err(FrontError::Io),
            Err((_, QueueError::CompleteWithoutSending)) => Err(FrontError::CompleteWithoutSending),
            Err((_, QueueError::NotSupp)) => Err(FrontError::NotSupp),
        }
    }

    /// `RING_PUSH_REQUESTS_AND_CHECK_NOTIFY`; counts a notification.
    pub fn kick(&mut self) -> bool {
        let mut s = SliceRing::new(&mut self.ring_mem);
        let notify = self.ring.push_requests_and_check_notify(&mut s);
        if notify {
            self.notifies += 1;
            self.dp.notified();
        }
        notify
    }

    /// The interrupt handler: one pass of the kernel's completion loop.
    /// `Err` once the backend broke the protocol; the requests then in
    /// flight are in `failed` (ended with an I/O error).
    pub fn poll(&mut self, gt: &mut GrantTable) -> Result<Vec<Done>, (FrontError, Vec<Done>)> {
        let mut done = Vec::new();
        if let Some(f) = self.broken {
            return Err((FrontError::Broken(f), done));
        }
        let mut ring = SliceRing::new(&mut self.ring_mem);
        let r = self
            .dp
            .drain(gt, &mut self.ring, &mut ring, &mut |tag, status| {
                done.push(Done { tag, status })
            });
        match r {
            Drained::Responses | Drained::NonePending => Ok(done),
            Drained::Broken { fault, .. } => {
                self.broken = Some(fault);
                Err((FrontError::Broken(fault), done))
            }
        }
    }

    /// The periodic purge of idle persistent grants.
    pub fn purge(&mut self, gt: &mut GrantTable) -> u32 {
        self.dp.purge(gt)
    }

    /// Device removal: revokes every grant (requests in flight are
    /// dropped, except those held while the backend maps their pages);
    /// returns the deferred ones.
    pub fn teardown(&mut self, gt: &mut GrantTable) -> u32 {
        self.dp.take_down(gt, |_| {})
    }

    /// Requests held because the backend still maps their pages.
    pub fn held(&self) -> u32 {
        self.dp.held()
    }

    /// The kernel's periodic retry of held requests: those whose pages
    /// the backend let go of end now.
    pub fn retry_held(&mut self, gt: &mut GrantTable) -> Vec<Done> {
        let mut done = Vec::new();
        self.dp
            .retry_held(gt, &mut |tag, status| done.push(Done { tag, status }));
        done
    }
}
