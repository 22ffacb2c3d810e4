// SPDX-License-Identifier: GPL-2.0

//! virtio-blk driver in Rust (`virtio_blk_rs`).
//!
//! Binds virtio devices with device id 2 and exposes them as blk-mq disks
//! (`vda`, `vdb`, ...), like drivers/block/virtio_blk.c. The config space is
//! parsed and validated by `blkcore::virtio`, the queue limits computed by
//! `blkcore::limits::virtio_limits`; this crate is the glue between
//! `rust/virtio` (virtio core) and `rust/blkmq` (block layer).
//!
//! Requests are added under the per-virtqueue lock; the device is notified
//! outside the lock and only for the last request of a batch (`bd->last`,
//! `commit_rqs`). Notifications are counted per disk and reported at remove.
//!
//! The serial is asked once, before the disk is added, with a deadline
//! (`get_id_timeout_ms`): see [`VirtioBlk::read_serial`].

#![deny(unsafe_code)]

use kernel::prelude::*;

#[path = "../../../rust/blkcore/src/tree.rs"]
#[expect(
    dead_code,
    unreachable_pub,
    reason = "blkcore is a crate of its own on the host, whose API is public; each module uses its own part of it"
)]
mod blkcore;

#[path = "../../../rust/blkmq/blkmq.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "shared by both modules (each uses its own part; BioRequeue is the Xen driver's); an abstraction's API is public"
)]
mod blkmq;

#[path = "../../../rust/virtio/virtio.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    unreachable_pub,
    reason = "an abstraction's API is public, as in the kernel crate"
)]
mod virtio;

#[path = "../../../rust/param/param.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    unreachable_pub,
    reason = "an abstraction's API is public, as in the kernel crate"
)]
mod param;

mod config;
mod device;
mod fault;
mod mq;
mod naming;

use device::VirtioBlk;

module! {
    type: VirtioBlkModule,
    name: "virtio_blk_rs",
    authors: ["blkfront-rs developers"],
    description: "Virtio block driver (Rust)",
    license: "GPL",
    // The alias modpost makes from virtio_blk's id table
    // (`MODULE_DEVICE_TABLE(virtio, ...)`: device 2, any vendor), which
    // udev and the initramfs load by; the registration binds the same id.
    alias: ["virtio:d00000002v*"],
}

param::sysfs_params! {
    /// Upstream's name, meaning and permissions (0644: read at each probe).
    num_request_queues: u32 = 0, 0o644,
        "Limit the number of request queues (0: no limit, like virtio_blk; never more than the device's num_queues or nr_cpu_ids)";
    /// Upstream's name, meaning and permissions (0644: read at each probe).
    poll_queues: u32 = 0, 0o644,
        "The number of dedicated virtqueues for polling I/O (default 0, like virtio_blk; at least one queue keeps interrupts)";
    /// Upstream's name, meaning and permissions.
    queue_depth: u32 = 0, 0o444,
        "Requests per queue (0: fill the virtqueue, like virtio_blk)";
    /// Ours (upstream reports every virtio disk rotational).
    rotational: i32 = -1, 0o444,
        "-1: report the disk as rotational like virtio_blk; 0: non-rotational; 1: rotational";
    /// Ours: the GET_ID deadline.
    get_id_timeout_ms: u32 = 5000, 0o444,
        "How long probe waits for the serial (VIRTIO_BLK_T_GET_ID) before adding the disk without one (0, a test hook: send it already given up on and without notifying the device; its answer, if any, is dropped)";
    /// Ours: upstream has no request timeout and waits for ever.
    give_up_after_ms: u32 = 0, 0o644,
        "0 (default): a device that answers nothing, however long, is waited for, like virtio_blk; N: when a queue with requests in flight answered none for N ms the device is reset, its requests fail, and so does all I/O until it is removed (checked at each io_timeout: after N to N + io_timeout ms). Removing the disk gives up on a queue silent for one io_timeout, whatever this says (writable)";
}

struct VirtioBlkModule {
    _reg: virtio::Registration<VirtioBlk>,
    #[cfg(CONFIG_FAULT_INJECTION)]
    _inject: fault::Injection,
}

impl kernel::Module for VirtioBlkModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(VirtioBlkModule {
            _reg: virtio::Registration::new()?,
            #[cfg(CONFIG_FAULT_INJECTION)]
            _inject: fault::Injection::new(),
        })
    }
}

#[kunit_tests(virtio_blk_rs)]
mod tests {
    use kernel::{
        prelude::*,
        sync::Arc, //
    };

