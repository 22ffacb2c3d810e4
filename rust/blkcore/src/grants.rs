// SPDX-License-Identifier: GPL-2.0

//! Grant-pool policy of the Xen frontend (the mechanism, the grant table
//! itself, is behind [`GrantOps`]).
//!
//! Three modes, fixed by negotiation (see `Negotiated::copy_data` /
//! `persistent`); this module never decides them itself:
//!
//! | persistent | copy_data | frames granted | after completion |
//! |---|---|---|---|
//! | yes | yes | pool (bounce) frames | still mapped by backend: keep, reuse first (LIFO head); else revoke, tail |
//! | no | yes (untrusted backend) | pool (bounce) frames | must be unmapped: revoke, tail; still mapped = backend error |
//! | no | no | the caller's own frames | must be unmapped: revoke; still mapped = backend error |
//!
//! `persistent && !copy_data` is refused: it would leave the backend a
//! lasting mapping of arbitrary guest pages.
//!
//! Storage is the caller's: a slice-like `S` of [`PoolEntry`] (an array, a
//! `Vec`, a `KVec`, `&mut [PoolEntry]`), one entry per grant that can be in
//! use at once (xen-blkfront: `(segments + indirect pages) * ring size`). The
//! free entries form an intrusive doubly linked list inside that storage, so
//! every operation is O(1) except [`GrantPool::purge`] and
//! [`GrantPool::teardown`].

use super::negotiate::Negotiated;

/// A grant reference (`grant_ref_t`).
pub type GrantRef = u32;

/// "No grant" (`INVALID_GRANT_REF`).
pub const INVALID_GRANT_REF: GrantRef = u32::MAX;

/// Grant-table mechanism: the kernel implements it over the real grant
/// table for the backend's domain, the simulator over its model.
pub trait GrantOps {
    /// How a 4 KiB frame is named (kernel: a gfn or page index; host: an
    /// index into the simulated memory).
    type Frame: Copy;

    /// Grants the backend access to `frame` (`gnttab_grant_foreign_access`),
    /// read-only if `readonly`.
    fn grant(&mut self, frame: Self::Frame, readonly: bool) -> Result<GrantRef, GrantError>;

    /// Ends access and frees the reference if the backend no longer maps
    /// it (`gnttab_try_end_foreign_access`); returns `false`, changing
    /// nothing, if the backend still maps it.
    fn try_end_access(&mut self, gref: GrantRef) -> bool;

    /// Ends access unconditionally (`gnttab_end_foreign_access`): if the
    /// backend still maps the frame, the implementation must defer the
    /// release and keep the frame alive until the backend lets go.
    fn end_access(&mut self, gref: GrantRef);
}

/// Errors of the grant pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrantError {
    /// `persistent` without `copy_data` was asked for.
    PersistentWithoutCopy,
    /// All entries are in use (the caller sized its storage too small).
    Exhausted,
    /// The grant table refused (no free references).
    NoGrantRefs,
    /// The handle does not name an entry in use.
    BadHandle(u32),
    /// Without persistent grants the backend still maps `gref` after
    /// completing the request: backend bug, the device must be disabled.
    StillMapped(GrantRef),
    /// Copy accounting while `copy_data` is off (caller bug).
    CopyNotNegotiated,
}

/// Mode of a pool, from negotiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantMode {
    /// Persistent grants negotiated with the backend.
    pub persistent: bool,
    /// Data goes through the pool's bounce frames
    /// (`Negotiated::copy_data`: persistent or untrusted backend).
    pub copy_data: bool,
}

