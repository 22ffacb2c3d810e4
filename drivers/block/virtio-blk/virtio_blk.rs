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

use core::sync::atomic::{
    AtomicU64,
    Ordering, //
};

use kernel::{
    c_str,
    new_mutex,
    new_spinlock_irq,
    prelude::*,
    str::CString,
    sync::{
        Arc,
        ArcBorrow,
        Mutex,
        SpinLockIrq, //
    }, //
};

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
    reason = "shared by both modules (each uses its own part); an abstraction's API is public"
)]
mod blkmq;

#[path = "../../../rust/virtio/virtio.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    unreachable_pub,
    reason = "an abstraction's API is public, as in the kernel crate"
)]
mod virtio;

use blkcore::{
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
use blkmq::{
    GenDisk,
    HwQueue,
    QueueDataRef,
    Rejected,
    ReqOp,
    Request,
    Status, //
};
use virtio::blk::{
    self as vblk,
    BlkReq,
    BlkVq,
    Command,
    IdRequest, //
};

module! {
    type: VirtioBlkModule,
    name: "virtio_blk_rs",
    authors: ["blkfront-rs developers"],
    description: "Virtio block driver (Rust)",
    license: "GPL",
    params: {
        num_request_queues: u32 {
            default: 0,
            description: "Limit the number of request queues (0: no limit, like virtio_blk; never more than the device's num_queues or nr_cpu_ids)",
        },
        queue_depth: u32 {
            default: 0,
            description: "Requests per queue (0: fill the virtqueue, like virtio_blk)",
        },
        rotational: i32 {
            default: -1,
            description: "-1: report the disk as rotational like virtio_blk; 0: non-rotational; 1: rotational",
        },
        get_id_timeout_ms: u32 {
            default: 5000,
            description: "How long probe waits for the serial (VIRTIO_BLK_T_GET_ID) before adding the disk without one (0, a test hook: send it already given up on and without notifying the device; its answer, if any, is dropped)",
        },
    },
}

/// Feature bits we offer (upstream virtio_blk's minus secure erase and zoned).
const FEATURES: [u32; 11] = [
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
];

/// Scatterlist entries preallocated per request (each request carries its
/// own table in the blk-mq PDU): `seg_max` is capped to this. QEMU's
/// default `seg_max` is 254.
const MAX_SG_PER_REQUEST: u32 = 256;

/// Names of the request virtqueues; also the cap on their number.
const VQ_NAMES: [&CStr; 16] = [
    c_str!("req.0"),
    c_str!("req.1"),
    c_str!("req.2"),
    c_str!("req.3"),
    c_str!("req.4"),
    c_str!("req.5"),
    c_str!("req.6"),
    c_str!("req.7"),
    c_str!("req.8"),
    c_str!("req.9"),
    c_str!("req.10"),
    c_str!("req.11"),
    c_str!("req.12"),
    c_str!("req.13"),
    c_str!("req.14"),
    c_str!("req.15"),
];

/// Config fields read per feature: (feature bit or `None` = always, offset,
/// width in bytes). Only fields of negotiated features are read: the
/// transport `BUG()`s on reads past the device's config space.
const CONFIG_FIELDS: [(Option<u32>, usize, usize); 19] = [
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
];

/// Negotiated feature mask (bits of [`FEATURES`]).
fn negotiated(dev: &virtio::Device) -> u64 {
    FEATURES
        .iter()
        .filter(|&&b| dev.has_feature(b))
        .fold(0, |m, &b| m | vcfg::feature_mask(b))
}

/// Snapshot the config space as the little-endian bytes blkcore parses.
fn read_config(dev: &virtio::Device, features: u64) -> [u8; offset::SIZE] {
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
/// policies: the `rotational` parameter, per-request scatterlist cap, one
/// range per discard / write-zeroes request.
fn config_to_limits(
    bytes: &[u8],
    features: u64,
    max_dma_size: usize,
    rotational: i32,
) -> Result<(VirtioBlkConfig, QueueLimits), ConfigError> {
    let cfg = VirtioBlkConfig::parse(bytes, features)?;
    let mut lim = virtio_limits(&cfg, max_dma_size)?;
    lim.rotational = match rotational {
        0 => Some(false),
        1 => Some(true),
        _ => lim.rotational,
    };
    lim.max_segments = lim.max_segments.min(MAX_SG_PER_REQUEST);
    lim.max_discard_segments = 1;
    Ok((cfg, lim))
}

/// Disk name for index `i`: vda..vdz, vdaa.. (upstream `virtblk_name_format`).
fn disk_letters(mut index: u32, buf: &mut [u8; 8]) -> &str {
    let mut p = buf.len();
    loop {
        p -= 1;
        buf[p] = b'a' + (index % 26) as u8;
        index /= 26;
        if index == 0 || p == 0 {
            break;
        }
        index -= 1;
    }
    core::str::from_utf8(&buf[p..]).unwrap_or("?")
}

/// `string_get_size()`-like "1.07 GB" / "1.00 GiB" rendering of `bytes`.
struct HumanSize {
    bytes: u64,
    binary: bool,
}

impl kernel::fmt::Display for HumanSize {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const DEC: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
        const BIN: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let div: u64 = if self.binary { 1024 } else { 1000 };
        let (mut unit, mut scale) = (0usize, 1u64);
        while self.bytes / scale >= div && unit < 6 {
            scale *= div;
            unit += 1;
        }
        let units = if self.binary { &BIN } else { &DEC };
        if unit == 0 {
            return write!(f, "{} B", self.bytes);
        }
        // Three significant digits, rounded (no 128-bit division: the
        // kernel has no __udivti3).
        let (mut i, rem) = (self.bytes / scale, self.bytes % scale);
        let mut frac = (rem + scale / 200) / (scale / 100);
        if frac >= 100 {
            i += 1;
            frac -= 100;
        }
        if i >= 100 {
            write!(f, "{} {}", i + u64::from(frac >= 50), units[unit])
        } else if i >= 10 {
            let mut tenths = (frac + 5) / 10;
            if tenths == 10 {
                i += 1;
                tenths = 0;
            }
            write!(f, "{}.{} {}", i, tenths, units[unit])
        } else {
            write!(f, "{}.{:02} {}", i, frac, units[unit])
        }
    }
}

/// Shows a `core::fmt::Display` value (blkcore's errors) with the kernel's
/// formatting macros.
struct Shown<T>(T);

impl<T: core::fmt::Display> kernel::fmt::Display for Shown<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.0, f)
    }
}

