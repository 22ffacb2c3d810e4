// SPDX-License-Identifier: GPL-2.0

//! [`GenDisk`] (the disk and its queue limits) and [`BlockMajor`].

use super::*;

/// Write a `QueueLimits` into the kernel's `queue_limits`.
fn apply_limits(lim: &mut bindings::queue_limits, l: &QueueLimits) {
    lim.logical_block_size = l.logical_block_size;
    lim.physical_block_size = l.physical_block_size;
    lim.alignment_offset = l.alignment_offset;
    lim.io_min = l.io_min;
    lim.io_opt = l.io_opt;
    lim.max_hw_sectors = l.max_hw_sectors;
    lim.max_segments = u16::try_from(l.max_segments).unwrap_or(u16::MAX);
    lim.max_segment_size = l.max_segment_size;
    if l.seg_boundary_mask != 0 {
        lim.seg_boundary_mask = kernel::ffi::c_ulong::try_from(l.seg_boundary_mask)
            .unwrap_or(kernel::ffi::c_ulong::MAX);
    }
    lim.discard_granularity = l.discard_granularity;
    lim.discard_alignment = l.discard_alignment;
    lim.max_hw_discard_sectors = l.max_discard_sectors;
    lim.max_discard_segments = u16::try_from(l.max_discard_segments).unwrap_or(u16::MAX);
    lim.max_secure_erase_sectors = l.max_secure_erase_sectors;
    lim.max_write_zeroes_sectors = l.max_write_zeroes_sectors;
    let mut f = lim.features;
    let set = |f: &mut u32, bit: u32, on: bool| {
        if on {
            *f |= bit
        } else {
            *f &= !bit
        }
    };
    if let Some(rot) = l.rotational {
        set(&mut f, shim::BLKFRONT_RS_BLK_FEAT_ROTATIONAL, rot);
    }
    set(
        &mut f,
        shim::BLKFRONT_RS_BLK_FEAT_WRITE_CACHE,
        l.write_cache,
    );
    set(
        &mut f,
        shim::BLKFRONT_RS_BLK_FEAT_FUA,
        l.fua && l.write_cache,
    );
    lim.features = f;
}

/// A disk on a [`TagSet`].
///
/// # Invariants
///
/// `disk` came from `blkfront_rs_blkmq_alloc_disk` on `tagset` (queuedata =
/// the tag set's `driver_data`) and we hold its reference; `added` says
/// whether `device_add_disk` succeeded.
pub struct GenDisk<T: Operations> {
    disk: NonNull<bindings::gendisk>,
    added: bool,
    tagset: Arc<TagSet<T>>,
}

// SAFETY: the gendisk functions used here may be called from any thread.
unsafe impl<T: Operations> Send for GenDisk<T> {}
// SAFETY: `&GenDisk` methods only call functions that lock internally.
unsafe impl<T: Operations> Sync for GenDisk<T> {}

impl<T: Operations> GenDisk<T> {
    /// Allocate a disk named `name` with limits `limits` and capacity
    /// `capacity` (512-byte sectors). It is not visible until [`add`].
    ///
    /// [`add`]: GenDisk::add
    pub fn new(
        tagset: Arc<TagSet<T>>,
        limits: &QueueLimits,
        name: fmt::Arguments<'_>,
        capacity: u64,
    ) -> Result<Self> {
        let mut lim: bindings::queue_limits = pin_init::zeroed();
        apply_limits(&mut lim, limits);
        // SAFETY: the tag set is allocated; `lim` is a valid limits struct;
        // queuedata is the tag set's driver data, which lives as long as the
        // tag set, which outlives the disk (we hold an `Arc`).
        let disk = from_err_ptr(unsafe {
            shim::blkfront_rs_blkmq_alloc_disk(
                tagset.raw().cast(),
                (&raw mut lim).cast(),
                (*tagset.raw()).driver_data,
            )
        })?
        .cast::<bindings::gendisk>();
        // INVARIANT: allocated above, reference owned.
        let this = Self {
            // SAFETY: `from_err_ptr` succeeded, so not null.
            disk: unsafe { NonNull::new_unchecked(disk) },
            added: false,
            tagset,
        };
        // SAFETY: the disk is not yet visible: exclusive access to its name.
        let buf = unsafe { &mut (*disk).disk_name };
        let mut w = NameWriter { buf, pos: 0 };
        w.write_fmt(name).map_err(|_| code::EINVAL)?;
        // SAFETY: the disk is valid.
        unsafe { bindings::set_capacity(disk, capacity) };
        if limits.read_only {
            // SAFETY: the disk is valid.
            unsafe { bindings::set_disk_ro(disk, true) };
        }
        Ok(this)
    }

