// SPDX-License-Identifier: GPL-2.0

//! Xen blkif protocol: constants and the x86_64 (native, little-endian) wire
//! format of include/xen/interface/io/blkif.h and io/ring.h.
//!
//! The `#[repr(C)]` structs below mirror the C layout field by field and the
//! `const _: () = assert!(..)` lines pin every size and offset at compile
//! time. blkcore forbids `unsafe`, so nothing is transmuted: every message is
//! encoded to / decoded from little-endian bytes. The kernel glue copies a
//! ring entry out of shared memory exactly once (into a local
//! `[u8; N]`) and decodes that copy, so a backend that rewrites the entry
//! concurrently can't make two reads disagree ("read once" hardening).
//!
//! Decoding never fails and never panics: any byte pattern decodes to some
//! value; judging the value (ids, operations, segment bounds) is the job of
//! the caller ([`super::ring::InFlight`] on the frontend side).

use core::mem::{offset_of, size_of};

/// Size of a grant / Xen page: data is always moved in 4 KiB frames.
pub const XEN_PAGE_SIZE: u32 = 4096;
/// Sector unit of the protocol, independent of the disk's sector size.
pub const SECTOR_SIZE: u32 = 512;
/// Segments that fit in a direct (non-indirect) request.
pub const BLKIF_MAX_SEGMENTS_PER_REQUEST: u32 = 11;
/// Segment descriptors per indirect page (4096 / 8).
pub const SEGS_PER_INDIRECT_FRAME: u32 = XEN_PAGE_SIZE / 8;
/// Indirect pages one indirect request may reference on x86_64.
pub const BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST: u32 = 8;
/// Largest `ring-page-order` the protocol allows (16 pages).
pub const XENBUS_MAX_RING_GRANT_ORDER: u32 = 4;

/// Sectors (512 B) per Xen page: `first_sect`/`last_sect` lie in `0..8`.
pub const SECTORS_PER_XEN_PAGE: u32 = XEN_PAGE_SIZE / SECTOR_SIZE;
/// Largest number of segments one indirect request can describe
/// (8 indirect pages x 512 descriptors).
pub const BLKIF_MAX_INDIRECT_SEGMENTS: u32 =
    BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * SEGS_PER_INDIRECT_FRAME;
/// Largest number of ring pages (`1 << XENBUS_MAX_RING_GRANT_ORDER`).
pub const XENBUS_MAX_RING_PAGES: u32 = 1 << XENBUS_MAX_RING_GRANT_ORDER;

/// Read from the disk into the granted frames.
pub const BLKIF_OP_READ: u8 = 0;
/// Write the granted frames to the disk.
pub const BLKIF_OP_WRITE: u8 = 1;
/// Write with barrier semantics (`feature-barrier`).
pub const BLKIF_OP_WRITE_BARRIER: u8 = 2;
/// Flush the backend's disk cache (`feature-flush-cache`).
pub const BLKIF_OP_FLUSH_DISKCACHE: u8 = 3;
/// Discard a sector range (`feature-discard`).
pub const BLKIF_OP_DISCARD: u8 = 5;
/// Indirect request: segments live in granted indirect pages.
pub const BLKIF_OP_INDIRECT: u8 = 6;

/// Response status: success.
pub const BLKIF_RSP_OKAY: i16 = 0;
/// Response status: the operation failed (-EIO).
pub const BLKIF_RSP_ERROR: i16 = -1;
/// Response status: operation not supported (barrier/flush/discard).
pub const BLKIF_RSP_EOPNOTSUPP: i16 = -2;

/// `flag` bit of a discard request: secure erase.
pub const BLKIF_DISCARD_SECURE: u8 = 1;

/// Bytes of one ring slot: the union of request (112) and response (16).
pub const BLKIF_RING_ENTRY_SIZE: usize = 112;
/// Bytes of a response as copied out of the ring (`sizeof(blkif_response)`).
pub const BLKIF_RESPONSE_SIZE: usize = 16;
/// Bytes of one segment descriptor (direct or in an indirect page).
pub const BLKIF_SEGMENT_SIZE: usize = 8;
/// Bytes of the shared ring header before `ring[0]`.
pub const SRING_HEADER_SIZE: usize = 64;

