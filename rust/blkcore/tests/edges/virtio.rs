// SPDX-License-Identifier: GPL-2.0

//! Config space edges: the smallest `size_max` accepted, and a discard
//! alignment that is not whole logical blocks, rejected with the block
//! size in sectors it must be a multiple of.

use blkcore::virtio::{
    feature_mask,
    offset,
    ConfigError,
    ConfigReason,
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
fn a_discard_alignment_of_part_of_a_block_names_the_block_in_sectors() {
    let mut cfg = [0u8; offset::SIZE];
    cfg[offset::BLK_SIZE..offset::BLK_SIZE + 4].copy_from_slice(&4096u32.to_le_bytes());
    let at = offset::DISCARD_SECTOR_ALIGNMENT;
    cfg[at..at + 4].copy_from_slice(&12u32.to_le_bytes());
    let features = feature_mask(VIRTIO_BLK_F_BLK_SIZE) | feature_mask(VIRTIO_BLK_F_DISCARD);
    let e = VirtioBlkConfig::parse(&cfg, features).unwrap_err();
    assert_eq!(
        e,
        ConfigError {
            field: "discard_sector_alignment",
            value: 12,
            reason: ConfigReason::NotMultipleOf {
                what: "blk_size in sectors",
                value: 8,
            },
        }
    );
    assert_eq!(
        e.to_string(),
        "virtio-blk config discard_sector_alignment = 12: \
         not a multiple of blk_size in sectors (8)"
    );
    // Whole blocks are fine.
    cfg[at..at + 4].copy_from_slice(&16u32.to_le_bytes());
    assert!(VirtioBlkConfig::parse(&cfg, features).is_ok());
}
