// SPDX-License-Identifier: GPL-2.0

//! A model of Linux xen-blkback (drivers/block/xen-blkback/blkback.c): the
//! back half of the ring written independently of blkcore's front half
//! (only the wire codecs are shared), an in-memory disk, persistent grants
//! with blkback's cap, indirect requests.

use std::collections::BTreeMap;

use blkcore::blkif::{
    indirect_pages, indirect_segment, ring_size, sring_entry_offset, BlkifRequestSegment,
    BlkifResponse, IndirectPageBytes, Request, RingEntryBytes, BLKIF_DISCARD_SECURE,
    BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST, BLKIF_MAX_SEGMENTS_PER_REQUEST, BLKIF_OP_DISCARD,
    BLKIF_OP_FLUSH_DISKCACHE, BLKIF_OP_READ, BLKIF_OP_WRITE, BLKIF_OP_WRITE_BARRIER,
    BLKIF_RING_ENTRY_SIZE, BLKIF_RSP_EOPNOTSUPP, BLKIF_RSP_ERROR, BLKIF_RSP_OKAY, SECTOR_SIZE,
    SEGS_PER_INDIRECT_FRAME, SRING_REQ_EVENT, SRING_REQ_PROD, SRING_RSP_EVENT, SRING_RSP_PROD,
};
use blkcore::grants::GrantRef;

use crate::gnttab::{GrantTable, FRAME};

/// blkback's `max_persistent_grants` default.
pub const MAX_PERSISTENT_GRANTS: usize = 1056;
/// blkback's `feature-max-indirect-segments`.
pub const MAX_INDIRECT_SEGMENTS: u32 = 256;

/// Backend settings (module parameters and features).
#[derive(Clone, Copy, Debug)]
pub struct BackendConfig {
    /// `feature_persistent`.
    pub persistent: bool,
    /// `max_persistent_grants`.
    pub max_persistent_grants: usize,
    /// `feature-max-indirect-segments` (0: no indirect).
    pub max_indirect_segments: u32,
    /// Ring pages (from the frontend's `ring-page-order`).
    pub ring_pages: u32,
    /// Disk size in 512-byte sectors.
    pub sectors: u64,
    /// `feature-flush-cache`.
    pub flush: bool,
    /// `feature-discard`.
    pub discard: bool,
    /// Ring index both ends start at (to exercise wrap-around).
    pub start_idx: u32,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            persistent: true,
            max_persistent_grants: MAX_PERSISTENT_GRANTS,
            max_indirect_segments: MAX_INDIRECT_SEGMENTS,
            ring_pages: 1,
            sectors: 8192,
            flush: true,
            discard: true,
            start_idx: 0,
        }
    }
}

/// Counters of the backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Requests consumed.
    pub requests: u64,
    /// Responses with an error status.
    pub errors: u64,
    /// Segments served from a persistent grant (no map op).
    pub persistent_hits: u64,
    /// Grants made persistent.
    pub persistent_added: u64,
    /// Notifications the backend would send.
    pub notifies: u64,
    /// Bytes read from / written to the disk.
    pub bytes: u64,
}

/// The backend.
#[derive(Debug)]
pub struct Blkback {
    cfg: BackendConfig,
    disk: Vec<u8>,
    nr_ents: u32,
    req_cons: u32,
    rsp_prod_pvt: u32,
    /// gref -> frame of grants kept mapped (blkback's rb-tree).
    persistent: BTreeMap<GrantRef, usize>,
    /// Counters.
    pub stats: BackendStats,
}

/// Result of one `process` call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Processed {
    /// Requests handled.
    pub handled: u32,
    /// Whether the frontend must be notified.
    pub notify: bool,
}

