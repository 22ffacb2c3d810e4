// SPDX-License-Identifier: GPL-2.0

//! What the device offers: its virtio features and its configuration
//! space, sane or as a probe-time scenario makes it.

use virtio_bindings::bindings::virtio_blk::*;
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_ring::{
    VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};

use crate::scenario::Scenario;

/// `VHOST_USER_F_PROTOCOL_FEATURES`.
const PROTOCOL_FEATURES: u64 = 1 << 30;

/// The most sectors one discard or write-zeroes segment may cover
/// (`max_discard_sectors`, `max_write_zeroes_sectors`).
pub const MAX_ZERO_SECTORS: u32 = 32768;

/// The virtio-blk configuration space, as offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlkConfig {
    /// In 512-byte sectors.
    pub capacity: u64,
    /// Segments in one request.
    pub seg_max: u32,
    /// The logical block size.
    pub blk_size: u32,
    /// log2 of logical blocks per physical block.
    pub physical_block_exp: u8,
    /// Offset of the first aligned logical block.
    pub alignment_offset: u8,
    /// Suggested minimum I/O size, in logical blocks.
    pub min_io_size: u16,
    /// Optimal I/O size, in logical blocks.
    pub opt_io_size: u32,
    /// Writeback cache on (`VIRTIO_BLK_F_CONFIG_WCE`).
    pub wce: u8,
    /// Request queues.
    pub num_queues: u16,
    /// Discard limits.
    pub max_discard_sectors: u32,
    /// Discard segments in one request.
    pub max_discard_seg: u32,
    /// Discard granularity, in sectors.
    pub discard_sector_alignment: u32,
    /// Write-zeroes limits.
    pub max_write_zeroes_sectors: u32,
    /// Write-zeroes segments in one request.
    pub max_write_zeroes_seg: u32,
    /// Write-zeroes may deallocate.
    pub write_zeroes_may_unmap: u8,
}

impl BlkConfig {
    /// The sane configuration of a disk of `capacity` sectors.
    pub fn sane(capacity: u64, num_queues: u16) -> Self {
        Self {
            capacity,
            // Two descriptors of a queue of 128 go to the header and the
            // status byte.
            seg_max: 126,
            blk_size: 512,
            physical_block_exp: 0,
            alignment_offset: 0,
            min_io_size: 1,
            opt_io_size: 0,
            wce: 1,
            num_queues,
            max_discard_sectors: MAX_ZERO_SECTORS,
            max_discard_seg: 1,
            discard_sector_alignment: 8,
            max_write_zeroes_sectors: MAX_ZERO_SECTORS,
            max_write_zeroes_seg: 1,
            write_zeroes_may_unmap: 0,
        }
    }

    /// The configuration a probe-time scenario offers instead.
    pub fn for_scenario(mut self, s: Option<Scenario>) -> Self {
        match s {
            Some(Scenario::SegMaxZero) => self.seg_max = 0,
            Some(Scenario::BlkSize8k) => self.blk_size = 8192,
            Some(Scenario::BlkSizeOdd) => self.blk_size = 1000,
            Some(Scenario::TopologyOdd) => {
                self.physical_block_exp = 3;
                self.alignment_offset = 9;
                self.min_io_size = 3;
                self.opt_io_size = 5;
            }
            Some(Scenario::CapacityLoffOverflow) => self.capacity = u64::MAX / 256,
            Some(Scenario::NumQueuesZero) => self.num_queues = 0,
            Some(Scenario::NumQueuesHuge) => self.num_queues = 65535,
            _ => {}
        }
        self
    }

    /// `struct virtio_blk_config` in little endian, zeroes after
    /// `write_zeroes_may_unmap` (the secure-erase and zoned fields, whose
    /// features are not offered).
    pub fn bytes(&self) -> [u8; 256] {
        let mut b = [0u8; 256];
        b[0..8].copy_from_slice(&self.capacity.to_le_bytes());
        // size_max (8..12) and geometry (16..20): features not offered.
        b[12..16].copy_from_slice(&self.seg_max.to_le_bytes());
        b[20..24].copy_from_slice(&self.blk_size.to_le_bytes());
        b[24] = self.physical_block_exp;
        b[25] = self.alignment_offset;
        b[26..28].copy_from_slice(&self.min_io_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.opt_io_size.to_le_bytes());
        b[32] = self.wce;
        b[34..36].copy_from_slice(&self.num_queues.to_le_bytes());
        b[36..40].copy_from_slice(&self.max_discard_sectors.to_le_bytes());
        b[40..44].copy_from_slice(&self.max_discard_seg.to_le_bytes());
        b[44..48].copy_from_slice(&self.discard_sector_alignment.to_le_bytes());
        b[48..52].copy_from_slice(&self.max_write_zeroes_sectors.to_le_bytes());
        b[52..56].copy_from_slice(&self.max_write_zeroes_seg.to_le_bytes());
        b[56] = self.write_zeroes_may_unmap;
        b
    }
}

/// The offset of `wce` in the configuration space, the one field the
/// driver may write.
pub const WCE_OFFSET: u32 = 32;

/// The virtio features offered.
pub const FEATURES: u64 = 1 << VIRTIO_BLK_F_SEG_MAX
    | 1 << VIRTIO_BLK_F_BLK_SIZE
    | 1 << VIRTIO_BLK_F_TOPOLOGY
    | 1 << VIRTIO_BLK_F_FLUSH
    | 1 << VIRTIO_BLK_F_CONFIG_WCE
    | 1 << VIRTIO_BLK_F_MQ
    | 1 << VIRTIO_BLK_F_DISCARD
    | 1 << VIRTIO_BLK_F_WRITE_ZEROES
    | 1 << VIRTIO_F_VERSION_1
    | 1 << VIRTIO_RING_F_EVENT_IDX
    | 1 << VIRTIO_RING_F_INDIRECT_DESC
    | PROTOCOL_FEATURES;

/// What features-withdrawn-on-reset takes away after the reset.
pub const WITHDRAWN: u64 = 1 << VIRTIO_BLK_F_FLUSH
    | 1 << VIRTIO_BLK_F_DISCARD
    | 1 << VIRTIO_BLK_F_WRITE_ZEROES
    | 1 << VIRTIO_BLK_F_MQ;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{self, Strike};

    #[test]
    fn config_layout() {
        let b = BlkConfig::sane(2048, 2).bytes();
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 2048);
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 126);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 512);
        assert_eq!(u16::from_le_bytes(b[26..28].try_into().unwrap()), 1);
        assert_eq!(u16::from_le_bytes(b[34..36].try_into().unwrap()), 2);
        assert_eq!(
            u32::from_le_bytes(b[48..52].try_into().unwrap()),
            MAX_ZERO_SECTORS
        );
    }

    #[test]
    fn probe_scenarios_change_the_config() {
        let sane = BlkConfig::sane(2048, 2);
        for (n, s) in scenario::ALL {
            let c = sane.for_scenario(Some(*s));
            let probe_config =
                s.expect().strikes == Strike::Probe && *s != Scenario::FeaturesWithdrawnOnReset;
            assert_eq!(c != sane, probe_config, "{n}");
        }
    }

    #[test]
    fn withdrawn_features_were_offered() {
        assert_eq!(FEATURES & WITHDRAWN, WITHDRAWN);
    }
}