/// Bitmap of disk indices in use: 1024 disks (vda .. vdamj).
static DISK_INDICES: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// An allocated disk index, freed on drop.
struct DiskIndex(u32);

impl DiskIndex {
    fn alloc() -> Result<Self> {
        for (w, word) in DISK_INDICES.iter().enumerate() {
            let mut cur = word.load(Ordering::Relaxed);
            while cur != u64::MAX {
                let bit = (!cur).trailing_zeros();
                match word.compare_exchange(
                    cur,
                    cur | (1 << bit),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Ok(DiskIndex(w as u32 * 64 + bit)),
                    Err(now) => cur = now,
                }
            }
        }
        Err(ENOSPC)
    }
}

impl Drop for DiskIndex {
    fn drop(&mut self) {
        if let Some(word) = DISK_INDICES.get((self.0 / 64) as usize) {
            word.fetch_and(!(1u64 << (self.0 % 64)), Ordering::AcqRel);
        }
    }
}

/// One request virtqueue and its counters.
#[pin_data]
struct VqSlot {
    #[pin]
    vq: SpinLockIrq<BlkVq<BlkOps>>,
    /// Requests added.
    requests: AtomicU64,
    /// Device notifications sent.
    notifies: AtomicU64,
    /// Requests sent back to blk-mq because the ring was full.
    ring_full: AtomicU64,
}

/// State shared with blk-mq callbacks and interrupts.
struct Queues {
    /// Device byte order for request headers.
    le: bool,
    vqs: KVec<Pin<KBox<VqSlot>>>,
}

