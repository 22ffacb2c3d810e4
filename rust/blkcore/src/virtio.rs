// SPDX-License-Identifier: GPL-2.0

//! virtio-blk feature bits and the device configuration space
//! (`struct virtio_blk_config`, include/uapi/linux/virtio_blk.h), parsed and
//! validated once, with errors that name the field and its value.
//!
//! The config space is little-endian (virtio 1.0 and later; the glue must
//! only bind devices that negotiated `VIRTIO_F_VERSION_1`, or pass a
//! legacy device's bytes from a little-endian guest). A field whose feature
//! was not negotiated is not read and takes upstream virtio_blk's default.

use core::fmt;

/// Feature bit: `size_max` is valid (maximum segment size).
pub const VIRTIO_BLK_F_SIZE_MAX: u32 = 1;
/// Feature bit: `seg_max` is valid (maximum segments per request).
pub const VIRTIO_BLK_F_SEG_MAX: u32 = 2;
/// Feature bit: legacy `geometry` is valid.
pub const VIRTIO_BLK_F_GEOMETRY: u32 = 4;
/// Feature bit: the device is read-only.
pub const VIRTIO_BLK_F_RO: u32 = 5;
/// Feature bit: `blk_size` is valid (logical block size).
pub const VIRTIO_BLK_F_BLK_SIZE: u32 = 6;
/// Feature bit: the flush command is supported.
pub const VIRTIO_BLK_F_FLUSH: u32 = 9;
/// Feature bit: topology fields are valid.
pub const VIRTIO_BLK_F_TOPOLOGY: u32 = 10;
/// Feature bit: `wce` (writeback cache mode) is valid and writable.
pub const VIRTIO_BLK_F_CONFIG_WCE: u32 = 11;
/// Feature bit: `num_queues` is valid (multiqueue).
pub const VIRTIO_BLK_F_MQ: u32 = 12;
/// Feature bit: discard and its config fields.
pub const VIRTIO_BLK_F_DISCARD: u32 = 13;
/// Feature bit: write-zeroes and its config fields.
pub const VIRTIO_BLK_F_WRITE_ZEROES: u32 = 14;
/// Feature bit: secure erase and its config fields.
pub const VIRTIO_BLK_F_SECURE_ERASE: u32 = 16;
/// Feature bit: zoned device and its config fields.
pub const VIRTIO_BLK_F_ZONED: u32 = 17;

/// Every feature bit upstream virtio_blk negotiates.
pub const VIRTIO_BLK_FEATURES: [u32; 13] = [
    VIRTIO_BLK_F_SIZE_MAX,
    VIRTIO_BLK_F_SEG_MAX,
    VIRTIO_BLK_F_GEOMETRY,
    VIRTIO_BLK_F_RO,
    VIRTIO_BLK_F_BLK_SIZE,
    VIRTIO_BLK_F_FLUSH,
    VIRTIO_BLK_F_TOPOLOGY,
    VIRTIO_BLK_F_CONFIG_WCE,
    VIRTIO_BLK_F_MQ,
    VIRTIO_BLK_F_DISCARD,
    VIRTIO_BLK_F_WRITE_ZEROES,
    VIRTIO_BLK_F_SECURE_ERASE,
    VIRTIO_BLK_F_ZONED,
];

/// The mask `1 << bit`, or 0 for a bit outside a `u64`.
pub const fn feature_mask(bit: u32) -> u64 {
    match 1u64.checked_shl(bit) {
        Some(m) => m,
        None => 0,
    }
}

/// True when `features` has feature `bit` set (false for bits >= 64).
pub const fn has_feature(features: u64, bit: u32) -> bool {
    features & feature_mask(bit) != 0
}

/// Byte offsets of `struct virtio_blk_config` fields (packed; from the
/// uapi header, checked by the `layout` test and the asserts below).
mod parse;
pub mod request;

