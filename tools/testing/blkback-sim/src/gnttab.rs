// SPDX-License-Identifier: GPL-2.0

//! A model of the guest's memory and of its grant table as seen by both
//! ends: the frontend grants and ends access (through blkcore's
//! [`GrantOps`]), the backend maps and unmaps.

use std::collections::BTreeMap;

use blkcore::datapath::{Memory, MemoryError};
use blkcore::grants::{GrantError, GrantOps, GrantRef};

/// Bytes of a frame.
pub const FRAME: usize = 4096;

/// One 4 KiB guest frame.
pub type Frame = [u8; FRAME];

#[derive(Clone, Copy, Debug)]
struct Entry {
    frame: usize,
    readonly: bool,
    /// Backend mappings of this grant.
    mapped: u32,
    /// Ended with `end_access` while still mapped: released at last unmap.
    deferred: bool,
}

/// Counters of the grant table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GnttabStats {
    /// Frontend grant operations.
    pub grant_ops: u64,
    /// Frontend end-access operations that succeeded.
    pub end_ops: u64,
    /// `try_end_access` refused because the backend maps the grant.
    pub end_refused: u64,
    /// Grants ended while mapped (release deferred).
    pub deferred: u64,
    /// Backend map operations.
    pub map_ops: u64,
    /// Backend unmap operations.
    pub unmap_ops: u64,
}

/// Errors the backend sees when mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// No such grant (never granted, or already ended).
    NotGranted(GrantRef),
    /// Write access to a read-only grant.
    ReadOnly(GrantRef),
}

/// Guest memory plus grant table.
#[derive(Debug)]
pub struct GrantTable {
    mem: Vec<Frame>,
    /// Single frames, handed out from the bottom of memory.
    free_frames: Vec<usize>,
    /// Runs of n > 1 frames, carved from the top of memory.
    free_runs: BTreeMap<usize, Vec<usize>>,
    /// Lowest frame used by a run.
    runs_floor: usize,
    /// Next never-used single frame.
    singles_next: usize,
    entries: BTreeMap<GrantRef, Entry>,
    free_refs: Vec<GrantRef>,
    next_ref: GrantRef,
    max_refs: usize,
    /// Counters.
    pub stats: GnttabStats,
}

impl GrantTable {
    /// `frames` frames of guest memory, at most `max_refs` live grants.
    pub fn new(frames: usize, max_refs: usize) -> Self {
        Self {
            mem: vec![[0u8; FRAME]; frames],
            free_frames: Vec::new(),
            free_runs: BTreeMap::new(),
            runs_floor: frames,
            singles_next: 0,
            entries: BTreeMap::new(),
            free_refs: Vec::new(),
            // Like Linux, the first references are reserved.
            next_ref: 8,
            max_refs,
            stats: GnttabStats::default(),
        }
    }

    /// Allocates `n` contiguous frames (a "page" of `n * 4 KiB`); returns
    /// the first frame.
    pub fn alloc_frames(&mut self, n: usize) -> Option<usize> {
        if n == 0 {
            return None;
        }
        if n == 1 {
            if let Some(f) = self.free_frames.pop() {
                return Some(f);
            }
            if self.singles_next < self.runs_floor {
                self.singles_next += 1;
                return Some(self.singles_next - 1);
            }
            return None;
        }
        if let Some(f) = self.free_runs.get_mut(&n).and_then(Vec::pop) {
            return Some(f);
        }
        let start = self.runs_floor.checked_sub(n)?;
        if start < self.singles_next {
            return None;
        }
        self.runs_floor = start;
        Some(start)
    }

    /// Frees `n` frames from `first` (as allocated).
    pub fn free_frames(&mut self, first: usize, n: usize) {
        if n == 1 {
            self.free_frames.push(first);
        } else {
            self.free_runs.entry(n).or_default().push(first);
        }
    }

    /// A frame's bytes.
    pub fn frame(&self, f: usize) -> &Frame {
        &self.mem[f]
    }

    /// A frame's bytes, mutably (guest side).
    pub fn frame_mut(&mut self, f: usize) -> &mut Frame {
        &mut self.mem[f]
    }

    /// Grants alive (granted and not released), deferred ones included.
    pub fn live_grants(&self) -> usize {
        self.entries.len()
    }