/// The bytes of one ring slot, as copied out of / into shared memory.
pub type RingEntryBytes = [u8; BLKIF_RING_ENTRY_SIZE];
/// The bytes of one indirect page.
pub type IndirectPageBytes = [u8; XEN_PAGE_SIZE as usize];

/// Number of entries of a blkif ring made of `pages` 4 KiB pages
/// (`__CONST_RING_SIZE(blkif, pages * XEN_PAGE_SIZE)`): the entries that fit
/// after the 64-byte header, rounded down to a power of two.
///
/// Returns `None` unless `1 <= pages <= 16`.
pub const fn ring_size(pages: u32) -> Option<u32> {
    if pages == 0 || pages > XENBUS_MAX_RING_PAGES {
        return None;
    }
    let bytes = pages * XEN_PAGE_SIZE - SRING_HEADER_SIZE as u32;
    let fit = bytes / BLKIF_RING_ENTRY_SIZE as u32;
    // Round down to a power of two (__RD32); `fit` >= 36 here.
    Some(1 << (31 - fit.leading_zeros()))
}

const _: () = assert!(matches!(ring_size(1), Some(32)));
const _: () = assert!(matches!(ring_size(2), Some(64)));
const _: () = assert!(matches!(ring_size(16), Some(512)));

/// Largest ring size over all valid page counts (16 pages).
pub const BLKIF_MAX_RING_SIZE: u32 = match ring_size(XENBUS_MAX_RING_PAGES) {
    Some(n) => n,
    None => 0,
};

/// Header of the shared ring page (`struct blkif_sring` before `ring[]`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SringHeader {
    /// Requests produced by the frontend (free-running).
    pub req_prod: u32,
    /// Backend wants a notification when `req_prod` passes this.
    pub req_event: u32,
    /// Responses produced by the backend (free-running).
    pub rsp_prod: u32,
    /// Frontend wants a notification when `rsp_prod` passes this.
    pub rsp_event: u32,
    /// Reserved, zero.
    pub pad: [u8; 48],
}

/// Byte offset of `req_prod` in the shared page.
pub const SRING_REQ_PROD: usize = offset_of!(SringHeader, req_prod);
/// Byte offset of `req_event` in the shared page.
pub const SRING_REQ_EVENT: usize = offset_of!(SringHeader, req_event);
/// Byte offset of `rsp_prod` in the shared page.
pub const SRING_RSP_PROD: usize = offset_of!(SringHeader, rsp_prod);
/// Byte offset of `rsp_event` in the shared page.
pub const SRING_RSP_EVENT: usize = offset_of!(SringHeader, rsp_event);

const _: () = assert!(size_of::<SringHeader>() == SRING_HEADER_SIZE);
const _: () = assert!(SRING_REQ_PROD == 0);
const _: () = assert!(SRING_REQ_EVENT == 4);
const _: () = assert!(SRING_RSP_PROD == 8);
const _: () = assert!(SRING_RSP_EVENT == 12);

/// Byte offset of ring slot `slot` (already masked) from the start of the
/// shared ring, or `None` if it does not fit in `usize`.
pub const fn sring_entry_offset(slot: u32) -> Option<usize> {
    match (slot as usize).checked_mul(BLKIF_RING_ENTRY_SIZE) {
        Some(o) => o.checked_add(SRING_HEADER_SIZE),
        None => None,
    }
}

/// One segment (`struct blkif_request_segment`): a granted frame and the
/// inclusive 512-byte sector range inside it. Also the 8-byte descriptor
/// stored 512 to an indirect page.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlkifRequestSegment {
    /// Grant reference of the 4 KiB frame.
    pub gref: u32,
    /// First sector in the frame (inclusive), `0..8`.
    pub first_sect: u8,
    /// Last sector in the frame (inclusive), `first_sect..8`.
    pub last_sect: u8,
    /// Padding to 8 bytes.
    pub pad: u16,
}