    fn raw(&self) -> *mut bindings::gendisk {
        self.disk.as_ptr()
    }

    /// The tag set.
    pub fn tagset(&self) -> &Arc<TagSet<T>> {
        &self.tagset
    }

    /// CHS geometry for `HDIO_GETGEO` (default: sd-like values).
    pub fn set_geometry(&self, cylinders: u16, heads: u8, sectors: u8) {
        // SAFETY: the disk is valid and was allocated by the shim.
        unsafe {
            shim::blkfront_rs_blkmq_set_geometry(self.raw().cast(), cylinders, heads, sectors)
        }
    }

    /// `HDIO_GETGEO` asks `read(ctx, ..)` at each call (as virtio_blk
    /// reads the device's config then), until the disk is dropped; after
    /// that (an ioctl on a disk still open after its removal) it fails with
    /// `ENXIO`, as upstream's once its device is gone.
    ///
    /// # Safety
    ///
    /// `read` may be called with `ctx`, from process context and serialised
    /// with itself, until this `GenDisk` is dropped (its drop waits for a
    /// call in progress): `ctx` must stay valid for that long.
    pub unsafe fn set_geometry_source(
        &self,
        read: unsafe extern "C" fn(*mut core::ffi::c_void, *mut u16, *mut u8, *mut u8),
        ctx: *mut core::ffi::c_void,
    ) {
        // SAFETY: the disk is valid and was allocated by the shim; the
        // caller keeps `ctx` valid until `drop` forgets it.
        unsafe { shim::blkfront_rs_blkmq_set_geometry_source(self.raw().cast(), Some(read), ctx) }
    }

    /// `HDIO_GETGEO` as xen-blkfront answers it (`blkif_getgeo`): 255
    /// heads, 63 sectors per track and the cylinders that fit the current
    /// capacity (0xffff when they do not), computed at each call.
    pub fn set_xen_geometry(&self) {
        // SAFETY: the disk is valid and was allocated by the shim.
        unsafe { shim::blkfront_rs_blkmq_set_xen_geometry(self.raw().cast()) }
    }

    /// `ioctl` as xen-blkfront answers it (`blkif_ioctl`): the two CD-ROM
    /// ioctls that tools ask of any disk (`CDROMMULTISESSION`: zeros;
    /// `CDROM_GET_CAPABILITY`: success only for a CD-ROM), `EINVAL` for the
    /// rest. Without it every driver ioctl is `ENOTTY`.
    pub fn set_xen_ioctls(&self, cdrom: bool) {
        // SAFETY: the disk is valid and was allocated by the shim.
        unsafe { shim::blkfront_rs_blkmq_set_xen_ioctls(self.raw().cast(), cdrom) }
    }

    /// Removable media (`/sys/block/<disk>/removable`); before
    /// [`GenDisk::add`].
    pub fn set_removable(&mut self) -> Result {
        if self.added {
            return Err(code::EINVAL);
        }
        // SAFETY: the disk is valid and not added yet: nothing else reads
        // its flags.
        unsafe { shim::blkfront_rs_blkmq_set_removable(self.raw().cast()) };
        Ok(())
    }

    /// Serial number for `/sys/block/<disk>/serial` (at most 31 bytes kept);
    /// set it before [`GenDisk::add`]. The attribute exists once this was
    /// called, empty for an empty `serial`; never called, it is absent.
    pub fn set_serial(&self, serial: &[u8]) {
        // SAFETY: the disk is valid and was allocated by the shim; `serial`
        // is readable for its length.
        unsafe {
            shim::blkfront_rs_blkmq_set_serial(
                self.raw().cast(),
                serial.as_ptr().cast(),
                serial.len(),
            )
        }
    }

