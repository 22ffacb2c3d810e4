// SPDX-License-Identifier: GPL-2.0

//! Block queue limits computed from a negotiated Xen device or a parsed
//! virtio-blk config.
//!
//! The values are those the block layer ends up with after
//! `blk_validate_limits()` (e.g. `io_min` raised to the physical block
//! size, `io_opt` rounded down to it, discard granularity at least a
//! physical block and 0 without discard), so the glue can set them as they
//! are and the invariants can be tested on the host.
//!
//! Both drivers assume a 4 KiB kernel `PAGE_SIZE` (x86_64): one Xen grant
//! per block-layer segment. Other page sizes need `GRANTS_PER_PSEG` here.

use super::blkif::{SECTOR_SIZE, XEN_PAGE_SIZE};
use super::negotiate::{FlushKind, Negotiated};
use super::virtio::{ConfigError, ConfigReason, VirtioBlkConfig, MAX_DISCARD_SEGMENTS};

/// Block queue limits for one disk. Sizes are in bytes, `*_sectors` in
/// 512-byte sectors; 0 in a discard / write-zeroes / secure-erase limit
/// means "not supported".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Logical block size (bytes): power of two, 512..=65536 (Xen: 4096
    /// at most).
    pub logical_block_size: u32,
    /// Physical block size (bytes): power of two, >= logical.
    pub physical_block_size: u32,
    /// Offset (bytes) of the first physically aligned logical block;
    /// smaller than `physical_block_size`.
    pub alignment_offset: u32,
    /// Minimum I/O size (bytes): a multiple of `physical_block_size`.
    pub io_min: u32,
    /// Optimal I/O size (bytes), 0 = not given; a multiple of
    /// `physical_block_size`.
    pub io_opt: u32,
    /// Largest request (512-byte sectors), a multiple of the logical block.
    pub max_hw_sectors: u32,
    /// Largest number of segments per request (>= 1).
    pub max_segments: u32,
    /// Largest segment (bytes), >= 4096.
    pub max_segment_size: u32,
    /// A segment never crosses a multiple of `seg_boundary_mask + 1` bytes
    /// (`seg_boundary_mask + 1` a power of two >= 4096 and >=
    /// `max_segment_size`); 0 = no constraint (the block layer's default).
    pub seg_boundary_mask: u64,
    /// Discard granularity (bytes): 0 without discard, else a multiple of
    /// the logical block and >= `physical_block_size`.
    pub discard_granularity: u32,
    /// Discard alignment (bytes), smaller than `discard_granularity` (0
    /// without discard).
    pub discard_alignment: u32,
    /// Largest discard (512-byte sectors); 0 = no discard.
    pub max_discard_sectors: u32,
    /// Largest number of ranges in one discard (>= 1).
    pub max_discard_segments: u32,
    /// Largest secure erase (512-byte sectors); 0 = not supported.
    pub max_secure_erase_sectors: u32,
    /// Largest write-zeroes (512-byte sectors); 0 = not supported.
    pub max_write_zeroes_sectors: u32,
    /// `Some(true)`: set `BLK_FEAT_ROTATIONAL`; `Some(false)`: clear it;
    /// `None`: unknown, leave the block layer's default (in 7.3: not
    /// rotational).
    pub rotational: Option<bool>,
    /// Mark the disk read-only.
    pub read_only: bool,
    /// The device has a volatile write cache (`BLK_FEAT_WRITE_CACHE`).
    pub write_cache: bool,
    /// Forced unit access supported (`BLK_FEAT_FUA`); implies `write_cache`.
    pub fua: bool,
}