    /// Live grants and whether the backend maps each.
    pub fn live(&self) -> impl Iterator<Item = (GrantRef, bool)> + '_ {
        self.entries.iter().map(|(g, e)| (*g, e.mapped > 0))
    }

    /// Grants ended while mapped and not yet released.
    pub fn deferred(&self) -> usize {
        self.entries.values().filter(|e| e.deferred).count()
    }

    /// Whether the backend maps `gref`.
    pub fn is_mapped(&self, gref: GrantRef) -> bool {
        self.entries.get(&gref).is_some_and(|e| e.mapped > 0)
    }

    /// Backend: maps `gref`, for writing into it if `write`. Returns the
    /// frame.
    pub fn map(&mut self, gref: GrantRef, write: bool) -> Result<usize, MapError> {
        let e = self
            .entries
            .get_mut(&gref)
            .filter(|e| !e.deferred)
            .ok_or(MapError::NotGranted(gref))?;
        if write && e.readonly {
            return Err(MapError::ReadOnly(gref));
        }
        e.mapped += 1;
        self.stats.map_ops += 1;
        Ok(e.frame)
    }

    /// Backend: unmaps `gref`.
    pub fn unmap(&mut self, gref: GrantRef) {
        let Some(e) = self.entries.get_mut(&gref) else {
            panic!("backend unmapped unknown grant {gref}");
        };
        assert!(e.mapped > 0, "unmap of unmapped grant {gref}");
        e.mapped -= 1;
        self.stats.unmap_ops += 1;
        if e.mapped == 0 && e.deferred {
            self.release(gref);
        }
    }

    fn release(&mut self, gref: GrantRef) {
        self.entries.remove(&gref);
        self.free_refs.push(gref);
    }
}

impl GrantOps for GrantTable {
    type Frame = usize;

    fn grant(&mut self, frame: usize, readonly: bool) -> Result<GrantRef, GrantError> {
        assert!(frame < self.mem.len(), "grant of a frame outside memory");
        if self.entries.len() >= self.max_refs {
            return Err(GrantError::NoGrantRefs);
        }
        let gref = match self.free_refs.pop() {
            Some(g) => g,
            None => {
                let g = self.next_ref;
                self.next_ref += 1;
                g
            }
        };
        self.entries.insert(
            gref,
            Entry {
                frame,
                readonly,
                mapped: 0,
                deferred: false,
            },
        );
        self.stats.grant_ops += 1;
        Ok(gref)
    }

    fn try_end_access(&mut self, gref: GrantRef) -> bool {
        let Some(e) = self.entries.get(&gref) else {
            panic!("frontend ended unknown grant {gref}");
        };
        assert!(!e.deferred, "frontend ended a deferred grant {gref}");
        if e.mapped > 0 {
            self.stats.end_refused += 1;
            return false;
        }
        self.release(gref);
        self.stats.end_ops += 1;
        true
    }

    fn end_access(&mut self, gref: GrantRef) {
        if self.try_end_access(gref) {
            return;
        }
        if let Some(e) = self.entries.get_mut(&gref) {
            e.deferred = true;
            self.stats.deferred += 1;
        }
    }
}

/// Frames are indices into guest memory; a multi-frame page is a run of
/// consecutive frames.
impl Memory for GrantTable {
    fn frame_in_page(&self, page: usize, frame_offset: u32) -> usize {
        page + frame_offset as usize / FRAME
    }

    fn copy(
        &mut self,
        src: usize,
        src_off: u32,
        dst: usize,
        dst_off: u32,
        len: u32,
    ) -> Result<(), MemoryError> {
        let (so, d_o, n) = (src_off as usize, dst_off as usize, len as usize);
        if so + n > FRAME || d_o + n > FRAME || src >= self.mem.len() || dst >= self.mem.len() {
            return Err(MemoryError);
        }
        let data = self.mem[src][so..so + n].to_vec();
        self.mem[dst][d_o..d_o + n].copy_from_slice(&data);
        Ok(())
    }

    fn write(&mut self, dst: usize, off: u32, bytes: &[u8]) -> Result<(), MemoryError> {
        let o = off as usize;
        let frame = self.mem.get_mut(dst).ok_or(MemoryError)?;
        frame
            .get_mut(o..o + bytes.len())
            .ok_or(MemoryError)?
            .copy_from_slice(bytes);
        Ok(())
    }
}
