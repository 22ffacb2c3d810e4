// SPDX-License-Identifier: GPL-2.0

//! Request -> blkif segment mapping.
//!
//! A block request arrives as a list of [`Piece`]s (page, byte offset,
//! length), one per bio_vec. Each piece is split at 4 KiB Xen-frame
//! boundaries (a kernel page may be larger than a Xen frame); every part is
//! one segment with `first_sect`/`last_sect` in 512-byte units inside its
//! frame. Up to 11 segments go in a direct request, more in an indirect one
//! whose descriptors fill granted indirect pages, 512 per page, up to the
//! negotiated maximum.
//!
//! The flow for a read/write:
//! 1. [`map_piece`] (or [`map_pieces`]) into caller storage ->
//!    [`MappedSegment`]s;
//! 2. grant each segment's frame (`GrantPool::get`) and turn it into a
//!    [`BlkifRequestSegment`] with [`MappedSegment::to_blkif`], whose 8
//!    wire bytes are the descriptor;
//! 3. [`layout`] says direct or indirect; direct: [`encode_direct`];
//!    indirect: grant [`Layout::Indirect::pages`] pages, copy the
//!    descriptors into them, 512 per page, then [`encode_indirect`].

use super::blkif::{
    BlkifRequest, BlkifRequestDiscard, BlkifRequestIndirect, BlkifRequestSegment, RingEntryBytes,
    BLKIF_DISCARD_SECURE, BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST, BLKIF_MAX_INDIRECT_SEGMENTS,
    BLKIF_MAX_SEGMENTS_PER_REQUEST, BLKIF_OP_DISCARD, BLKIF_OP_FLUSH_DISKCACHE, BLKIF_OP_INDIRECT,
    BLKIF_OP_READ, BLKIF_OP_WRITE, BLKIF_OP_WRITE_BARRIER, BLKIF_RING_ENTRY_SIZE,
    BLKIF_SEGMENT_SIZE, SECTOR_SIZE, SEGS_PER_INDIRECT_FRAME, XEN_PAGE_SIZE,
};
use super::grants::GrantRef;
use super::negotiate::FlushKind;

/// Part of a request's data: `len` bytes at `offset` in `page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece<P> {
    /// The page (kernel: page or pfn; host: frame index). May be larger
    /// than 4 KiB: `offset` then selects the Xen frames inside it.
    pub page: P,
    /// Byte offset in the page, a multiple of 512.
    pub offset: u32,
    /// Length in bytes, a non-zero multiple of 512.
    pub len: u32,
}

impl<P: Copy + PartialEq> Piece<P> {
    /// Appends `next` to this piece if it starts where this one ends in the
    /// same page, and says whether it did (no change if not). A request's
    /// data walked bio_vec by bio_vec has two pieces in one page when the
    /// block layer merged two bios there: it counted them as one segment,
    /// and as one they must take one frame's segment, not two.
    pub fn extend(&mut self, next: &Piece<P>) -> bool {
        if next.page != self.page || self.offset.checked_add(self.len) != Some(next.offset) {
            return false;
        }
        match self.len.checked_add(next.len) {
            Some(len) => {
                self.len = len;
                true
            }
            None => false,
        }
    }
}

/// The pieces of `pieces` with every piece that [extends](Piece::extend)
/// the one before it merged into it: what the kernel's walk of a request's
/// bio_vecs yields (several bios the block layer merged into one request
/// may share a page, and it counted such a run as one segment). An error
/// from `pieces` (a walk that failed) is passed on at once, the run being
/// merged dropped: the caller fails the request.
#[inline]
pub fn merged<P, E, I>(pieces: I) -> Merged<P, I::IntoIter>
where
    P: Copy + PartialEq,
    I: IntoIterator<Item = Result<Piece<P>, E>>,
{
    Merged {
        pieces: pieces.into_iter(),
        next: None,
    }
}

/// Iterator of [`merged`].
pub struct Merged<P, I> {
    pieces: I,
    /// The piece after the last one returned, read to see whether it
    /// extended that one (it did not).
    next: Option<Piece<P>>,
}