impl QueueLimits {
    /// Whether every request the block layer may have built under `old`
    /// (same size in sectors, same number and size of segments) can be
    /// sent under `self`: a disk that keeps its queue across a reconnect to
    /// a new backend (guest restore) needs this, because requests already
    /// built are resubmitted as they are. On failure, says which limit
    /// shrank.
    pub fn admits_requests_of(&self, old: &QueueLimits) -> Result<(), &'static str> {
        if self.logical_block_size != old.logical_block_size {
            return Err("logical block size changed");
        }
        if self.max_hw_sectors < old.max_hw_sectors {
            return Err("max_hw_sectors shrank");
        }
        if self.max_segments < old.max_segments {
            return Err("max_segments shrank");
        }
        if self.max_segment_size < old.max_segment_size {
            return Err("max_segment_size shrank");
        }
        let boundary = |m: u64| if m == 0 { u64::MAX } else { m };
        if boundary(self.seg_boundary_mask) < boundary(old.seg_boundary_mask) {
            return Err("seg_boundary_mask narrowed");
        }
        Ok(())
    }

    /// Check the documented invariants (the ones `blk_validate_limits()`
    /// relies on, and those this crate promises); on failure, say which.
    /// Used by tests and fuzz targets; cheap enough for a debug check in
    /// the glue.
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        let lbs = self.logical_block_size;
        let pbs = self.physical_block_size;
        // Up to the block layer's largest `BLK_MAX_BLOCK_SIZE` (64 KiB with
        // large folios).
        if !lbs.is_power_of_two() || !(SECTOR_SIZE..=64 * 1024).contains(&lbs) {
            return Err("logical_block_size not a power of two in 512..=65536");
        }
        if !pbs.is_power_of_two() || pbs < lbs || pbs > 64 * 1024 {
            return Err("physical_block_size not a power of two in logical..=64K");
        }
        if self.alignment_offset >= pbs {
            return Err("alignment_offset not below physical_block_size");
        }
        if self.io_min < pbs || self.io_min % pbs != 0 {
            return Err("io_min not a multiple of physical_block_size");
        }
        if self.io_opt % pbs != 0 {
            return Err("io_opt not a multiple of physical_block_size");
        }
        let lbs_sectors = lbs / SECTOR_SIZE;
        if self.max_hw_sectors < XEN_PAGE_SIZE / SECTOR_SIZE
            || self.max_hw_sectors < lbs_sectors
            || self.max_hw_sectors % lbs_sectors != 0
        {
            return Err("max_hw_sectors below a page or not a multiple of the logical block");
        }
        if self.max_segments == 0 {
            return Err("max_segments is 0");
        }
        if self.max_segment_size < XEN_PAGE_SIZE {
            return Err("max_segment_size below 4096");
        }
        if self.seg_boundary_mask != 0 {
            let span = self.seg_boundary_mask.checked_add(1);
            if !span.is_some_and(|s| {
                s.is_power_of_two()
                    && s >= u64::from(XEN_PAGE_SIZE)
                    && s >= u64::from(self.max_segment_size)
            }) {
                return Err(
                    "seg_boundary_mask + 1 not a power of two >= 4096 and >= max_segment_size",
                );
            }
        }
        if self.max_discard_sectors == 0 {
            if self.discard_granularity != 0 || self.discard_alignment != 0 {
                return Err("discard granularity/alignment without discard");
            }
        } else if self.discard_granularity < pbs
            || self.discard_granularity % lbs != 0
            || self.discard_alignment >= self.discard_granularity
        {
            return Err("discard granularity/alignment inconsistent");
        }
        if self.max_discard_segments == 0 {
            return Err("max_discard_segments is 0");
        }
        if self.fua && !self.write_cache {
            return Err("fua without write_cache");
        }
        Ok(())
    }
}

/// `v` rounded down to a multiple of `m` (`v` itself for `m` = 0).
fn round_down(v: u32, m: u32) -> u32 {
    v.checked_rem(m).map_or(v, |r| v.saturating_sub(r))
}

