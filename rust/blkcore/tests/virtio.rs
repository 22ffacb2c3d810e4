// SPDX-License-Identifier: GPL-2.0

//! virtio-blk config space: layout against the uapi header, parsing,
//! defaults when features are off, and validation errors naming the field.

use blkcore::virtio::*;
use proptest::prelude::*;

/// `struct virtio_blk_config` as in include/uapi/linux/virtio_blk.h
/// (Linux 7.3), comments dropped. If the kernel source is present, the
/// `vendored_struct_matches_kernel_header` test checks this copy.
const UAPI_STRUCT: &str = "
struct virtio_blk_config {
	__virtio64 capacity;
	__virtio32 size_max;
	__virtio32 seg_max;
	struct virtio_blk_geometry {
		__virtio16 cylinders;
		__u8 heads;
		__u8 sectors;
	} geometry;
	__virtio32 blk_size;
	__u8 physical_block_exp;
	__u8 alignment_offset;
	__virtio16 min_io_size;
	__virtio32 opt_io_size;
	__u8 wce;
	__u8 unused;
	__virtio16 num_queues;
	__virtio32 max_discard_sectors;
	__virtio32 max_discard_seg;
	__virtio32 discard_sector_alignment;
	__virtio32 max_write_zeroes_sectors;
	__virtio32 max_write_zeroes_seg;
	__u8 write_zeroes_may_unmap;
	__u8 unused1[3];
	__virtio32 max_secure_erase_sectors;
	__virtio32 max_secure_erase_seg;
	__virtio32 secure_erase_sector_alignment;
	struct virtio_blk_zoned_characteristics {
		__virtio32 zone_sectors;
		__virtio32 max_open_zones;
		__virtio32 max_active_zones;
		__virtio32 max_append_sectors;
		__virtio32 write_granularity;
		__u8 model;
		__u8 unused2[3];
	} zoned;
} __attribute__((packed));
";

/// (name, offset, size) of every field of a packed C struct declaration,
/// nested struct members named `outer.inner`.
fn packed_layout(text: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    let mut nested: Vec<(String, usize)> = Vec::new(); // (members, start) of open inner struct
    let mut inner_fields: Vec<(String, usize, usize)> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("struct virtio_blk_config") || line.starts_with("} __attribute__") {
            continue;
        }
        if line.starts_with("struct ") && line.ends_with('{') {
            nested.push((String::new(), off));
            inner_fields.clear();
            continue;
        }
        if let Some(name) = line.strip_prefix("} ") {
            let name = name.trim_end_matches(';');
            nested.pop();
            for (f, o, s) in inner_fields.drain(..) {
                out.push((format!("{name}.{f}"), o, s));
            }
            continue;
        }
        let decl = line.trim_end_matches(';');
        let (ty, name) = decl.split_once(' ').expect("type name");
        let size = match ty {
            "__virtio64" | "__le64" => 8,
            "__virtio32" | "__le32" => 4,
            "__virtio16" | "__le16" => 2,
            "__u8" => 1,
            other => panic!("unknown type {other}"),
        };
        let (name, count) = match name.split_once('[') {
            Some((n, rest)) => (n, rest.trim_end_matches(']').parse::<usize>().unwrap()),
            None => (name, 1),
        };
        let entry = (name.to_string(), off, size * count);
        if nested.is_empty() {
            out.push(entry);
        } else {
            inner_fields.push(entry);
        }
        off += size * count;
    }
    out.push(("sizeof".to_string(), off, 0));
    out
}