impl GrantMode {
    /// The mode negotiation decided: `persistent` and `copy_data` taken
    /// as they are.
    pub fn from_negotiated(n: &Negotiated) -> Self {
        Self {
            persistent: n.persistent,
            copy_data: n.copy_data,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EntryState {
    /// On the free list.
    Free,
    /// Handed out by `get`.
    InUse,
    /// Its grant was still mapped by the backend when its request ended
    /// without persistent grants: ended with a deferred release, and the
    /// frame is never granted again (the backend may still write it).
    Retired,
}

const NIL: u32 = u32::MAX;

/// One grant slot of the pool.
#[derive(Clone, Copy, Debug)]
pub struct PoolEntry<F> {
    frame: F,
    gref: GrantRef,
    prev: u32,
    next: u32,
    state: EntryState,
}

impl<F: Copy> PoolEntry<F> {
    /// An entry owning bounce frame `frame` (with `copy_data`); without
    /// `copy_data` the frame is a placeholder replaced on each `get`.
    pub fn new(frame: F) -> Self {
        Self {
            frame,
            gref: INVALID_GRANT_REF,
            prev: NIL,
            next: NIL,
            state: EntryState::Free,
        }
    }

    /// The frame (bounce frame, or the caller's frame while in use
    /// without `copy_data`).
    pub fn frame(&self) -> F {
        self.frame
    }

    /// The grant, or [`INVALID_GRANT_REF`].
    pub fn gref(&self) -> GrantRef {
        self.gref
    }
}

/// Handle of an entry in use (its index in the storage).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GrantHandle(pub u32);

/// What `get` handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant<F> {
    /// Give back with [`GrantPool::put`].
    pub handle: GrantHandle,
    /// Reference to put in the segment / indirect gref.
    pub gref: GrantRef,
    /// The frame the backend sees: a bounce frame with `copy_data` (copy
    /// the data in/out of it), else the caller's frame.
    pub frame: F,
    /// Whether this was a still-mapped persistent grant (no grant op).
    pub reused: bool,
}

/// What `put` did with a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// Backend still maps it (persistent): kept at the head for reuse.
    Kept,
    /// Backend had unmapped it: access ended, entry at the tail.
    Revoked,
}

/// Counters of a pool (monotonic except `held` and `in_use`).
///
/// `get` and `put`, which run for every segment, count with plain
/// (wrapping) adds, one instruction each: `held` and `in_use` are bounded
/// by the pool's capacity and a 64-bit count of grants does not wrap, so
/// only a bookkeeping bug could wrap one, and it would show as a huge value
/// rather than be clamped out of sight (the datapath fuzz target checks
/// `in_use + held` against the live grants after every step).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrantStats {
    /// Grant operations (`grant` calls that succeeded).
    pub granted: u64,
    /// Grants ended (completion, purge, teardown).
    pub revoked: u64,
    /// `get`s served by a still-mapped persistent grant.
    pub reused: u64,
    /// Idle entries whose grant the backend still maps
    /// (`persistent_gnts_c`).
    pub held: u32,
    /// Entries handed out and not yet put back.
    pub in_use: u32,
    /// Bytes copied to or from bounce frames (reported by the caller).
    pub bytes_copied: u64,
    /// Grants still mapped by the backend when they were ended, at
    /// teardown or on a completion without persistent grants (release
    /// deferred to the grant table, which keeps the frame until the
    /// backend unmaps it).
    pub deferred: u64,
}

impl GrantStats {
    /// Adds another pool's counters (per-disk totals).
    pub fn add(&mut self, o: &GrantStats) {
        self.granted += o.granted;
        self.revoked += o.revoked;
        self.reused += o.reused;
        self.held += o.held;
        self.in_use += o.in_use;
        self.bytes_copied += o.bytes_copied;
        self.deferred += o.deferred;
    }
}

/// The pool. See the module documentation.
#[derive(Debug)]
pub struct GrantPool<F, S> {
    storage: S,
    head: u32,
    tail: u32,
    mode: GrantMode,
    stats: GrantStats,
    _frame: core::marker::PhantomData<F>,
}