const _: () = assert!(size_of::<BlkifRequestSegment>() == BLKIF_SEGMENT_SIZE);
const _: () = assert!(offset_of!(BlkifRequestSegment, gref) == 0);
const _: () = assert!(offset_of!(BlkifRequestSegment, first_sect) == 4);
const _: () = assert!(offset_of!(BlkifRequestSegment, last_sect) == 5);

/// Read/write/flush/barrier request (`struct blkif_request` with `u.rw`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlkifRequest {
    /// `BLKIF_OP_*`.
    pub operation: u8,
    /// Number of valid entries in `seg` (0 for a flush).
    pub nr_segments: u8,
    /// Virtual device handle.
    pub handle: u16,
    /// Padding (x86_64 ABI: keeps `id` at offset 8).
    pub pad1: u32,
    /// Frontend cookie, echoed in the response.
    pub id: u64,
    /// Start sector (512-byte units).
    pub sector_number: u64,
    /// The segments.
    pub seg: [BlkifRequestSegment; BLKIF_MAX_SEGMENTS_PER_REQUEST as usize],
}

const _: () = assert!(size_of::<BlkifRequest>() == BLKIF_RING_ENTRY_SIZE);
const _: () = assert!(offset_of!(BlkifRequest, operation) == 0);
const _: () = assert!(offset_of!(BlkifRequest, nr_segments) == 1);
const _: () = assert!(offset_of!(BlkifRequest, handle) == 2);
const _: () = assert!(offset_of!(BlkifRequest, id) == 8);
const _: () = assert!(offset_of!(BlkifRequest, sector_number) == 16);
const _: () = assert!(offset_of!(BlkifRequest, seg) == 24);

/// Indirect request (`struct blkif_request` with `u.indirect`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlkifRequestIndirect {
    /// Always [`BLKIF_OP_INDIRECT`].
    pub operation: u8,
    /// The real operation ([`BLKIF_OP_READ`] or [`BLKIF_OP_WRITE`]).
    pub indirect_op: u8,
    /// Number of segment descriptors in the indirect pages.
    pub nr_segments: u16,
    /// Padding (x86_64 ABI: keeps `id` at offset 8).
    pub pad1: u32,
    /// Frontend cookie, echoed in the response.
    pub id: u64,
    /// Start sector (512-byte units).
    pub sector_number: u64,
    /// Virtual device handle.
    pub handle: u16,
    /// Padding.
    pub pad2: u16,
    /// Grants of the indirect pages (only the first
    /// `ceil(nr_segments / 512)` are meaningful).
    pub indirect_grefs: [u32; BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST as usize],
    /// Padding to 64 bytes.
    pub pad3: u32,
}

const _: () = assert!(size_of::<BlkifRequestIndirect>() == 64);
const _: () = assert!(offset_of!(BlkifRequestIndirect, operation) == 0);
const _: () = assert!(offset_of!(BlkifRequestIndirect, indirect_op) == 1);
const _: () = assert!(offset_of!(BlkifRequestIndirect, nr_segments) == 2);
const _: () = assert!(offset_of!(BlkifRequestIndirect, id) == 8);
const _: () = assert!(offset_of!(BlkifRequestIndirect, sector_number) == 16);
const _: () = assert!(offset_of!(BlkifRequestIndirect, handle) == 24);
const _: () = assert!(offset_of!(BlkifRequestIndirect, indirect_grefs) == 28);
const _: () = assert!(offset_of!(BlkifRequestIndirect, pad3) == 60);

/// Discard request (`struct blkif_request` with `u.discard`). The C struct
/// is packed to 33 bytes; only the offsets matter on the wire (the Rust
/// struct has tail padding that is never encoded).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlkifRequestDiscard {
    /// Always [`BLKIF_OP_DISCARD`].
    pub operation: u8,
    /// [`BLKIF_DISCARD_SECURE`] or 0.
    pub flag: u8,
    /// Padding.
    pub pad1: u16,
    /// Padding (x86_64 ABI: keeps `id` at offset 8).
    pub pad2: u32,
    /// Frontend cookie, echoed in the response.
    pub id: u64,
    /// Start sector (512-byte units).
    pub sector_number: u64,
    /// Number of sectors to discard.
    pub nr_sectors: u64,
}

