// SPDX-License-Identifier: GPL-2.0

//! Without bounce copies (`copy_data` off: a trusted backend without
//! persistent grants), a read or write's pages are granted as the caller
//! walks the request, before it takes the ring lock: each piece is split
//! into per-frame segments, each segment's frame granted and its wire
//! descriptor written, in one pass. Under the lock,
//! [`DataPath::queue_granted`] only takes a slot, records the grants and
//! encodes the ring entry; completion ends the slot's grants directly.
//!
//! The grant pool has nothing to add here: without persistent grants every
//! grant is made for one request and ended when it completes, and the
//! pool's free list, handles and per-entry state would be bookkeeping on
//! every segment (upstream's `get_grant`/`put_grant` do the same list work
//! under its ring lock). Persistent grants and bounce frames keep the pool
//! ([`DataPath::queue`]).
//!
//! Grants taken here and never seen by the backend (the ring was full, the
//! ring went down meanwhile) are ended by [`PreGranted::end_unsent`]; the
//! data path does it itself when it refuses the request.

use super::*;

/// The grants and wire descriptors of one request being queued (the
/// caller's scratch, one per ring: the kernel keeps it under its own lock,
/// taken before the ring lock).
pub struct PreGranted<S: Storage> {
    /// `nr` wire descriptors (8 bytes each, grant reference first) of the
    /// `capacity` this holds.
    desc: S::Buf<u8>,
    nr: u32,
    capacity: u32,
    /// The backend only reads the frames (a write).
    readonly: bool,
    /// Grants refused by the grant table (out of references) since the
    /// data path last took the count.
    out_of_grants: u64,
}

impl<S: Storage> PreGranted<S> {
    /// Room for a request of up to `wire_max` segments (the data path's
    /// [`Geometry::wire_max`]).
    pub fn new(wire_max: u32) -> Result<Self, OutOfMemory> {
        Ok(Self {
            desc: S::buf(wire_max as usize * BLKIF_SEGMENT_SIZE, || 0)?,
            nr: 0,
            capacity: wire_max,
            readonly: false,
            out_of_grants: 0,
        })
    }

    /// Segments granted so far.
    pub fn len(&self) -> u32 {
        self.nr
    }

    /// Whether nothing is granted.
    pub fn is_empty(&self) -> bool {
        self.nr == 0
    }

    /// Starts request `req`: its frames are granted read-only if the
    /// backend only reads them (a write). Grants left from an earlier
    /// request (a caller that forgot [`end_unsent`](Self::end_unsent))
    /// are ended first, never leaked.
    pub fn begin<G: GrantOps>(&mut self, gt: &mut G, req: &Request) {
        if self.nr != 0 {
            self.end_unsent(gt);
        }
        self.readonly = matches!(req, Request::Write { .. });
    }

    /// Splits `piece` into per-frame segments ([`map_piece`]), grants each
    /// frame and writes its descriptor. `Busy` if the grant table is out
    /// of references (retry later), `Io` if the piece is not something a
    /// request can carry or the request has more segments than `wire_max`
    /// (fail it). Either way the grants already taken stay recorded, for
    /// [`end_unsent`](Self::end_unsent).
    #[inline]
    pub fn add<M: Memory>(&mut self, mem: &mut M, piece: &Piece<M::Frame>) -> Result<(), QueueError>
    where
        M::Frame: Copy,
    {
        let Self {
            desc,
            nr,
            capacity,
            readonly,
            out_of_grants,
        } = self;
        let mut out_of_refs = false;
        map_piece(piece, 0, |seg| {
            let too_many = MapError::TooManySegments { max: *capacity };
            if *nr >= *capacity {
                return Err(too_many);
            }
            let at = *nr as usize * BLKIF_SEGMENT_SIZE;
            let d = desc.as_mut().get_mut(at..).ok_or(too_many)?;
            let frame = mem.frame_in_page(seg.page, seg.frame_offset);
            let gref = mem.grant(frame, *readonly).map_err(|e| {
                out_of_refs = e == GrantError::NoGrantRefs;
                // Not a mapping error: told apart by `out_of_refs`.
                MapError::NoData
            })?;
            seg.to_blkif(gref).encode_into(d);
            *nr += 1;
            Ok(())
        })
        .map_err(|_| {
            if out_of_refs {
                *out_of_grants += 1;
                QueueError::Busy
            } else {
                QueueError::Io
            }
        })
    }