impl<P, E, I> Iterator for Merged<P, I>
where
    P: Copy + PartialEq,
    I: Iterator<Item = Result<Piece<P>, E>>,
{
    type Item = Result<Piece<P>, E>;

    // Per request in the kernel's queue_rq: inline, with the walk it reads.
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let mut run = match self.next.take() {
            Some(run) => run,
            None => match self.pieces.next()? {
                Ok(p) => p,
                Err(e) => return Some(Err(e)),
            },
        };
        for p in self.pieces.by_ref() {
            match p {
                Ok(p) if run.extend(&p) => {}
                Ok(p) => {
                    self.next = Some(p);
                    break;
                }
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(run))
    }
}

/// One segment: a run of sectors inside one 4 KiB Xen frame of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappedSegment<P> {
    /// The page of the piece.
    pub page: P,
    /// Byte offset of the Xen frame inside the page (multiple of 4096).
    pub frame_offset: u32,
    /// First sector inside the frame, `0..8`.
    pub first_sect: u8,
    /// Last sector inside the frame (inclusive), `first_sect..8`.
    pub last_sect: u8,
}

impl<P> MappedSegment<P> {
    /// Byte offset of the data inside the Xen frame.
    pub fn offset_in_frame(&self) -> u32 {
        u32::from(self.first_sect) * SECTOR_SIZE
    }

    /// Byte length of the data.
    pub fn len(&self) -> u32 {
        (u32::from(self.last_sect) + 1).saturating_sub(u32::from(self.first_sect)) * SECTOR_SIZE
    }

    /// Always false: a segment holds at least one sector.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The wire segment for the frame granted as `gref`.
    pub fn to_blkif(&self, gref: GrantRef) -> BlkifRequestSegment {
        BlkifRequestSegment {
            gref,
            first_sect: self.first_sect,
            last_sect: self.last_sect,
            pad: 0,
        }
    }
}

/// Why a request can't be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapError {
    /// A piece's offset or length is not a multiple of 512 (piece index).
    Misaligned(usize),
    /// A piece of length 0 (piece index).
    EmptyPiece(usize),
    /// A read/write without data.
    NoData,
    /// More segments than allowed.
    TooManySegments {
        /// The limit in force (negotiated maximum or output storage).
        max: u32,
    },
    /// Byte/sector arithmetic overflowed.
    Overflow,
    /// Indirect requests carry only reads and writes.
    IndirectOp(u8),
    /// Wrong number of indirect grants for the segment count.
    IndirectGrefs {
        /// Needed.
        needed: u32,
        /// Given.
        given: usize,
    },
    /// A segment's sector range is not within one frame.
    BadSegment(usize),
    /// A discard of 0 sectors.
    EmptyDiscard,
}

/// What [`map_pieces`] produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapSummary {
    /// Segments written to the output.
    pub nr_segments: u32,
    /// Total 512-byte sectors.
    pub nr_sectors: u64,
}

/// Splits one piece into per-frame segments, handing each to `out` (which
/// fails with [`MapError::TooManySegments`] when it has no room). `index`
/// names the piece in errors.
///
/// The one mapping function: [`map_pieces`] runs it over a request, the
/// kernel driver over each page of the request's scatterlist as it walks
/// it, before it takes the ring lock.
#[inline]
pub fn map_piece<P: Copy>(
    p: &Piece<P>,
    index: usize,
    mut out: impl FnMut(MappedSegment<P>) -> Result<(), MapError>,
) -> Result<(), MapError> {
    if p.len == 0 {
        return Err(MapError::EmptyPiece(index));
    }
    if (p.offset | p.len) % SECTOR_SIZE != 0 {
        return Err(MapError::Misaligned(index));
    }
    let in_frame = p.offset % XEN_PAGE_SIZE;
    if p.len <= XEN_PAGE_SIZE - in_frame {
        // The common case (a kernel page is one Xen frame): one segment.
        return out(MappedSegment {
            page: p.page,
            frame_offset: p.offset - in_frame,
            first_sect: (in_frame / SECTOR_SIZE) as u8,
            last_sect: ((in_frame + p.len) / SECTOR_SIZE - 1) as u8,
        });
    }
    let end = p.offset.checked_add(p.len).ok_or(MapError::Overflow)?;
    let mut pos = p.offset;
    while pos < end {
        let frame_offset = pos - pos % XEN_PAGE_SIZE;
        let part_end = end.min(frame_offset.saturating_add(XEN_PAGE_SIZE));
        let first = (pos - frame_offset) / SECTOR_SIZE;
        let nsect = (part_end - pos) / SECTOR_SIZE;
        out(MappedSegment {
            page: p.page,
            frame_offset,
            first_sect: first as u8,
            last_sect: (first + nsect - 1) as u8,
        })?;
        pos = part_end;
    }
    Ok(())
}

