// SPDX-License-Identifier: GPL-2.0

//! Xen blkfront feature negotiation: from the backend's xenstore directory
//! and our module parameters to one validated [`Negotiated`] record.
//!
//! Every key upstream xen-blkfront (Linux 7.3) reads from the backend is
//! read here, with the same defaults for absent keys, plus the protocol
//! extension keys `minimum-io-size` and `optimal-io-size` (bytes; see
//! Documentation/). Differences from upstream, all deliberate:
//!
//! * a malformed value of a key without which no I/O is possible
//!   (`sectors`, `info`, `sector-size`) is an error naming the key; in any
//!   other key it is ignored, its default used, and reported (see
//!   [`Ignored`]); upstream uses the default silently;
//! * `sector-size` must be a power of two in 512..=4096 and
//!   `physical-sector-size` a power of two in `sector-size`..=64 KiB
//!   (upstream hands anything to the block layer, which rejects only some);
//! * the I/O size hints are at most [`MAX_IO_SIZE_HINT`];
//! * `feature-max-indirect-segments` is additionally capped at the
//!   protocol's limit ([`MAX_INDIRECT_SEGMENTS`]);
//! * discard granularity/alignment are checked against the sector size.

mod optional;

use super::blkif::{
    BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST, BLKIF_MAX_INDIRECT_SEGMENTS,
    BLKIF_MAX_SEGMENTS_PER_REQUEST, SECTOR_SIZE, SEGS_PER_INDIRECT_FRAME,
    XENBUS_MAX_RING_GRANT_ORDER, XEN_PAGE_SIZE,
};
use super::xenstore::{
    read_bool, read_frontend_bool, read_u32, require_u32, require_u64, KeyError, KeyedValues,
    Reason,
};
use optional::{
    read_discard,
    read_minimum_io_size,
    read_optimal_io_size,
    read_physical_sector_size, //
};

/// Backend key: largest ring order the backend accepts.
pub const KEY_MAX_RING_PAGE_ORDER: &str = "max-ring-page-order";
/// Backend key: most rings (queues) the backend accepts.
pub const KEY_MULTI_QUEUE_MAX_QUEUES: &str = "multi-queue-max-queues";
/// Backend key: capacity in 512-byte sectors (mandatory).
pub const KEY_SECTORS: &str = "sectors";
/// Backend key: `VDISK_*` flags (mandatory).
pub const KEY_INFO: &str = "info";
/// Backend key: logical sector size in bytes (mandatory).
pub const KEY_SECTOR_SIZE: &str = "sector-size";
/// Backend key: physical sector size in bytes (defaults to `sector-size`).
pub const KEY_PHYSICAL_SECTOR_SIZE: &str = "physical-sector-size";
/// Backend key: `BLKIF_OP_WRITE_BARRIER` supported.
pub const KEY_FEATURE_BARRIER: &str = "feature-barrier";
/// Backend key: `BLKIF_OP_FLUSH_DISKCACHE` supported.
pub const KEY_FEATURE_FLUSH_CACHE: &str = "feature-flush-cache";
/// Backend key: `BLKIF_OP_DISCARD` supported.
pub const KEY_FEATURE_DISCARD: &str = "feature-discard";
/// Backend key: discard granularity in bytes.
pub const KEY_DISCARD_GRANULARITY: &str = "discard-granularity";
/// Backend key: discard alignment (offset) in bytes.
pub const KEY_DISCARD_ALIGNMENT: &str = "discard-alignment";
/// Backend key: secure discard supported.
pub const KEY_DISCARD_SECURE: &str = "discard-secure";
/// Backend key (and frontend key we write): persistent grants.
pub const KEY_FEATURE_PERSISTENT: &str = "feature-persistent";
/// Backend key: most segments per indirect request.
pub const KEY_FEATURE_MAX_INDIRECT_SEGMENTS: &str = "feature-max-indirect-segments";
/// Backend key (extension): minimum I/O size in bytes.
pub const KEY_MINIMUM_IO_SIZE: &str = "minimum-io-size";
/// Backend key (extension): optimal I/O size in bytes.
pub const KEY_OPTIMAL_IO_SIZE: &str = "optimal-io-size";
/// Frontend (own directory) key: is the backend trusted.
pub const KEY_TRUSTED: &str = "trusted";