const _: () = assert!(offset_of!(BlkifRequestDiscard, operation) == 0);
const _: () = assert!(offset_of!(BlkifRequestDiscard, flag) == 1);
const _: () = assert!(offset_of!(BlkifRequestDiscard, id) == 8);
const _: () = assert!(offset_of!(BlkifRequestDiscard, sector_number) == 16);
const _: () = assert!(offset_of!(BlkifRequestDiscard, nr_sectors) == 24);

/// Response (`struct blkif_response`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlkifResponse {
    /// Copied from the request.
    pub id: u64,
    /// Copied from the request (`indirect_op` for indirect requests).
    pub operation: u8,
    /// Padding.
    pub pad1: u8,
    /// `BLKIF_RSP_*`.
    pub status: i16,
    /// Padding to 16 bytes.
    pub pad2: u32,
}

const _: () = assert!(size_of::<BlkifResponse>() == BLKIF_RESPONSE_SIZE);
const _: () = assert!(offset_of!(BlkifResponse, id) == 0);
const _: () = assert!(offset_of!(BlkifResponse, operation) == 8);
const _: () = assert!(offset_of!(BlkifResponse, status) == 10);

/// One ring slot (`union blkif_sring_entry`). Documents the layout only:
/// reading a union field needs `unsafe`, so code uses the byte codecs.
#[repr(C)]
#[derive(Clone, Copy)]
pub union BlkifSringEntry {
    /// Request view.
    pub req: BlkifRequest,
    /// Response view.
    pub rsp: BlkifResponse,
}

const _: () = assert!(size_of::<BlkifSringEntry>() == BLKIF_RING_ENTRY_SIZE);
const _: () = assert!(size_of::<BlkifRequestIndirect>() <= BLKIF_RING_ENTRY_SIZE);
const _: () = assert!(size_of::<BlkifRequestDiscard>() <= BLKIF_RING_ENTRY_SIZE);

// Little-endian field access. Offsets are constants below the buffer length;
// `get` keeps them panic-free regardless.

fn rd<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    if let Some(s) = off.checked_add(N).and_then(|end| b.get(off..end)) {
        a.copy_from_slice(s);
    }
    a
}

fn wr(b: &mut [u8], off: usize, v: &[u8]) {
    if let Some(d) = off.checked_add(v.len()).and_then(|end| b.get_mut(off..end)) {
        d.copy_from_slice(v);
    }
}

fn rd_u8(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}
fn rd_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(rd(b, off))
}
fn rd_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(rd(b, off))
}
fn rd_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(rd(b, off))
}

impl BlkifRequestSegment {
    /// Encodes the 8-byte descriptor.
    pub fn encode(&self) -> [u8; BLKIF_SEGMENT_SIZE] {
        let mut b = [0u8; BLKIF_SEGMENT_SIZE];
        self.encode_into(&mut b);
        b
    }

    /// Encodes into the first 8 bytes of `b` (nothing if `b` is shorter).
    #[inline]
    pub fn encode_into(&self, b: &mut [u8]) {
        // One 8-byte store: this runs for every segment of a request.
        let v = u64::from(self.gref)
            | u64::from(self.first_sect) << 32
            | u64::from(self.last_sect) << 40
            | u64::from(self.pad) << 48;
        if let Some(b) = b.get_mut(..BLKIF_SEGMENT_SIZE) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Decodes the descriptor at the start of `b` (zero-filled if short).
    pub fn decode(b: &[u8]) -> Self {
        Self {
            gref: Self::decode_gref(b),
            first_sect: rd_u8(b, 4),
            last_sect: rd_u8(b, 5),
            pad: rd_u16(b, 6),
        }
    }

    /// The grant reference of the descriptor at the start of `b` (0 if
    /// short), without decoding the rest.
    #[inline]
    pub fn decode_gref(b: &[u8]) -> u32 {
        // Not `rd_u32`: this runs per segment under the ring lock, and the
        // fixed-size read is what the compiler turns into one load.
        b.first_chunk::<4>().map_or(0, |g| u32::from_le_bytes(*g))
    }

    /// Bytes covered by the segment, if `first_sect <= last_sect < 8`.
    pub fn byte_len(&self) -> Option<u32> {
        if self.first_sect > self.last_sect || u32::from(self.last_sect) >= SECTORS_PER_XEN_PAGE {
            return None;
        }
        Some((u32::from(self.last_sect) - u32::from(self.first_sect) + 1) * SECTOR_SIZE)
    }
}

impl BlkifRequest {
    /// Encodes a whole ring slot.
    pub fn encode(&self) -> RingEntryBytes {
        let mut b = [0u8; BLKIF_RING_ENTRY_SIZE];
        b[0] = self.operation;
        b[1] = self.nr_segments;
        wr(&mut b, 2, &self.handle.to_le_bytes());
        wr(&mut b, 4, &self.pad1.to_le_bytes());
        wr(&mut b, 8, &self.id.to_le_bytes());
        wr(&mut b, 16, &self.sector_number.to_le_bytes());
        for (i, s) in self.seg.iter().enumerate() {
            let off = 24 + i * BLKIF_SEGMENT_SIZE;
            if let Some(d) = b.get_mut(off..) {
                s.encode_into(d);
            }
        }
        b
    }

