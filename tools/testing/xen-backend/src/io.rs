// SPDX-License-Identifier: GPL-2.0

//! Requests served against the backing file, as xen-blkback serves them:
//! data grants mapped per request (read-only for writes) or kept mapped as
//! persistent grants up to blkback's cap; indirect pages mapped to read
//! the segment descriptors; flush and barrier as `fdatasync`; discard as a
//! punched hole.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use blkcore::blkif::{
    indirect_pages, indirect_segment, BlkifRequestSegment, IndirectPageBytes, Request,
    BLKIF_OP_FLUSH_DISKCACHE, BLKIF_OP_READ, BLKIF_OP_WRITE, BLKIF_OP_WRITE_BARRIER,
    BLKIF_RSP_EOPNOTSUPP, BLKIF_RSP_ERROR, BLKIF_RSP_OKAY, SECTOR_SIZE, SEGS_PER_INDIRECT_FRAME,
};

use crate::xen::{punch_hole, GrantTable, Mapping};

/// blkback's `max_persistent_grants` default.
pub const MAX_PERSISTENT_GRANTS: usize = 1056;

/// What the backend offers (its feature keys).
#[derive(Clone, Copy, Debug)]
pub struct Features {
    /// `feature-flush-cache`.
    pub flush: bool,
    /// `feature-barrier`.
    pub barrier: bool,
    /// `feature-discard`.
    pub discard: bool,
    /// `feature-persistent`.
    pub persistent: bool,
    /// `feature-max-indirect-segments` (0: none).
    pub max_indirect: u32,
}

/// Counters, published in xenstore for the guest's checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests consumed.
    pub requests: u64,
    /// Reads and writes (direct or indirect).
    pub reads: u64,
    /// Writes (plain; barriers not included).
    pub writes: u64,
    /// `BLKIF_OP_FLUSH_DISKCACHE`.
    pub flushes: u64,
    /// `BLKIF_OP_WRITE_BARRIER`.
    pub barriers: u64,
    /// `BLKIF_OP_DISCARD`.
    pub discards: u64,
    /// Responses other than `BLKIF_RSP_OKAY`.
    pub errors: u64,
    /// Indirect requests.
    pub indirect: u64,
    /// Grants held mapped as persistent grants now.
    pub persistent: u64,
    /// Barriers that carried data (a forced write sent as a barrier; the
    /// empty ones are flushes).
    pub barrier_writes: u64,
    /// Requests answered late on purpose ([`Slowness`]).
    pub delayed: u64,
    /// The most requests a ring held at once, published and not yet
    /// answered (a full ring: its size).
    pub most_waiting: u64,
}

/// An honest backend that is merely slow (`--request-ms`, `--flush-ms`,
/// `--discard-ms`): each request of the kind is served, then answered
/// that much later, and the backend serves nothing else meanwhile (a
/// storage stack that crawls).
#[derive(Clone, Copy, Debug, Default)]
pub struct Slowness {
    /// Each read and write.
    pub request: Duration,
    /// Each flush, and each barrier.
    pub flush: Duration,
    /// Each discard.
    pub discard: Duration,
}

impl Slowness {
    /// How late `req` is answered.
    pub fn of(&self, req: &Request) -> Duration {
        match req {
            Request::ReadWrite(r)
                if matches!(
                    r.operation,
                    BLKIF_OP_FLUSH_DISKCACHE | BLKIF_OP_WRITE_BARRIER
                ) =>
            {
                self.flush
            }
            Request::ReadWrite(_) | Request::Indirect(_) => self.request,
            Request::Discard(_) => self.discard,
            Request::Unknown { .. } => Duration::ZERO,
        }
    }
}

impl Stats {
    /// "requests reads writes flushes barriers discards errors indirect
    /// persistent barrier_writes delayed most_waiting", the form `us_stats` in guest/common.sh
    /// parses.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {} {} {}",
            self.requests,
            self.reads,
            self.writes,
            self.flushes,
            self.barriers,
            self.discards,
            self.errors,
            self.indirect,
            self.persistent,
            self.barrier_writes,
            self.delayed,
            self.most_waiting
        )
    }
}

/// The data path of one vbd.
pub struct Disk {
    /// The backing file.
    pub file: File,
    /// Its size in 512-byte sectors.
    pub sectors: u64,
    /// Grant mapping handle.
    pub gnt: GrantTable,
    /// The frontend's domain.
    pub domid: u32,
    /// What was offered.
    pub features: Features,
    /// Whether both ends said `feature-persistent` (set at connect).
    pub persistent_on: bool,
    /// gref -> its persistent mapping.
    pub persistent: HashMap<u32, Mapping>,
    /// Counters.
    pub stats: Stats,
    /// Flushes answered `BLKIF_RSP_EOPNOTSUPP` although offered.
    pub refuse_flush: bool,
    /// Flushes answered `BLKIF_RSP_ERROR` (they carry no data).
    pub fail_flush: bool,
    /// Discards answered `BLKIF_RSP_EOPNOTSUPP` although offered.
    pub refuse_discard: bool,
    /// Data grants are not unmapped after the response (kept here).
    pub keep_data_grants: bool,
    /// Mappings kept on purpose (misbehaviour), unmapped at exit.
    pub kept: Vec<Mapping>,
    /// The next request of this kind that succeeds is kept in `late`
    /// (misbehaviour; once).
    pub keep_next: Option<KeepNext>,
    /// That request's pages, still reachable by the backend after its
    /// response.
    pub late: Option<Late>,
    /// How late each kind of request is answered.
    pub slow: Slowness,
}