/// Queue limits for a Xen vbd, matching upstream `blkif_set_queue_limits()`
/// plus `io_min`/`io_opt` from the extension keys:
///
/// * `max_segments` = segments per request (11 direct, or the indirect
///   count), `max_segment_size` = 4096, `max_hw_sectors` =
///   segments * 4096 / 512;
/// * logical/physical block = `sector-size` / `physical-sector-size`;
/// * `io_min` = `minimum-io-size`, else the physical sector size;
///   `io_opt` = `optimal-io-size`, else 0;
/// * discard: unlimited length, one range, granularity =
///   max(`discard-granularity`, physical sector size), alignment =
///   `discard-alignment` modulo that; secure erase unlimited when
///   `discard-secure`;
/// * flush: write cache on, FUA only with barriers; no write-zeroes;
///   rotational unknown (upstream does not set it either).
///
/// Arithmetic saturates rather than wraps; for a [`Negotiated`] produced by
/// [`super::negotiate::negotiate`] nothing saturates.
pub fn xen_limits(n: &Negotiated) -> QueueLimits {
    let segments = n.segments_per_request.max(1);
    let sectors_per_page = XEN_PAGE_SIZE / SECTOR_SIZE;
    let lbs_sectors = (n.sector_size / SECTOR_SIZE).max(1);
    let max_hw_sectors = round_down(segments.saturating_mul(sectors_per_page), lbs_sectors);
    let physical = n.physical_sector_size.max(n.sector_size);
    let io_min = n.minimum_io_size.unwrap_or(physical).max(physical);
    let io_opt = round_down(n.optimal_io_size.unwrap_or(0), physical);

    let (discard_granularity, discard_alignment, max_discard_sectors, secure) = match n.discard {
        Some(d) => {
            let g = d.granularity.max(physical);
            (
                g,
                d.alignment.checked_rem(g).unwrap_or(0),
                u32::MAX,
                d.secure,
            )
        }
        None => (0, 0, 0, false),
    };

    QueueLimits {
        logical_block_size: n.sector_size,
        physical_block_size: physical,
        alignment_offset: 0,
        io_min,
        io_opt,
        max_hw_sectors,
        max_segments: segments,
        max_segment_size: XEN_PAGE_SIZE,
        // One segment, one granted frame: never across a page (upstream
        // sets the same).
        seg_boundary_mask: u64::from(XEN_PAGE_SIZE) - 1,
        discard_granularity,
        discard_alignment,
        max_discard_sectors,
        max_discard_segments: 1,
        max_secure_erase_sectors: if secure { u32::MAX } else { 0 },
        max_write_zeroes_sectors: 0,
        rotational: None,
        read_only: n.read_only(),
        write_cache: n.flush.is_some(),
        // FUA rides on a barrier, which only a direct request can carry
        // (`indirect_op` is read or write). With indirect descriptors the
        // block layer emulates FUA instead: the write, then an empty
        // barrier, which is as durable.
        fua: n.flush == Some(FlushKind::Barrier) && n.indirect_segments == 0,
    }
}

fn min_not_zero(a: u32, b: u32) -> u32 {
    match (a, b) {
        (0, b) => b,
        (a, 0) => a,
        (a, b) => a.min(b),
    }
}

fn overflow(field: &'static str, value: impl Into<u64>) -> ConfigError {
    ConfigError {
        field,
        value: value.into(),
        reason: ConfigReason::Overflow,
    }
}