#[test]
fn offsets_match_uapi_header() {
    let layout = packed_layout(UAPI_STRUCT);
    let ours: &[(&str, usize)] = &[
        ("capacity", offset::CAPACITY),
        ("size_max", offset::SIZE_MAX),
        ("seg_max", offset::SEG_MAX),
        ("geometry.cylinders", offset::GEOMETRY_CYLINDERS),
        ("geometry.heads", offset::GEOMETRY_HEADS),
        ("geometry.sectors", offset::GEOMETRY_SECTORS),
        ("blk_size", offset::BLK_SIZE),
        ("physical_block_exp", offset::PHYSICAL_BLOCK_EXP),
        ("alignment_offset", offset::ALIGNMENT_OFFSET),
        ("min_io_size", offset::MIN_IO_SIZE),
        ("opt_io_size", offset::OPT_IO_SIZE),
        ("wce", offset::WCE),
        ("unused", offset::UNUSED),
        ("num_queues", offset::NUM_QUEUES),
        ("max_discard_sectors", offset::MAX_DISCARD_SECTORS),
        ("max_discard_seg", offset::MAX_DISCARD_SEG),
        ("discard_sector_alignment", offset::DISCARD_SECTOR_ALIGNMENT),
        ("max_write_zeroes_sectors", offset::MAX_WRITE_ZEROES_SECTORS),
        ("max_write_zeroes_seg", offset::MAX_WRITE_ZEROES_SEG),
        ("write_zeroes_may_unmap", offset::WRITE_ZEROES_MAY_UNMAP),
        ("unused1", offset::UNUSED1),
        ("max_secure_erase_sectors", offset::MAX_SECURE_ERASE_SECTORS),
        ("max_secure_erase_seg", offset::MAX_SECURE_ERASE_SEG),
        (
            "secure_erase_sector_alignment",
            offset::SECURE_ERASE_SECTOR_ALIGNMENT,
        ),
        ("zoned.zone_sectors", offset::ZONED_ZONE_SECTORS),
        ("zoned.max_open_zones", offset::ZONED_MAX_OPEN_ZONES),
        ("zoned.max_active_zones", offset::ZONED_MAX_ACTIVE_ZONES),
        ("zoned.max_append_sectors", offset::ZONED_MAX_APPEND_SECTORS),
        ("zoned.write_granularity", offset::ZONED_WRITE_GRANULARITY),
        ("zoned.model", offset::ZONED_MODEL),
        ("zoned.unused2", offset::ZONED_UNUSED2),
        ("sizeof", offset::SIZE),
    ];
    assert_eq!(layout.len(), ours.len(), "{layout:?}");
    for ((name, off, _), (our_name, our_off)) in layout.iter().zip(ours) {
        assert_eq!((name.as_str(), *off), (*our_name, *our_off));
    }
    assert_eq!(offset::SIZE, 96);
}

/// Checks the vendored copy against the real header when a kernel tree is
/// around (`LINUX_SRC`, or the path the build downloads to).
#[test]
fn vendored_struct_matches_kernel_header() {
    let root = std::env::var("LINUX_SRC")
        .unwrap_or_else(|_| "/var/cache/blkfront-rs/linux-source-7.3".to_string());
    let path = std::path::Path::new(&root).join("include/uapi/linux/virtio_blk.h");
    let Ok(header) = std::fs::read_to_string(&path) else {
        eprintln!(
            "{} not found; layout checked against the vendored copy only",
            path.display()
        );
        return;
    };
    // Strip comments and blank lines from the struct in the header.
    let start = header
        .find("struct virtio_blk_config {")
        .expect("struct in header");
    let end = start
        + header[start..]
            .find("} __attribute__((packed));")
            .expect("struct end");
    let mut text = String::new();
    let mut in_comment = false;
    for line in header[start..end].lines() {
        let mut l = line.trim().to_string();
        if in_comment {
            if let Some(i) = l.find("*/") {
                l = l[i + 2..].to_string();
                in_comment = false;
            } else {
                continue;
            }
        }
        while let Some(i) = l.find("/*") {
            match l[i..].find("*/") {
                Some(j) => l.replace_range(i..i + j + 2, ""),
                None => {
                    l.truncate(i);
                    in_comment = true;
                }
            }
        }
        let l = l.trim();
        if !l.is_empty() {
            text.push_str(l);
            text.push('\n');
        }
    }
    text.push_str("} __attribute__((packed));\n");
    assert_eq!(packed_layout(&text), packed_layout(UAPI_STRUCT));
}

fn mask(bits: &[u32]) -> u64 {
    bits.iter().fold(0, |m, &b| m | feature_mask(b))
}

/// A 96-byte config with `fields` written little-endian.
fn config(fields: &[(usize, &[u8])]) -> [u8; 96] {
    let mut cfg = [0u8; 96];
    for (off, bytes) in fields {
        cfg[*off..*off + bytes.len()].copy_from_slice(bytes);
    }
    cfg
}