/// Which request a late-access scenario keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepNext {
    /// A read's per-request data mapping (writable, as a read's data
    /// grants are mapped): the backend can still write into the pages.
    ReadMapping,
    /// A write's per-request data mapping (read-only): the backend can
    /// still read the pages.
    WriteMapping,
    /// The persistent frames a read used (mapped for good anyway).
    ReadPersistent,
}

/// A request the backend answered and can still reach.
pub enum Late {
    /// Its per-request data mapping; for a write, with a copy of what was
    /// written to the disk, to compare the pages with later.
    Mapped {
        map: Mapping,
        written: Option<Vec<u8>>,
    },
    /// The grant references of the persistent frames it used.
    Persistent(Vec<u32>),
}

impl Disk {
    /// Serves one request; the status of its response.
    pub fn execute(&mut self, req: &Request) -> i16 {
        self.stats.requests += 1;
        let st = match req {
            Request::ReadWrite(r) => {
                let segs = r.seg.get(..usize::from(r.nr_segments));
                match (r.operation, segs) {
                    (_, None) => BLKIF_RSP_ERROR,
                    (BLKIF_OP_READ | BLKIF_OP_WRITE, Some(s)) if !s.is_empty() => {
                        self.rw(r.operation == BLKIF_OP_WRITE, r.sector_number, s)
                    }
                    (BLKIF_OP_FLUSH_DISKCACHE, Some(_)) => self.flush(),
                    (BLKIF_OP_WRITE_BARRIER, Some(s)) => self.barrier(r.sector_number, s),
                    _ => BLKIF_RSP_ERROR,
                }
            }
            Request::Indirect(r) => self.indirect(
                r.indirect_op,
                r.nr_segments,
                r.sector_number,
                &r.indirect_grefs,
            ),
            Request::Discard(r) => self.discard(r.sector_number, r.nr_sectors),
            Request::Unknown { .. } => BLKIF_RSP_ERROR,
        };
        if st != BLKIF_RSP_OKAY {
            self.stats.errors += 1;
        }
        let late = self.slow.of(req);
        if !late.is_zero() {
            std::thread::sleep(late);
            self.stats.delayed += 1;
        }
        st
    }

    fn flush(&mut self) -> i16 {
        if !self.features.flush {
            return BLKIF_RSP_EOPNOTSUPP;
        }
        self.stats.flushes += 1;
        if self.refuse_flush {
            return BLKIF_RSP_EOPNOTSUPP;
        }
        if self.fail_flush {
            return BLKIF_RSP_ERROR;
        }
        status(self.file.sync_data().is_ok())
    }

    fn barrier(&mut self, sector: u64, segs: &[BlkifRequestSegment]) -> i16 {
        if !self.features.barrier {
            return BLKIF_RSP_EOPNOTSUPP;
        }
        self.stats.barriers += 1;
        if self.file.sync_data().is_err() {
            return BLKIF_RSP_ERROR;
        }
        if !segs.is_empty() {
            self.stats.barrier_writes += 1;
            let st = self.rw(true, sector, segs);
            if st != BLKIF_RSP_OKAY {
                return st;
            }
        }
        status(self.file.sync_data().is_ok())
    }

    fn discard(&mut self, sector: u64, nr: u64) -> i16 {
        if !self.features.discard {
            return BLKIF_RSP_EOPNOTSUPP;
        }
        self.stats.discards += 1;
        if self.refuse_discard {
            return BLKIF_RSP_EOPNOTSUPP;
        }
        match sector.checked_add(nr) {
            Some(end) if end <= self.sectors => {
                status(punch_hole(self.file.as_raw_fd(), sector * 512, nr * 512).is_ok())
            }
            _ => BLKIF_RSP_ERROR,
        }
    }