/// Queue limits for a virtio-blk device, mirroring upstream
/// `virtblk_read_limits()` and `virtblk_probe()` (7.3).
///
/// `max_dma_size` is the transport's `virtio_max_dma_size()` (bytes);
/// `max_segment_size` = min(`size_max`, `max_dma_size`, `u32::MAX`).
///
/// * `max_segments` = `seg_max` (1 without `SEG_MAX`), `max_hw_sectors`
///   unlimited (rounded down to the logical block);
/// * physical = `blk_size << physical_block_exp`, alignment offset =
///   `blk_size * alignment_offset`, `io_min` = max(`blk_size *
///   min_io_size`, physical), `io_opt` = `blk_size * opt_io_size` rounded
///   down to the physical block;
/// * discard (`DISCARD` or `SECURE_ERASE`): `max_discard_sectors` =
///   `max_discard_sectors` or unlimited when 0 (0 without `DISCARD`);
///   segments = min_not_zero(`max_discard_seg`, `max_secure_erase_seg`),
///   else `seg_max`, capped at 256; granularity =
///   min_not_zero(`discard_sector_alignment`,
///   `secure_erase_sector_alignment`) * 512, else the logical block, then
///   at least the physical block;
/// * write-zeroes: `max_write_zeroes_sectors` or unlimited when 0;
/// * always rotational (upstream marks every virtio disk rotational);
///   write cache from `wce`/`FLUSH`; no FUA; read-only with `RO`.
///
/// Fails (naming the field) only on an overflow or a too-small segment
/// size, which [`VirtioBlkConfig::parse`] already excludes for the config
/// fields.
pub fn virtio_limits(
    cfg: &VirtioBlkConfig,
    max_dma_size: usize,
) -> Result<QueueLimits, ConfigError> {
    let lbs = cfg.blk_size;
    let physical = if cfg.physical_block_exp != 0 {
        lbs.checked_shl(u32::from(cfg.physical_block_exp))
            .filter(|p| p.checked_shr(u32::from(cfg.physical_block_exp)) == Some(lbs))
            .ok_or_else(|| overflow("physical_block_exp", cfg.physical_block_exp))?
    } else {
        lbs
    }
    .max(lbs);
    let alignment_offset = lbs
        .checked_mul(u32::from(cfg.alignment_offset))
        .ok_or_else(|| overflow("alignment_offset", cfg.alignment_offset))?;
    let io_min = lbs
        .checked_mul(u32::from(cfg.min_io_size))
        .ok_or_else(|| overflow("min_io_size", cfg.min_io_size))?
        .max(physical);
    let io_opt = round_down(
        lbs.checked_mul(cfg.opt_io_size)
            .ok_or_else(|| overflow("opt_io_size", cfg.opt_io_size))?,
        physical,
    );

    let dma = u32::try_from(max_dma_size).unwrap_or(u32::MAX);
    let max_segment_size = cfg.size_max.unwrap_or(u32::MAX).min(dma);
    if max_segment_size < XEN_PAGE_SIZE {
        return Err(ConfigError {
            field: if dma < XEN_PAGE_SIZE {
                "transport max_dma_size"
            } else {
                "size_max"
            },
            value: u64::from(max_segment_size),
            reason: ConfigReason::TooSmall {
                min: u64::from(XEN_PAGE_SIZE),
            },
        });
    }
    let seg_max = cfg.seg_max.max(1);
    let lbs_sectors = (lbs / SECTOR_SIZE).max(1);

    let mut max_discard_sectors = 0;
    let mut max_discard_segments = 1;
    let mut discard_granularity = 0;
    let mut max_secure_erase_sectors = 0;
    if cfg.discard.is_some() || cfg.secure_erase.is_some() {
        let (mut gran, mut segs) = (0, 0);
        if let Some(d) = cfg.discard {
            gran = d.sector_alignment;
            segs = d.max_seg;
            max_discard_sectors = if d.max_sectors == 0 {
                u32::MAX
            } else {
                d.max_sectors
            };
        }
        if let Some(s) = cfg.secure_erase {
            gran = min_not_zero(gran, s.sector_alignment);
            segs = min_not_zero(segs, s.max_seg);
            max_secure_erase_sectors = s.max_sectors;
        }
        if segs == 0 {
            segs = seg_max;
        }
        max_discard_segments = segs.min(MAX_DISCARD_SEGMENTS);
        // Secure erase alone: upstream sets the granularity from
        // `secure_erase_sector_alignment`, and `blk_validate_limits()` sets
        // it back to 0 (no discard); secure erase does not use it
        // (`blkdev_issue_secure_erase` aligns to the logical block). The
        // discard alignment is 0 in upstream's limits either way.
        if max_discard_sectors != 0 {
            let g = if gran != 0 {
                gran.checked_mul(SECTOR_SIZE)
                    .ok_or_else(|| overflow("discard_sector_alignment", gran))?
            } else {
                lbs
            };
            discard_granularity = g.max(physical);
        }
    }

    let max_write_zeroes_sectors = match cfg.write_zeroes {
        Some(w) if w.max_sectors != 0 => w.max_sectors,
        Some(_) => u32::MAX,
        None => 0,
    };

    Ok(QueueLimits {
        logical_block_size: lbs,
        physical_block_size: physical,
        alignment_offset: alignment_offset.checked_rem(physical).unwrap_or(0),
        io_min,
        io_opt,
        max_hw_sectors: round_down(u32::MAX, lbs_sectors),
        max_segments: seg_max,
        max_segment_size,
        // virtio_blk sets none either.
        seg_boundary_mask: 0,
        discard_granularity,
        discard_alignment: 0,
        max_discard_sectors,
        max_discard_segments,
        max_secure_erase_sectors,
        max_write_zeroes_sectors,
        rotational: Some(true),
        read_only: cfg.read_only,
        write_cache: cfg.writeback,
        fua: false,
    })
}

