// SPDX-License-Identifier: GPL-2.0

//! Advisory config fields out of range: the device is accepted, the field
//! clamped to what upstream virtio_blk or the block layer would use, and
//! one warning names the field, the value offered and the value used.
//! What makes I/O impossible is still refused, naming field and value.

use blkcore::limits::virtio_limits;
use blkcore::virtio::{
    feature_mask,
    offset,
    Clamp,
    ConfigReason,
    VirtioBlkConfig,
    VIRTIO_BLK_F_BLK_SIZE,
    VIRTIO_BLK_F_CONFIG_WCE,
    VIRTIO_BLK_F_SEG_MAX,
    VIRTIO_BLK_F_TOPOLOGY, //
};

fn parse(fields: &[(usize, &[u8])], features: &[u32]) -> VirtioBlkConfig {
    let mut cfg = [0u8; offset::SIZE];
    for (at, bytes) in fields {
        cfg[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    let f = features.iter().fold(0, |m, &b| m | feature_mask(b));
    VirtioBlkConfig::parse(&cfg, f).unwrap()
}

fn warnings(c: &VirtioBlkConfig) -> Vec<String> {
    c.clamps.iter().map(|c| c.to_string()).collect()
}

#[test]
fn seg_max_0_is_one_segment_as_upstream() {
    let c = parse(
        &[(offset::SEG_MAX, &0u32.to_le_bytes())],
        &[VIRTIO_BLK_F_SEG_MAX],
    );
    assert_eq!(c.seg_max, 1);
    assert_eq!(warnings(&c), ["device config: seg_max 0, using 1"]);
    assert_eq!(virtio_limits(&c, usize::MAX).unwrap().max_segments, 1);
    // 1 is fine as it is.
    let c = parse(
        &[(offset::SEG_MAX, &1u32.to_le_bytes())],
        &[VIRTIO_BLK_F_SEG_MAX],
    );
    assert!(c.clamps.is_empty());
}

#[test]
fn blk_size_up_to_64k_is_accepted() {
    for blk in [8192u32, 16384, 65536] {
        let c = parse(
            &[(offset::BLK_SIZE, &blk.to_le_bytes())],
            &[VIRTIO_BLK_F_BLK_SIZE],
        );
        assert_eq!(c.blk_size, blk);
        assert!(c.clamps.is_empty());
        let l = virtio_limits(&c, usize::MAX).unwrap();
        assert_eq!(l.check_invariants(), Ok(()));
        assert_eq!((l.logical_block_size, l.physical_block_size), (blk, blk));
        // A kernel whose block layer stops at a page refuses it, by name.
        let e = c.check_block_size(4096).unwrap_err();
        assert_eq!((e.field, e.value), ("blk_size", u64::from(blk)));
        assert_eq!(
            e.to_string(),
            format!("virtio-blk config blk_size = {blk}: not a power of two between 512 and 4096")
        );
        assert_eq!(c.check_block_size(65536), Ok(()));
    }
}

#[test]
fn physical_block_past_64k_is_64k() {
    let c = parse(
        &[
            (offset::BLK_SIZE, &4096u32.to_le_bytes()),
            (offset::PHYSICAL_BLOCK_EXP, &[5]),
        ],
        &[VIRTIO_BLK_F_BLK_SIZE, VIRTIO_BLK_F_TOPOLOGY],
    );
    assert_eq!((c.physical_block_exp, c.physical_block_size()), (4, 65536));
    assert_eq!(
        warnings(&c),
        ["device config: physical_block_exp 5, using 4"]
    );
    for exp in [8u8, 31, 32, 255] {
        let c = parse(
            &[(offset::PHYSICAL_BLOCK_EXP, &[exp])],
            &[VIRTIO_BLK_F_TOPOLOGY],
        );
        assert_eq!(c.physical_block_size(), 65536, "exp {exp}");
    }
}

#[test]
fn alignment_offset_past_a_physical_block_is_masked_as_the_block_layer_does() {
    // 512-byte blocks, 4 KiB physical: offset 9 blocks is 1 block in.
    let c = parse(
        &[
            (offset::PHYSICAL_BLOCK_EXP, &[3]),
            (offset::ALIGNMENT_OFFSET, &[9]),
        ],
        &[VIRTIO_BLK_F_TOPOLOGY],
    );
    assert_eq!(c.alignment_offset, 1);
    assert_eq!(warnings(&c), ["device config: alignment_offset 9, using 1"]);
    assert_eq!(virtio_limits(&c, usize::MAX).unwrap().alignment_offset, 512);
    // One below the physical block: as given.
    let c = parse(
        &[
            (offset::PHYSICAL_BLOCK_EXP, &[3]),
            (offset::ALIGNMENT_OFFSET, &[7]),
        ],
        &[VIRTIO_BLK_F_TOPOLOGY],
    );
    assert!(c.clamps.is_empty());
}

#[test]
fn min_io_not_whole_physical_blocks_is_rounded_down() {
    // QEMU physical_block_size=4096,min_io_size=6144: 12 of 512 bytes.
    let c = parse(
        &[
            (offset::PHYSICAL_BLOCK_EXP, &[3]),
            (offset::MIN_IO_SIZE, &12u16.to_le_bytes()),
        ],
        &[VIRTIO_BLK_F_TOPOLOGY],
    );
    assert_eq!(c.min_io_size, 8);
    assert_eq!(warnings(&c), ["device config: min_io_size 12, using 8"]);
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!((l.io_min, l.check_invariants()), (4096, Ok(())));
    // Below one physical block: raised to it without a warning (the block
    // layer does the same).
    let c = parse(
        &[
            (offset::PHYSICAL_BLOCK_EXP, &[3]),
            (offset::MIN_IO_SIZE, &3u16.to_le_bytes()),
        ],
        &[VIRTIO_BLK_F_TOPOLOGY],
    );
    assert!(c.clamps.is_empty());
    assert_eq!(virtio_limits(&c, usize::MAX).unwrap().io_min, 4096);
}

#[test]
fn opt_io_past_32_bits_of_bytes_is_the_largest_that_fits() {
    let c = parse(
        &[
            (offset::BLK_SIZE, &4096u32.to_le_bytes()),
            (offset::OPT_IO_SIZE, &0x0010_0000u32.to_le_bytes()),
        ],
        &[VIRTIO_BLK_F_BLK_SIZE, VIRTIO_BLK_F_TOPOLOGY],
    );
    assert_eq!(c.opt_io_size, u32::MAX / 4096);
    assert_eq!(
        warnings(&c),
        [format!(
            "device config: opt_io_size 1048576, using {}",
            u32::MAX / 4096
        )]
    );
}

#[test]
fn wce_above_1_is_writeback_as_upstream() {
    let c = parse(&[(offset::WCE, &[2])], &[VIRTIO_BLK_F_CONFIG_WCE]);
    assert!(c.writeback);
    assert_eq!(
        c.clamps.iter().copied().collect::<Vec<_>>(),
        [Clamp {
            field: "wce",
            value: 2,
            used: 1
        }]
    );
}

#[test]
fn every_clamp_of_one_device_is_kept() {
    let c = parse(
        &[
            (offset::SEG_MAX, &0u32.to_le_bytes()),
            (offset::BLK_SIZE, &4096u32.to_le_bytes()),
            (offset::PHYSICAL_BLOCK_EXP, &[9]),
            (offset::ALIGNMENT_OFFSET, &[17]),
            (offset::MIN_IO_SIZE, &17u16.to_le_bytes()),
            (offset::OPT_IO_SIZE, &u32::MAX.to_le_bytes()),
            (offset::WCE, &[7]),
        ],
        &[
            VIRTIO_BLK_F_SEG_MAX,
            VIRTIO_BLK_F_BLK_SIZE,
            VIRTIO_BLK_F_TOPOLOGY,
            VIRTIO_BLK_F_CONFIG_WCE,
        ],
    );
    let fields: Vec<_> = c.clamps.iter().map(|c| c.field).collect();
    assert_eq!(
        fields,
        [
            "seg_max",
            "physical_block_exp",
            "alignment_offset",
            "min_io_size",
            "opt_io_size",
            "wce"
        ]
    );
    assert_eq!(
        virtio_limits(&c, usize::MAX).unwrap().check_invariants(),
        Ok(())
    );
}

#[test]
fn a_block_size_that_makes_io_impossible_is_still_refused() {
    let mut cfg = [0u8; offset::SIZE];
    cfg[offset::BLK_SIZE..offset::BLK_SIZE + 4].copy_from_slice(&6144u32.to_le_bytes());
    let e = VirtioBlkConfig::parse(&cfg, feature_mask(VIRTIO_BLK_F_BLK_SIZE)).unwrap_err();
    assert_eq!(
        (e.field, e.value, e.reason),
        (
            "blk_size",
            6144,
            ConfigReason::NotPowerOfTwoIn {
                min: 512,
                max: 65536
            }
        )
    );
}