/// Splits `pieces` into per-frame segments, written to `out`.
///
/// `max_segments` is the negotiated per-request limit
/// (`min(feature-max-indirect-segments, max_indirect_segments)`, or 11
/// without indirect); it is clamped to what the protocol can carry (4096).
pub fn map_pieces<P: Copy>(
    pieces: &[Piece<P>],
    max_segments: u32,
    out: &mut [MappedSegment<P>],
) -> Result<MapSummary, MapError> {
    let limit = max_segments.clamp(BLKIF_MAX_SEGMENTS_PER_REQUEST, BLKIF_MAX_INDIRECT_SEGMENTS);
    let cap = out.len().min(limit as usize);
    let mut slots = out.iter_mut().take(cap);
    let too_many = MapError::TooManySegments { max: cap as u32 };
    let mut sectors = 0u64;
    for (pi, p) in pieces.iter().enumerate() {
        map_piece(p, pi, |seg| {
            *slots.next().ok_or(too_many)? = seg;
            Ok(())
        })?;
        // Pieces are at most the block layer's segment size: the sum of
        // their sector counts cannot overflow.
        sectors += u64::from(p.len / SECTOR_SIZE);
    }
    // At most `cap` (<= 4096) segments were written.
    let n = (cap - slots.len()) as u32;
    if n == 0 {
        return Err(MapError::NoData);
    }
    Ok(MapSummary {
        nr_segments: n,
        nr_sectors: sectors,
    })
}

/// Data operations of a read/write-layout request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RwOp {
    /// [`BLKIF_OP_READ`].
    Read,
    /// [`BLKIF_OP_WRITE`].
    Write,
    /// [`BLKIF_OP_WRITE_BARRIER`] (data optional).
    WriteBarrier,
    /// [`BLKIF_OP_FLUSH_DISKCACHE`] (data optional: FUA/preflush writes).
    Flush,
}

impl RwOp {
    /// The wire operation.
    pub fn wire(self) -> u8 {
        match self {
            Self::Read => BLKIF_OP_READ,
            Self::Write => BLKIF_OP_WRITE,
            Self::WriteBarrier => BLKIF_OP_WRITE_BARRIER,
            Self::Flush => BLKIF_OP_FLUSH_DISKCACHE,
        }
    }

    /// The operation of a data request (`blkif_queue_rw_req`). A write
    /// with `REQ_FUA` goes out as a barrier when the backend offers only
    /// barriers (a barrier is a superset of FUA; the queue advertises FUA
    /// only then, see `limits`), as a flush-with-data when it flushes, and
    /// as a plain write when it offers neither (or withdrew it at run
    /// time: there is nothing more durable to ask for).
    pub fn for_data(write: bool, fua: bool, flush: Option<FlushKind>) -> Self {
        match (write, fua, flush) {
            (false, _, _) => Self::Read,
            (true, true, Some(FlushKind::Barrier)) => Self::WriteBarrier,
            (true, true, Some(FlushKind::Flush)) => Self::Flush,
            (true, _, _) => Self::Write,
        }
    }

    /// Whether the backend only reads the frames (grant read-only).
    pub fn backend_reads_only(self) -> bool {
        !matches!(self, Self::Read)
    }
}

