// SPDX-License-Identifier: GPL-2.0

//! The virtio driver: probe, config changes, removal.

use core::sync::atomic::{
    AtomicBool,
    AtomicU64,
    Ordering, //
};

use kernel::{
    c_str,
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    }, //
};

use crate::blkcore::{
    limits::{
        virtio_ring_fit,
        virtio_ring_fits_after_restore,
        QueueLimits, //
    },
    naming::{
        self,
        DiskName,
        HumanSize, //
    },
    virtio::{
        self as vcfg,
        offset,
        VirtioBlkConfig, //
    },
};
use crate::blkmq::{
    self,
    GenDisk, //
};
use crate::config::{
    config_to_limits,
    negotiated,
    read_config,
    FEATURES,
    INLINE_SG_PER_REQUEST,
    VQ_NAME_PREFIX, //
};
use crate::mq::{
    BlkOps,
    Queues,
    VqSlot, //
};
use crate::naming::DiskIndex;
use crate::params;
use crate::virtio::{
    self,
    blk::{
        self as vblk,
        BlkVq,
        IdRequest, //
    },
};

/// One virtio-blk device.
#[pin_data]
pub(crate) struct VirtioBlk {
    queues: Arc<Queues>,
    #[pin]
    disk: Mutex<Option<GenDisk<BlkOps>>>,
    /// `vda`, `vdb`, ...: what the log lines name the disk by.
    disk_name: DiskName,
    cfg: VirtioBlkConfig,
    limits: QueueLimits,
    /// Capacity in force (512-byte sectors): `cfg.capacity`, then the last
    /// valid one a config change brought.
    capacity: AtomicU64,
    /// Of the queues, how many are polled (the last ones): a restore finds
    /// the same set again.
    npoll: u32,
    /// The serial may be asked for: the rings have room for GET_ID beside a
    /// largest request ([`virtio_ring_fit`]).
    get_id: bool,
    /// Freezes (system sleeps and device resets) survived.
    restores: AtomicU64,
    /// Between `freeze` and `restore` (dispatch stopped, no virtqueues).
    /// Written under the disk lock.
    frozen: AtomicBool,
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
            self.disk_name.as_str(),
            if resize { "new size: " } else { "" },
            nblocks,
            lbs,
            core::format_args!(
                "{}",
                HumanSize {
                    bytes,
                    binary: false
                }
            ),
            core::format_args!(
                "{}",
                HumanSize {
                    bytes,
                    binary: true
                }
            ),
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
    /// reset at remove if none ever does (`reclaim`). Nothing in the
    /// block layer waits for it, so removal cannot hang on it either.
    fn read_serial(&self, dev: &virtio::Device) -> Option<[u8; vblk::VIRTIO_BLK_ID_BYTES]> {
        if !self.get_id {
            return None;
        }
        let name = self.disk_name.as_str();
        let timeout_ms = params::get_id_timeout_ms.value();
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
        let (cfg, mut limits) = config_to_limits(
            &bytes,
            features,
            dev.max_dma_size(),
            params::rotational.value(),
        )
        .map_err(|e| {
            dev_err!(dev, "{}\n", core::format_args!("{e}"));
            EINVAL
        })?;
        // Advisory fields out of range: one line each, the disk still
        // comes up.
        for clamp in cfg.clamps.iter() {
            dev_warn!(dev, "{}\n", core::format_args!("{clamp}"));
        }

        if !blkmq::CAN_CHAIN_SG {
            limits.max_segments = limits.max_segments.min(INLINE_SG_PER_REQUEST);
        }

        let mut nq = u32::from(cfg.num_queues);
        let limit = params::num_request_queues.value();
        if limit != 0 {
            nq = nq.min(limit);
        }
        // As upstream: as many queues as the device has, CPUs exist and the
        // parameter allows, and no fixed cap.
        nq = nq.min(kernel::cpu::nr_cpu_ids()).max(1);
        // Polled queues come out of those, leaving at least one with
        // interrupts (upstream's `num_poll_vqs`).
        let npoll = params::poll_queues.value().min(nq - 1);
        let found = dev.find_vqs::<Self>(VQ_NAME_PREFIX, nq as usize, npoll as usize)?;
        // Without indirect descriptors a request takes one descriptor per
        // segment besides its header and status, and GET_ID (sent on the
        // first queue, maybe never answered) holds 3: the cap keeps a
        // largest request fitting beside it, else a request that cannot fit
        // an otherwise idle ring would be retried for ever (upstream does
        // not check this).
        let indirect = dev.has_feature(virtio::VIRTIO_RING_F_INDIRECT_DESC);
        let ring = found.iter().map(|vq| vq.num_free()).min().unwrap_or(0);
        let fit = virtio_ring_fit(ring, indirect, limits.max_segments);
        if fit.max_segments != limits.max_segments {
            dev_info!(
                dev,
                "seg_max {} does not fit a ring of {} without indirect descriptors beside GET_ID: {} segments per request\n",
                limits.max_segments,
                ring,
                fit.max_segments
            );
            limits.max_segments = fit.max_segments;
        }
        if !fit.get_id {
            dev_info!(
                dev,
                "a ring of {} descriptors cannot hold GET_ID beside a request: no serial\n",
                ring
            );
        }

        let mut depth = params::queue_depth.value();
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
                KBox::pin_init(VqSlot::new(BlkVq::new(vq)), GFP_KERNEL)?,
                GFP_KERNEL,
            )?;
        }
        let queues = Arc::new(
            Queues::new(dev.is_little_endian(), vqs, Some(dev.resetter())),
            GFP_KERNEL,
        )?;
        dev_info!(
            dev,
            "{} request queues ({} polled), depth {}\n",
            nq,
            npoll,
            depth
        );

        let tagset = Arc::pin_init(
            virtio::blk_tag_set::<BlkOps>(
                dev,
                nq,
                npoll,
                depth,
                limits.max_segments.min(INLINE_SG_PER_REQUEST),
                queues.clone(),
            ),
            GFP_KERNEL,
        )?;
        let index = DiskIndex::alloc()?;
        let name = naming::disk_name("vd", index.0, 0).ok_or(EINVAL)?;
        let disk = GenDisk::new(tagset, &limits, fmt!("{}", name.as_str()), cfg.capacity)?;
        // As upstream, read at each HDIO_GETGEO; without GEOMETRY sd-like
        // defaults from the capacity at each call.
        if cfg.geometry.is_some() {
            vblk::read_geometry_at_getgeo(&disk, dev);
        }

        KBox::pin_init(
            try_pin_init!(VirtioBlk {
                queues,
                disk <- new_mutex!(Some(disk), "virtio_blk_rs:disk"),
                disk_name: name,
                capacity: AtomicU64::new(cfg.capacity),
                npoll,
                get_id: fit.get_id,
                restores: AtomicU64::new(0),
                frozen: AtomicBool::new(false),
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
        // As upstream, `serial` exists on every disk: empty when the device
        // has none (GET_ID unsupported, or here not answered in time).
        let s = serial.as_ref().map_or(&[][..], |id| {
            &id[..id.iter().position(|&b| b == 0).unwrap_or(id.len())]
        });
        disk.set_serial(s);
        if !s.is_empty() {
            dev_info!(
                dev,
                "[{}] serial {}\n",
                self.disk_name.as_str(),
                core::str::from_utf8(s).unwrap_or("(not UTF-8)")
            );
        }
        self.report_capacity(dev, self.cfg.capacity, false);
        vblk::add_disk(disk, dev)?;
        let a = disk.applied_limits();
        dev_info!(
            dev,
            "[{}] lbs {} pbs {} align {} io_min {} io_opt {} max_segs {} max_seg_size {} discard {} wzeroes {} rotational {} wc {}\n",
            self.disk_name.as_str(),
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
        let mut answered = 0u64;
        loop {
            vq.disable_cb();
            while let Some(rq) = vq.complete_one() {
                rq.complete();
                answered += 1;
            }
            if vq.enable_cb() {
                break;
            }
        }
        drop(vq);
        if answered != 0 {
            slot.answered.fetch_add(answered, Ordering::Relaxed);
        }
    }

    fn config_changed(self: Pin<&Self>, dev: &virtio::Device) {
        let raw = dev.cread_u64(offset::CAPACITY);
        let guard = self.disk.lock();
        let Some(disk) = guard.as_ref() else {
            return;
        };
        // The same rule as at probe (`VirtioBlkConfig::parse`).
        let (sectors, clamped) = vcfg::clamp_capacity(raw);
        if let Some(c) = clamped {
            dev_warn!(
                dev,
                "[{}] {}\n",
                self.disk_name.as_str(),
                core::format_args!("{c}")
            );
        }
        self.report_capacity(dev, sectors, true);
        self.capacity.store(sectors, Ordering::Relaxed);
        disk.set_capacity_and_notify(sectors);
    }

    fn remove(self: Pin<&Self>, dev: &virtio::Device) {
        // del_gendisk waits for the requests in flight: a queue that
        // answers nothing is given up on after one io_timeout.
        self.queues.removing.store(true, Ordering::Relaxed);
        let disk = self.disk.lock().take();
        if let Some(disk) = &disk {
            // Removed between a freeze and its restore: the held requests
            // go to slots without a virtqueue and fail, so that del_gendisk
            // does not wait for them for ever.
            if self.frozen.swap(false, Ordering::Relaxed) {
                disk.resume_dispatch();
            }
        }
        // del_gendisk drains in-flight I/O; the tag set goes with the disk.
        drop(disk);
        let t = self.queues.totals();
        let late_id = self
            .queues
            .vqs
            .iter()
            .fold(0u32, |n, s| n.saturating_add(s.vq.lock().late_id_answers()));
        dev_info!(
            dev,
            "[{}] removed: {} requests, {} notifications on {} queues, {} ring-full retries, {} late GET_ID answers, {} polled completions, {} chained scatterlists, {} batches, {} request timeouts\n",
            self.disk_name.as_str(),
            t.requests,
            t.notifies,
            self.queues.vqs.len(),
            t.ring_full,
            late_id,
            t.polled,
            t.chained,
            t.batches,
            t.timeouts
        );
    }

    fn freeze(self: Pin<&Self>, dev: &virtio::Device) -> Result {
        // Under the disk lock: a removal sees either no freeze or a
        // complete one (`remove` then releases what is held).
        let guard = self.disk.lock();
        if let Some(disk) = guard.as_ref() {
            disk.stop_dispatch();
            self.frozen.store(true, Ordering::Relaxed);
        }
        drop(guard);
        dev_info!(
            dev,
            "[{}] freeze: requests held until the restore\n",
            self.disk_name.as_str()
        );
        Ok(())
    }

    fn surrender_vqs(self: Pin<&Self>, dev: &virtio::Device, out: &mut KVec<virtio::Virtqueue>) {
        for slot in self.queues.vqs.iter() {
            // Its own statement: the guard is dropped before the push.
            let vq = slot.vq.lock().surrender();
            if let Some(vq) = vq {
                // Within the capacity the core reserved for all of this
                // device's virtqueues: does not allocate.
                if out.push_within_capacity(vq).is_err() {
                    dev_err!(dev, "freeze: more virtqueues than the device has\n");
                }
            }
        }
    }

    fn restore(self: Pin<&Self>, dev: &virtio::Device) -> Result {
        let name = self.disk_name.as_str();
        let nq = self.queues.vqs.len();
        let found = dev
            .find_vqs::<Self>(VQ_NAME_PREFIX, nq, self.npoll as usize)
            .and_then(|found| {
                // The device may come back with a smaller queue: the held
                // requests were built for the probe's ring. One that no
                // longer fits would be retried for ever; they fail instead
                // (the virtqueues are left unused).
                let indirect = dev.has_feature(virtio::VIRTIO_RING_F_INDIRECT_DESC);
                let ring = found.iter().map(|vq| vq.num_free()).min().unwrap_or(0);
                let segs = self.limits.max_segments;
                if virtio_ring_fits_after_restore(ring, indirect, segs) {
                    Ok(found)
                } else {
                    // Kept, unused, so that the next freeze gives them
                    // back for deletion with the rest.
                    for (slot, vq) in self.queues.vqs.iter().zip(found) {
                        slot.vq.lock().park(vq);
                    }
                    dev_err!(
                        dev,
                        "[{}] restore: a ring of {} descriptors does not hold a request of {} segments\n",
                        name,
                        ring,
                        segs
                    );
                    Err(ENOSPC)
                }
            });
        let guard = self.disk.lock();
        let result = found.map(|found| {
            for (slot, vq) in self.queues.vqs.iter().zip(found) {
                slot.vq.lock().attach(vq);
            }
            dev.ready();
        });
        // Held requests go out now: to the device, or, if the virtqueues
        // could not be found again, back as I/O errors (a slot without a
        // virtqueue refuses them): none waits for ever.
        if let Some(disk) = guard.as_ref() {
            disk.resume_dispatch();
            self.frozen.store(false, Ordering::Relaxed);
        }
        drop(guard);
        match &result {
            Ok(()) => {
                let n = self.restores.fetch_add(1, Ordering::Relaxed) + 1;
                dev_info!(
                    dev,
                    "[{}] restored: {} queues ({} polled), restore {}\n",
                    name,
                    nq,
                    self.npoll,
                    n
                );
            }
            Err(e) => dev_err!(
                dev,
                "[{}] restore: virtqueues not found again ({:?}): requests fail with I/O errors\n",
                name,
                e
            ),
        }
        result
    }

    fn reclaim(self: Pin<&Self>, dev: &virtio::Device, reset: &virtio::Reset) {
        for slot in self.queues.vqs.iter() {
            if slot.vq.lock().reclaim(reset) {
                dev_info!(
                    dev,
                    "[{}] GET_ID never answered: its buffer freed after the reset\n",
                    self.disk_name.as_str()
                );
            }
        }
    }
}