    /// [`add`](Self::add) for each of a request's `pieces` as a walk of its
    /// data yields them, stopping at the first that fails; a failed walk
    /// (an `Err` piece) is [`QueueError::Io`]. The kernel's entry (its walk
    /// of the request's bios, runs in one page
    /// [merged](crate::mapping::merged)), the host simulator's and the fuzz
    /// target's: one grant loop for all three.
    ///
    /// Out of line: one of the measurement boundaries of the data path's
    /// instruction count (granting a request's pages, counted as one
    /// function apart from the block glue that walks them).
    #[inline(never)]
    pub fn grant_pieces<M: Memory, E>(
        &mut self,
        mem: &mut M,
        pieces: impl IntoIterator<Item = Result<Piece<M::Frame>, E>>,
    ) -> Result<(), QueueError>
    where
        M::Frame: Copy,
    {
        for p in pieces {
            self.add(mem, &p.map_err(|_| QueueError::Io)?)?;
        }
        Ok(())
    }

    /// Ends the grants of a request that never reached the ring and
    /// forgets them. The backend was never told of them, so one it maps
    /// anyway is hostile: its release is deferred (the grant table keeps the
    /// frame until the backend unmaps it). Returns how many were.
    pub fn end_unsent<G: GrantOps>(&mut self, gt: &mut G) -> u32 {
        let mut still_mapped = 0u32;
        for gref in self.grefs() {
            if !gt.try_end_access(gref) {
                gt.end_access(gref);
                still_mapped += 1;
            }
        }
        self.nr = 0;
        still_mapped
    }

    /// The grant references of the segments, in order.
    fn grefs(&self) -> impl Iterator<Item = GrantRef> + '_ {
        let used = self.nr as usize * BLKIF_SEGMENT_SIZE;
        self.desc
            .as_ref()
            .get(..used)
            .unwrap_or(&[])
            .chunks_exact(BLKIF_SEGMENT_SIZE)
            .map(BlkifRequestSegment::decode_gref)
    }
}

impl<S: Storage, F: Copy, Rq> DataPath<S, F, Rq> {
    /// Whether a read or write would find a ring slot and an id now. The
    /// caller asks before it grants a request's pages ([`PreGranted`]):
    /// a request granted and then sent back unsent (ring full) leaves
    /// grants a backend could have mapped on pages whose owner gets them
    /// back, since grant references are predictable. Upstream grants only
    /// after `RING_FULL` under the ring lock; here the caller holds the
    /// ring's only way in for the whole submission, so the room it saw
    /// can only grow until it queues.
    /// Counted as busy when there is none, like a request the ring sends
    /// back.
    pub fn has_room(&mut self, front: &FrontRing) -> bool {
        let room = !front.is_full() && self.inflight.as_ref().first().is_some_and(|t| t.has_free());
        if !room {
            self.stats.busy += 1;
        }
        room
    }

    /// Whether reads and writes go through [`PreGranted`] and
    /// [`queue_granted`](Self::queue_granted) (no bounce frames), rather
    /// than mapped segments and [`queue`](Self::queue).
    pub fn grants_before_lock(&self) -> bool {
        !self.n.copy_data
    }

    /// Scratch for [`queue_granted`](Self::queue_granted), sized for this
    /// data path.
    pub fn new_pregranted(&self) -> Result<PreGranted<S>, OutOfMemory> {
        PreGranted::new(self.geometry().wire_max)
    }