    use crate::blkcore::{
        blkif,
        limits::QueueLimits,
        naming::disk_name,
        virtio::{
            self as vcfg,
            offset,
            ConfigError, //
        },
    };
    use crate::blkmq::{
        GenDisk,
        ReqOp,
        TagSet, //
    };
    use crate::config::{
        config_to_limits,
        FEATURES, //
    };
    use crate::mq::{
        command_of,
        BlkOps,
        Queues, //
    };
    use crate::naming::{
        DISK_INDICES,
        MAX_DISKS, //
    };
    use crate::virtio::blk::{
        self as vblk,
        Command, //
    };

    const F_BASE: u64 = 0;

    fn cfg_bytes() -> [u8; offset::SIZE] {
        let mut b = [0u8; offset::SIZE];
        b[0..8].copy_from_slice(&2097152u64.to_le_bytes());
        b
    }

    fn put32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn feat(bits: &[u32]) -> u64 {
        bits.iter().fold(F_BASE, |m, &b| m | vcfg::feature_mask(b))
    }

    /// What the block layer applies of `l` to a real (not added) disk of
    /// `capacity` sectors on a tag set of this driver.
    fn applied_limits(l: &QueueLimits, capacity: u64) -> Result<QueueLimits> {
        let queues = Arc::new(Queues::new(true, KVec::new(), None), GFP_KERNEL)?;
        let tagset = Arc::pin_init(
            TagSet::<BlkOps>::new(1, 4, l.max_segments, queues),
            GFP_KERNEL,
        )?;
        let disk = GenDisk::new(tagset, l, fmt!("vdtest"), capacity)?;
        Ok(disk.applied_limits())
    }

    #[test]
    fn sector_unit_is_512() {
        assert_eq!(blkif::SECTOR_SIZE, 512);
    }

