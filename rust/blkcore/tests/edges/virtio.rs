// SPDX-License-Identifier: GPL-2.0

//! Config space edges: the smallest `size_max` accepted, and a discard
//! alignment that is not whole logical blocks, rounded to whole blocks
//! with a warning.

use blkcore::virtio::{
    feature_mask,
    offset,
    VirtioBlkConfig,
    VIRTIO_BLK_F_BLK_SIZE,
    VIRTIO_BLK_F_DISCARD,
    VIRTIO_BLK_F_SIZE_MAX, //
};

#[test]
fn a_size_max_of_one_page_is_accepted() {
    let mut cfg = [0u8; offset::SIZE];
    let at = offset::SIZE_MAX;
    cfg[at..at + 4].copy_from_slice(&4096u32.to_le_bytes());
    let c = VirtioBlkConfig::parse(&cfg, feature_mask(VIRTIO_BLK_F_SIZE_MAX)).unwrap();
    assert_eq!(c.size_max, Some(4096));
}

#[test]
fn a_discard_alignment_of_part_of_a_block_is_rounded_to_whole_blocks() {
    let mut cfg = [0u8; offset::SIZE];
    cfg[offset::BLK_SIZE..offset::BLK_SIZE + 4].copy_from_slice(&4096u32.to_le_bytes());
    let at = offset::DISCARD_SECTOR_ALIGNMENT;
    cfg[at..at + 4].copy_from_slice(&12u32.to_le_bytes());
    let features = feature_mask(VIRTIO_BLK_F_BLK_SIZE) | feature_mask(VIRTIO_BLK_F_DISCARD);
    let c = VirtioBlkConfig::parse(&cfg, features).unwrap();
    assert_eq!(c.discard.map(|d| d.sector_alignment), Some(8));
    assert_eq!(
        c.clamps
            .get("discard_sector_alignment")
            .map(|c| c.to_string()),
        Some("device config: discard_sector_alignment 12, using 8".into())
    );
    // Less than a block: one block.
    cfg[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    let c = VirtioBlkConfig::parse(&cfg, features).unwrap();
    assert_eq!(c.discard.map(|d| d.sector_alignment), Some(8));
    // A byte size past u32: the largest whole number of blocks that fits.
    cfg[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let c = VirtioBlkConfig::parse(&cfg, features).unwrap();
    let s = c.discard.map_or(0, |d| d.sector_alignment);
    assert!(s.checked_mul(512).is_some() && s % 8 == 0 && s > u32::MAX / 512 - 8);
    // Whole blocks are used as given, without a warning.
    cfg[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
    let c = VirtioBlkConfig::parse(&cfg, features).unwrap();
    assert_eq!(c.discard.map(|d| d.sector_alignment), Some(16));
    assert!(c.clamps.is_empty());
}