pub mod offset {
    /// `__virtio64 capacity`.
    pub const CAPACITY: usize = 0;
    /// `__virtio32 size_max`.
    pub const SIZE_MAX: usize = 8;
    /// `__virtio32 seg_max`.
    pub const SEG_MAX: usize = 12;
    /// `geometry.cylinders` (`__virtio16`).
    pub const GEOMETRY_CYLINDERS: usize = 16;
    /// `geometry.heads` (`__u8`).
    pub const GEOMETRY_HEADS: usize = 18;
    /// `geometry.sectors` (`__u8`).
    pub const GEOMETRY_SECTORS: usize = 19;
    /// `__virtio32 blk_size`.
    pub const BLK_SIZE: usize = 20;
    /// `__u8 physical_block_exp`.
    pub const PHYSICAL_BLOCK_EXP: usize = 24;
    /// `__u8 alignment_offset`.
    pub const ALIGNMENT_OFFSET: usize = 25;
    /// `__virtio16 min_io_size`.
    pub const MIN_IO_SIZE: usize = 26;
    /// `__virtio32 opt_io_size`.
    pub const OPT_IO_SIZE: usize = 28;
    /// `__u8 wce`.
    pub const WCE: usize = 32;
    /// `__u8 unused`.
    pub const UNUSED: usize = 33;
    /// `__virtio16 num_queues`.
    pub const NUM_QUEUES: usize = 34;
    /// `__virtio32 max_discard_sectors`.
    pub const MAX_DISCARD_SECTORS: usize = 36;
    /// `__virtio32 max_discard_seg`.
    pub const MAX_DISCARD_SEG: usize = 40;
    /// `__virtio32 discard_sector_alignment`.
    pub const DISCARD_SECTOR_ALIGNMENT: usize = 44;
    /// `__virtio32 max_write_zeroes_sectors`.
    pub const MAX_WRITE_ZEROES_SECTORS: usize = 48;
    /// `__virtio32 max_write_zeroes_seg`.
    pub const MAX_WRITE_ZEROES_SEG: usize = 52;
    /// `__u8 write_zeroes_may_unmap`.
    pub const WRITE_ZEROES_MAY_UNMAP: usize = 56;
    /// `__u8 unused1[3]`.
    pub const UNUSED1: usize = 57;
    /// `__virtio32 max_secure_erase_sectors`.
    pub const MAX_SECURE_ERASE_SECTORS: usize = 60;
    /// `__virtio32 max_secure_erase_seg`.
    pub const MAX_SECURE_ERASE_SEG: usize = 64;
    /// `__virtio32 secure_erase_sector_alignment`.
    pub const SECURE_ERASE_SECTOR_ALIGNMENT: usize = 68;
    /// `zoned.zone_sectors` (`__virtio32`).
    pub const ZONED_ZONE_SECTORS: usize = 72;
    /// `zoned.max_open_zones` (`__virtio32`).
    pub const ZONED_MAX_OPEN_ZONES: usize = 76;
    /// `zoned.max_active_zones` (`__virtio32`).
    pub const ZONED_MAX_ACTIVE_ZONES: usize = 80;
    /// `zoned.max_append_sectors` (`__virtio32`).
    pub const ZONED_MAX_APPEND_SECTORS: usize = 84;
    /// `zoned.write_granularity` (`__virtio32`).
    pub const ZONED_WRITE_GRANULARITY: usize = 88;
    /// `zoned.model` (`__u8`).
    pub const ZONED_MODEL: usize = 92;
    /// `zoned.unused2[3]`.
    pub const ZONED_UNUSED2: usize = 93;
    /// `sizeof(struct virtio_blk_config)`.
    pub const SIZE: usize = 96;
}

