// SPDX-License-Identifier: GPL-2.0

//! Disk names and sizes as the C drivers print them.

use blkcore::naming::{
    disk_name, xen_disk_name, xen_vdev_layout, xvd_ext_minors, xvd_minors, HumanSize,
};
use proptest::prelude::*;

fn name(prefix: &str, i: u32, p: u32) -> String {
    disk_name(prefix, i, p).expect("fits").as_str().to_string()
}

#[test]
fn virtio_names_like_virtblk_name_format() {
    assert_eq!(name("vd", 0, 0), "vda");
    assert_eq!(name("vd", 25, 0), "vdz");
    assert_eq!(name("vd", 26, 0), "vdaa");
    assert_eq!(name("vd", 27, 0), "vdab");
    assert_eq!(name("vd", 701, 0), "vdzz");
    assert_eq!(name("vd", 702, 0), "vdaaa");
    assert_eq!(name("vd", 1023, 0), "vdamj");
}

#[test]
fn xen_names_like_xlvbd_alloc_gendisk() {
    let x = |v: u32| xen_disk_name(v).map(|n| n.as_str().to_string());
    assert_eq!(x(51712).as_deref(), Some("xvda")); // 202:0
    assert_eq!(x(51728).as_deref(), Some("xvdb")); // 202:16
    assert_eq!(x(51713).as_deref(), Some("xvda1"));
    assert_eq!(x(768).as_deref(), Some("xvda")); // hda
    assert_eq!(x(0x800).as_deref(), Some("xvda")); // sda
    assert_eq!(x(0x810).as_deref(), Some("xvdb")); // sdb
    assert_eq!(x((1 << 28) | (26 * 256)).as_deref(), Some("xvdaa"));
    assert_eq!(x((1 << 28) | ((27 * 256) + 3)).as_deref(), Some("xvdab3"));
    assert_eq!(x(0x1234), None);
    assert_eq!(x(3 << 28), None);
}

#[test]
fn xvd_minors_like_upstream() {
    assert_eq!(xvd_minors(51712, 256), Some((0, 16)));
    assert_eq!(xvd_minors(51728, 256), Some((16, 16)));
    assert_eq!(xvd_minors(51713, 256), Some((1, 1)));
    assert_eq!(xvd_minors(0x800, 256), Some((0, 16)));
    assert_eq!(xvd_minors((1 << 28) | 256, 256), None);
    assert_eq!(xvd_minors(2 << 28, 256), None);
    // The last whole disk that fits below the fixed minors, and the first
    // that does not.
    assert_eq!(xvd_minors((202 << 8) | 240, 256), Some((240, 16)));
    assert_eq!(xvd_minors((202 << 8) | 240, 250), None);
}

#[test]
fn sizes_like_string_get_size() {
    let h = |bytes, binary| HumanSize { bytes, binary }.to_string();
    assert_eq!(h(512, false), "512 B");
    assert_eq!(h(1_073_741_824, false), "1.07 GB");
    assert_eq!(h(1_073_741_824, true), "1.00 GiB");
    assert_eq!(h(268_435_456, false), "268 MB");
    assert_eq!(h(268_435_456, true), "256 MiB");
    assert_eq!(h(403_000_000, false), "403 MB");
    assert_eq!(h(19_990_000, false), "20.0 MB");
    assert_eq!(h(u64::MAX, true), "16.0 EiB");
}

proptest! {
    /// Names are unique per index and made of the prefix, letters and
    /// digits only; the layout's partition is what the name ends with.
    #[test]
    fn names_are_injective_and_well_formed(a in 0u32..100_000, b in 0u32..100_000, p in 0u32..300) {
        prop_assume!(a != b);
        prop_assert_ne!(name("vd", a, 0), name("vd", b, 0));
        let n = name("xvd", a, p);
        prop_assert!(n.starts_with("xvd"));
        let rest = &n[3..];
        let letters = rest.trim_end_matches(|c: char| c.is_ascii_digit());
        prop_assert!(!letters.is_empty() && letters.bytes().all(|c| c.is_ascii_lowercase()));
        let digits = &rest[letters.len()..];
        prop_assert_eq!(digits.parse::<u32>().unwrap_or(0), p);
    }

    #[test]
    fn vdev_layout_never_panics(v in any::<u32>()) {
        if let Some(l) = xen_vdev_layout(v) {
            prop_assert!(l.partition() < l.parts);
            prop_assert!(xen_disk_name(v).is_some());
        }
    }
}

#[test]
fn hvm_guards_follow_upstream() {
    use blkcore::naming::{hvm_refusal, HvmRefusal};
    let xvda = 202 << 8;
    let hda = 3 << 8;
    let sda = 8 << 8;
    let ext = (1 << 28) | (5 * 256);
    // Emulated disks unplugged (the usual case): every disk vbd binds.
    for v in [xvda, hda, sda, ext] {
        assert_eq!(hvm_refusal(v, false, Some(b"disk")), None, "{v:#x}");
    }
    // Still plugged: only xvd and extended numbers bind.
    assert_eq!(hvm_refusal(xvda, true, Some(b"disk")), None);
    assert_eq!(hvm_refusal(ext, true, Some(b"disk")), None);
    assert_eq!(
        hvm_refusal(hda, true, Some(b"disk")),
        Some(HvmRefusal::EmulatedDiskNotUnplugged { major: 3 })
    );
    assert_eq!(
        hvm_refusal(sda, true, Some(b"disk")),
        Some(HvmRefusal::EmulatedDiskNotUnplugged { major: 8 })
    );
    // CD-ROMs never bind in HVM/PVH; a vbd without device-type neither.
    assert_eq!(
        hvm_refusal(xvda, false, Some(b"cdrom")),
        Some(HvmRefusal::Cdrom)
    );
    assert_eq!(
        hvm_refusal(xvda, false, None),
        Some(HvmRefusal::NoDeviceType)
    );
}

#[test]
fn xvd_ext_minors_like_upstream() {
    // xvdq and xvdr as libxl numbers them: 202:4096 and 202:4352, 256 each.
    assert_eq!(
        xvd_ext_minors((1 << 28) | (16 << 8), 4096),
        Some((4096, 256))
    );
    assert_eq!(
        xvd_ext_minors((1 << 28) | (17 << 8), 4096),
        Some((4352, 256))
    );
    // A partition of an extended disk, classic numbers, below the fixed
    // range, past the minor bits, beyond the extended range: none.
    assert_eq!(xvd_ext_minors((1 << 28) | (16 << 8) | 1, 4096), None);
    assert_eq!(xvd_ext_minors(51712, 4096), None);
    assert_eq!(xvd_ext_minors((1 << 28) | (3 << 8), 4096), None);
    assert_eq!(
        xvd_ext_minors((1 << 28) | (4095 << 8), 4096),
        Some((4095 << 8, 256))
    );
    assert_eq!(xvd_ext_minors((1 << 28) | (4096 << 8), 4096), None);
    assert_eq!(xvd_ext_minors(2 << 28, 4096), None);
}