/// Descriptors a virtio-blk request takes besides its data segments
/// without indirect descriptors: the header and the status byte.
pub const VIRTIO_REQUEST_OVERHEAD: u32 = 2;

/// Descriptors the serial request (`VIRTIO_BLK_T_GET_ID`: header, 20-byte
/// id buffer, status) holds on the first request virtqueue without
/// indirect descriptors, for as long as the device does not answer it,
/// possibly for ever.
pub const GET_ID_DESCRIPTORS: u32 = 3;

/// Most data segments a virtio-blk request may have so that it fits a ring
/// of `ring` descriptors on which nothing but `reserved` descriptors is
/// held, or `None` when not even a one-segment request does. With
/// indirect descriptors a request takes one descriptor whatever its size:
/// no cap (`u32::MAX`) as long as one is free.
///
/// Why: a request that does not fit gets `ENOSPC`, and blk-mq retries it
/// when a request completes. On a ring holding nothing else none ever
/// does, and the disk hangs. `seg_max` need not know the ring (QEMU with
/// `seg-max-adjust=off` offers 126 on any ring), and upstream does not
/// check this.
pub fn ring_fit_segments(ring: u32, indirect: bool, reserved: u32) -> Option<u32> {
    let free = ring.checked_sub(reserved)?;
    if indirect {
        return (free >= 1).then_some(u32::MAX);
    }
    free.checked_sub(VIRTIO_REQUEST_OVERHEAD)
        .filter(|&segs| segs >= 1)
}

/// How a virtio-blk disk's requests fit its rings, decided at probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingFit {
    /// Segments per request: `seg_max` capped so that a request fits.
    pub max_segments: u32,
    /// Whether the serial may be asked for: its descriptors are reserved
    /// in `max_segments`, so that an unanswered GET_ID cannot keep a
    /// largest request out of an otherwise idle ring. False when the ring
    /// is too small to hold both a one-segment request and GET_ID (the
    /// disk then has no serial).
    pub get_id: bool,
}

/// Cap `max_segments` for the smallest request ring (`ring` descriptors)
/// at probe, keeping room for the serial request ([`GET_ID_DESCRIPTORS`]),
/// which is sent on an I/O queue and may never be answered.
pub fn virtio_ring_fit(ring: u32, indirect: bool, max_segments: u32) -> RingFit {
    match ring_fit_segments(ring, indirect, GET_ID_DESCRIPTORS) {
        Some(fits) => RingFit {
            max_segments: max_segments.min(fits),
            get_id: true,
        },
        // Too small for both: I/O before the serial.
        None => RingFit {
            max_segments: max_segments
                .min(ring_fit_segments(ring, indirect, 0).unwrap_or(1))
                .max(1),
            get_id: false,
        },
    }
}

/// Whether the rings found again at a restore (`ring` descriptors, the
/// smallest; nothing held: the serial is not asked again) still carry a
/// request of `max_segments`, the limit the disk's requests, some of them
/// already built and held across the freeze, were made with. A device may
/// come back with a smaller queue.
pub fn virtio_ring_fits_after_restore(ring: u32, indirect: bool, max_segments: u32) -> bool {
    ring_fit_segments(ring, indirect, 0).is_some_and(|fits| fits >= max_segments)
}