    /// [`queue`](Self::queue) for a data path without bounce frames
    /// ([`grants_before_lock`](Self::grants_before_lock)): a read or
    /// write's segments were granted in `pre` (flushes and discards come
    /// with `pre` empty).
    ///
    /// On `Ok` the grants belong to the request's slot (`pre` is empty);
    /// on `Err` the request comes back untouched, nothing of it reached
    /// the ring, and `pre`'s grants were ended.
    pub fn queue_granted<M: Memory<Frame = F>, R: SharedRing>(
        &mut self,
        mem: &mut M,
        front: &mut FrontRing,
        ring: &mut R,
        rq: Rq,
        req: Request,
        pre: &mut PreGranted<S>,
    ) -> Result<(), (Rq, QueueError)> {
        // Requests `add` sent back for want of grant references: retries
        // like any Busy, counted here where the ring's counters are.
        let refused = core::mem::take(&mut pre.out_of_grants);
        self.stats.out_of_grants += refused;
        self.stats.busy += refused;
        let mut entry = [0u8; BLKIF_RING_ENTRY_SIZE];
        let rw = match req {
            Request::Flush | Request::Discard { .. } if pre.is_empty() => {
                return self.queue(mem, front, ring, rq, req, &[]);
            }
            _ if front.is_full() => Err(QueueError::Busy),
            Request::Read { sector } => Ok((RwOp::Read, sector)),
            Request::Write { sector, fua } => Ok((RwOp::for_data(true, fua, self.n.flush), sector)),
            Request::Flush | Request::Discard { .. } => Err(QueueError::Io),
        };
        let r = rw.and_then(|(op, sector)| self.prepare_granted(mem, op, sector, pre, &mut entry));
        // Grants still in `pre` never reached a slot.
        if r.is_err() && pre.end_unsent(mem) != 0 {
            self.stats.errors += 1;
        }
        self.finish_queue(mem, front, ring, rq, r, &entry)
    }