/// Logical block size when `VIRTIO_BLK_F_BLK_SIZE` is off (upstream: 512).
pub const DEFAULT_BLK_SIZE: u32 = 512;
/// Largest logical block size the parser accepts: the block layer's
/// `BLK_MAX_BLOCK_SIZE` with large folios (64 KiB). A kernel built with a
/// smaller one (a page, without `CONFIG_TRANSPARENT_HUGEPAGE`) refuses more
/// than its own: [`VirtioBlkConfig::check_block_size`].
pub const MAX_BLK_SIZE: u32 = 64 * 1024;
/// Largest accepted physical block size (64 KiB).
pub const MAX_PHYSICAL_BLOCK_SIZE: u32 = 64 * 1024;
/// Smallest accepted `size_max`: the block layer's `BLK_MIN_SEGMENT_SIZE`.
pub const MIN_SIZE_MAX: u32 = 4096;
/// Upstream `VIRTIO_BLK_MAX_SG_ELEMS - 2`: cap on `seg_max`.
pub const MAX_SEG_MAX: u32 = 32768 - 2;
/// Upstream `MAX_DISCARD_SEGMENTS`: cap on discard segments.
pub const MAX_DISCARD_SEGMENTS: u32 = 256;
/// `zoned.model`: not zoned.
pub const VIRTIO_BLK_Z_NONE: u8 = 0;
/// `zoned.model`: host-managed.
pub const VIRTIO_BLK_Z_HM: u8 = 1;
/// `zoned.model`: host-aware.
pub const VIRTIO_BLK_Z_HA: u8 = 2;

/// Why a config field was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigReason {
    /// The config space given is too short to hold the field (`value` is
    /// the number of bytes given).
    Truncated {
        /// Bytes needed to read the field.
        need: usize,
    },
    /// Must be a power of two within `min..=max`.
    NotPowerOfTwoIn {
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
    },
    /// Must be at least `min`.
    TooSmall {
        /// Smallest accepted value.
        min: u64,
    },
    /// Must be at most `max`.
    TooLarge {
        /// Largest accepted value.
        max: u64,
    },
    /// The derived byte size `field * block size` overflows `u32`.
    Overflow,
    /// Must not be 0 when its feature is offered.
    Zero,
    /// Must be a multiple of another quantity.
    NotMultipleOf {
        /// Name of the other quantity.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// The device asks for something this driver does not support.
    Unsupported(&'static str),
}

impl fmt::Display for ConfigReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigReason::Truncated { need } => {
                write!(f, "config space too short (need {need} bytes)")
            }
            ConfigReason::NotPowerOfTwoIn { min, max } => {
                write!(f, "not a power of two between {min} and {max}")
            }
            ConfigReason::TooSmall { min } => write!(f, "below the minimum {min}"),
            ConfigReason::TooLarge { max } => write!(f, "above the maximum {max}"),
            ConfigReason::Overflow => f.write_str("byte size overflows 32 bits"),
            ConfigReason::Zero => f.write_str("must not be 0 when its feature is offered"),
            ConfigReason::NotMultipleOf { what, value } => {
                write!(f, "not a multiple of {what} ({value})")
            }
            ConfigReason::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

/// A rejected config field. Displays as, e.g.,
/// `virtio-blk config blk_size = 1000: not a power of two between 512 and 65536`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Field name as in `struct virtio_blk_config` (`zoned.model`, ...).
    pub field: &'static str,
    /// The raw value read (for [`ConfigReason::Truncated`]: the length of
    /// the config space given).
    pub value: u64,
    /// What is wrong with it.
    pub reason: ConfigReason,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            ConfigReason::Truncated { need } => write!(
                f,
                "virtio-blk config {}: config space too short ({} bytes, need {})",
                self.field, self.value, need
            ),
            reason => write!(
                f,
                "virtio-blk config {} = {}: {}",
                self.field, self.value, reason
            ),
        }
    }
}

fn cerr(field: &'static str, value: impl Into<u64>, reason: ConfigReason) -> ConfigError {
    ConfigError {
        field,
        value: value.into(),
        reason,
    }
}