    /// Fixed device numbers (`major`:`first_minor`, `minors` of them for
    /// the disk and its partitions) instead of dynamic ones; before
    /// [`GenDisk::add`]. The caller owns `major` ([`BlockMajor`]) and keeps
    /// the minors unique.
    pub fn set_numbers(&mut self, major: u32, first_minor: u32, minors: u32) -> Result {
        if self.added || minors == 0 {
            return Err(code::EINVAL);
        }
        let conv = |v: u32| kernel::ffi::c_int::try_from(v).map_err(|_| code::EINVAL);
        let (ma, fi, mi) = (conv(major)?, conv(first_minor)?, conv(minors)?);
        // SAFETY: the disk is not yet added: exclusive access.
        unsafe {
            (*self.raw()).major = ma;
            (*self.raw()).first_minor = fi;
            (*self.raw()).minors = mi;
        }
        Ok(())
    }

    /// One more sysfs attribute group for the disk (e.g. virtio-blk's
    /// `cache_type`); before [`GenDisk::add`].
    pub fn set_attribute_group(&mut self, group: AttributeGroup) -> Result {
        if self.added {
            return Err(code::EINVAL);
        }
        // SAFETY: the disk is valid, allocated by the shim and not added;
        // the group is static (`AttributeGroup` invariant).
        unsafe { shim::blkfront_rs_blkmq_set_attr_group(self.raw().cast(), group.0) };
        Ok(())
    }

    /// Make the disk visible, as a child of `parent`.
    pub fn add(&mut self, parent: &Device) -> Result {
        if self.added {
            return Err(code::EBUSY);
        }
        // SAFETY: the disk is valid and not added; `parent` is a live device
        // (`Device` is a transparent wrapper of `struct device`).
        to_result(unsafe {
            shim::blkfront_rs_blkmq_add_disk(
                core::ptr::from_ref(parent).cast_mut().cast(),
                self.raw().cast(),
            )
        })?;
        self.added = true;
        Ok(())
    }

    /// The disk name (`vda`, ...).
    pub fn name(&self) -> &CStr {
        // SAFETY: `disk_name` is NUL-terminated (written by `new`) and lives
        // as long as the disk.
        unsafe { CStr::from_char_ptr((*self.raw()).disk_name.as_ptr()) }
    }

    /// Dispatch the requests given back with [`Request::requeue`]
    /// (`blk_mq_kick_requeue_list`).
    pub fn kick_requeue_list(&self) {
        // SAFETY: the disk and its queue are valid.
        unsafe { bindings::blk_mq_kick_requeue_list((*self.raw()).queue) };
    }

    /// Wait for every request in flight to end, then hold new ones in
    /// blk-mq (not failed, not sent to the driver) until
    /// [`GenDisk::resume_dispatch`]; when this returns no `queue_rq`,
    /// `commit_rqs` or `poll` of a request in flight is running. For a
    /// device reset or a system sleep (upstream's `virtblk_freeze_priv`,
    /// which does not wait for a dispatch in progress). Sleeps.
    pub fn stop_dispatch(&self) {
        // SAFETY: the disk and its queue are valid. Freezing waits for the
        // requests in flight; quiescing (with its RCU wait) for a dispatch
        // in progress; unfreezing lets new requests be allocated, to wait in
        // blk-mq. No allocation happens while frozen, so the noio flags of
        // `blk_mq_freeze_queue` are not needed.
        unsafe {
            let q = (*self.raw()).queue;
            bindings::blk_mq_freeze_queue_nomemsave(q);
            bindings::blk_mq_quiesce_queue(q);
            bindings::blk_mq_unfreeze_queue_nomemrestore(q);
        }
    }

    /// Dispatch again what [`GenDisk::stop_dispatch`] held.
    pub fn resume_dispatch(&self) {
        // SAFETY: the disk and its queue are valid; quiesced by
        // `stop_dispatch` (blk-mq counts quiesce depth).
        unsafe { bindings::blk_mq_unquiesce_queue((*self.raw()).queue) };
    }

    /// Resize and send a uevent (`set_capacity_and_notify`).
    pub fn set_capacity_and_notify(&self, sectors: u64) -> bool {
        // SAFETY: the disk is valid.
        unsafe { bindings::set_capacity_and_notify(self.raw(), sectors) }
    }

