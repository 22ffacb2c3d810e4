// SPDX-License-Identifier: GPL-2.0

//! `virtio_limits` at the edges: the smallest segment size it accepts and
//! which limit a too-small one is blamed on, request sizes in whole
//! logical blocks, and the write-zeroes limit the device gives.

use blkcore::limits::virtio_limits;
use blkcore::virtio::{
    VirtioBlkConfig,
    WriteZeroesConfig, //
};

/// A device without optional features: 512-byte blocks, no limits.
fn bare() -> VirtioBlkConfig {
    VirtioBlkConfig::parse(&64u64.to_le_bytes(), 0).unwrap()
}

#[test]
fn a_segment_of_one_page_is_enough() {
    let l = virtio_limits(&bare(), 4096).unwrap();
    assert_eq!(l.max_segment_size, 4096);
    let c = VirtioBlkConfig {
        size_max: Some(4096),
        ..bare()
    };
    assert_eq!(
        virtio_limits(&c, usize::MAX).unwrap().max_segment_size,
        4096
    );
}

#[test]
fn a_segment_below_a_page_is_blamed_on_the_smaller_limit() {
    // size_max below a page (parse refuses it; a hand-built config
    // reaches here) with a transport that allows exactly a page.
    let c = VirtioBlkConfig {
        size_max: Some(2048),
        ..bare()
    };
    let e = virtio_limits(&c, 4096).unwrap_err();
    assert_eq!((e.field, e.value), ("size_max", 2048));
    let e = virtio_limits(&bare(), 4095).unwrap_err();
    assert_eq!((e.field, e.value), ("transport max_dma_size", 4095));
}

#[test]
fn unlimited_requests_are_whole_logical_blocks() {
    let c = VirtioBlkConfig {
        blk_size: 4096,
        ..bare()
    };
    let l = virtio_limits(&c, usize::MAX).unwrap();
    assert_eq!(l.max_hw_sectors, u32::MAX - 7);
    assert_eq!(l.check_invariants(), Ok(()));
    assert_eq!(
        virtio_limits(&bare(), usize::MAX).unwrap().max_hw_sectors,
        u32::MAX
    );
}

#[test]
fn write_zeroes_limit_is_the_devices_or_unlimited_for_zero() {
    let wz = |max_sectors| VirtioBlkConfig {
        write_zeroes: Some(WriteZeroesConfig {
            max_sectors,
            max_seg: 1,
            may_unmap: false,
        }),
        ..bare()
    };
    let limit = |c| {
        virtio_limits(&c, usize::MAX)
            .unwrap()
            .max_write_zeroes_sectors
    };
    assert_eq!(limit(wz(1024)), 1024);
    assert_eq!(limit(wz(0)), u32::MAX);
    assert_eq!(limit(bare()), 0);
}