/// An advisory config field the driver could not use as given, and the
/// value used instead. Displays as the driver's one warning line for it,
/// e.g. `device config: seg_max 0, using 1`.
///
/// Advisory fields (segment count, topology hints, alignments, capacity
/// past what the block layer can size) are clamped, as upstream virtio_blk
/// or the block layer would (often silently) do: refusing the device for
/// them would cost a user the disk, possibly the boot disk. Only what makes
/// I/O impossible is refused ([`ConfigError`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clamp {
    /// Field name as in `struct virtio_blk_config`.
    pub field: &'static str,
    /// The raw value the device offered.
    pub value: u64,
    /// The value used instead.
    pub used: u64,
}

impl fmt::Display for Clamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "device config: {} {}, using {}",
            self.field, self.value, self.used
        )
    }
}

/// The [`Clamp`]s of one parse, in config order. Room for every field that
/// can be clamped, so none is lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clamps {
    list: [Option<Clamp>; Clamps::ROOM],
}

impl Clamps {
    /// Fields that can be clamped: capacity, seg_max, physical_block_exp,
    /// alignment_offset, min_io_size, opt_io_size, wce,
    /// discard_sector_alignment, secure_erase_sector_alignment.
    const ROOM: usize = 9;

    fn push(&mut self, field: &'static str, value: impl Into<u64>, used: impl Into<u64>) {
        if let Some(slot) = self.list.iter_mut().find(|c| c.is_none()) {
            *slot = Some(Clamp {
                field,
                value: value.into(),
                used: used.into(),
            });
        }
    }

    /// The clamps, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Clamp> {
        self.list.iter().flatten()
    }

    /// The clamp of `field`, if it was clamped.
    pub fn get(&self, field: &str) -> Option<&Clamp> {
        self.iter().find(|c| c.field == field)
    }

    /// True when nothing was clamped.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// A discard / secure-erase alignment in 512-byte sectors made usable: a
/// whole number of logical blocks (rounded down, at least one) whose byte
/// size fits `u32`. Upstream shifts it into a `u32` unchecked, and the
/// block layer then raises the granularity to the physical block.
fn fit_sector_alignment(
    field: &'static str,
    sectors: u32,
    blk_size: u32,
    clamps: &mut Clamps,
) -> u32 {
    let block = (blk_size / 512).max(1);
    let fits = sectors.min(u32::MAX / 512);
    let used = fits - fits % block;
    let used = if sectors != 0 && used == 0 {
        block
    } else {
        used
    };
    if used != sectors {
        clamps.push(field, sectors, used);
    }
    used
}

/// Little-endian reader over the config bytes that fails with the field name.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn bytes<const N: usize>(
        &self,
        field: &'static str,
        off: usize,
    ) -> Result<[u8; N], ConfigError> {
        let have = self.0.len();
        let end = off.saturating_add(N);
        let truncated = ConfigError {
            field,
            value: u64::try_from(have).unwrap_or(u64::MAX),
            reason: ConfigReason::Truncated { need: end },
        };
        self.0
            .get(off..end)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or(truncated)
    }
    fn u8(&self, field: &'static str, off: usize) -> Result<u8, ConfigError> {
        Ok(u8::from_le_bytes(self.bytes::<1>(field, off)?))
    }
    fn u16(&self, field: &'static str, off: usize) -> Result<u16, ConfigError> {
        Ok(u16::from_le_bytes(self.bytes::<2>(field, off)?))
    }
    fn u32(&self, field: &'static str, off: usize) -> Result<u32, ConfigError> {
        Ok(u32::from_le_bytes(self.bytes::<4>(field, off)?))
    }
    fn u64(&self, field: &'static str, off: usize) -> Result<u64, ConfigError> {
        Ok(u64::from_le_bytes(self.bytes::<8>(field, off)?))
    }
}

/// Largest usable `capacity` (512-byte sectors): its byte size fits the
/// block layer's `loff_t` (`i64`), which `set_capacity` shifts it into
/// (`bdev_set_nr_sectors`: the inode size of the block device).
pub const MAX_CAPACITY: u64 = i64::MAX as u64 / 512;