fn ld(ring: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(ring[off..off + 4].try_into().unwrap())
}
fn st(ring: &mut [u8], off: usize, v: u32) {
    ring[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

struct Seg {
    frame: usize,
    gref: GrantRef,
    persistent: bool,
    first: usize,
    last: usize,
}

impl Blkback {
    /// A backend with a zeroed disk.
    pub fn new(cfg: BackendConfig) -> Self {
        Self {
            nr_ents: ring_size(cfg.ring_pages).expect("ring pages"),
            disk: vec![0; (cfg.sectors * 512) as usize],
            req_cons: cfg.start_idx,
            rsp_prod_pvt: cfg.start_idx,
            persistent: BTreeMap::new(),
            stats: BackendStats::default(),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BackendConfig {
        &self.cfg
    }

    /// The disk.
    pub fn disk(&self) -> &[u8] {
        &self.disk
    }

    /// Grants kept mapped.
    pub fn persistent_grants(&self) -> usize {
        self.persistent.len()
    }

    /// Consumes up to `limit` requests, answers them, and does
    /// `RING_PUSH_RESPONSES_AND_CHECK_NOTIFY` / `RING_FINAL_CHECK_FOR_REQUESTS`.
    pub fn process(&mut self, ring: &mut [u8], gt: &mut GrantTable, limit: u32) -> Processed {
        let mut out = Processed::default();
        loop {
            let rp = ld(ring, SRING_REQ_PROD);
            assert!(
                rp.wrapping_sub(self.req_cons) <= self.nr_ents,
                "frontend overflowed the ring"
            );
            while self.req_cons != rp && out.handled < limit {
                let slot = self.req_cons & (self.nr_ents - 1);
                let off = sring_entry_offset(slot).unwrap();
                let bytes: RingEntryBytes =
                    ring[off..off + BLKIF_RING_ENTRY_SIZE].try_into().unwrap();
                self.req_cons = self.req_cons.wrapping_add(1);
                let req = Request::decode(&bytes);
                let status = self.handle(&req, gt);
                if status != BLKIF_RSP_OKAY {
                    self.stats.errors += 1;
                }
                self.stats.requests += 1;
                out.handled += 1;
                let rsp = BlkifResponse {
                    id: req.id(),
                    operation: req.response_operation(),
                    status,
                    ..BlkifResponse::default()
                };
                let slot = self.rsp_prod_pvt & (self.nr_ents - 1);
                let off = sring_entry_offset(slot).unwrap();
                ring[off..off + 16].copy_from_slice(&rsp.encode());
                self.rsp_prod_pvt = self.rsp_prod_pvt.wrapping_add(1);
            }
            // RING_PUSH_RESPONSES_AND_CHECK_NOTIFY
            let old = ld(ring, SRING_RSP_PROD);
            let new = self.rsp_prod_pvt;
            st(ring, SRING_RSP_PROD, new);
            let ev = ld(ring, SRING_RSP_EVENT);
            if new.wrapping_sub(ev) < new.wrapping_sub(old) {
                out.notify = true;
            }
            if out.handled >= limit {
                break;
            }
            // RING_FINAL_CHECK_FOR_REQUESTS
            if ld(ring, SRING_REQ_PROD) != self.req_cons {
                continue;
            }
            st(ring, SRING_REQ_EVENT, self.req_cons.wrapping_add(1));
            if ld(ring, SRING_REQ_PROD) == self.req_cons {
                break;
            }
        }
        if out.notify {
            self.stats.notifies += 1;
        }
        out
    }

    /// blkback's purge of unused persistent grants: unmaps all but `keep`.
    pub fn purge_persistent(&mut self, gt: &mut GrantTable, keep: usize) -> usize {
        let drop: Vec<GrantRef> = self.persistent.keys().copied().skip(keep).collect();
        for g in &drop {
            self.persistent.remove(g);
            gt.unmap(*g);
        }
        drop.len()
    }

    /// What blkback writes to xenstore for this configuration
    /// (`xen_blkbk_connect`, `connect_ring`'s `max-ring-page-order`): the
    /// frontend negotiates from these, as the kernel's does.
    pub fn xenstore_keys(&self) -> Vec<(&'static str, String)> {
        let bool_key = |b: bool| if b { "1" } else { "0" }.to_string();
        let mut keys = vec![
            ("sectors", self.cfg.sectors.to_string()),
            ("info", "0".to_string()),
            ("sector-size", "512".to_string()),
            ("physical-sector-size", "512".to_string()),
            ("feature-persistent", bool_key(self.cfg.persistent)),
            ("feature-flush-cache", bool_key(self.cfg.flush)),
            ("feature-discard", bool_key(self.cfg.discard)),
            ("discard-secure", "1".to_string()),
            (
                "max-ring-page-order",
                self.cfg.ring_pages.trailing_zeros().to_string(),
            ),
            ("multi-queue-max-queues", "1".to_string()),
        ];
        if self.cfg.max_indirect_segments != 0 {
            keys.push((
                "feature-max-indirect-segments",
                self.cfg.max_indirect_segments.to_string(),
            ));
        }
        keys
    }

    /// Disconnect: unmaps every persistent grant.
    pub fn disconnect(&mut self, gt: &mut GrantTable) {
        self.purge_persistent(gt, 0);
    }

    /// xen_blkbk_map: a persistent grant if we have one, else a map op
    /// (kept if persistent grants are on and below the cap).
    fn map(&mut self, gt: &mut GrantTable, gref: GrantRef, write: bool) -> Option<Seg> {
        if let Some(&frame) = self.persistent.get(&gref) {
            self.stats.persistent_hits += 1;
            return Some(Seg {
                frame,
                gref,
                persistent: true,
                first: 0,
                last: 0,
            });
        }
        let persistent =
            self.cfg.persistent && self.persistent.len() < self.cfg.max_persistent_grants;
        // Persistent grants are mapped read-write (they are reused for
        // reads); others read-only unless the backend writes them.
        let frame = gt.map(gref, write || persistent).ok()?;
        if persistent {
            self.persistent.insert(gref, frame);
            self.stats.persistent_added += 1;
        }
        Some(Seg {
            frame,
            gref,
            persistent,
            first: 0,
            last: 0,
        })
    }

    fn unmap_all(&mut self, gt: &mut GrantTable, segs: &[Seg]) {
        for s in segs.iter().filter(|s| !s.persistent) {
            gt.unmap(s.gref);
        }
    }

    fn handle(&mut self, req: &Request, gt: &mut GrantTable) -> i16 {
        match *req {
            Request::ReadWrite(r) => {
                let n = usize::from(r.nr_segments);
                match r.operation {
                    BLKIF_OP_FLUSH_DISKCACHE | BLKIF_OP_WRITE_BARRIER if !self.cfg.flush => {
                        return BLKIF_RSP_EOPNOTSUPP
                    }
                    BLKIF_OP_FLUSH_DISKCACHE | BLKIF_OP_WRITE_BARRIER if n == 0 => {
                        return BLKIF_RSP_OKAY
                    }
                    _ => {}
                }
                if n == 0 || n > BLKIF_MAX_SEGMENTS_PER_REQUEST as usize {
                    return BLKIF_RSP_ERROR;
                }
                let read = r.operation == BLKIF_OP_READ;
                self.rw(gt, read, r.sector_number, &r.seg[..n])
            }
            Request::Indirect(r) => {
                if r.indirect_op != BLKIF_OP_READ && r.indirect_op != BLKIF_OP_WRITE {
                    return BLKIF_RSP_ERROR;
                }
                let n = u32::from(r.nr_segments);
                if n <= BLKIF_MAX_SEGMENTS_PER_REQUEST || n > self.cfg.max_indirect_segments {
                    return BLKIF_RSP_ERROR;
                }
                let pages = indirect_pages(n) as usize;
                if pages > BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST as usize {
                    return BLKIF_RSP_ERROR;
                }
                // xen_blkbk_parse_indirect: map the indirect pages, copy
                // the descriptors out.
                let mut isegs = Vec::new();
                let mut descs = Vec::with_capacity(n as usize);
                for p in 0..pages {
                    let Some(s) = self.map(gt, r.indirect_grefs[p], false) else {
                        self.unmap_all(gt, &isegs);
                        return BLKIF_RSP_ERROR;
                    };
                    let page: &IndirectPageBytes = gt.frame(s.frame);
                    let here =
                        (n - p as u32 * SEGS_PER_INDIRECT_FRAME).min(SEGS_PER_INDIRECT_FRAME);
                    for i in 0..here {
                        descs.push(indirect_segment(page, i).unwrap());
                    }
                    isegs.push(s);
                }
                self.unmap_all(gt, &isegs);
                let read = r.indirect_op == BLKIF_OP_READ;
                self.rw(gt, read, r.sector_number, &descs)
            }
            Request::Discard(d) => {
                if !self.cfg.discard {
                    return BLKIF_RSP_EOPNOTSUPP;
                }
                let Some(end) = d.sector_number.checked_add(d.nr_sectors) else {
                    return BLKIF_RSP_ERROR;
                };
                if end > self.cfg.sectors {
                    return BLKIF_RSP_ERROR;
                }
                let _secure = d.flag & BLKIF_DISCARD_SECURE != 0;
                self.disk[(d.sector_number * 512) as usize..(end * 512) as usize].fill(0);
                debug_assert_eq!(d.operation, BLKIF_OP_DISCARD);
                BLKIF_RSP_OKAY
            }
            Request::Unknown { .. } => BLKIF_RSP_ERROR,
        }
    }

    fn rw(
        &mut self,
        gt: &mut GrantTable,
        read: bool,
        sector: u64,
        descs: &[BlkifRequestSegment],
    ) -> i16 {
        // Validate every segment and the sector range first.
        let mut total = 0u64;
        for d in descs {
            match d.byte_len() {
                Some(l) => total += u64::from(l / SECTOR_SIZE),
                None => return BLKIF_RSP_ERROR,
            }
        }
        match sector.checked_add(total) {
            Some(end) if end <= self.cfg.sectors => {}
            _ => return BLKIF_RSP_ERROR,
        }
        let mut segs = Vec::with_capacity(descs.len());
        for d in descs {
            // A read writes into the guest frame.
            let Some(mut s) = self.map(gt, d.gref, read) else {
                self.unmap_all(gt, &segs);
                return BLKIF_RSP_ERROR;
            };
            s.first = usize::from(d.first_sect) * 512;
            s.last = (usize::from(d.last_sect) + 1) * 512;
            segs.push(s);
        }
        let mut pos = (sector * 512) as usize;
        for s in &segs {
            let len = s.last - s.first;
            if read {
                let src = &self.disk[pos..pos + len];
                gt.frame_mut(s.frame)[s.first..s.last].copy_from_slice(src);
            } else {
                let src = &gt.frame(s.frame)[s.first..s.last];
                self.disk[pos..pos + len].copy_from_slice(src);
            }
            pos += len;
            self.stats.bytes += len as u64;
        }
        debug_assert!(segs.iter().all(|s| s.last <= FRAME));
        self.unmap_all(gt, &segs);
        BLKIF_RSP_OKAY
    }
}
