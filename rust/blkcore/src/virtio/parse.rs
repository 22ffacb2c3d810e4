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
    /// anything past them is ignored.
    ///
    /// Refused, with the field and value ([`ConfigError`]), only what
    /// makes I/O impossible or that upstream refuses too:
    ///
    /// * `size_max` >= 4096 (upstream lets the block layer WARN);
    /// * `blk_size` a power of two in 512..=65536 (the block layer's
    ///   largest `BLK_MAX_BLOCK_SIZE`; the kernel's own is checked by
    ///   [`VirtioBlkConfig::check_block_size`]);
    /// * `num_queues` != 0 with `MQ` (same as upstream);
    /// * secure-erase fields non-zero (same as upstream);
    /// * `zoned.model`: host-managed devices are refused (this driver has
    ///   no zoned support), unknown models too; none/host-aware are fine.
    ///
    /// Clamped, each recorded in [`VirtioBlkConfig::clamps`] for one
    /// warning line (advisory fields; upstream or the block layer accept
    /// them, mostly silently):
    ///
    /// * `capacity`: at most [`MAX_CAPACITY`], the most whose byte size fits
    ///   the block layer's `loff_t` ([`clamp_capacity`]);
    /// * `seg_max` 0: 1 (as upstream); above 32766: 32766 (as upstream,
    ///   silently);
    /// * `physical_block_exp`: at most a 64 KiB physical block (upstream
    ///   shifts `1 << exp` unchecked: undefined for exp >= 32);
    /// * `alignment_offset` within one physical block (the block layer
    ///   masks it so);
    /// * `min_io_size` at or above one physical block: rounded down to a
    ///   whole number of physical blocks (smaller values are raised to the
    ///   physical block, silently, as the block layer does);
    /// * `opt_io_size * blk_size` fits `u32` (upstream overflows);
    /// * `wce` above 1: 1 (upstream treats any non-zero as writeback);
    /// * `discard_sector_alignment` and `secure_erase_sector_alignment`:
    ///   whole logical blocks whose byte size fits `u32`.
    pub fn parse(bytes: &[u8], features: u64) -> Result<Self, ConfigError> {
        let r = Reader(bytes);
        let has = |bit| has_feature(features, bit);
        let mut clamps = Clamps::default();

        let (capacity, clamped) = clamp_capacity(r.u64("capacity", offset::CAPACITY)?);
        if let Some(c) = clamped {
            clamps.push(c.field, c.value, c.used);
        }

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
            // Above the cap is no device error (QEMU offers up to its queue
            // size): capped without a warning, as upstream.
            if v == 0 {
                clamps.push("seg_max", v, 1u32);
            }
            v.clamp(1, MAX_SEG_MAX)
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
            let exp = r.u8("physical_block_exp", offset::PHYSICAL_BLOCK_EXP)?;
            // blk_size >= 512 = 2^9, so max_exp <= 7 keeps the shifts below
            // in range.
            let max_exp = MAX_PHYSICAL_BLOCK_SIZE
                .checked_div(blk_size)
                .unwrap_or(1)
                .trailing_zeros();
            physical_block_exp = exp.min(u8::try_from(max_exp).unwrap_or(0));
            if physical_block_exp != exp {
                clamps.push("physical_block_exp", exp, physical_block_exp);
            }
            let phys_blocks = 1u32.checked_shl(u32::from(physical_block_exp)).unwrap_or(1);
            let offset = r.u8("alignment_offset", offset::ALIGNMENT_OFFSET)?;
            // The block layer masks the byte offset with the physical block
            // size: the same in logical blocks.
            alignment_offset = u8::try_from(u32::from(offset) % phys_blocks).unwrap_or(0);
            if alignment_offset != offset {
                clamps.push("alignment_offset", offset, alignment_offset);
            }
            let min_io = r.u16("min_io_size", offset::MIN_IO_SIZE)?;
            // In logical blocks: a whole number of physical blocks is a
            // multiple of phys_blocks. Below one physical block it is raised
            // to one in `virtio_limits`, as the block layer does.
            min_io_size = min_io;
            if u32::from(min_io) >= phys_blocks {
                let whole = u32::from(min_io) - u32::from(min_io) % phys_blocks;
                min_io_size = u16::try_from(whole).unwrap_or(min_io);
            }
            if min_io_size != min_io {
                clamps.push("min_io_size", min_io, min_io_size);
            }
            let opt_io = r.u32("opt_io_size", offset::OPT_IO_SIZE)?;
            opt_io_size = opt_io.min(u32::MAX / blk_size.max(1));
            if opt_io_size != opt_io {
                clamps.push("opt_io_size", opt_io, opt_io_size);
            }
        }

        let writeback = if has(VIRTIO_BLK_F_CONFIG_WCE) {
            let wce = r.u8("wce", offset::WCE)?;
            if wce > 1 {
                clamps.push("wce", wce, 1u8);
            }
            wce != 0
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
            let alignment = r.u32("discard_sector_alignment", offset::DISCARD_SECTOR_ALIGNMENT)?;
            Some(DiscardConfig {
                max_sectors: r.u32("max_discard_sectors", offset::MAX_DISCARD_SECTORS)?,
                max_seg: r.u32("max_discard_seg", offset::MAX_DISCARD_SEG)?,
                sector_alignment: fit_sector_alignment(
                    "discard_sector_alignment",
                    alignment,
                    blk_size,
                    &mut clamps,
                ),
            })
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
            let sector_alignment = fit_sector_alignment(
                "secure_erase_sector_alignment",
                sector_alignment,
                blk_size,
                &mut clamps,
            );
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
            clamps,
        })
    }

    /// Refuse a logical block size above the running kernel's
    /// `BLK_MAX_BLOCK_SIZE` (`max`): the block layer would refuse the
    /// disk's limits, with no word of which field.
    pub fn check_block_size(&self, max: u32) -> Result<(), ConfigError> {
        if self.blk_size > max {
            return Err(cerr(
                "blk_size",
                self.blk_size,
                ConfigReason::NotPowerOfTwoIn {
                    min: u64::from(DEFAULT_BLK_SIZE),
                    max: u64::from(max),
                },
            ));
        }
        Ok(())
    }
}