/// A `capacity` read from the device, made usable: above [`MAX_CAPACITY`]
/// it is clamped there, with the [`Clamp`] to report (upstream passes it to
/// `set_capacity` as it is, and the disk's byte size overflows to a
/// negative one). The one rule for both readers: [`VirtioBlkConfig::parse`]
/// at probe and the driver's config-change (online resize) handler, which
/// re-reads only this field.
pub fn clamp_capacity(capacity: u64) -> (u64, Option<Clamp>) {
    if capacity > MAX_CAPACITY {
        let clamp = Clamp {
            field: "capacity",
            value: capacity,
            used: MAX_CAPACITY,
        };
        return (MAX_CAPACITY, Some(clamp));
    }
    (capacity, None)
}

/// Legacy CHS geometry (`VIRTIO_BLK_F_GEOMETRY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Cylinders.
    pub cylinders: u16,
    /// Heads.
    pub heads: u8,
    /// Sectors per track.
    pub sectors: u8,
}

/// Discard fields (`VIRTIO_BLK_F_DISCARD`), raw as the device wrote them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscardConfig {
    /// Largest discard per segment, 512-byte sectors; 0 = no limit.
    pub max_sectors: u32,
    /// Largest number of segments per discard; 0 = `seg_max`.
    pub max_seg: u32,
    /// Alignment (granularity), 512-byte sectors; 0 = logical block size.
    pub sector_alignment: u32,
}

/// Write-zeroes fields (`VIRTIO_BLK_F_WRITE_ZEROES`), raw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteZeroesConfig {
    /// Largest write-zeroes per segment, 512-byte sectors; 0 = no limit.
    pub max_sectors: u32,
    /// Largest number of segments per write-zeroes.
    pub max_seg: u32,
    /// Write-zeroes may deallocate (`write_zeroes_may_unmap` != 0).
    pub may_unmap: bool,
}

/// Secure-erase fields (`VIRTIO_BLK_F_SECURE_ERASE`), all non-zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecureEraseConfig {
    /// Largest secure erase per segment, 512-byte sectors.
    pub max_sectors: u32,
    /// Largest number of segments per secure erase.
    pub max_seg: u32,
    /// Alignment, 512-byte sectors.
    pub sector_alignment: u32,
}

/// A parsed and validated `struct virtio_blk_config`. Fields whose feature
/// is off hold upstream virtio_blk's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtioBlkConfig {
    /// Negotiated feature bits the config was parsed with.
    pub features: u64,
    /// Capacity in 512-byte sectors (always present), at most
    /// [`MAX_CAPACITY`].
    pub capacity: u64,
    /// Maximum segment size in bytes (>= 4096); `None` without `SIZE_MAX`
    /// (no device limit; the transport's DMA limit still applies).
    pub size_max: Option<u32>,
    /// Maximum segments per request, in 1..=32766: `seg_max` capped like
    /// upstream, or 1 without `SEG_MAX` or when the device says 0
    /// (upstream's default).
    pub seg_max: u32,
    /// Legacy geometry, `None` without `GEOMETRY`.
    pub geometry: Option<Geometry>,
    /// Logical block size in bytes: power of two in 512..=65536 (512
    /// without `BLK_SIZE`).
    pub blk_size: u32,
    /// log2(physical / logical block) (0 without `TOPOLOGY`); the physical
    /// block is at most 64 KiB.
    pub physical_block_exp: u8,
    /// Alignment offset in logical blocks, smaller than a physical block
    /// (0 without `TOPOLOGY`).
    pub alignment_offset: u8,
    /// Minimum I/O size in logical blocks (0 = not given).
    pub min_io_size: u16,
    /// Optimal I/O size in logical blocks (0 = not given); its byte size
    /// fits a `u32`.
    pub opt_io_size: u32,
    /// Writeback cache: `wce` with `CONFIG_WCE`, else whether `FLUSH` was
    /// negotiated (upstream `virtblk_get_cache_mode`).
    pub writeback: bool,
    /// Number of request virtqueues, >= 1 (1 without `MQ`).
    pub num_queues: u16,
    /// Discard fields, `None` without `DISCARD`.
    pub discard: Option<DiscardConfig>,
    /// Write-zeroes fields, `None` without `WRITE_ZEROES`.
    pub write_zeroes: Option<WriteZeroesConfig>,
    /// Secure-erase fields, `None` without `SECURE_ERASE`.
    pub secure_erase: Option<SecureEraseConfig>,
    /// `RO` was negotiated.
    pub read_only: bool,
    /// Advisory fields the device offered out of range, and what was used
    /// instead (the fields above hold the values used).
    pub clamps: Clamps,
}

