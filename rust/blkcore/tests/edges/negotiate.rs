// SPDX-License-Identifier: GPL-2.0

//! The backend's `info` key: each `VDISK_*` bit turns on its own predicate
//! and no other; bits without a meaning turn on none.

use blkcore::negotiate::{
    negotiate,
    FrontendParams,
    Negotiated,
    VDISK_CDROM,
    VDISK_READONLY,
    VDISK_REMOVABLE, //
};
use blkcore::xenstore::SliceValues;

fn with_info(info: u32) -> Negotiated {
    let info = info.to_string();
    let keys = [
        ("sectors", "2048"),
        ("info", info.as_str()),
        ("sector-size", "512"),
    ];
    negotiate(&SliceValues(&keys), &FrontendParams::default()).expect("negotiates")
}

/// (read_only, cdrom, removable) of a disk whose `info` is `info`.
fn predicates(info: u32) -> (bool, bool, bool) {
    let n = with_info(info);
    assert_eq!(n.info, info, "info is kept as the backend wrote it");
    (n.read_only(), n.cdrom(), n.removable())
}

#[test]
fn no_info_bit_means_a_writable_fixed_disk() {
    assert_eq!(predicates(0), (false, false, false));
}

#[test]
fn each_vdisk_bit_sets_only_its_own_predicate() {
    assert_eq!(predicates(VDISK_READONLY), (true, false, false));
    assert_eq!(predicates(VDISK_CDROM), (false, true, false));
    assert_eq!(predicates(VDISK_REMOVABLE), (false, false, true));
    assert_eq!(
        predicates(VDISK_READONLY | VDISK_CDROM | VDISK_REMOVABLE),
        (true, true, true)
    );
}

#[test]
fn info_bits_without_a_meaning_set_no_predicate() {
    assert_eq!(predicates(0x8 | 0x100 | 0x8000_0000), (false, false, false));
}