/// QEMU `-device virtio-blk-pci,logical_block_size=512,physical_block_size=4096,
/// min_io_size=4096,opt_io_size=1048576,num-queues=2,queue-size=256`.
pub fn qemu_config() -> [u8; 96] {
    config(&[
        (offset::CAPACITY, &2_097_152u64.to_le_bytes()),
        (offset::SIZE_MAX, &65536u32.to_le_bytes()),
        (offset::SEG_MAX, &254u32.to_le_bytes()),
        (offset::GEOMETRY_CYLINDERS, &2080u16.to_le_bytes()),
        (offset::GEOMETRY_HEADS, &[16]),
        (offset::GEOMETRY_SECTORS, &[63]),
        (offset::BLK_SIZE, &512u32.to_le_bytes()),
        (offset::PHYSICAL_BLOCK_EXP, &[3]),
        (offset::MIN_IO_SIZE, &8u16.to_le_bytes()),
        (offset::OPT_IO_SIZE, &2048u32.to_le_bytes()),
        (offset::WCE, &[1]),
        (offset::NUM_QUEUES, &2u16.to_le_bytes()),
        (offset::MAX_DISCARD_SECTORS, &4_194_303u32.to_le_bytes()),
        (offset::MAX_DISCARD_SEG, &1u32.to_le_bytes()),
        (offset::DISCARD_SECTOR_ALIGNMENT, &8u32.to_le_bytes()),
        (
            offset::MAX_WRITE_ZEROES_SECTORS,
            &4_194_303u32.to_le_bytes(),
        ),
        (offset::MAX_WRITE_ZEROES_SEG, &1u32.to_le_bytes()),
        (offset::WRITE_ZEROES_MAY_UNMAP, &[1]),
    ])
}

const QEMU_FEATURES: &[u32] = &[
    VIRTIO_BLK_F_SIZE_MAX,
    VIRTIO_BLK_F_SEG_MAX,
    VIRTIO_BLK_F_GEOMETRY,
    VIRTIO_BLK_F_BLK_SIZE,
    VIRTIO_BLK_F_FLUSH,
    VIRTIO_BLK_F_TOPOLOGY,
    VIRTIO_BLK_F_CONFIG_WCE,
    VIRTIO_BLK_F_MQ,
    VIRTIO_BLK_F_DISCARD,
    VIRTIO_BLK_F_WRITE_ZEROES,
];

#[test]
fn parses_qemu_config() {
    let c = VirtioBlkConfig::parse(&qemu_config(), mask(QEMU_FEATURES)).unwrap();
    assert_eq!(c.capacity, 2_097_152);
    assert_eq!(c.size_max, Some(65536));
    assert_eq!(c.seg_max, 254);
    assert_eq!(
        c.geometry,
        Some(Geometry {
            cylinders: 2080,
            heads: 16,
            sectors: 63
        })
    );
    assert_eq!(
        (c.blk_size, c.physical_block_exp, c.physical_block_size()),
        (512, 3, 4096)
    );
    assert_eq!((c.min_io_size, c.opt_io_size), (8, 2048));
    assert!(c.writeback);
    assert_eq!(c.num_queues, 2);
    assert_eq!(
        c.discard,
        Some(DiscardConfig {
            max_sectors: 4_194_303,
            max_seg: 1,
            sector_alignment: 8
        })
    );
    assert_eq!(
        c.write_zeroes,
        Some(WriteZeroesConfig {
            max_sectors: 4_194_303,
            max_seg: 1,
            may_unmap: true
        })
    );
    assert_eq!(c.secure_erase, None);
    assert!(!c.read_only);
}

#[test]
fn features_off_take_upstream_defaults() {
    // Garbage everywhere but capacity: nothing else may be read.
    let mut cfg = [0xffu8; 96];
    cfg[..8].copy_from_slice(&7u64.to_le_bytes());
    let c = VirtioBlkConfig::parse(&cfg, 0).unwrap();
    assert_eq!(c.capacity, 7);
    assert_eq!(c.size_max, None);
    assert_eq!(c.seg_max, 1, "upstream: one segment without SEG_MAX");
    assert_eq!(c.geometry, None);
    assert_eq!(
        (c.blk_size, c.physical_block_exp, c.alignment_offset),
        (512, 0, 0)
    );
    assert_eq!((c.min_io_size, c.opt_io_size), (0, 0));
    assert!(!c.writeback);
    assert_eq!(c.num_queues, 1);
    assert_eq!(
        (c.discard, c.write_zeroes, c.secure_erase),
        (None, None, None)
    );
    // FLUSH without CONFIG_WCE means writeback.
    assert!(
        VirtioBlkConfig::parse(&cfg, mask(&[VIRTIO_BLK_F_FLUSH]))
            .unwrap()
            .writeback
    );
    assert!(
        VirtioBlkConfig::parse(&cfg, mask(&[VIRTIO_BLK_F_RO]))
            .unwrap()
            .read_only
    );
    // Only 8 bytes needed when no field-carrying feature is on.
    assert_eq!(VirtioBlkConfig::parse(&cfg[..8], 0).unwrap().capacity, 7);
}