// The layout must match the packed C struct: each field starts where the
// previous one ends.
const _: () = {
    assert!(offset::SIZE_MAX == offset::CAPACITY + 8);
    assert!(offset::SEG_MAX == offset::SIZE_MAX + 4);
    assert!(offset::GEOMETRY_CYLINDERS == offset::SEG_MAX + 4);
    assert!(offset::GEOMETRY_HEADS == offset::GEOMETRY_CYLINDERS + 2);
    assert!(offset::GEOMETRY_SECTORS == offset::GEOMETRY_HEADS + 1);
    assert!(offset::BLK_SIZE == offset::GEOMETRY_SECTORS + 1);
    assert!(offset::PHYSICAL_BLOCK_EXP == offset::BLK_SIZE + 4);
    assert!(offset::ALIGNMENT_OFFSET == offset::PHYSICAL_BLOCK_EXP + 1);
    assert!(offset::MIN_IO_SIZE == offset::ALIGNMENT_OFFSET + 1);
    assert!(offset::OPT_IO_SIZE == offset::MIN_IO_SIZE + 2);
    assert!(offset::WCE == offset::OPT_IO_SIZE + 4);
    assert!(offset::UNUSED == offset::WCE + 1);
    assert!(offset::NUM_QUEUES == offset::UNUSED + 1);
    assert!(offset::MAX_DISCARD_SECTORS == offset::NUM_QUEUES + 2);
    assert!(offset::MAX_DISCARD_SEG == offset::MAX_DISCARD_SECTORS + 4);
    assert!(offset::DISCARD_SECTOR_ALIGNMENT == offset::MAX_DISCARD_SEG + 4);
    assert!(offset::MAX_WRITE_ZEROES_SECTORS == offset::DISCARD_SECTOR_ALIGNMENT + 4);
    assert!(offset::MAX_WRITE_ZEROES_SEG == offset::MAX_WRITE_ZEROES_SECTORS + 4);
    assert!(offset::WRITE_ZEROES_MAY_UNMAP == offset::MAX_WRITE_ZEROES_SEG + 4);
    assert!(offset::UNUSED1 == offset::WRITE_ZEROES_MAY_UNMAP + 1);
    assert!(offset::MAX_SECURE_ERASE_SECTORS == offset::UNUSED1 + 3);
    assert!(offset::MAX_SECURE_ERASE_SEG == offset::MAX_SECURE_ERASE_SECTORS + 4);
    assert!(offset::SECURE_ERASE_SECTOR_ALIGNMENT == offset::MAX_SECURE_ERASE_SEG + 4);
    assert!(offset::ZONED_ZONE_SECTORS == offset::SECURE_ERASE_SECTOR_ALIGNMENT + 4);
    assert!(offset::ZONED_MAX_OPEN_ZONES == offset::ZONED_ZONE_SECTORS + 4);
    assert!(offset::ZONED_MAX_ACTIVE_ZONES == offset::ZONED_MAX_OPEN_ZONES + 4);
    assert!(offset::ZONED_MAX_APPEND_SECTORS == offset::ZONED_MAX_ACTIVE_ZONES + 4);
    assert!(offset::ZONED_WRITE_GRANULARITY == offset::ZONED_MAX_APPEND_SECTORS + 4);
    assert!(offset::ZONED_MODEL == offset::ZONED_WRITE_GRANULARITY + 4);
    assert!(offset::ZONED_UNUSED2 == offset::ZONED_MODEL + 1);
    assert!(offset::SIZE == offset::ZONED_UNUSED2 + 3);
};