/// Every backend key [`negotiate`] reads (an error names one of these).
pub const BACKEND_KEYS: [&str; 16] = [
    KEY_MAX_RING_PAGE_ORDER,
    KEY_MULTI_QUEUE_MAX_QUEUES,
    KEY_SECTORS,
    KEY_INFO,
    KEY_SECTOR_SIZE,
    KEY_PHYSICAL_SECTOR_SIZE,
    KEY_FEATURE_BARRIER,
    KEY_FEATURE_FLUSH_CACHE,
    KEY_FEATURE_DISCARD,
    KEY_DISCARD_GRANULARITY,
    KEY_DISCARD_ALIGNMENT,
    KEY_DISCARD_SECURE,
    KEY_FEATURE_PERSISTENT,
    KEY_FEATURE_MAX_INDIRECT_SEGMENTS,
    KEY_MINIMUM_IO_SIZE,
    KEY_OPTIMAL_IO_SIZE,
];

/// The keys without which no I/O is possible: a bad value in one of them
/// fails the connection; in any other of [`BACKEND_KEYS`] it is ignored
/// (see [`Ignored`]).
pub const REQUIRED_KEYS: [&str; 3] = [KEY_SECTORS, KEY_INFO, KEY_SECTOR_SIZE];

/// `info` bit: the disk is a CD-ROM (blkif.h `VDISK_CDROM`).
pub const VDISK_CDROM: u32 = 0x1;
/// `info` bit: removable media (blkif.h `VDISK_REMOVABLE`).
pub const VDISK_REMOVABLE: u32 = 0x2;
/// `info` bit: read-only (blkif.h `VDISK_READONLY`).
pub const VDISK_READONLY: u32 = 0x4;

/// Largest segment count of one indirect request the protocol can carry:
/// [`BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST`] pages of
/// [`SEGS_PER_INDIRECT_FRAME`] descriptors (4096 on x86_64).
pub const MAX_INDIRECT_SEGMENTS: u32 =
    BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * SEGS_PER_INDIRECT_FRAME;

/// Largest accepted logical sector size: a frontend cannot address blocks
/// larger than a page.
pub const MAX_SECTOR_SIZE: u32 = XEN_PAGE_SIZE;
/// Largest accepted physical sector size (64 KiB).
pub const MAX_PHYSICAL_SECTOR_SIZE: u32 = 64 * 1024;

/// Frontend-side inputs to negotiation: the module parameters.
///
/// The glue should clamp `max_queues` to the number of online CPUs, as
/// upstream's module init does; everything else is clamped here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrontendParams {
    /// `max_indirect_segments` (upstream default 32). Values below 11 act
    /// as 11, which means "no indirect requests" (upstream raises the
    /// parameter to 11 at module init).
    pub max_indirect_segments: u32,
    /// `max_queues` (upstream default 4). 0 acts as 1.
    pub max_queues: u32,
    /// `max_ring_page_order` (upstream default 0). Values above 4 act as 4.
    pub max_ring_page_order: u32,
    /// `feature_persistent` (upstream default true): offer persistent grants.
    pub feature_persistent: bool,
    /// Effective trust in the backend (upstream default true): the
    /// `trusted` module parameter AND the frontend's own `trusted` node;
    /// see [`frontend_trusted`].
    pub trusted: bool,
}

impl FrontendParams {
    /// Upstream xen-blkfront's defaults: 32, 4, 0, true, true.
    pub const UPSTREAM_DEFAULTS: FrontendParams = FrontendParams {
        max_indirect_segments: 32,
        max_queues: 4,
        max_ring_page_order: 0,
        feature_persistent: true,
        trusted: true,
    };
}

impl Default for FrontendParams {
    fn default() -> Self {
        Self::UPSTREAM_DEFAULTS
    }
}

/// How the frontend makes writes durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    /// `BLKIF_OP_FLUSH_DISKCACHE` (`feature-flush-cache`): write cache, no FUA.
    Flush,
    /// `BLKIF_OP_WRITE_BARRIER` (`feature-barrier` without
    /// `feature-flush-cache`): write cache with FUA.
    Barrier,
}