    /// The limits in force, as the block layer validated them, read back
    /// into the same type the driver asked with (`rotational` is always
    /// `Some`).
    pub fn applied_limits(&self) -> QueueLimits {
        // SAFETY: the disk and its queue are valid; a racy read of plain
        // integers is acceptable for reporting.
        let l = unsafe { &(*(*self.raw()).queue).limits };
        // SAFETY: the disk is valid.
        let read_only = unsafe { shim::blkfront_rs_blkmq_get_disk_ro(self.raw().cast()) };
        let feature = |bit: u32| l.features & bit != 0;
        QueueLimits {
            logical_block_size: l.logical_block_size,
            physical_block_size: l.physical_block_size,
            alignment_offset: l.alignment_offset,
            io_min: l.io_min,
            io_opt: l.io_opt,
            max_hw_sectors: l.max_hw_sectors,
            max_segments: u32::from(l.max_segments),
            max_segment_size: l.max_segment_size,
            seg_boundary_mask: u64::try_from(l.seg_boundary_mask).unwrap_or(u64::MAX),
            discard_granularity: l.discard_granularity,
            discard_alignment: l.discard_alignment,
            max_discard_sectors: l.max_hw_discard_sectors,
            max_discard_segments: u32::from(l.max_discard_segments),
            max_secure_erase_sectors: l.max_secure_erase_sectors,
            max_write_zeroes_sectors: l.max_write_zeroes_sectors,
            rotational: Some(feature(shim::BLKFRONT_RS_BLK_FEAT_ROTATIONAL)),
            read_only,
            write_cache: feature(shim::BLKFRONT_RS_BLK_FEAT_WRITE_CACHE),
            fua: feature(shim::BLKFRONT_RS_BLK_FEAT_FUA),
        }
    }

    /// Changes the live queue's limits: `f` edits the limits in force
    /// (`queue_limits_start_update` / `queue_limits_commit_update`, queue
    /// not frozen, as upstream drivers do on a reconfiguration).
    fn update_limits_with(&self, f: impl FnOnce(&mut bindings::queue_limits)) -> Result {
        let mut lim: bindings::queue_limits = pin_init::zeroed();
        // SAFETY: the disk is valid; start/commit bracket the update and
        // `commit` releases the limits lock taken by `start`.
        unsafe {
            shim::blkfront_rs_blkmq_limits_start_update(self.raw().cast(), (&raw mut lim).cast());
        }
        f(&mut lim);
        // SAFETY: as above: ends the update started above.
        to_result(unsafe { bindings::queue_limits_commit_update((*self.raw()).queue, &mut lim) })
    }

    /// Turn the volatile write cache flag on or off (e.g. after a config
    /// change of the device's cache mode).
    pub fn set_write_cache(&self, on: bool) -> Result {
        self.update_limits_with(|lim| {
            if on {
                lim.features |= shim::BLKFRONT_RS_BLK_FEAT_WRITE_CACHE;
            } else {
                lim.features &= !shim::BLKFRONT_RS_BLK_FEAT_WRITE_CACHE;
            }
        })
    }

    /// Applies `limits` to the live disk (a device that reconnected with
    /// other features: write cache, FUA, discard, read-only). The caller
    /// checks that requests built under the old limits still fit.
    pub fn update_limits(&self, limits: &QueueLimits) -> Result {
        self.update_limits_with(|lim| apply_limits(lim, limits))?;
        // SAFETY: the disk is valid.
        unsafe { bindings::set_disk_ro(self.raw(), limits.read_only) };
        Ok(())
    }
}

impl<T: Operations> Drop for GenDisk<T> {
    fn drop(&mut self) {
        // SAFETY: the disk is valid and ours (type invariant); `del_gendisk`
        // only if added, then drop our reference. In-flight I/O is drained
        // by `del_gendisk`. The tag set outlives this (field dropped after).
        unsafe {
            // A geometry source's context may go with us: calls on a disk
            // still open fail from now on.
            shim::blkfront_rs_blkmq_forget_geometry(self.raw().cast());
            if self.added {
                bindings::del_gendisk(self.raw());
            }
            shim::blkfront_rs_blkmq_put_disk(self.raw().cast(), self.added);
        }
    }
}

/// Writes a NUL-terminated name into a fixed buffer, failing when it does
/// not fit.
struct NameWriter<'a> {
    buf: &'a mut [kernel::ffi::c_char],
    pos: usize,
}

impl Write for NameWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.pos + 1 >= self.buf.len() {
                return Err(fmt::Error);
            }
            self.buf[self.pos] = b as kernel::ffi::c_char;
            self.pos += 1;
        }
        self.buf[self.pos] = 0;
        Ok(())
    }
}