    /// Decodes a ring slot with the read/write layout.
    pub fn decode(b: &RingEntryBytes) -> Self {
        let mut seg = [BlkifRequestSegment::default(); BLKIF_MAX_SEGMENTS_PER_REQUEST as usize];
        for (i, s) in seg.iter_mut().enumerate() {
            let off = 24 + i * BLKIF_SEGMENT_SIZE;
            *s = BlkifRequestSegment::decode(b.get(off..).unwrap_or(&[]));
        }
        Self {
            operation: b[0],
            nr_segments: b[1],
            handle: rd_u16(b, 2),
            pad1: rd_u32(b, 4),
            id: rd_u64(b, 8),
            sector_number: rd_u64(b, 16),
            seg,
        }
    }
}

impl BlkifRequestIndirect {
    /// Encodes a whole ring slot (bytes past 64 are zero).
    pub fn encode(&self) -> RingEntryBytes {
        let mut b = [0u8; BLKIF_RING_ENTRY_SIZE];
        b[0] = self.operation;
        b[1] = self.indirect_op;
        wr(&mut b, 2, &self.nr_segments.to_le_bytes());
        wr(&mut b, 4, &self.pad1.to_le_bytes());
        wr(&mut b, 8, &self.id.to_le_bytes());
        wr(&mut b, 16, &self.sector_number.to_le_bytes());
        wr(&mut b, 24, &self.handle.to_le_bytes());
        wr(&mut b, 26, &self.pad2.to_le_bytes());
        for (i, g) in self.indirect_grefs.iter().enumerate() {
            wr(&mut b, 28 + 4 * i, &g.to_le_bytes());
        }
        wr(&mut b, 60, &self.pad3.to_le_bytes());
        b
    }

    /// Decodes a ring slot with the indirect layout.
    pub fn decode(b: &RingEntryBytes) -> Self {
        let mut indirect_grefs = [0u32; BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST as usize];
        for (i, g) in indirect_grefs.iter_mut().enumerate() {
            *g = rd_u32(b, 28 + 4 * i);
        }
        Self {
            operation: b[0],
            indirect_op: b[1],
            nr_segments: rd_u16(b, 2),
            pad1: rd_u32(b, 4),
            id: rd_u64(b, 8),
            sector_number: rd_u64(b, 16),
            handle: rd_u16(b, 24),
            pad2: rd_u16(b, 26),
            indirect_grefs,
            pad3: rd_u32(b, 60),
        }
    }
}

impl BlkifRequestDiscard {
    /// Encodes a whole ring slot (bytes past 32 are zero).
    pub fn encode(&self) -> RingEntryBytes {
        let mut b = [0u8; BLKIF_RING_ENTRY_SIZE];
        b[0] = self.operation;
        b[1] = self.flag;
        wr(&mut b, 2, &self.pad1.to_le_bytes());
        wr(&mut b, 4, &self.pad2.to_le_bytes());
        wr(&mut b, 8, &self.id.to_le_bytes());
        wr(&mut b, 16, &self.sector_number.to_le_bytes());
        wr(&mut b, 24, &self.nr_sectors.to_le_bytes());
        b
    }

