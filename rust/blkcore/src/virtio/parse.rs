// SPDX-License-Identifier: GPL-2.0

//! Parsing and validating the device's config space into a
//! [`VirtioBlkConfig`].

use super::*;

impl VirtioBlkConfig {
    /// Physical block size in bytes (`blk_size << physical_block_exp`).
    pub fn physical_block_size(&self) -> u32 {
        self.blk_size
            .checked_shl(u32::from(self.physical_block_exp))
            .unwrap_or(self.blk_size)
    }

    /// Parse and validate config space `bytes` for negotiated `features`.
    ///
    /// `bytes` needs to cover only the fields of negotiated features;
    /// anything past them is ignored. Checks, each failing with the field
    /// and value (upstream silently mis-computes or falls back on these):
    ///
    /// * `capacity` * 512 fits a `u64` ([`check_capacity`]);
    /// * `size_max` >= 4096 (upstream lets the block layer WARN);
    /// * `seg_max` != 0 (upstream quietly uses 1); larger than 32766 is
    ///   capped like upstream;
    /// * `blk_size` a power of two in 512..=4096 (upstream accepts up to
    ///   the block layer's maximum, 64 KiB with large folios);
    /// * `physical_block_exp`: `blk_size << exp` <= 64 KiB (upstream
    ///   shifts `1 << exp` with no check: undefined for exp >= 32);
    /// * `alignment_offset` < one physical block (upstream lets the block
    ///   layer mask it);
    /// * `min_io_size`: its byte size a multiple of the physical block
    ///   size when it is at least one physical block (smaller values are
    ///   raised to the physical block size, as the block layer does);
    /// * `opt_io_size * blk_size` fits `u32` (upstream overflows);
    /// * `num_queues` != 0 with `MQ` (same as upstream);
    /// * `discard_sector_alignment * 512` fits `u32` (upstream overflows)
    ///   and is a multiple of `blk_size` (same for
    ///   `secure_erase_sector_alignment`);
    /// * secure-erase fields non-zero (same as upstream);
    /// * `wce` is 0 or 1;
    /// * `zoned.model`: host-managed devices are rejected (this driver has
    ///   no zoned support), unknown models too; none/host-aware are fine.
    pub fn parse(bytes: &[u8], features: u64) -> Result<Self, ConfigError> {
        let r = Reader(bytes);
        let has = |bit| has_feature(features, bit);

        let capacity = check_capacity(r.u64("capacity", offset::CAPACITY)?)?;

        let size_max = if has(VIRTIO_BLK_F_SIZE_MAX) {
            let v = r.u32("size_max", offset::SIZE_MAX)?;
            if v < MIN_SIZE_MAX {
                return Err(cerr(
                    "size_max",
                    v,
                    ConfigReason::TooSmall {
                        min: u64::from(MIN_SIZE_MAX),
                    },
                ));
            }
            Some(v)
        } else {
            None
        };

        let seg_max = if has(VIRTIO_BLK_F_SEG_MAX) {
            let v = r.u32("seg_max", offset::SEG_MAX)?;
            if v == 0 {
                return Err(cerr("seg_max", v, ConfigReason::Zero));
            }
            v.min(MAX_SEG_MAX)
        } else {
            1
        };

        let geometry = if has(VIRTIO_BLK_F_GEOMETRY) {
            Some(Geometry {
                cylinders: r.u16("geometry.cylinders", offset::GEOMETRY_CYLINDERS)?,
                heads: r.u8("geometry.heads", offset::GEOMETRY_HEADS)?,
                sectors: r.u8("geometry.sectors", offset::GEOMETRY_SECTORS)?,
            })
        } else {
            None
        };

        let blk_size = if has(VIRTIO_BLK_F_BLK_SIZE) {
            let v = r.u32("blk_size", offset::BLK_SIZE)?;
            if !v.is_power_of_two() || !(DEFAULT_BLK_SIZE..=MAX_BLK_SIZE).contains(&v) {
                return Err(cerr(
                    "blk_size",
                    v,
                    ConfigReason::NotPowerOfTwoIn {
                        min: u64::from(DEFAULT_BLK_SIZE),
                        max: u64::from(MAX_BLK_SIZE),
                    },
                ));
            }
            v
        } else {
            DEFAULT_BLK_SIZE
        };

        let (mut physical_block_exp, mut alignment_offset) = (0u8, 0u8);
        let (mut min_io_size, mut opt_io_size) = (0u16, 0u32);
        if has(VIRTIO_BLK_F_TOPOLOGY) {
            physical_block_exp = r.u8("physical_block_exp", offset::PHYSICAL_BLOCK_EXP)?;
            // blk_size >= 512 = 2^9, so exp <= 7 keeps the shift in range;
            // anything larger is rejected before shifting.
            let max_exp = MAX_PHYSICAL_BLOCK_SIZE
                .checked_div(blk_size)
                .unwrap_or(1)
                .trailing_zeros();
            if u32::from(physical_block_exp) > max_exp {
                return Err(cerr(
                    "physical_block_exp",
                    physical_block_exp,
                    ConfigReason::TooLarge {
                        max: u64::from(max_exp),
                    },
                ));
            }
            let phys_blocks = 1u32
                .checked_shl(u32::from(physical_block_exp))
                .unwrap_or(u32::MAX);
            alignment_offset = r.u8("alignment_offset", offset::ALIGNMENT_OFFSET)?;
            if u32::from(alignment_offset) >= phys_blocks {
                return Err(cerr(
                    "alignment_offset",
                    alignment_offset,
                    ConfigReason::TooLarge {
                        max: u64::from(phys_blocks.saturating_sub(1)),
                    },
                ));
            }
            min_io_size = r.u16("min_io_size", offset::MIN_IO_SIZE)?;
            // min_io_size is in logical blocks; a multiple of a physical
            // block is a multiple of phys_blocks logical blocks.
            if u32::from(min_io_size) >= phys_blocks && u32::from(min_io_size) % phys_blocks != 0 {
                return Err(cerr(
                    "min_io_size",
                    min_io_size,
                    ConfigReason::NotMultipleOf {
                        what: "the physical block in logical blocks",
                        value: u64::from(phys_blocks),
                    },
                ));
            }
            opt_io_size = r.u32("opt_io_size", offset::OPT_IO_SIZE)?;
            if opt_io_size.checked_mul(blk_size).is_none() {
                return Err(cerr("opt_io_size", opt_io_size, ConfigReason::Overflow));
            }
        }

        let writeback = if has(VIRTIO_BLK_F_CONFIG_WCE) {
            match r.u8("wce", offset::WCE)? {
                0 => false,
                1 => true,
                v => return Err(cerr("wce", v, ConfigReason::TooLarge { max: 1 })),
            }
        } else {
            has(VIRTIO_BLK_F_FLUSH)
        };

        let num_queues = if has(VIRTIO_BLK_F_MQ) {
            let v = r.u16("num_queues", offset::NUM_QUEUES)?;
            if v == 0 {
                return Err(cerr("num_queues", v, ConfigReason::Zero));
            }
            v
        } else {
            1
        };

        let discard = if has(VIRTIO_BLK_F_DISCARD) {
            let d = DiscardConfig {
                max_sectors: r.u32("max_discard_sectors", offset::MAX_DISCARD_SECTORS)?,
                max_seg: r.u32("max_discard_seg", offset::MAX_DISCARD_SEG)?,
                sector_alignment: r
                    .u32("discard_sector_alignment", offset::DISCARD_SECTOR_ALIGNMENT)?,
            };
            check_sector_alignment("discard_sector_alignment", d.sector_alignment, blk_size)?;
            Some(d)
        } else {
            None
        };

        let write_zeroes = if has(VIRTIO_BLK_F_WRITE_ZEROES) {
            Some(WriteZeroesConfig {
                max_sectors: r.u32("max_write_zeroes_sectors", offset::MAX_WRITE_ZEROES_SECTORS)?,
                max_seg: r.u32("max_write_zeroes_seg", offset::MAX_WRITE_ZEROES_SEG)?,
                may_unmap: r.u8("write_zeroes_may_unmap", offset::WRITE_ZEROES_MAY_UNMAP)? != 0,
            })
        } else {
            None
        };

        let secure_erase = if has(VIRTIO_BLK_F_SECURE_ERASE) {
            // Same order and checks as upstream virtblk_read_limits().
            let sector_alignment = r.u32(
                "secure_erase_sector_alignment",
                offset::SECURE_ERASE_SECTOR_ALIGNMENT,
            )?;
            if sector_alignment == 0 {
                return Err(cerr(
                    "secure_erase_sector_alignment",
                    0u32,
                    ConfigReason::Zero,
                ));
            }
            check_sector_alignment("secure_erase_sector_alignment", sector_alignment, blk_size)?;
            let max_sectors =
                r.u32("max_secure_erase_sectors", offset::MAX_SECURE_ERASE_SECTORS)?;
            if max_sectors == 0 {
                return Err(cerr("max_secure_erase_sectors", 0u32, ConfigReason::Zero));
            }
            let max_seg = r.u32("max_secure_erase_seg", offset::MAX_SECURE_ERASE_SEG)?;
            if max_seg == 0 {
                return Err(cerr("max_secure_erase_seg", 0u32, ConfigReason::Zero));
            }
            Some(SecureEraseConfig {
                max_sectors,
                max_seg,
                sector_alignment,
            })
        } else {
            None
        };

        if has(VIRTIO_BLK_F_ZONED) {
            match r.u8("zoned.model", offset::ZONED_MODEL)? {
                VIRTIO_BLK_Z_NONE | VIRTIO_BLK_Z_HA => {}
                VIRTIO_BLK_Z_HM => {
                    return Err(cerr(
                        "zoned.model",
                        VIRTIO_BLK_Z_HM,
                        ConfigReason::Unsupported("host-managed zoned device"),
                    ))
                }
                m => {
                    return Err(cerr(
                        "zoned.model",
                        m,
                        ConfigReason::Unsupported("unknown zone model"),
                    ))
                }
            }
        }

        Ok(VirtioBlkConfig {
            features,
            capacity,
            size_max,
            seg_max,
            geometry,
            blk_size,
            physical_block_exp,
            alignment_offset,
            min_io_size,
            opt_io_size,
            writeback,
            num_queues,
            discard,
            write_zeroes,
            secure_erase,
            read_only: has(VIRTIO_BLK_F_RO),
        })
    }
}