impl Queues {
    /// (requests, notifications, ring-full retries) over all queues.
    fn totals(&self) -> (u64, u64, u64) {
        self.vqs.iter().fold((0, 0, 0), |(r, n, f), s| {
            (
                r + s.requests.load(Ordering::Relaxed),
                n + s.notifies.load(Ordering::Relaxed),
                f + s.ring_full.load(Ordering::Relaxed),
            )
        })
    }
}

/// blk-mq operations of a virtio-blk disk.
struct BlkOps;

impl blkmq::Operations for BlkOps {
    type QueueData = Arc<Queues>;
    type RequestData = BlkReq;

    fn queue_rq_or_reject(
        qd: ArcBorrow<'_, Queues>,
        hctx: HwQueue,
        mut rq: Request<Self>,
        last: bool,
    ) -> core::result::Result<(), Rejected<Self>> {
        let cmd = match rq.op() {
            ReqOp::Read => Command::Read,
            ReqOp::Write => Command::Write,
            ReqOp::Flush => Command::Flush,
            ReqOp::Discard => Command::Discard,
            ReqOp::WriteZeroes => Command::WriteZeroes {
                unmap: !rq.no_unmap(),
            },
            _ => return Err(rq.reject(Status::NOTSUPP)),
        };
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return Err(rq.reject(Status::IOERR));
        };
        if let Err(status) = vblk::prepare(&mut rq, cmd, qd.le) {
            return Err(rq.reject(status));
        }