/// Negotiated discard parameters (only when `feature-discard` = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discard {
    /// `discard-granularity` in bytes; 0 = not given (the block layer then
    /// uses the physical sector size). A multiple of the logical sector size.
    pub granularity: u32,
    /// `discard-alignment` in bytes: a multiple of 512 and, when
    /// `granularity` is given, smaller than it.
    pub alignment: u32,
    /// `discard-secure`: secure erase supported.
    pub secure: bool,
}

/// Result of negotiation: everything the driver needs to set up rings,
/// grants and the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// Number of rings (hardware queues), >= 1.
    pub queues: u32,
    /// Ring order we write as `ring-page-order` (0..=4).
    pub ring_page_order: u32,
    /// Pages per ring: `1 << ring_page_order`.
    pub ring_pages: u32,
    /// Persistent grants in use (both sides offered them).
    pub persistent: bool,
    /// Segments per indirect request; 0 = no indirect requests.
    pub indirect_segments: u32,
    /// Segments one request may carry: `indirect_segments`, or 11 without
    /// indirect requests.
    pub segments_per_request: u32,
    /// Cache flush method, `None` when the backend offers neither.
    pub flush: Option<FlushKind>,
    /// Discard parameters, `None` when `feature-discard` is absent or 0.
    pub discard: Option<Discard>,
    /// Capacity in 512-byte sectors (0 is allowed: empty CD-ROM drives and
    /// zero-sized disks exist upstream).
    pub sectors: u64,
    /// `info`: [`VDISK_CDROM`] | [`VDISK_REMOVABLE`] | [`VDISK_READONLY`];
    /// other bits are kept but have no meaning.
    pub info: u32,
    /// Logical sector size in bytes: a power of two in 512..=4096.
    pub sector_size: u32,
    /// Physical sector size in bytes: a power of two in
    /// `sector_size..=65536`.
    pub physical_sector_size: u32,
    /// `minimum-io-size` in bytes: a power-of-two multiple of the physical
    /// sector size. `None` when absent or 0.
    pub minimum_io_size: Option<u32>,
    /// `optimal-io-size` in bytes: a multiple of the physical sector size,
    /// not below the minimum I/O size. `None` when absent or 0.
    pub optimal_io_size: Option<u32>,
    /// Bounce data through frontend-owned pages (grant + memcpy) instead
    /// of granting the bio pages directly. See [`negotiate`].
    pub copy_data: bool,
    /// Optional keys whose values were rejected, their defaults used.
    pub ignored: Ignored,
}

/// Optional backend keys whose values were rejected: each is ignored and
/// its default used (as upstream's `xenbus_read_unsigned` does with a
/// value it cannot parse), so that a backend's mistake in a feature or a
/// hint costs the feature or the hint, never the disk (on a restore, the
/// live disk and its mounted file systems). Only the keys without which no
/// I/O is possible (`sectors`, `info`, `sector-size`) fail a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ignored {
    /// How many keys were ignored.
    pub count: u32,
    /// The first of them, for the log line.
    pub first: Option<KeyError>,
}

impl Ignored {
    /// `r`'s value, or `default` with the error recorded.
    fn or_default<T>(&mut self, r: Result<T, KeyError>, default: T) -> T {
        r.unwrap_or_else(|e| {
            self.count = self.count.saturating_add(1);
            self.first.get_or_insert(e);
            default
        })
    }
}

impl Negotiated {
    /// This negotiation on the rings `layout` describes: the ones set up
    /// and published at InitWait. Upstream reads the ring keys once, there;
    /// a backend that changes them before Connected does not make the
    /// frontend tear down what it published (nor, on a restore, the live
    /// disk).
    pub fn with_rings(self, layout: RingLayout) -> Self {
        Self {
            queues: layout.queues,
            ring_page_order: layout.ring_page_order,
            ring_pages: layout.ring_pages,
            ..self
        }
    }

    /// The ring layout of this negotiation.
    pub fn rings(&self) -> RingLayout {
        RingLayout {
            queues: self.queues,
            ring_page_order: self.ring_page_order,
            ring_pages: self.ring_pages,
        }
    }

    /// The backend marked the disk read-only.
    pub fn read_only(&self) -> bool {
        self.info & VDISK_READONLY != 0
    }

    /// The backend marked the disk as a CD-ROM.
    pub fn cdrom(&self) -> bool {
        self.info & VDISK_CDROM != 0
    }