fn parse_err(fields: &[(usize, &[u8])], features: &[u32]) -> ConfigError {
    VirtioBlkConfig::parse(&config(fields), mask(features)).unwrap_err()
}

/// Refused: only what makes I/O impossible, or what upstream refuses too.
#[test]
fn validation_errors_name_field_and_value() {
    let e = parse_err(
        &[(offset::BLK_SIZE, &1000u32.to_le_bytes())],
        &[VIRTIO_BLK_F_BLK_SIZE],
    );
    assert_eq!(
        e.to_string(),
        "virtio-blk config blk_size = 1000: not a power of two between 512 and 65536"
    );
    for bad in [0u32, 256, 511, 3 << 10, 128 << 10, u32::MAX] {
        let e = parse_err(
            &[(offset::BLK_SIZE, &bad.to_le_bytes())],
            &[VIRTIO_BLK_F_BLK_SIZE],
        );
        assert_eq!((e.field, e.value), ("blk_size", u64::from(bad)));
    }
    let e = parse_err(
        &[(offset::SIZE_MAX, &4095u32.to_le_bytes())],
        &[VIRTIO_BLK_F_SIZE_MAX],
    );
    assert_eq!(
        e.to_string(),
        "virtio-blk config size_max = 4095: below the minimum 4096"
    );
    let e = parse_err(&[], &[VIRTIO_BLK_F_MQ]);
    assert_eq!((e.field, e.reason), ("num_queues", ConfigReason::Zero));
    for (field, off) in [
        (
            "secure_erase_sector_alignment",
            offset::SECURE_ERASE_SECTOR_ALIGNMENT,
        ),
        ("max_secure_erase_sectors", offset::MAX_SECURE_ERASE_SECTORS),
        ("max_secure_erase_seg", offset::MAX_SECURE_ERASE_SEG),
    ] {
        let mut fields: Vec<(usize, &[u8])> = vec![
            (offset::SECURE_ERASE_SECTOR_ALIGNMENT, &[1, 0, 0, 0]),
            (offset::MAX_SECURE_ERASE_SECTORS, &[1, 0, 0, 0]),
            (offset::MAX_SECURE_ERASE_SEG, &[1, 0, 0, 0]),
        ];
        fields.retain(|(o, _)| *o != off);
        let e = parse_err(&fields, &[VIRTIO_BLK_F_SECURE_ERASE]);
        assert_eq!((e.field, e.reason), (field, ConfigReason::Zero));
    }
    let e = parse_err(
        &[(offset::ZONED_MODEL, &[VIRTIO_BLK_Z_HM])],
        &[VIRTIO_BLK_F_ZONED],
    );
    assert_eq!(
        e.to_string(),
        "virtio-blk config zoned.model = 1: unsupported: host-managed zoned device"
    );
    let e = parse_err(&[(offset::ZONED_MODEL, &[9])], &[VIRTIO_BLK_F_ZONED]);
    assert_eq!((e.field, e.value), ("zoned.model", 9));
    for ok in [VIRTIO_BLK_Z_NONE, VIRTIO_BLK_Z_HA] {
        assert!(VirtioBlkConfig::parse(
            &config(&[(offset::ZONED_MODEL, &[ok])]),
            mask(&[VIRTIO_BLK_F_ZONED])
        )
        .is_ok());
    }
    let e = VirtioBlkConfig::parse(&7u64.to_le_bytes(), u64::MAX).unwrap_err();
    assert_eq!(
        e.to_string(),
        "virtio-blk config size_max: config space too short (8 bytes, need 12)"
    );
}

/// Probe (`parse`) and online resize (`clamp_capacity`, called by the
/// driver's config-change handler) use the same capacities: up to the
/// most sectors whose byte size fits the block layer's `loff_t`, clamped
/// there with one warning naming field and values.
#[test]
fn capacity_clamped_alike_at_probe_and_resize() {
    let loff = |sectors: u64| sectors.checked_mul(512).and_then(|b| i64::try_from(b).ok());
    assert!(loff(MAX_CAPACITY).is_some());
    assert!(loff(MAX_CAPACITY + 1).is_none());
    assert_eq!(MAX_CAPACITY, (1u64 << 54) - 1);
    for ok in [0, 1, 2_097_152, MAX_CAPACITY] {
        assert_eq!(clamp_capacity(ok), (ok, None));
        let c = VirtioBlkConfig::parse(&ok.to_le_bytes(), 0).unwrap();
        assert_eq!((c.capacity, c.clamps.is_empty()), (ok, true));
    }
    for big in [MAX_CAPACITY + 1, u64::MAX / 512, u64::MAX / 2, u64::MAX] {
        let (used, clamp) = clamp_capacity(big);
        assert_eq!(used, MAX_CAPACITY);
        let clamp = clamp.unwrap();
        assert_eq!(
            clamp.to_string(),
            format!("device config: capacity {big}, using {MAX_CAPACITY}")
        );
        let c = VirtioBlkConfig::parse(&big.to_le_bytes(), 0).unwrap();
        assert_eq!(c.capacity, MAX_CAPACITY);
        assert_eq!(c.clamps.iter().copied().collect::<Vec<_>>(), [clamp]);
    }
}