/// Header fields of a read/write request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RwHeader {
    /// The operation.
    pub op: RwOp,
    /// Id from [`super::ring::InFlight::alloc`].
    pub id: u64,
    /// Virtual device handle.
    pub handle: u16,
    /// Start sector (512-byte units).
    pub sector: u64,
}

/// Direct or indirect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Segments in the ring slot.
    Direct,
    /// Segments in `pages` granted indirect pages.
    Indirect {
        /// Indirect pages needed.
        pages: u32,
    },
}

/// Chooses the layout for `nr_segments` segments under the negotiated
/// `max_segments`: direct up to 11, indirect above.
pub fn layout(nr_segments: u32, max_segments: u32) -> Result<Layout, MapError> {
    if nr_segments <= BLKIF_MAX_SEGMENTS_PER_REQUEST {
        return Ok(Layout::Direct);
    }
    let max = max_segments.min(BLKIF_MAX_INDIRECT_SEGMENTS);
    if nr_segments > max {
        return Err(MapError::TooManySegments {
            max: max.max(BLKIF_MAX_SEGMENTS_PER_REQUEST),
        });
    }
    Ok(Layout::Indirect {
        pages: nr_segments.div_ceil(SEGS_PER_INDIRECT_FRAME),
    })
}

fn check_segments(segs: &[BlkifRequestSegment]) -> Result<(), MapError> {
    for (i, s) in segs.iter().enumerate() {
        if s.byte_len().is_none() {
            return Err(MapError::BadSegment(i));
        }
    }
    Ok(())
}

/// Encodes a direct request (at most 11 segments; 0 only for flush and
/// barrier).
pub fn encode_direct(
    hdr: &RwHeader,
    segs: &[BlkifRequestSegment],
) -> Result<RingEntryBytes, MapError> {
    if segs.len() > BLKIF_MAX_SEGMENTS_PER_REQUEST as usize {
        return Err(MapError::TooManySegments {
            max: BLKIF_MAX_SEGMENTS_PER_REQUEST,
        });
    }
    check_segments(segs)?;
    let mut desc = [0u8; DIRECT_SEGMENTS_SIZE];
    for (s, d) in segs.iter().zip(desc.chunks_exact_mut(BLKIF_SEGMENT_SIZE)) {
        s.encode_into(d);
    }
    let mut entry = [0u8; BLKIF_RING_ENTRY_SIZE];
    encode_direct_wire(
        hdr,
        desc.get(..segs.len() * BLKIF_SEGMENT_SIZE).unwrap_or(&[]),
        &mut entry,
    )?;
    Ok(entry)
}

/// Bytes of a direct request before its segments (`struct blkif_request`
/// up to `seg[]`).
const DIRECT_HEADER_SIZE: usize = 24;
/// Bytes of a direct request's segment array.
const DIRECT_SEGMENTS_SIZE: usize = BLKIF_RING_ENTRY_SIZE - DIRECT_HEADER_SIZE;
const _: () =
    assert!(DIRECT_SEGMENTS_SIZE == BLKIF_MAX_SEGMENTS_PER_REQUEST as usize * BLKIF_SEGMENT_SIZE);