impl<F, S> GrantPool<F, S>
where
    F: Copy,
    S: AsRef<[PoolEntry<F>]> + AsMut<[PoolEntry<F>]>,
{
    /// Builds a pool over `storage` (every entry is reset to free and
    /// ungranted). Fails for `persistent && !copy_data`.
    pub fn new(mut storage: S, mode: GrantMode) -> Result<Self, GrantError> {
        if mode.persistent && !mode.copy_data {
            return Err(GrantError::PersistentWithoutCopy);
        }
        let entries = storage.as_mut();
        // Indices are u32 with NIL = u32::MAX: ignore anything beyond.
        let n = entries.len().min(NIL as usize);
        let mut prev = NIL;
        for (i, e) in entries.iter_mut().take(n).enumerate() {
            let i = i as u32;
            e.gref = INVALID_GRANT_REF;
            e.state = EntryState::Free;
            e.prev = prev;
            e.next = if (i as usize) + 1 < n { i + 1 } else { NIL };
            prev = i;
        }
        Ok(Self {
            storage,
            head: if n > 0 { 0 } else { NIL },
            tail: prev,
            mode,
            stats: GrantStats::default(),
            _frame: core::marker::PhantomData,
        })
    }

    /// The mode the pool was built with.
    pub fn mode(&self) -> GrantMode {
        self.mode
    }

    /// Whether data must be bounced through the granted frames.
    pub fn copy_data(&self) -> bool {
        self.mode.copy_data
    }

    /// Counters.
    pub fn stats(&self) -> GrantStats {
        self.stats
    }

    /// Entries in the storage.
    pub fn capacity(&self) -> usize {
        self.entries().len().min(NIL as usize)
    }

    /// Entries free to `get`.
    pub fn available(&self) -> u32 {
        let mut n = 0u32;
        let mut i = self.head;
        while let Some(e) = self.entries().get(i as usize) {
            n = n.saturating_add(1);
            i = e.next;
        }
        n
    }

    /// The entry behind a handle.
    pub fn entry(&self, h: GrantHandle) -> Option<&PoolEntry<F>> {
        self.entries().get(h.0 as usize)
    }

    /// Iterates over all entries (for diagnostics and tests).
    pub fn entries(&self) -> &[PoolEntry<F>] {
        self.storage.as_ref()
    }

    fn entries_mut(&mut self) -> &mut [PoolEntry<F>] {
        self.storage.as_mut()
    }

    fn unlink(&mut self, i: u32) {
        let Some(&PoolEntry { prev, next, .. }) = self.entries().get(i as usize) else {
            return;
        };
        match self.entries_mut().get_mut(prev as usize) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.entries_mut().get_mut(next as usize) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
        if let Some(e) = self.entries_mut().get_mut(i as usize) {
            e.prev = NIL;
            e.next = NIL;
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        if let Some(e) = self.entries_mut().get_mut(i as usize) {
            e.prev = NIL;
            e.next = old;
            e.state = EntryState::Free;
        } else {
            return;
        }
        match self.entries_mut().get_mut(old as usize) {
            Some(o) => o.prev = i,
            None => self.tail = i,
        }
        self.head = i;
    }

    fn push_back(&mut self, i: u32) {
        let old = self.tail;
        if let Some(e) = self.entries_mut().get_mut(i as usize) {
            e.prev = old;
            e.next = NIL;
            e.state = EntryState::Free;
        } else {
            return;
        }
        match self.entries_mut().get_mut(old as usize) {
            Some(o) => o.next = i,
            None => self.head = i,
        }
        self.tail = i;
    }

    /// Takes a grant for one segment or indirect page
    /// (`get_grant`/`get_indirect_grant`).
    ///
    /// With `copy_data` the head entry's bounce frame is used and
    /// `data_frame`/`readonly` are ignored (pool frames are granted
    /// read-write, since they serve reads and writes); a still-mapped
    /// persistent grant is reused without a grant operation. Without
    /// `copy_data`, `data_frame` itself is granted, read-only if `readonly`
    /// (a write request).
    #[inline]
    pub fn get<G: GrantOps<Frame = F>>(
        &mut self,
        ops: &mut G,
        data_frame: F,
        readonly: bool,
    ) -> Result<Grant<F>, GrantError> {
        let i = self.head;
        let copy_data = self.mode.copy_data;
        let entries = self.storage.as_mut();
        let Some(e) = entries.get_mut(i as usize) else {
            return Err(GrantError::Exhausted);
        };
        let (frame, ro) = if copy_data {
            (e.frame, false)
        } else {
            (data_frame, readonly)
        };
        let reused = e.gref != INVALID_GRANT_REF;
        let gref = if reused {
            e.gref
        } else {
            ops.grant(frame, ro)?
        };
        // Pop the head: it has no predecessor.
        let next = e.next;
        *e = PoolEntry {
            frame,
            gref,
            prev: NIL,
            next: NIL,
            state: EntryState::InUse,
        };
        match entries.get_mut(next as usize) {
            Some(n) => n.prev = NIL,
            None => self.tail = NIL,
        }
        self.head = next;
        if reused {
            self.stats.reused = self.stats.reused.wrapping_add(1);
            self.stats.held = self.stats.held.wrapping_sub(1);
        } else {
            self.stats.granted = self.stats.granted.wrapping_add(1);
        }
        self.stats.in_use = self.stats.in_use.wrapping_add(1);
        Ok(Grant {
            handle: GrantHandle(i),
            gref,
            frame,
            reused,
        })
    }

    /// Gives a grant back after its request completed (the grant loop of
    /// `blkif_completion`): if the backend unmapped it, access ends and
    /// the entry goes to the tail; if it still maps it, the entry goes to
    /// the head in persistent mode, and is an error otherwise (its release is
    /// then deferred like [`teardown`](Self::teardown)'s and the entry is
    /// retired: never handed out again).
    #[inline]
    pub fn put<G: GrantOps<Frame = F>>(
        &mut self,
        ops: &mut G,
        h: GrantHandle,
    ) -> Result<PutOutcome, GrantError> {
        let e = match self.storage.as_mut().get_mut(h.0 as usize) {
            Some(e) if e.state == EntryState::InUse => e,
            _ => return Err(GrantError::BadHandle(h.0)),
        };
        let gref = e.gref;
        self.stats.in_use = self.stats.in_use.wrapping_sub(1);
        let outcome = if ops.try_end_access(gref) {
            e.gref = INVALID_GRANT_REF;
            self.stats.revoked = self.stats.revoked.wrapping_add(1);
            Ok(PutOutcome::Revoked)
        } else if self.mode.persistent {
            self.stats.held = self.stats.held.wrapping_add(1);
            self.push_front(h.0);
            return Ok(PutOutcome::Kept);
        } else {
            // Backend error: end the grant with a deferred release (the
            // grant table keeps a page reference until the backend
            // unmaps it) and retire the entry: its frame, reachable by the
            // backend, is never granted again (a bounce frame reused for
            // another request would let the backend write into that
            // request's data). The pool is one entry smaller from now on.
            ops.end_access(gref);
            e.gref = INVALID_GRANT_REF;
            e.state = EntryState::Retired;
            self.stats.revoked = self.stats.revoked.wrapping_add(1);
            self.stats.deferred = self.stats.deferred.wrapping_add(1);
            return Err(GrantError::StillMapped(gref));
        };
        self.push_back(h.0);
        outcome
    }

    /// Records `bytes` copied to or from bounce frames. Fails (and counts
    /// nothing) if `copy_data` is off: a copy then is a caller bug.
    pub fn account_copy(&mut self, bytes: u64) -> Result<(), GrantError> {
        if !self.mode.copy_data {
            return Err(GrantError::CopyNotNegotiated);
        }
        self.stats.bytes_copied = self.stats.bytes_copied.saturating_add(bytes);
        Ok(())
    }

    /// Periodic purge (`purge_persistent_grants`): revokes idle grants the
    /// backend no longer maps and moves them to the tail, keeping the order
    /// of the rest. Returns how many were revoked.
    pub fn purge<G: GrantOps<Frame = F>>(&mut self, ops: &mut G) -> u32 {
        if self.stats.held == 0 {
            return 0;
        }
        let last = self.tail;
        let mut i = self.head;
        let mut purged = 0u32;
        while let Some(&e) = self.entries().get(i as usize) {
            let next = e.next;
            if e.gref != INVALID_GRANT_REF && ops.try_end_access(e.gref) {
                self.unlink(i);
                if let Some(x) = self.entries_mut().get_mut(i as usize) {
                    x.gref = INVALID_GRANT_REF;
                }
                self.push_back(i);
                self.stats.held = self.stats.held.saturating_sub(1);
                self.stats.revoked = self.stats.revoked.saturating_add(1);
                purged = purged.saturating_add(1);
            }
            if i == last {
                break;
            }
            i = next;
        }
        purged
    }

    /// Revokes every grant of the pool, in use or not (device removal,
    /// suspend). Grants the backend still maps are ended with
    /// [`GrantOps::end_access`] (deferred release). Afterwards every entry
    /// is free and ungranted. Returns how many were deferred.
    pub fn teardown<G: GrantOps<Frame = F>>(&mut self, ops: &mut G) -> u32 {
        let mut deferred = 0u32;
        let n = self.capacity();
        for i in 0..n {
            let Some(&e) = self.entries().get(i) else {
                break;
            };
            if e.gref == INVALID_GRANT_REF {
                continue;
            }
            if !ops.try_end_access(e.gref) {
                ops.end_access(e.gref);
                deferred = deferred.saturating_add(1);
            }
            self.stats.revoked = self.stats.revoked.saturating_add(1);
            if let Some(x) = self.entries_mut().get_mut(i) {
                x.gref = INVALID_GRANT_REF;
            }
        }
        // Rebuild the free list in storage order, retired entries left
        // out.
        self.head = NIL;
        self.tail = NIL;
        for i in 0..n {
            if self
                .entries()
                .get(i)
                .is_some_and(|e| e.state != EntryState::Retired)
            {
                self.push_back(i as u32);
            }
        }
        self.stats.held = 0;
        self.stats.in_use = 0;
        self.stats.deferred = self.stats.deferred.saturating_add(u64::from(deferred));
        deferred
    }
}