#[test]
fn seg_max_is_capped_like_upstream() {
    let c = VirtioBlkConfig::parse(
        &config(&[(offset::SEG_MAX, &u32::MAX.to_le_bytes())]),
        mask(&[VIRTIO_BLK_F_SEG_MAX]),
    )
    .unwrap();
    assert_eq!(c.seg_max, MAX_SEG_MAX);
    assert_eq!(MAX_SEG_MAX, 32766);
}

#[test]
fn feature_helpers() {
    assert!(has_feature(1 << 13, VIRTIO_BLK_F_DISCARD));
    assert!(!has_feature(1 << 13, VIRTIO_BLK_F_WRITE_ZEROES));
    assert!(!has_feature(u64::MAX, 64));
    assert!(!has_feature(u64::MAX, u32::MAX));
    assert_eq!(feature_mask(64), 0);
    let bits = [1, 2, 4, 5, 6, 9, 10, 11, 12, 13, 14, 16, 17];
    assert_eq!(VIRTIO_BLK_FEATURES, bits);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..120), features in any::<u64>()) {
        match VirtioBlkConfig::parse(&bytes, features) {
            Ok(c) => {
                prop_assert!(c.blk_size.is_power_of_two() && (512..=65536).contains(&c.blk_size));
                prop_assert!(c.physical_block_size() <= 65536);
                prop_assert!((1..=MAX_SEG_MAX).contains(&c.seg_max));
                prop_assert!(c.num_queues >= 1);
                prop_assert_eq!(c.features, features);
            }
            Err(e) => {
                let prefix = format!("virtio-blk config {}", e.field);
                prop_assert!(e.to_string().starts_with(&prefix), "{}", e);
            }
        }
    }

    /// Valid field values round-trip through the byte layout.
    #[test]
    fn valid_fields_round_trip(
        capacity in 0..=MAX_CAPACITY,
        size_max in 4096u32..,
        seg_max in 1u32..=MAX_SEG_MAX,
        lbs_log in 9u32..=12,
        exp in 0u8..=3,
        opt in 0u32..=1 << 19,
        queues in 1u16..,
        wce in 0u8..=1,
    ) {
        let blk = 1u32 << lbs_log;
        let min_io = (1u16 << exp) * 2;
        let cfg = config(&[
            (offset::CAPACITY, &capacity.to_le_bytes()),
            (offset::SIZE_MAX, &size_max.to_le_bytes()),
            (offset::SEG_MAX, &seg_max.to_le_bytes()),
            (offset::BLK_SIZE, &blk.to_le_bytes()),
            (offset::PHYSICAL_BLOCK_EXP, &[exp]),
            (offset::MIN_IO_SIZE, &min_io.to_le_bytes()),
            (offset::OPT_IO_SIZE, &opt.to_le_bytes()),
            (offset::WCE, &[wce]),
            (offset::NUM_QUEUES, &queues.to_le_bytes()),
        ]);
        let f = mask(&[VIRTIO_BLK_F_SIZE_MAX, VIRTIO_BLK_F_SEG_MAX, VIRTIO_BLK_F_BLK_SIZE,
            VIRTIO_BLK_F_TOPOLOGY, VIRTIO_BLK_F_CONFIG_WCE, VIRTIO_BLK_F_MQ]);
        let c = VirtioBlkConfig::parse(&cfg, f).unwrap();
        prop_assert_eq!(c.capacity, capacity);
        prop_assert_eq!(c.size_max, Some(size_max));
        prop_assert_eq!(c.seg_max, seg_max);
        prop_assert_eq!((c.blk_size, c.physical_block_exp, c.min_io_size, c.opt_io_size), (blk, exp, min_io, opt));
        prop_assert_eq!(c.writeback, wce == 1);
        prop_assert_eq!(c.num_queues, queues);
    }
}