    fn indirect(&mut self, op: u8, nr: u16, sector: u64, grefs: &[u32]) -> i16 {
        let n = u32::from(nr);
        if n == 0 || n > self.features.max_indirect || !matches!(op, BLKIF_OP_READ | BLKIF_OP_WRITE)
        {
            return BLKIF_RSP_ERROR;
        }
        self.stats.indirect += 1;
        let pages = indirect_pages(n) as usize;
        let Some(refs) = grefs.get(..pages) else {
            return BLKIF_RSP_ERROR;
        };
        let Ok(mut m) = self.gnt.map(self.domid, refs, false) else {
            return BLKIF_RSP_ERROR;
        };
        let mut segs = Vec::with_capacity(n as usize);
        for i in 0..n {
            let page = i / SEGS_PER_INDIRECT_FRAME;
            let off = page as usize * 4096;
            let bytes: Option<&IndirectPageBytes> = m
                .bytes()
                .get(off..off + 4096)
                .and_then(|b| b.try_into().ok());
            match bytes.and_then(|b| indirect_segment(b, i % SEGS_PER_INDIRECT_FRAME)) {
                Some(s) => segs.push(s),
                None => break,
            }
        }
        let _ = self.gnt.unmap(m);
        if segs.len() != n as usize {
            return BLKIF_RSP_ERROR;
        }
        self.rw(op == BLKIF_OP_WRITE, sector, &segs)
    }

    /// Reads or writes `segs` at `sector`, mapping what is not mapped yet.
    fn rw(&mut self, write: bool, sector: u64, segs: &[BlkifRequestSegment]) -> i16 {
        let mut total = 0u64;
        for s in segs {
            if s.first_sect > s.last_sect || u32::from(s.last_sect) >= 4096 / SECTOR_SIZE {
                return BLKIF_RSP_ERROR;
            }
            total += u64::from(s.last_sect - s.first_sect) + 1;
        }
        if !matches!(sector.checked_add(total), Some(end) if end <= self.sectors) {
            return BLKIF_RSP_ERROR;
        }
        if write {
            self.stats.writes += 1;
        } else {
            self.stats.reads += 1;
        }
        // Grants new to this request: persistent ones while the cap
        // allows (mapped writable: the frontend reuses them for both
        // directions), the rest in one batch, read-only for a write.
        let mut batch: Vec<u32> = Vec::new();
        for s in segs {
            if self.persistent.contains_key(&s.gref) || batch.contains(&s.gref) {
                continue;
            }
            if self.persistent_on && self.persistent.len() < MAX_PERSISTENT_GRANTS {
                match self.gnt.map(self.domid, &[s.gref], true) {
                    Ok(m) => {
                        self.persistent.insert(s.gref, m);
                    }
                    Err(_) => return BLKIF_RSP_ERROR,
                }
            } else {
                batch.push(s.gref);
            }
        }
        self.stats.persistent = self.persistent.len() as u64;
        let mut mapped = if batch.is_empty() {
            None
        } else {
            match self.gnt.map(self.domid, &batch, !write) {
                Ok(m) => Some(m),
                Err(_) => return BLKIF_RSP_ERROR,
            }
        };
        let mut ok = true;
        let mut pos = sector * 512;
        for s in segs {
            let range = usize::from(s.first_sect) * 512..(usize::from(s.last_sect) + 1) * 512;
            let page: Option<&mut [u8]> = match self.persistent.get_mut(&s.gref) {
                Some(m) => m.bytes().get_mut(..4096),
                None => batch.iter().position(|g| *g == s.gref).and_then(|k| {
                    mapped
                        .as_mut()
                        .and_then(|m| m.bytes().get_mut(k * 4096..(k + 1) * 4096))
                }),
            };
            let Some(buf) = page.and_then(|p| p.get_mut(range.clone())) else {
                ok = false;
                break;
            };
            let r = if write {
                self.file.write_all_at(buf, pos)
            } else {
                self.file.read_exact_at(buf, pos)
            };
            if r.is_err() {
                ok = false;
                break;
            }
            pos += range.len() as u64;
        }
        let keep = self.keep_next.filter(|k| {
            ok && match k {
                KeepNext::ReadMapping => !write && mapped.is_some(),
                KeepNext::WriteMapping => write && mapped.is_some(),
                KeepNext::ReadPersistent => {
                    !write && segs.iter().any(|s| self.persistent.contains_key(&s.gref))
                }
            }
        });
        if keep == Some(KeepNext::ReadPersistent) {
            self.keep_next = None;
            let grefs = segs
                .iter()
                .map(|s| s.gref)
                .filter(|g| self.persistent.contains_key(g));
            self.late = Some(Late::Persistent(grefs.collect()));
        }
        if let Some(mut m) = mapped {
            if self.keep_data_grants {
                self.kept.push(m);
            } else if matches!(keep, Some(KeepNext::ReadMapping | KeepNext::WriteMapping)) {
                self.keep_next = None;
                let written = write.then(|| m.bytes().to_vec());
                self.late = Some(Late::Mapped { map: m, written });
            } else {
                let _ = self.gnt.unmap(m);
            }
        }
        status(ok)
    }

    /// Unmaps every persistent grant (disconnect), or keeps them all
    /// mapped when `keep` (misbehaviour).
    pub fn release_persistent(&mut self, keep: bool) {
        for (_, m) in self.persistent.drain() {
            if keep {
                self.kept.push(m);
            } else {
                let _ = self.gnt.unmap(m);
            }
        }
        self.stats.persistent = 0;
    }
}

fn status(ok: bool) -> i16 {
    if ok {
        BLKIF_RSP_OKAY
    } else {
        BLKIF_RSP_ERROR
    }
}