    /// Takes a slot for a read or write granted in `pre`, moves the grants
    /// to it and encodes the ring entry into `entry`.
    #[inline(always)]
    fn prepare_granted<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        op: RwOp,
        sector: u64,
        pre: &mut PreGranted<S>,
        entry: &mut RingEntryBytes,
    ) -> Result<u32, QueueError> {
        if self.n.copy_data || pre.desc.as_ref().len() != self.desc.as_ref().len() {
            // A caller's bug: this data path bounces data through its
            // pool, or `pre` was sized for another one.
            return Err(QueueError::Io);
        }
        let nr = pre.nr;
        let (lay, indirect) = self.rw_layout(op, nr)?;
        let id = self.alloc_id(op.wire(), indirect, nr)?;
        let idu = id as usize;
        let slot = self.slots.as_mut().get_mut(idu);
        let dst = self.tables.first_direct_grefs_mut(idu, nr as usize);
        let (Some(slot), Some(dst)) = (slot, dst) else {
            self.cancel_id(id);
            return Err(QueueError::Io);
        };
        for (g, gref) in dst.iter_mut().zip(pre.grefs()) {
            *g = gref;
        }
        slot.nr_direct_grants = nr;
        pre.nr = 0;
        self.direct_grant_stats.granted =
            self.direct_grant_stats.granted.wrapping_add(u64::from(nr));
        self.direct_grant_stats.in_use = self.direct_grant_stats.in_use.wrapping_add(nr);
        // The descriptors trade places with the data path's scratch (same
        // size, checked above), where the encoders take them from: no copy.
        core::mem::swap(&mut self.desc, &mut pre.desc);
        self.encode_rw(mem, &self.rw_header(op, id, sector), nr, lay, entry)
            .inspect_err(|_| self.release_unsent(mem, id))
            .map(|()| id)
    }

    /// Ends the grants slot `id` made before the ring lock (see
    /// [`PreGranted`]): the caller's own pages. Those the backend still
    /// maps stay granted and recorded (no deferred release: the page is
    /// the request's owner's, and ending the request would hand it back
    /// while the backend can still write it), so a later call retries
    /// them; the first is returned as `Err`. `Ok` once none is left.
    pub(super) fn end_direct<M: Memory<Frame = F>>(
        &mut self,
        mem: &mut M,
        id: usize,
    ) -> Result<(), GrantRef> {
        let Some(s) = self.slots.as_mut().get_mut(id) else {
            return Ok(());
        };
        let n = s.nr_direct_grants as usize;
        let grefs = self.tables.direct_grefs_mut(id);
        let mut still_mapped = None;
        let mut ended = 0u32;
        for g in grefs.iter_mut().take(n) {
            if *g == INVALID_GRANT_REF {
                continue;
            }
            if mem.try_end_access(*g) {
                *g = INVALID_GRANT_REF;
                ended += 1;
            } else {
                still_mapped.get_or_insert(*g);
            }
        }
        if still_mapped.is_none() {
            s.nr_direct_grants = 0;
        }
        self.direct_grant_stats.revoked = self
            .direct_grant_stats
            .revoked
            .wrapping_add(u64::from(ended));
        self.direct_grant_stats.in_use = self.direct_grant_stats.in_use.wrapping_sub(ended);
        still_mapped.map_or(Ok(()), Err)
    }

    /// Ends the direct grants of slot `id` the backend still maps with a
    /// deferred release (the grant table keeps a page reference until the
    /// backend unmaps them) and forgets them: for a request that never
    /// reached the ring, whose owner the caller gives it back to.
    pub(super) fn defer_direct<M: Memory<Frame = F>>(&mut self, mem: &mut M, id: usize) {
        let Some(s) = self.slots.as_mut().get_mut(id) else {
            return;
        };
        let n = core::mem::take(&mut s.nr_direct_grants) as usize;
        let grefs = self.tables.direct_grefs_mut(id);
        let mut deferred = 0u32;
        for g in grefs.iter_mut().take(n) {
            if *g != INVALID_GRANT_REF {
                mem.end_access(*g);
                *g = INVALID_GRANT_REF;
                deferred += 1;
            }
        }
        self.direct_grant_stats.revoked = self
            .direct_grant_stats
            .revoked
            .wrapping_add(u64::from(deferred));
        self.direct_grant_stats.deferred = self
            .direct_grant_stats
            .deferred
            .wrapping_add(u64::from(deferred));
        self.direct_grant_stats.in_use = self.direct_grant_stats.in_use.wrapping_sub(deferred);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::VecStorage;

    extern crate alloc;
    use alloc::vec::Vec;

    /// A grant table with `left` references; frames are numbers, pages
    /// 16 KiB (four frames).
    #[derive(Default)]
    struct Table {
        left: u32,
        live: Vec<(GrantRef, u32, bool)>,
        next: GrantRef,
    }

    impl GrantOps for Table {
        type Frame = u32;
        fn grant(&mut self, frame: u32, readonly: bool) -> Result<GrantRef, GrantError> {
            self.left = self.left.checked_sub(1).ok_or(GrantError::NoGrantRefs)?;
            self.next += 1;
            self.live.push((self.next, frame, readonly));
            Ok(self.next)
        }
        fn try_end_access(&mut self, gref: GrantRef) -> bool {
            self.live.retain(|g| g.0 != gref);
            true
        }
        fn end_access(&mut self, gref: GrantRef) {
            self.try_end_access(gref);
        }
    }

    impl Memory for Table {
        fn frame_in_page(&self, page: u32, frame_offset: u32) -> u32 {
            page * 4 + frame_offset / XEN_PAGE_SIZE
        }
        fn copy(&mut self, _: u32, _: u32, _: u32, _: u32, _: u32) -> Result<(), MemoryError> {
            Err(MemoryError)
        }
        fn write(&mut self, _: u32, _: u32, _: &[u8]) -> Result<(), MemoryError> {
            Err(MemoryError)
        }
    }

    /// A table of `refs` references and a scratch for `room` segments.
    fn setup(refs: u32, room: u32) -> (Table, PreGranted<VecStorage>) {
        let t = Table {
            left: refs,
            ..Table::default()
        };
        (t, PreGranted::new(room).unwrap())
    }

    fn write() -> Request {
        Request::Write {
            sector: 0,
            fua: false,
        }
    }

    #[test]
    fn a_request_refused_for_want_of_references_counts_as_busy() {
        use crate::ring::SliceRing;
        let n = crate::fuzz::datapath::negotiated(0, 0);
        let geo = Geometry::new(&n, 32, 11);
        let frames = alloc::vec![0u32; geo.frames(false)];
        let mut dp = DataPath::<VecStorage, u32, u32>::new(&n, geo, 0, &frames, 0).unwrap();
        let (mut t, mut pre) = setup(1, 11);
        pre.begin(&mut t, &write());
        let two_frames = Piece {
            page: 0,
            offset: 0,
            len: 8192,
        };
        assert_eq!(pre.add(&mut t, &two_frames), Err(QueueError::Busy));
        pre.end_unsent(&mut t);
        // The next request reaches the ring and brings the count along.
        t.left = 4;
        let mut mem = alloc::vec![0u8; XEN_PAGE_SIZE as usize];
        let mut front = FrontRing::new(1).unwrap();
        front.init_shared(&mut SliceRing::new(&mut mem));
        pre.begin(&mut t, &write());
        pre.add(&mut t, &two_frames).unwrap();
        let mut ring = SliceRing::new(&mut mem);
        assert!(dp
            .queue_granted(&mut t, &mut front, &mut ring, 7, write(), &mut pre)
            .is_ok());
        let st = dp.stats();
        assert_eq!((st.busy, st.out_of_grants, st.requests), (1, 1, 1));
        assert_eq!(dp.grant_stats().in_use, 2);
    }

    #[test]
    fn a_piece_across_frames_is_granted_frame_by_frame() {
        let (mut t, mut pre) = setup(8, 16);
        pre.begin(&mut t, &write());
        // Page 1, bytes 3584..5120: the last sector of frame 4 and the
        // first two of frame 5.
        let p = Piece {
            page: 1,
            offset: 3584,
            len: 1536,
        };
        pre.add(&mut t, &p).unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(t.live, [(1, 4, true), (2, 5, true)], "a write: read-only");
        let d: Vec<_> = pre
            .desc
            .chunks_exact(BLKIF_SEGMENT_SIZE)
            .take(2)
            .map(BlkifRequestSegment::decode)
            .map(|s| (s.gref, s.first_sect, s.last_sect))
            .collect();
        assert_eq!(d, [(1, 7, 7), (2, 0, 1)]);
    }

    #[test]
    fn out_of_references_is_busy_and_the_grants_taken_are_ended() {
        let (mut t, mut pre) = setup(3, 16);
        pre.begin(&mut t, &Request::Read { sector: 0 });
        let page = |page| Piece {
            page,
            offset: 0,
            len: 8192,
        };
        pre.add(&mut t, &page(0)).unwrap();
        assert_eq!(pre.add(&mut t, &page(1)), Err(QueueError::Busy));
        assert_eq!(pre.len(), 3, "the grants taken stay recorded");
        assert!(t.live.iter().all(|g| !g.2), "a read: writable");
        assert_eq!(pre.end_unsent(&mut t), 0);
        assert!(pre.is_empty() && t.live.is_empty());
    }

    #[test]
    fn more_segments_than_room_or_a_misaligned_piece_fail_the_request() {
        let (mut t, mut pre) = setup(100, 2);
        pre.begin(&mut t, &write());
        let p = Piece {
            page: 0,
            offset: 0,
            len: 3 * 4096,
        };
        assert_eq!(pre.add(&mut t, &p), Err(QueueError::Io));
        pre.begin(&mut t, &write());
        assert!(t.live.is_empty(), "begin ends what was left");
        let p = Piece {
            page: 0,
            offset: 100,
            len: 512,
        };
        assert_eq!(pre.add(&mut t, &p), Err(QueueError::Io));
        assert!(pre.is_empty() && t.live.is_empty());
    }

    #[test]
    fn a_walk_that_fails_fails_the_request_and_keeps_what_it_granted() {
        let (mut t, mut pre) = setup(8, 16);
        pre.begin(&mut t, &write());
        let page = |page| {
            Ok(Piece {
                page,
                offset: 0,
                len: 4096,
            })
        };
        let walk = [page(0), Err("no page"), page(1)];
        assert_eq!(pre.grant_pieces(&mut t, walk), Err(QueueError::Io));
        assert_eq!(pre.len(), 1, "granted before the failure, not after");
        assert_eq!(pre.end_unsent(&mut t), 0);
        assert!(t.live.is_empty());
        pre.begin(&mut t, &write());
        assert_eq!(pre.grant_pieces(&mut t, [page(0), page(1)]), Ok(()));
        assert_eq!(pre.len(), 2);
    }
}
