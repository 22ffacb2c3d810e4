// SPDX-License-Identifier: GPL-2.0

//! Feature bits, the device config as read, and the queue limits it gives.

use kernel::{
    c_str,
    prelude::*, //
};

use crate::blkcore::{
    limits::{
        virtio_limits,
        QueueLimits, //
    },
    virtio::{
        self as vcfg,
        offset,
        ConfigError,
        VirtioBlkConfig, //
    },
};
use crate::blkmq;
use crate::virtio::{
    self,
    blk as vblk, //
};

/// Feature bits we offer (upstream virtio_blk's minus zoned).
pub(crate) const FEATURES: [u32; 12] = [
    vcfg::VIRTIO_BLK_F_SEG_MAX,
    vcfg::VIRTIO_BLK_F_SIZE_MAX,
    vcfg::VIRTIO_BLK_F_GEOMETRY,
    vcfg::VIRTIO_BLK_F_RO,
    vcfg::VIRTIO_BLK_F_BLK_SIZE,
    vcfg::VIRTIO_BLK_F_FLUSH,
    vcfg::VIRTIO_BLK_F_TOPOLOGY,
    vcfg::VIRTIO_BLK_F_CONFIG_WCE,
    vcfg::VIRTIO_BLK_F_MQ,
    vcfg::VIRTIO_BLK_F_DISCARD,
    vcfg::VIRTIO_BLK_F_WRITE_ZEROES,
    vcfg::VIRTIO_BLK_F_SECURE_ERASE,
];

/// Scatterlist entries preallocated per request, in its blk-mq PDU: 2, as
/// upstream's `VIRTIO_BLK_INLINE_SG_CNT`. The PDU is allocated for every
/// request of every queue whether or not it is in flight (256 entries are
/// 8 KiB a request, 4 MiB for a disk of 2 queues of 256 requests), while a
/// request with more segments chains a table from the kernel's scatterlist
/// pools only for its time in flight (rust/blkmq `Request::map_sg`, as
/// upstream's `sg_alloc_table_chained`). Two, not one: the pools take the
/// inline entries as the first chunk only when it holds a data entry
/// besides the chain link. Without the pools (no `CONFIG_SG_POOL`) nothing
/// chains and `max_segments` is capped to the inline entries, so there keep
/// enough for a 1 MiB request of single pages.
pub(crate) const INLINE_SG_PER_REQUEST: u32 = if blkmq::CAN_CHAIN_SG { 2 } else { 256 };

/// Name prefix of the request virtqueues ("req.0", "req.1", ...: upstream's
/// names).
pub(crate) const VQ_NAME_PREFIX: &CStr = c_str!("req.");

/// Config fields read per feature: (feature bit or `None` = always, offset,
/// width in bytes). Only fields of negotiated features are read: the
/// transport `BUG()`s on reads past the device's config space.
pub(crate) const CONFIG_FIELDS: [(Option<u32>, usize, usize); 22] = [
    (None, offset::CAPACITY, 8),
    (Some(vcfg::VIRTIO_BLK_F_SIZE_MAX), offset::SIZE_MAX, 4),
    (Some(vcfg::VIRTIO_BLK_F_SEG_MAX), offset::SEG_MAX, 4),
    (
        Some(vcfg::VIRTIO_BLK_F_GEOMETRY),
        offset::GEOMETRY_CYLINDERS,
        2,
    ),
    (Some(vcfg::VIRTIO_BLK_F_GEOMETRY), offset::GEOMETRY_HEADS, 1),
    (
        Some(vcfg::VIRTIO_BLK_F_GEOMETRY),
        offset::GEOMETRY_SECTORS,
        1,
    ),
    (Some(vcfg::VIRTIO_BLK_F_BLK_SIZE), offset::BLK_SIZE, 4),
    (
        Some(vcfg::VIRTIO_BLK_F_TOPOLOGY),
        offset::PHYSICAL_BLOCK_EXP,
        1,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_TOPOLOGY),
        offset::ALIGNMENT_OFFSET,
        1,
    ),
    (Some(vcfg::VIRTIO_BLK_F_TOPOLOGY), offset::MIN_IO_SIZE, 2),
    (Some(vcfg::VIRTIO_BLK_F_TOPOLOGY), offset::OPT_IO_SIZE, 4),
    (Some(vcfg::VIRTIO_BLK_F_CONFIG_WCE), offset::WCE, 1),
    (Some(vcfg::VIRTIO_BLK_F_MQ), offset::NUM_QUEUES, 2),
    (
        Some(vcfg::VIRTIO_BLK_F_DISCARD),
        offset::MAX_DISCARD_SECTORS,
        4,
    ),
    (Some(vcfg::VIRTIO_BLK_F_DISCARD), offset::MAX_DISCARD_SEG, 4),
    (
        Some(vcfg::VIRTIO_BLK_F_DISCARD),
        offset::DISCARD_SECTOR_ALIGNMENT,
        4,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_WRITE_ZEROES),
        offset::MAX_WRITE_ZEROES_SECTORS,
        4,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_WRITE_ZEROES),
        offset::MAX_WRITE_ZEROES_SEG,
        4,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_WRITE_ZEROES),
        offset::WRITE_ZEROES_MAY_UNMAP,
        1,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_SECURE_ERASE),
        offset::MAX_SECURE_ERASE_SECTORS,
        4,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_SECURE_ERASE),
        offset::MAX_SECURE_ERASE_SEG,
        4,
    ),
    (
        Some(vcfg::VIRTIO_BLK_F_SECURE_ERASE),
        offset::SECURE_ERASE_SECTOR_ALIGNMENT,
        4,
    ),
];

/// Negotiated feature mask (bits of [`FEATURES`]).
pub(crate) fn negotiated(dev: &virtio::Device) -> u64 {
    FEATURES
        .iter()
        .filter(|&&b| dev.has_feature(b))
        .fold(0, |m, &b| m | vcfg::feature_mask(b))
}

/// Snapshot the config space as the little-endian bytes blkcore parses.
pub(crate) fn read_config(dev: &virtio::Device, features: u64) -> [u8; offset::SIZE] {
    let mut buf = [0u8; offset::SIZE];
    for &(bit, off, width) in CONFIG_FIELDS.iter() {
        if bit.is_some_and(|b| !vcfg::has_feature(features, b)) {
            continue;
        }
        let Some(dst) = buf.get_mut(off..off + width) else {
            continue;
        };
        match width {
            1 => dst.copy_from_slice(&[dev.cread_u8(off)]),
            2 => dst.copy_from_slice(&dev.cread_u16(off).to_le_bytes()),
            4 => dst.copy_from_slice(&dev.cread_u32(off).to_le_bytes()),
            _ => dst.copy_from_slice(&dev.cread_u64(off).to_le_bytes()),
        }
    }
    buf
}

/// Config bytes -> validated config -> queue limits, with this driver's
/// policy for the `rotational` parameter. The config's `clamps` are the
/// caller's to report.
pub(crate) fn config_to_limits(
    bytes: &[u8],
    features: u64,
    max_dma_size: usize,
    rotational: i32,
) -> Result<(VirtioBlkConfig, QueueLimits), ConfigError> {
    let cfg = VirtioBlkConfig::parse(bytes, features)?;
    cfg.check_block_size(vblk::max_block_size())?;
    let mut lim = virtio_limits(&cfg, max_dma_size)?;
    lim.rotational = match rotational {
        0 => Some(false),
        1 => Some(true),
        _ => lim.rotational,
    };
    Ok((cfg, lim))
}