        let mut vq = slot.vq.lock();
        if let Err((rq, e)) = vq.submit(rq) {
            // Ring full: let the device see what is queued, retry when a
            // request completes.
            let kick = vq.kick_prepare();
            drop(vq);
            if let Some(k) = kick {
                k.notify();
                slot.notifies.fetch_add(1, Ordering::Relaxed);
            }
            return Err(rq.reject(if e == ENOSPC {
                slot.ring_full.fetch_add(1, Ordering::Relaxed);
                Status::DEV_RESOURCE
            } else if e == ENOMEM {
                Status::RESOURCE
            } else {
                Status::IOERR
            }));
        }
        let kick = if last { vq.kick_prepare() } else { None };
        drop(vq);
        slot.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(k) = kick {
            k.notify();
            slot.notifies.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn commit_rqs(qd: ArcBorrow<'_, Queues>, hctx: HwQueue) {
        let Some(slot) = qd.vqs.get(hctx.index() as usize) else {
            return;
        };
        let kick = slot.vq.lock().kick_prepare();
        if let Some(k) = kick {
            k.notify();
            slot.notifies.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn complete(_qd: QueueDataRef<'_, Self>, rq: Request<Self>) {
        let status = rq.data().status();
        rq.end(status);
    }
}

/// One virtio-blk device.
#[pin_data]
struct VirtioBlk {
    queues: Arc<Queues>,
    #[pin]
    disk: Mutex<Option<GenDisk<BlkOps>>>,
    disk_name: CString,
    cfg: VirtioBlkConfig,
    limits: QueueLimits,
    /// Capacity in force (512-byte sectors): `cfg.capacity`, then the last
    /// valid one a config change brought.
    capacity: AtomicU64,
    _index: DiskIndex,
}

impl VirtioBlk {
    /// The upstream-style capacity line.
    fn report_capacity(&self, dev: &virtio::Device, sectors: u64, resize: bool) {
        let lbs = u64::from(self.limits.logical_block_size);
        let nblocks = sectors.div_ceil((lbs / 512).max(1));
        let bytes = nblocks.saturating_mul(lbs);
        dev_notice!(
            dev,
            "[{}] {}{} {}-byte logical blocks ({}/{})\n",
            self.disk_name.to_str().unwrap_or("?"),
            if resize { "new size: " } else { "" },
            nblocks,
            lbs,
            HumanSize {
                bytes,
                binary: false
            },
            HumanSize {
                bytes,
                binary: true
            },
        );
    }

    /// Ask the device for its serial (`VIRTIO_BLK_T_GET_ID`) and wait at
    /// most `get_id_timeout_ms` for it. `None`: no serial (unsupported, not
    /// answered in time, ...), said in one dmesg line.
    ///
    /// Why this way: the serial must be known before `add_disk`, which
    /// creates `/sys/block/vdX/serial` and sends the uevent that udev's
    /// by-id links read it from. Upstream instead asks lazily in
    /// `serial_show`, with `blk_execute_rq`, which waits forever for a
    /// device that never answers (and so would our probe). Here the request
    /// bypasses blk-mq ([`IdRequest`]): probe waits with a deadline and
    /// then carries on without a serial; the buffer is shared with the
    /// virtqueue, which drops it when a late answer comes, or after the
    /// reset at remove if none ever does (`reset_done`). Nothing in the
    /// block layer waits for it, so removal cannot hang on it either.
    fn read_serial(&self, dev: &virtio::Device) -> Option<[u8; vblk::VIRTIO_BLK_ID_BYTES]> {
        let name = self.disk_name.to_str().unwrap_or("?");
        let timeout_ms = module_parameters::get_id_timeout_ms.value();
        let slot = self.queues.vqs.first()?;
        let result = IdRequest::new(self.queues.le).and_then(|req| {
            if timeout_ms == 0 {
                // Test hook: any answer is late (or never comes).
                req.abandon();
            }
            let mut vq = slot.vq.lock();
            let sent = vq.submit_get_id(&req);
            let kick = if sent.is_ok() && timeout_ms > 0 {
                vq.kick_prepare()
            } else {
                None
            };
            drop(vq);
            if let Some(k) = kick {
                k.notify();
                slot.notifies.fetch_add(1, Ordering::Relaxed);
            }
            sent?;
            req.wait(timeout_ms)
        });
        match result {
            Ok(serial) => Some(serial),
            Err(e) if e == ETIMEDOUT => {
                dev_warn!(
                    dev,
                    "[{}] no serial: GET_ID not answered within {} ms\n",
                    name,
                    timeout_ms
                );
                None
            }
            Err(e) => {
                dev_info!(dev, "[{}] no serial (GET_ID: {:?})\n", name, e);
                None
            }
        }
    }
}

impl virtio::Driver for VirtioBlk {
    const NAME: &'static CStr = c_str!("virtio_blk_rs");
    const DEVICE_ID: u32 = 2;
    const FEATURES: &'static [u32] = &FEATURES;

    fn probe(dev: &virtio::Device) -> Result<Pin<KBox<Self>>> {
        let features = negotiated(dev);
        let bytes = read_config(dev, features);
        let (cfg, limits) = config_to_limits(
            &bytes,
            features,
            dev.max_dma_size(),
            module_parameters::rotational.value(),
        )
        .map_err(|e| {
            dev_err!(dev, "{}\n", Shown(e));
            EINVAL
        })?;

        let mut nq = u32::from(cfg.num_queues);
        let limit = module_parameters::num_request_queues.value();
        if limit != 0 {
            nq = nq.min(limit);
        }
        nq = nq
            .min(kernel::cpu::nr_cpu_ids())
            .min(VQ_NAMES.len() as u32)
            .max(1);
        let found = dev.find_vqs::<Self>(&VQ_NAMES[..nq as usize])?;

        let mut depth = module_parameters::queue_depth.value();
        if depth == 0 {
            depth = found.first().map_or(1, |vq| vq.num_free());
            if !dev.has_feature(virtio::VIRTIO_RING_F_INDIRECT_DESC) {
                depth /= 2;
            }
        }
        let depth = depth.max(1);

        let mut vqs = KVec::with_capacity(found.len(), GFP_KERNEL)?;
        for vq in found {
            vqs.push(
                KBox::pin_init(
                    pin_init!(VqSlot {
                        vq <- new_spinlock_irq!(BlkVq::new(vq), "virtio_blk_rs:vq"),
                        requests: AtomicU64::new(0),
                        notifies: AtomicU64::new(0),
                        ring_full: AtomicU64::new(0),
                    }),
                    GFP_KERNEL,
                )?,
                GFP_KERNEL,
            )?;
        }
        let queues = Arc::new(
            Queues {
                le: dev.is_little_endian(),
                vqs,
            },
            GFP_KERNEL,
        )?;
        dev_info!(dev, "{} request queues, depth {}\n", nq, depth);

        let tagset = Arc::pin_init(
            virtio::blk_tag_set::<BlkOps>(dev, nq, depth, limits.max_segments, queues.clone()),
            GFP_KERNEL,
        )?;
        let index = DiskIndex::alloc()?;
        let mut letters = [0u8; 8];
        let name = disk_letters(index.0, &mut letters);
        let disk_name = CString::try_from_fmt(fmt!("vd{}", name))?;
        let disk = GenDisk::new(tagset, &limits, fmt!("vd{}", name), cfg.capacity)?;
        if let Some(g) = cfg.geometry {
            disk.set_geometry(g.cylinders, g.heads, g.sectors);
        }

        KBox::pin_init(
            try_pin_init!(VirtioBlk {
                queues,
                disk <- new_mutex!(Some(disk), "virtio_blk_rs:disk"),
                disk_name,
                capacity: AtomicU64::new(cfg.capacity),
                cfg,
                limits,
                _index: index,
            }),
            GFP_KERNEL,
        )
    }

    fn start(self: Pin<&Self>, dev: &virtio::Device) -> Result {
        dev.ready();
        let serial = self.read_serial(dev);
        let mut guard = self.disk.lock();
        let Some(disk) = &mut *guard else {
            return Err(ENODEV);
        };
        if let Some(id) = &serial {
            let s = &id[..id.iter().position(|&b| b == 0).unwrap_or(id.len())];
            if !s.is_empty() {
                disk.set_serial(s);
                dev_info!(
                    dev,
                    "[{}] serial {}\n",
                    self.disk_name.to_str().unwrap_or("?"),
                    core::str::from_utf8(s).unwrap_or("(not UTF-8)")
                );
            }
        }
        self.report_capacity(dev, self.cfg.capacity, false);
        disk.add(dev.as_dev())?;
        let a = disk.applied_limits();
        dev_info!(
            dev,
            "[{}] lbs {} pbs {} align {} io_min {} io_opt {} max_segs {} max_seg_size {} discard {} wzeroes {} rotational {} wc {}\n",
            self.disk_name.to_str().unwrap_or("?"),
            a.logical_block_size,
            a.physical_block_size,
            a.alignment_offset,
            a.io_min,
            a.io_opt,
            a.max_segments,
            a.max_segment_size,
            a.max_discard_sectors,
            a.max_write_zeroes_sectors,
            a.rotational.unwrap_or(false),
            a.write_cache
        );
        Ok(())
    }

    fn vq_interrupt(self: Pin<&Self>, index: u32) {
        let Some(slot) = self.queues.vqs.get(index as usize) else {
            return;
        };
        let mut vq = slot.vq.lock();
        loop {
            vq.disable_cb();
            while let Some(rq) = vq.complete_one() {
                rq.complete();
            }
            if vq.enable_cb() {
                break;
            }
        }
    }

    fn config_changed(self: Pin<&Self>, dev: &virtio::Device) {
        let raw = dev.cread_u64(offset::CAPACITY);
        let guard = self.disk.lock();
        let Some(disk) = guard.as_ref() else {
            return;
        };
        // The same check as at probe (`VirtioBlkConfig::parse`).
        match vcfg::check_capacity(raw) {
            Ok(sectors) => {
                self.report_capacity(dev, sectors, true);
                self.capacity.store(sectors, Ordering::Relaxed);
                disk.set_capacity_and_notify(sectors);
            }
            Err(e) => dev_err!(
                dev,
                "[{}] {}; keeping {} sectors\n",
                self.disk_name.to_str().unwrap_or("?"),
                Shown(e),
                self.capacity.load(Ordering::Relaxed)
            ),
        }
    }

    fn remove(self: Pin<&Self>, dev: &virtio::Device) {
        let disk = self.disk.lock().take();
        // del_gendisk drains in-flight I/O; the tag set goes with the disk.
        drop(disk);
        let (requests, notifies, ring_full) = self.queues.totals();
        let late_id = self
            .queues
            .vqs
            .iter()
            .fold(0u32, |n, s| n.saturating_add(s.vq.lock().late_id_answers()));
        dev_info!(
            dev,
            "[{}] removed: {} requests, {} notifications on {} queues, {} ring-full retries, {} late GET_ID answers\n",
            self.disk_name.to_str().unwrap_or("?"),
            requests,
            notifies,
            self.queues.vqs.len(),
            ring_full,
            late_id
        );
    }

    fn reset_done(self: Pin<&Self>, dev: &virtio::Device, reset: &virtio::Reset) {
        for slot in self.queues.vqs.iter() {
            if slot.vq.lock().reclaim(reset) {
                dev_info!(
                    dev,
                    "[{}] GET_ID never answered: its buffer freed after the reset\n",
                    self.disk_name.to_str().unwrap_or("?")
                );
            }
        }
    }
}

struct VirtioBlkModule {
    _reg: virtio::Registration<VirtioBlk>,
}

impl kernel::Module for VirtioBlkModule {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(VirtioBlkModule {
            _reg: virtio::Registration::new()?,
        })
    }
}

#[kunit_tests(virtio_blk_rs)]
mod tests {
    use super::blkcore::{blkif, virtio as vcfg};
    use super::blkmq::TagSet;
    use super::*;

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
        let queues = Arc::new(
            Queues {
                le: true,
                vqs: KVec::new(),
            },
            GFP_KERNEL,
        )?;
        let tagset = Arc::pin_init(
            TagSet::<BlkOps>::new(1, 4, l.max_segments, queues),
            GFP_KERNEL,
        )?;
        let disk = GenDisk::new(tagset, &l, fmt!("vdtest"), cfg.capacity)?;
        let a = disk.applied_limits();
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
    fn seg_max_capped() -> core::result::Result<(), ConfigError> {
        let mut b = cfg_bytes();
        put32(&mut b, offset::SEG_MAX, 30000);
        let f = feat(&[vcfg::VIRTIO_BLK_F_SEG_MAX]);
        let l = config_to_limits(&b, f, usize::MAX, -1)?.1;
        assert_eq!(l.max_segments, MAX_SG_PER_REQUEST);
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

    #[test]
    fn rejects_physical_block_exp_overflow() {
        let mut b = cfg_bytes();
        b[offset::PHYSICAL_BLOCK_EXP] = 40;
        assert_eq!(
            rejected(&b, feat(&[vcfg::VIRTIO_BLK_F_TOPOLOGY])),
            "physical_block_exp"
        );
    }

    #[test]
    fn rejects_opt_io_overflow() {
        let mut b = cfg_bytes();
        put32(&mut b, offset::BLK_SIZE, 4096);
        put32(&mut b, offset::OPT_IO_SIZE, u32::MAX);
        let f = feat(&[vcfg::VIRTIO_BLK_F_BLK_SIZE, vcfg::VIRTIO_BLK_F_TOPOLOGY]);
        assert_eq!(rejected(&b, f), "opt_io_size");
    }

    #[test]
    fn rejects_seg_max_zero() {
        let b = cfg_bytes();
        assert_eq!(rejected(&b, feat(&[vcfg::VIRTIO_BLK_F_SEG_MAX])), "seg_max");
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

    #[test]
    fn disk_names() {
        let mut buf = [0u8; 8];
        assert_eq!(disk_letters(0, &mut buf), "a");
        assert_eq!(disk_letters(25, &mut buf), "z");
        assert_eq!(disk_letters(26, &mut buf), "aa");
        assert_eq!(disk_letters(27, &mut buf), "ab");
        assert_eq!(disk_letters(701, &mut buf), "zz");
        assert_eq!(disk_letters(702, &mut buf), "aaa");
    }
}