/// [`encode_direct`] of segments already in wire form: `desc` holds their
/// descriptors as [`BlkifRequestSegment::encode_into`] wrote them (8 bytes
/// each), and they go to the slot as they are. Writes every byte of
/// `entry`. The data path's encoder: its descriptors were checked when
/// they were made, and under the ring lock a slot is written once, with
/// no decoding and no copies of the whole entry.
#[inline]
pub fn encode_direct_wire(
    hdr: &RwHeader,
    desc: &[u8],
    entry: &mut RingEntryBytes,
) -> Result<(), MapError> {
    let nr = desc.len() / BLKIF_SEGMENT_SIZE;
    let too_many = MapError::TooManySegments {
        max: BLKIF_MAX_SEGMENTS_PER_REQUEST,
    };
    if desc.len() % BLKIF_SEGMENT_SIZE != 0 {
        return Err(MapError::BadSegment(nr));
    }
    if nr == 0 && matches!(hdr.op, RwOp::Read | RwOp::Write) {
        return Err(MapError::NoData);
    }
    if desc.len() > DIRECT_SEGMENTS_SIZE {
        return Err(too_many);
    }
    let (head, segs) = entry
        .split_first_chunk_mut::<DIRECT_HEADER_SIZE>()
        .ok_or(too_many)?;
    head[0] = hdr.op.wire();
    head[1] = nr as u8;
    head[2..4].copy_from_slice(&hdr.handle.to_le_bytes());
    head[4..8].fill(0);
    head[8..16].copy_from_slice(&hdr.id.to_le_bytes());
    head[16..24].copy_from_slice(&hdr.sector.to_le_bytes());
    // Zeros of a constant length, then descriptor by descriptor: 8-byte
    // moves, where a `copy_from_slice` or `fill` of a variable length is a
    // call (the kernel's code has no vector registers to inline them).
    segs.fill(0);
    for (d, s) in segs
        .chunks_exact_mut(BLKIF_SEGMENT_SIZE)
        .zip(desc.chunks_exact(BLKIF_SEGMENT_SIZE))
    {
        d.copy_from_slice(s);
    }
    Ok(())
}

/// Encodes an empty flush (or barrier) request.
pub fn encode_flush(id: u64, handle: u16, barrier: bool) -> RingEntryBytes {
    BlkifRequest {
        operation: if barrier {
            BLKIF_OP_WRITE_BARRIER
        } else {
            BLKIF_OP_FLUSH_DISKCACHE
        },
        handle,
        id,
        ..BlkifRequest::default()
    }
    .encode()
}

/// Encodes an indirect read/write request of `nr_segments` segments whose
/// descriptors are in the pages granted as `indirect_grefs` (exactly
/// `ceil(nr_segments / 512)` of them).
pub fn encode_indirect(
    hdr: &RwHeader,
    nr_segments: u32,
    indirect_grefs: &[GrantRef],
    max_segments: u32,
) -> Result<RingEntryBytes, MapError> {
    let indirect_op = match hdr.op {
        RwOp::Read => BLKIF_OP_READ,
        RwOp::Write => BLKIF_OP_WRITE,
        other => return Err(MapError::IndirectOp(other.wire())),
    };
    let Layout::Indirect { pages } = layout(nr_segments, max_segments)? else {
        return Err(MapError::TooManySegments {
            max: BLKIF_MAX_SEGMENTS_PER_REQUEST,
        });
    };
    if indirect_grefs.len() != pages as usize || pages > BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST {
        return Err(MapError::IndirectGrefs {
            needed: pages,
            given: indirect_grefs.len(),
        });
    }
    let mut req = BlkifRequestIndirect {
        operation: BLKIF_OP_INDIRECT,
        indirect_op,
        nr_segments: u16::try_from(nr_segments).map_err(|_| MapError::Overflow)?,
        id: hdr.id,
        sector_number: hdr.sector,
        handle: hdr.handle,
        ..BlkifRequestIndirect::default()
    };
    for (d, g) in req.indirect_grefs.iter_mut().zip(indirect_grefs) {
        *d = *g;
    }
    Ok(req.encode())
}

/// Encodes a discard of `nr_sectors` sectors from `sector`.
pub fn encode_discard(
    id: u64,
    sector: u64,
    nr_sectors: u64,
    secure: bool,
) -> Result<RingEntryBytes, MapError> {
    if nr_sectors == 0 {
        return Err(MapError::EmptyDiscard);
    }
    sector.checked_add(nr_sectors).ok_or(MapError::Overflow)?;
    Ok(BlkifRequestDiscard {
        operation: BLKIF_OP_DISCARD,
        flag: if secure { BLKIF_DISCARD_SECURE } else { 0 },
        id,
        sector_number: sector,
        nr_sectors,
        ..BlkifRequestDiscard::default()
    }
    .encode())
}