    /// Decodes a ring slot with the discard layout.
    pub fn decode(b: &RingEntryBytes) -> Self {
        Self {
            operation: b[0],
            flag: b[1],
            pad1: rd_u16(b, 2),
            pad2: rd_u32(b, 4),
            id: rd_u64(b, 8),
            sector_number: rd_u64(b, 16),
            nr_sectors: rd_u64(b, 24),
        }
    }
}

impl BlkifResponse {
    /// Encodes the 16 response bytes.
    pub fn encode(&self) -> [u8; BLKIF_RESPONSE_SIZE] {
        let mut b = [0u8; BLKIF_RESPONSE_SIZE];
        wr(&mut b, 0, &self.id.to_le_bytes());
        b[8] = self.operation;
        b[9] = self.pad1;
        wr(&mut b, 10, &self.status.to_le_bytes());
        wr(&mut b, 12, &self.pad2.to_le_bytes());
        b
    }

    /// Decodes a response from the first 16 bytes of `b`; `None` if shorter.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let b = b.get(..BLKIF_RESPONSE_SIZE)?;
        Some(Self {
            id: rd_u64(b, 0),
            operation: rd_u8(b, 8),
            pad1: rd_u8(b, 9),
            status: i16::from_le_bytes(rd(b, 10)),
            pad2: rd_u32(b, 12),
        })
    }
}

/// A ring slot decoded according to its operation byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read, write, write-barrier or flush (read/write layout).
    ReadWrite(BlkifRequest),
    /// Indirect read or write.
    Indirect(BlkifRequestIndirect),
    /// Discard.
    Discard(BlkifRequestDiscard),
    /// Any other operation byte (a backend answers it with an error).
    Unknown {
        /// The operation byte.
        operation: u8,
        /// The id at offset 8 (common to all layouts).
        id: u64,
    },
}

impl Request {
    /// Decodes a ring slot; never fails, unknown operations included.
    pub fn decode(b: &RingEntryBytes) -> Self {
        match b[0] {
            BLKIF_OP_READ | BLKIF_OP_WRITE | BLKIF_OP_WRITE_BARRIER | BLKIF_OP_FLUSH_DISKCACHE => {
                Self::ReadWrite(BlkifRequest::decode(b))
            }
            BLKIF_OP_INDIRECT => Self::Indirect(BlkifRequestIndirect::decode(b)),
            BLKIF_OP_DISCARD => Self::Discard(BlkifRequestDiscard::decode(b)),
            operation => Self::Unknown {
                operation,
                id: rd_u64(b, 8),
            },
        }
    }

    /// The request id (offset 8 in every layout).
    pub fn id(&self) -> u64 {
        match self {
            Self::ReadWrite(r) => r.id,
            Self::Indirect(r) => r.id,
            Self::Discard(r) => r.id,
            Self::Unknown { id, .. } => *id,
        }
    }

    /// The operation a response must echo (`indirect_op` for indirect).
    pub fn response_operation(&self) -> u8 {
        match self {
            Self::ReadWrite(r) => r.operation,
            Self::Indirect(r) => r.indirect_op,
            Self::Discard(r) => r.operation,
            Self::Unknown { operation, .. } => *operation,
        }
    }
}

/// Number of indirect pages needed for `nr_segments` descriptors
/// (`INDIRECT_GREFS`).
pub const fn indirect_pages(nr_segments: u32) -> u32 {
    nr_segments.div_ceil(SEGS_PER_INDIRECT_FRAME)
}

/// Reads descriptor `i` (0-based within this page) of an indirect page.
pub fn indirect_segment(page: &IndirectPageBytes, i: u32) -> Option<BlkifRequestSegment> {
    if i >= SEGS_PER_INDIRECT_FRAME {
        return None;
    }
    let off = (i as usize).checked_mul(BLKIF_SEGMENT_SIZE)?;
    page.get(off..).map(BlkifRequestSegment::decode)
}