    /// The backend marked the media removable.
    pub fn removable(&self) -> bool {
        self.info & VDISK_REMOVABLE != 0
    }
}

/// The largest I/O size hint accepted: the largest request blkif can
/// express (8 indirect pages of 512 segments of 4 KiB: 16 MiB). A larger
/// size cannot be the one the disk works best at through blkif, and
/// `optimal-io-size` sets the readahead window (twice it): a value near
/// 4 GiB would read gigabytes ahead. SCSI's sd refuses an optimal transfer
/// length above the maximum transfer length the same way
/// (`sd_validate_opt_xfer_size`).
pub const MAX_IO_SIZE_HINT: u32 = BLKIF_MAX_INDIRECT_SEGMENTS * XEN_PAGE_SIZE;

/// Effective trust in the backend, as upstream's `talk_to_blkback()`
/// computes it: the `trusted` module parameter AND the frontend's own
/// `trusted` node (absent = trusted). `own` is the frontend's directory.
pub fn frontend_trusted(own: &impl KeyedValues, modparam: bool) -> Result<bool, KeyError> {
    let node = read_frontend_bool(own, KEY_TRUSTED)?.unwrap_or(true);
    Ok(modparam && node)
}

/// Re-read `sectors` on a later `Connected` (online resize).
pub fn read_sectors(backend: &impl KeyedValues) -> Result<u64, KeyError> {
    let sectors = require_u64(backend, KEY_SECTORS)?;
    check_sectors(backend, sectors)?;
    Ok(sectors)
}

/// Ring layout: what the frontend must decide before it writes its ring
/// references (backend state InitWait), when the disk keys may not be
/// there yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Number of rings (hardware queues), >= 1.
    pub queues: u32,
    /// Ring order we write as `ring-page-order` (0..=4).
    pub ring_page_order: u32,
    /// Pages per ring: `1 << ring_page_order`.
    pub ring_pages: u32,
}

/// Read only the ring keys (`multi-queue-max-queues`,
/// `max-ring-page-order`) and apply the ring rules of [`negotiate`], which
/// gives the same answer for the same directory (a key it cannot read
/// counts as absent; [`negotiate`] reports it).
pub fn negotiate_rings(backend: &impl KeyedValues, params: &FrontendParams) -> RingLayout {
    ring_layout(backend, params, &mut Ignored::default())
}

fn ring_layout(
    backend: &impl KeyedValues,
    params: &FrontendParams,
    ignored: &mut Ignored,
) -> RingLayout {
    let backend_queues = ignored
        .or_default(read_u32(backend, KEY_MULTI_QUEUE_MAX_QUEUES), None)
        .unwrap_or(1);
    let queues = backend_queues.min(params.max_queues).max(1);
    let backend_order = ignored
        .or_default(read_u32(backend, KEY_MAX_RING_PAGE_ORDER), None)
        .unwrap_or(0);
    let ring_page_order = backend_order
        .min(params.max_ring_page_order)
        .min(XENBUS_MAX_RING_GRANT_ORDER);
    // ring_page_order <= 4, so the shift cannot overflow.
    let ring_pages = 1u32.checked_shl(ring_page_order).unwrap_or(1);
    RingLayout {
        queues,
        ring_page_order,
        ring_pages,
    }
}

fn err(backend: &impl KeyedValues, key: &'static str, reason: Reason) -> KeyError {
    KeyError::backend(key, backend.get(key).unwrap_or(""), reason)
}

fn check_sectors(backend: &impl KeyedValues, sectors: u64) -> Result<(), KeyError> {
    // The byte size must fit a u64 (the block layer's sector_t maths).
    let max = u64::MAX / u64::from(SECTOR_SIZE);
    if sectors > max {
        return Err(err(
            backend,
            KEY_SECTORS,
            Reason::OutOfRange { min: 0, max },
        ));
    }
    Ok(())
}