    #[test]
    fn topology_to_limits() -> core::result::Result<(), ConfigError> {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SEG_MAX, 254);
        put32(&mut b, offset::BLK_SIZE, 512);
        b[offset::PHYSICAL_BLOCK_EXP] = 3;
        b[offset::MIN_IO_SIZE..offset::MIN_IO_SIZE + 2].copy_from_slice(&8u16.to_le_bytes());
        put32(&mut b, offset::OPT_IO_SIZE, 2048);
        let f = feat(&[
            vcfg::VIRTIO_BLK_F_SEG_MAX,
            vcfg::VIRTIO_BLK_F_BLK_SIZE,
            vcfg::VIRTIO_BLK_F_TOPOLOGY,
        ]);
        let (cfg, l) = config_to_limits(&b, f, usize::MAX, -1)?;
        assert_eq!(cfg.capacity, 2097152);
        assert_eq!(l.logical_block_size, 512);
        assert_eq!(l.physical_block_size, 4096);
        assert_eq!(l.io_min, 4096);
        assert_eq!(l.io_opt, 1048576);
        assert_eq!(l.max_segments, 254);
        assert_eq!(l.rotational, Some(true));
        Ok(())
    }

    /// Config -> limits -> what the block layer applies to a real (not
    /// added) disk on a tag set of this driver.
    #[test]
    fn limits_applied_to_queue() -> Result {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SEG_MAX, 254);
        b[offset::PHYSICAL_BLOCK_EXP] = 3;
        b[offset::MIN_IO_SIZE..offset::MIN_IO_SIZE + 2].copy_from_slice(&8u16.to_le_bytes());
        put32(&mut b, offset::OPT_IO_SIZE, 2048);
        put32(&mut b, offset::MAX_DISCARD_SEG, 1);
        put32(&mut b, offset::DISCARD_SECTOR_ALIGNMENT, 8);
        put32(&mut b, offset::MAX_WRITE_ZEROES_SECTORS, 65536);
        let f = feat(&[
            vcfg::VIRTIO_BLK_F_SEG_MAX,
            vcfg::VIRTIO_BLK_F_TOPOLOGY,
            vcfg::VIRTIO_BLK_F_DISCARD,
            vcfg::VIRTIO_BLK_F_WRITE_ZEROES,
            vcfg::VIRTIO_BLK_F_FLUSH,
        ]);
        let (cfg, l) = config_to_limits(&b, f, usize::MAX, 0).map_err(|_| EINVAL)?;
        let a = applied_limits(&l, cfg.capacity)?;
        assert_eq!(a.logical_block_size, 512);
        assert_eq!(a.physical_block_size, 4096);
        assert_eq!(a.io_min, 4096);
        assert_eq!(a.io_opt, 1048576);
        assert_eq!(a.max_segments, 254);
        assert_eq!(a.max_write_zeroes_sectors, 65536);
        assert!(a.max_discard_sectors > 0);
        assert_eq!(a.rotational, Some(false));
        assert!(a.write_cache);
        Ok(())
    }

    /// `SECURE_ERASE` (QEMU 7.2 has none, so KUnit, not a guest): the
    /// device's limit reaches a real queue, its alignment joins discard's
    /// (the smaller wins, as upstream), and the block layer's secure-erase
    /// requests become `VIRTIO_BLK_T_SECURE_ERASE` with a range.
    #[test]
    fn secure_erase_reaches_queue_and_wire() -> Result {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SEG_MAX, 254);
        put32(&mut b, offset::MAX_DISCARD_SECTORS, 65536);
        put32(&mut b, offset::MAX_DISCARD_SEG, 1);
        put32(&mut b, offset::DISCARD_SECTOR_ALIGNMENT, 16);
        put32(&mut b, offset::MAX_SECURE_ERASE_SECTORS, 2048);
        put32(&mut b, offset::MAX_SECURE_ERASE_SEG, 1);
        put32(&mut b, offset::SECURE_ERASE_SECTOR_ALIGNMENT, 8);
        let f = feat(&[
            vcfg::VIRTIO_BLK_F_SEG_MAX,
            vcfg::VIRTIO_BLK_F_DISCARD,
            vcfg::VIRTIO_BLK_F_SECURE_ERASE,
        ]);
        assert!(FEATURES.contains(&vcfg::VIRTIO_BLK_F_SECURE_ERASE));
        let (cfg, l) = config_to_limits(&b, f, usize::MAX, -1).map_err(|_| EINVAL)?;
        let a = applied_limits(&l, cfg.capacity)?;
        assert_eq!(a.max_secure_erase_sectors, 2048);
        assert_eq!(a.discard_granularity, 4096);
        assert_eq!(a.max_discard_segments, 1);
        // Without the feature, the same bytes give no secure erase.
        let no_se = feat(&[vcfg::VIRTIO_BLK_F_SEG_MAX, vcfg::VIRTIO_BLK_F_DISCARD]);
        let (_, l) = config_to_limits(&b, no_se, usize::MAX, -1).map_err(|_| EINVAL)?;
        assert_eq!(l.max_secure_erase_sectors, 0);
        assert_eq!(
            command_of(ReqOp::SecureErase, false),
            Some(Command::SecureErase)
        );
        let e = Command::SecureErase.encode(4096, 2048, 0, true);
        assert_eq!(e.hdr[0..4], 14u32.to_le_bytes());
        assert!(e.range.is_some() && !e.has_data);
        assert_eq!(command_of(ReqOp::Other(0xff), false), None);
        Ok(())
    }

    /// Several ranges per discard (`max_discard_seg`; QEMU offers 1, so
    /// KUnit, not a guest): the device's count reaches a real queue (0
    /// means `seg_max`, capped at 256, as upstream), and a request merged
    /// from several bios is sent as one range per bio.
    #[test]
    fn multi_range_discard_reaches_queue_and_wire() -> Result {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SEG_MAX, 254);
        put32(&mut b, offset::MAX_DISCARD_SECTORS, 65536);
        put32(&mut b, offset::MAX_DISCARD_SEG, 8);
        let f = feat(&[vcfg::VIRTIO_BLK_F_SEG_MAX, vcfg::VIRTIO_BLK_F_DISCARD]);
        let (cfg, l) = config_to_limits(&b, f, usize::MAX, -1).map_err(|_| EINVAL)?;
        assert_eq!(applied_limits(&l, cfg.capacity)?.max_discard_segments, 8);
        put32(&mut b, offset::MAX_DISCARD_SEG, 0);
        let (_, l) = config_to_limits(&b, f, usize::MAX, -1).map_err(|_| EINVAL)?;
        assert_eq!(l.max_discard_segments, 254);
        put32(&mut b, offset::SEG_MAX, 1000);
        let (_, l) = config_to_limits(&b, f, usize::MAX, -1).map_err(|_| EINVAL)?;
        assert_eq!(l.max_discard_segments, 256);
        let mut out = [0u8; 2 * vcfg::request::RANGE_BYTES];
        let flags = Command::Discard.range_flags().ok_or(EINVAL)?;
        let n = vcfg::request::encode_ranges([(2048, 8), (1 << 20, 16)], flags, &mut out);
        assert_eq!(n, Some(2));
        assert_eq!(out[0..8], 2048u64.to_le_bytes());
        assert_eq!(out[24..28], 16u32.to_le_bytes());
        Ok(())
    }

    #[test]
    fn rejects_secure_erase_without_sectors() {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SECURE_ERASE_SECTOR_ALIGNMENT, 8);
        put32(&mut b, offset::MAX_SECURE_ERASE_SEG, 1);
        assert_eq!(
            rejected(&b, feat(&[vcfg::VIRTIO_BLK_F_SECURE_ERASE])),
            "max_secure_erase_sectors"
        );
    }

    #[test]
    fn rotational_param() -> core::result::Result<(), ConfigError> {
        let b = cfg_bytes();
        assert_eq!(
            config_to_limits(&b, 0, usize::MAX, 0)?.1.rotational,
            Some(false)
        );
        assert_eq!(
            config_to_limits(&b, 0, usize::MAX, 1)?.1.rotational,
            Some(true)
        );
        assert_eq!(
            config_to_limits(&b, 0, usize::MAX, -1)?.1.rotational,
            Some(true)
        );
        Ok(())
    }

    #[test]
    fn seg_max_beyond_the_inline_table_is_kept() -> core::result::Result<(), ConfigError> {
        let mut b = cfg_bytes();
        let f = feat(&[vcfg::VIRTIO_BLK_F_SEG_MAX]);
        // QEMU with queue-size=1024: the limit is the device's, not the
        // inline entries'; requests past them chain a table (that they
        // succeed is virtio-chained-sg.sh's check, in a guest).
        put32(&mut b, offset::SEG_MAX, 1022);
        assert_eq!(
            config_to_limits(&b, f, usize::MAX, -1)?.1.max_segments,
            1022
        );
        // Past what fits a virtqueue: upstream's VIRTIO_BLK_MAX_SG_ELEMS - 2.
        put32(&mut b, offset::SEG_MAX, 40000);
        assert_eq!(
            config_to_limits(&b, f, usize::MAX, -1)?.1.max_segments,
            32766
        );
        Ok(())
    }

    fn rejected(b: &[u8], f: u64) -> &'static str {
        match config_to_limits(b, f, usize::MAX, -1) {
            Err(e) => e.field,
            Ok(_) => "accepted",
        }
    }

    #[test]
    fn rejects_bad_blk_size() {
        let mut b = cfg_bytes();
        put32(&mut b, offset::BLK_SIZE, 1000);
        assert_eq!(
            rejected(&b, feat(&[vcfg::VIRTIO_BLK_F_BLK_SIZE])),
            "blk_size"
        );
    }

    /// As many disks as upstream, each with a name.
    #[test]
    fn disk_indices_as_many_as_upstream() {
        assert_eq!(DISK_INDICES.len() * 64, 65536);
        let last = disk_name("vd", MAX_DISKS - 1, 0);
        assert_eq!(last.as_ref().map(|n| n.as_str()), Some("vdcrxp"));
    }

    /// Advisory fields out of range: the disk comes up, clamped.
    #[test]
    fn clamps_advisory_fields() -> core::result::Result<(), ConfigError> {
        let mut b = cfg_bytes();
        b[offset::PHYSICAL_BLOCK_EXP] = 40;
        put32(&mut b, offset::BLK_SIZE, 4096);
        put32(&mut b, offset::OPT_IO_SIZE, u32::MAX);
        let f = feat(&[
            vcfg::VIRTIO_BLK_F_SEG_MAX,
            vcfg::VIRTIO_BLK_F_BLK_SIZE,
            vcfg::VIRTIO_BLK_F_TOPOLOGY,
        ]);
        let (cfg, l) = config_to_limits(&b, f, usize::MAX, -1)?;
        assert_eq!(l.max_segments, 1);
        assert_eq!(l.physical_block_size, 65536);
        assert!(cfg.clamps.get("seg_max").is_some());
        assert!(cfg.clamps.get("physical_block_exp").is_some());
        assert!(cfg.clamps.get("opt_io_size").is_some());
        Ok(())
    }

    /// A block size the running kernel's block layer cannot take is
    /// refused by name, one it can is accepted.
    #[test]
    fn block_size_up_to_the_kernels_limit() {
        let max = vblk::max_block_size();
        let mut b = cfg_bytes();
        put32(&mut b, offset::BLK_SIZE, max);
        let f = feat(&[vcfg::VIRTIO_BLK_F_BLK_SIZE]);
        assert_eq!(rejected(&b, f), "accepted");
        if max < 65536 {
            put32(&mut b, offset::BLK_SIZE, max * 2);
            assert_eq!(rejected(&b, f), "blk_size");
        }
    }

    #[test]
    fn rejects_small_size_max() {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SIZE_MAX, 512);
        assert_eq!(
            rejected(&b, feat(&[vcfg::VIRTIO_BLK_F_SIZE_MAX])),
            "size_max"
        );
    }

    #[test]
    fn rejects_mq_zero_queues() {
        let b = cfg_bytes();
        assert_eq!(rejected(&b, feat(&[vcfg::VIRTIO_BLK_F_MQ])), "num_queues");
    }
}