/// Negotiate with the backend whose directory is `backend`.
///
/// Rules (upstream 7.3 unless noted):
///
/// * queues = min(`multi-queue-max-queues` (absent: 1), `max_queues`),
///   at least 1;
/// * ring order = min(`max-ring-page-order` (absent: 0),
///   `max_ring_page_order`, 4);
/// * persistent = `feature_persistent` && backend `feature-persistent`
///   (absent: false);
/// * indirect segments = min(`feature-max-indirect-segments` (absent: 0),
///   max(`max_indirect_segments`, 11), [`MAX_INDIRECT_SEGMENTS`]), and 0
///   ("direct requests only") when that is <= 11;
/// * flush: `feature-flush-cache` wins over `feature-barrier`;
/// * copy_data = persistent || !trusted. Persistent grants only pay off
///   when data is copied into a fixed pool of pages the backend keeps
///   mapped; without them, granting the bio pages directly avoids the
///   memcpy (Linux 3.13 "restore the non-persistent data path"). An
///   untrusted backend must never see guest pages other than the bounce
///   pages, so it always gets copies.
pub fn negotiate(
    backend: &impl KeyedValues,
    params: &FrontendParams,
) -> Result<Negotiated, KeyError> {
    let mut ignored = Ignored::default();
    let RingLayout {
        queues,
        ring_page_order,
        ring_pages,
    } = ring_layout(backend, params, &mut ignored);

    // Disk geometry.
    let sectors = require_u64(backend, KEY_SECTORS)?;
    check_sectors(backend, sectors)?;
    let info = require_u32(backend, KEY_INFO)?;
    let sector_size = require_u32(backend, KEY_SECTOR_SIZE)?;
    if !sector_size.is_power_of_two() {
        return Err(err(backend, KEY_SECTOR_SIZE, Reason::NotPowerOfTwo));
    }
    if !(SECTOR_SIZE..=MAX_SECTOR_SIZE).contains(&sector_size) {
        return Err(err(
            backend,
            KEY_SECTOR_SIZE,
            Reason::OutOfRange {
                min: u64::from(SECTOR_SIZE),
                max: u64::from(MAX_SECTOR_SIZE),
            },
        ));
    }
    let physical_sector_size =
        ignored.or_default(read_physical_sector_size(backend, sector_size), sector_size);

    // Features.
    let barrier = ignored.or_default(read_bool(backend, KEY_FEATURE_BARRIER), None);
    let flush_cache = ignored.or_default(read_bool(backend, KEY_FEATURE_FLUSH_CACHE), None);
    let flush = if flush_cache.unwrap_or(false) {
        Some(FlushKind::Flush)
    } else if barrier.unwrap_or(false) {
        Some(FlushKind::Barrier)
    } else {
        None
    };

    let discard = if ignored
        .or_default(read_bool(backend, KEY_FEATURE_DISCARD), None)
        .unwrap_or(false)
    {
        ignored.or_default(read_discard(backend, sector_size).map(Some), None)
    } else {
        None
    };

    let backend_persistent = ignored
        .or_default(read_bool(backend, KEY_FEATURE_PERSISTENT), None)
        .unwrap_or(false);
    let persistent = params.feature_persistent && backend_persistent;

    let backend_segs = ignored
        .or_default(read_u32(backend, KEY_FEATURE_MAX_INDIRECT_SEGMENTS), None)
        .unwrap_or(0);
    let capped = backend_segs
        .min(
            params
                .max_indirect_segments
                .max(BLKIF_MAX_SEGMENTS_PER_REQUEST),
        )
        .min(MAX_INDIRECT_SEGMENTS);
    let indirect_segments = if capped <= BLKIF_MAX_SEGMENTS_PER_REQUEST {
        0
    } else {
        capped
    };
    let segments_per_request = if indirect_segments == 0 {
        BLKIF_MAX_SEGMENTS_PER_REQUEST
    } else {
        indirect_segments
    };

    // I/O size hints (extension keys; 0 = not given).
    let minimum_io_size =
        ignored.or_default(read_minimum_io_size(backend, physical_sector_size), None);
    let optimal_io_size = ignored.or_default(
        read_optimal_io_size(backend, physical_sector_size, minimum_io_size),
        None,
    );

    Ok(Negotiated {
        queues,
        ring_page_order,
        ring_pages,
        persistent,
        indirect_segments,
        segments_per_request,
        flush,
        discard,
        sectors,
        info,
        sector_size,
        physical_sector_size,
        minimum_io_size,
        optimal_io_size,
        copy_data: persistent || !params.trusted,
        ignored,
    })
}
