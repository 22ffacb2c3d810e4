// SPDX-License-Identifier: GPL-2.0

//! virtio-blk requests on top of our blk-mq abstraction: the request header
//! and status byte (include/uapi/linux/virtio_blk.h), the discard /
//! write-zeroes range, and a typed virtqueue whose tokens are blk-mq
//! requests.
//!
//! A request's header, range, status byte and their scatterlist entries live
//! in its blk-mq PDU ([`BlkReq`]), the data in the request's own
//! scatterlist; the request handle itself is the virtqueue token, so the
//! buffers stay untouched from `submit` until the device returns them.
//!
//! The serial (`VIRTIO_BLK_T_GET_ID`) is the one request sent outside
//! blk-mq ([`IdRequest`]), so that waiting for it can have a deadline.

use core::{
    marker::PhantomData,
    mem::MaybeUninit,
    ptr::NonNull,
    sync::atomic::Ordering, //
};

use kernel::{
    bindings,
    prelude::*,
    sync::Arc, //
};

use super::{
    shim,
    Device,
    Notifier,
    Reset,
    Virtqueue, //
};
use crate::blkcore::virtio::request::{
    encode_ranges,
    RequestStatus,
    OUTHDR_BYTES,
    RANGE_BYTES, //
};
pub use crate::blkcore::virtio::request::{
    Command,
    STATUS_NOT_WRITTEN,
    VIRTIO_BLK_ID_BYTES, //
};
mod id;
pub use id::IdRequest;

use crate::blkmq::{
    AttributeGroup,
    GenDisk,
    Operations,
    Request,
    Status, //
};

/// Add `disk` under virtio device `dev` with virtio-blk's own disk
/// attributes: `cache_type` as upstream's (write back / write through from
/// the device's `wce`, else from FLUSH; writable with `CONFIG_WCE`, the
/// device's mode and the live queue's write cache flag then follow).
pub fn add_disk<T: Operations>(disk: &mut GenDisk<T>, dev: &Device) -> Result {
    // SAFETY: the group is static and its callbacks find the virtio device
    // as the disk's parent, which the `add` below makes it.
    let group = unsafe { AttributeGroup::from_raw(shim::blkfront_rs_virtio_blk_attr_group()) };
    disk.set_attribute_group(group)?;
    disk.add(dev.as_dev())
}

/// `HDIO_GETGEO` on `disk` reads `dev`'s `geometry` config at each call,
/// as upstream's `virtblk_getgeo` (only for a device that negotiated
/// `VIRTIO_BLK_F_GEOMETRY`); `ENXIO` once the disk is dropped.
///
/// `disk` must belong to `dev`'s driver data (`Driver::probe`'s result):
/// it is then dropped at the latest with that data, while the device is
/// still bound.
pub fn read_geometry_at_getgeo<T: Operations>(disk: &GenDisk<T>, dev: &Device) {
    // SAFETY: the shim reads the config space of the live device `dev`,
    // which outlives `disk` (see above); `GenDisk`'s drop forgets the
    // source, waiting for a call in progress.
    unsafe { disk.set_geometry_source(shim::blkfront_rs_virtio_blk_geometry, dev.raw().cast()) }
}

/// The largest logical block size the running kernel's block layer takes
/// (`BLK_MAX_BLOCK_SIZE`: 64 KiB with large folios, else a page).
pub fn max_block_size() -> u32 {
    // SAFETY: reads a compile-time constant; no state.
    unsafe { shim::blkfront_rs_blk_max_block_size() }
}

/// The block layer's status for the device's status byte
/// ([`RequestStatus::from_byte`]).
pub fn status_to_blk(status: u8) -> Status {
    match RequestStatus::from_byte(status) {
        RequestStatus::Ok => Status::OK,
        RequestStatus::Unsupported => Status::NOTSUPP,
        RequestStatus::IoError => Status::IOERR,
    }
}

/// The blk-mq per-request data of a virtio-blk request.
pub struct BlkReq {
    /// `struct virtio_blk_outhdr`, encoded by blkcore.
    hdr: [u8; OUTHDR_BYTES],
    /// The `struct virtio_blk_discard_write_zeroes` ranges of a discard,
    /// write-zeroes or secure-erase request (one per bio of a discard the
    /// block layer merged, else one), encoded by blkcore: a `KVec<u8>`'s
    /// raw parts (pointer, length, capacity), null for other requests.
    /// Allocated by [`prepare`] (as upstream's), freed by [`release`].
    ranges: *mut u8,
    ranges_len: u32,
    ranges_cap: u32,
    nsg: u32,
    status: u8,
    data_out: bool,
}

// What is in the PDU is allocated for every request of every queue from
// probe on, in flight or not, so it holds what upstream's `virtblk_req`
// holds and no more: with the tag set's `SgChain` (16 bytes) and 2 inline
// entries the PDU is upstream's 120 bytes, and request plus PDU fills the
// same cache-line-rounded slot on any kernel. The scatterlist entries of
// the header, ranges and status live on `BlkVq::submit`'s stack (as
// upstream's: the ring reads them only while adding the request), a
// single range in the ranges' allocation (as upstream's). With the three
// entries and an inline range here, request plus PDU took two cache lines
// more than upstream's (512 bytes against 384 on the test kernel).
const _: () = assert!(core::mem::size_of::<BlkReq>() <= 40);

// SAFETY: integers, bools and a raw pointer (null: no ranges): all-zero is
// valid.
unsafe impl Zeroable for BlkReq {}

// SAFETY: the `ranges` buffer is owned by the request data alone (it moves
// with the request between CPUs); the rest is plain data.
unsafe impl Send for BlkReq {}

impl BlkReq {
    /// The status byte the device wrote (valid after completion).
    pub fn status(&self) -> Status {
        status_to_blk(self.status)
    }

    /// The status byte, if it is none virtio-blk defines (valid after
    /// completion): [`STATUS_NOT_WRITTEN`] if the device never wrote it.
    pub fn undefined_status(&self) -> Option<u8> {
        (!RequestStatus::is_defined(self.status)).then_some(self.status)
    }
}

/// Fill in `rq`'s header (and range), map its data and start it. `le`:
/// the device's byte order ([`super::Device::is_little_endian`]).
/// `Err` means the request could not be prepared: return that status.
pub fn prepare<T: Operations<RequestData = BlkReq>>(
    rq: &mut Request<T>,
    cmd: Command,
    le: bool,
) -> core::result::Result<(), Status> {
    let (pos, nr) = (rq.sector(), rq.sectors());
    let e = cmd.encode(pos, nr, u32::from(rq.ioprio()), le);
    // The ranges in a buffer of their own, as upstream (`kmalloc` in atomic
    // context; without memory the request is retried later): one, or for a
    // discard the block layer merged from several bios (the queue allows
    // several discard segments, `max_discard_seg`) one per bio.
    if let Some(range) = e.range {
        let segments = rq.nr_phys_segments();
        let buf = if cmd == Command::Discard && segments > 1 {
            let flags = cmd.range_flags().unwrap_or(0);
            let len = segments as usize * RANGE_BYTES;
            let mut buf = KVec::with_capacity(len, GFP_ATOMIC).map_err(|_| Status::RESOURCE)?;
            buf.resize(len, 0, GFP_ATOMIC)
                .map_err(|_| Status::RESOURCE)?;
            // As many bios as segments, or the request is not what the
            // block layer promised (upstream WARNs): fail it rather than
            // send it.
            encode_ranges(rq.bio_ranges(), flags, &mut buf).ok_or(Status::IOERR)?;
            buf
        } else {
            let mut buf =
                KVec::with_capacity(RANGE_BYTES, GFP_ATOMIC).map_err(|_| Status::RESOURCE)?;
            buf.extend_from_slice(&range, GFP_ATOMIC)
                .map_err(|_| Status::RESOURCE)?;
            buf
        };
        // At most 65535 segments of 16 bytes: u32 holds them.
        let len = u32::try_from(buf.len()).map_err(|_| Status::IOERR)?;
        let cap = u32::try_from(buf.capacity()).map_err(|_| Status::IOERR)?;
        // Held by the request data from here: `release` frees it however
        // the request goes back.
        let d = rq.data_mut();
        (d.ranges, _, _) = buf.into_raw_parts();
        (d.ranges_len, d.ranges_cap) = (len, cap);
    }
    let nsg = if e.has_data {
        rq.map_sg().map_err(|e| {
            if e == ENOMEM {
                Status::RESOURCE
            } else {
                Status::IOERR
            }
        })?
    } else {
        0
    };
    let d = rq.data_mut();
    d.hdr = e.hdr;
    d.status = STATUS_NOT_WRITTEN;
    d.data_out = e.data_out;
    d.nsg = nsg;
    rq.start();
    Ok(())
}

/// Free what [`prepare`] allocated for the request (the ranges of a
/// discard, write-zeroes or secure erase): the driver's
/// `blkmq::Operations::release`.
pub fn release(d: &mut BlkReq) {
    if d.ranges.is_null() {
        return;
    }
    // SAFETY: `ranges` holds the raw parts of a `KVec<u8>` from `prepare`
    // (type field doc), not freed yet: rebuilt once, then forgotten here.
    drop(unsafe { KVec::from_raw_parts(d.ranges, d.ranges_len as usize, d.ranges_cap as usize) });
    d.ranges = core::ptr::null_mut();
    (d.ranges_len, d.ranges_cap) = (0, 0);
}

/// A virtqueue whose buffers are virtio-blk requests of blk-mq driver `T`
/// (and at most one [`IdRequest`]). Between a freeze and the restore it has
/// no virtqueue ([`BlkVq::surrender`], [`BlkVq::attach`]): submissions fail
/// with `ENODEV`, completions find nothing.
///
/// # Invariants
///
/// Every token in the virtqueue is a `Request<T>` added by `submit`, or the
/// address of `id`'s [`IdRequest`], added by `submit_get_id`; `id` holds it
/// while the device may use its buffers.
pub struct BlkVq<T: Operations<RequestData = BlkReq>> {
    vq: Option<Virtqueue>,
    /// A virtqueue held but not used (a restore found it too small):
    /// submissions are refused as without one; given back at a freeze.
    parked: Option<Virtqueue>,
    /// The GET_ID request the device holds, if any.
    id: Option<Arc<IdRequest>>,
    /// GET_ID answers that came after their waiter gave up.
    late_id_answers: u32,
    /// The device was reset to take its requests back
    /// ([`BlkVq::take_back_after_reset`]): nothing is added any more.
    failed: bool,
    _p: PhantomData<T>,
}

impl<T: Operations<RequestData = BlkReq>> BlkVq<T> {
    /// Use `vq` (fresh from `find_vqs`, no buffers) for virtio-blk requests.
    pub fn new(vq: Virtqueue) -> Self {
        Self {
            vq: Some(vq),
            parked: None,
            id: None,
            late_id_answers: 0,
            failed: false,
            _p: PhantomData,
        }
    }

    /// Send `req` (made by [`IdRequest::new`]; each is sent once). Without
    /// a notification: send one with [`BlkVq::kick_prepare`]. `EBUSY` if
    /// `req` was sent before or another GET_ID is outstanding here,
    /// `ENOSPC` if the ring is full.
    pub fn submit_get_id(&mut self, req: &Arc<IdRequest>) -> Result {
        let Some(vq) = self.vq.as_mut().filter(|_| !self.failed) else {
            return Err(ENODEV);
        };
        if self.id.is_some() || req.submitted.swap(true, Ordering::Relaxed) {
            return Err(EBUSY);
        }
        let sgs = req.sgs.get().cast::<bindings::scatterlist>();
        let mut ptrs: [*mut bindings::scatterlist; 3] = [core::ptr::null_mut(); 3];
        let bufs: [(*const u8, u32); 3] = [
            (core::ptr::from_ref(&req.hdr).cast(), OUTHDR_BYTES as u32),
            (req.id.get().cast_const().cast(), VIRTIO_BLK_ID_BYTES as u32),
            (req.status.get().cast_const(), 1),
        ];
        for (i, (buf, len)) in bufs.into_iter().enumerate() {
            ptrs[i] = sgs.wrapping_add(i);
            // SAFETY: `ptrs[i]` is one of the 3 entries of `sgs`, written
            // only here, once (`submitted`); the buffers are fields of the
            // `Arc` allocation (kmalloc: mappable), which `self.id` keeps
            // alive while the device may use them.
            unsafe { bindings::sg_init_one(ptrs[i], buf.cast(), len) };
        }
        let token = NonNull::from(&**req).cast();
        // SAFETY: see above; the CPU does not touch `id` or `status` until
        // the device returns the token (`answer`), nor frees them before
        // (`self.id`, type invariant).
        unsafe { vq.add_sgs(&mut ptrs, 1, token) }?;
        self.id = Some(req.clone());
        Ok(())
    }

    /// Give the virtqueue back (after a freeze, the device reset and
    /// [`BlkVq::reclaim`]), so that it can be deleted; `None` if already
    /// given.
    pub fn surrender(&mut self) -> Option<Virtqueue> {
        self.vq.take().or_else(|| self.parked.take())
    }

    /// Hold `vq` (fresh from `find_vqs`, no buffers) without using it:
    /// submissions fail with `ENODEV` as without a virtqueue, and
    /// [`BlkVq::surrender`] gives it back.
    pub fn park(&mut self, vq: Virtqueue) {
        self.parked = Some(vq);
    }

    /// Use `vq` (fresh from `find_vqs` at a restore, no buffers).
    pub fn attach(&mut self, vq: Virtqueue) {
        self.vq = Some(vq);
    }

    /// Take back what the device still held now that it was reset (it no
    /// longer writes to it): the GET_ID request it never answered (true if
    /// there was one) and the ring's bookkeeping for it.
    pub fn reclaim(&mut self, reset: &Reset) -> bool {
        while let Some(token) = self.vq.as_mut().and_then(|vq| vq.detach_unused_buf(reset)) {
            let is_id = self
                .id
                .as_ref()
                .is_some_and(|id| core::ptr::eq(Arc::as_ptr(id).cast(), token.as_ptr()));
            if !is_id {
                // A blk-mq request: impossible after `del_gendisk` drained
                // them, and its tag set may be gone: leave it alone.
                pr_warn!("request still owned by the device at reset: not completed\n");
            }
        }
        // The device is reset: whether or not it was still in the ring, the
        // GET_ID buffer is ours again.
        self.id.take().is_some()
    }

    /// After a [`Resetter::reset`] while requests were in flight (the
    /// driver gave up on the device): take back one request the device
    /// held, for the driver to end with an error; `None` once there are
    /// none. A GET_ID it held is taken back too (its waiter times out).
    /// From the first call on, [`BlkVq::submit`] and
    /// [`BlkVq::submit_get_id`] refuse with `ENODEV`: the device is reset
    /// and would never answer.
    ///
    /// [`Resetter::reset`]: super::Resetter::reset
    pub fn take_back_after_reset(&mut self, reset: &Reset) -> Option<Request<T>> {
        self.failed = true;
        loop {
            let token = self.vq.as_mut()?.detach_unused_buf(reset)?;
            let is_id = self
                .id
                .as_ref()
                .is_some_and(|id| core::ptr::eq(Arc::as_ptr(id).cast(), token.as_ptr()));
            if is_id {
                // Reset: the GET_ID buffer is ours again; its waiter gives
                // up at its timeout.
                self.id = None;
                continue;
            }
            // SAFETY: every other token is a `Request<T>` added by `submit`
            // (type invariant) that the device never returned; reset, it no
            // longer uses its buffers.
            return Some(unsafe { Request::from_raw(token) });
        }
    }

    /// GET_ID answers that arrived after their waiter gave up (and were
    /// dropped).
    pub fn late_id_answers(&self) -> u32 {
        self.late_id_answers
    }

    /// Add a prepared request. On failure (`ENOSPC`: ring full, `ENOMEM`)
    /// the request is given back.
    pub fn submit(&mut self, rq: Request<T>) -> core::result::Result<(), (Request<T>, Error)> {
        let Some(vq) = self.vq.as_mut().filter(|_| !self.failed) else {
            return Err((rq, ENODEV));
        };
        let p = rq.data_ptr();
        let data_sg = rq.sg_ptr();
        // Header, range and status entries: read by the ring only during
        // `add_sgs` (see there), so on the stack (see `BlkReq`).
        let mut hdr_sg = MaybeUninit::<bindings::scatterlist>::uninit();
        let mut range_sg = MaybeUninit::<bindings::scatterlist>::uninit();
        let mut status_sg = MaybeUninit::<bindings::scatterlist>::uninit();
        let mut sgs: [*mut bindings::scatterlist; 4] = [core::ptr::null_mut(); 4];
        let mut n = 0;
        // SAFETY: `p` is this request's PDU, owned through `rq`; the header,
        // range and status buffers are in it (or the ranges' own
        // allocation, owned by it), and stay untouched until the token
        // comes back from `complete_one` (the request handle is the token),
        // or the reset. `sg_init_one` initialises each stack entry it is
        // given before `add_sgs` reads it.
        let (nsg, data_out) = unsafe {
            bindings::sg_init_one(
                hdr_sg.as_mut_ptr(),
                (&raw const (*p).hdr).cast(),
                OUTHDR_BYTES as u32,
            );
            sgs[n] = hdr_sg.as_mut_ptr();
            n += 1;
            if !(*p).ranges.is_null() {
                bindings::sg_init_one(
                    range_sg.as_mut_ptr(),
                    (*p).ranges.cast_const().cast(),
                    (*p).ranges_len,
                );
                sgs[n] = range_sg.as_mut_ptr();
                n += 1;
            }
            ((*p).nsg, (*p).data_out)
        };
        let mut out = n as u32;
        if nsg > 0 {
            sgs[n] = data_sg;
            n += 1;
            if data_out {
                out += 1;
            }
        }
        // SAFETY: as above.
        unsafe {
            bindings::sg_init_one(status_sg.as_mut_ptr(), (&raw const (*p).status).cast(), 1);
        }
        sgs[n] = status_sg.as_mut_ptr();
        n += 1;
        let token = rq.into_raw();
        // SAFETY: the entries are initialised and live until the call
        // returns; the buffers they describe stay valid and untouched while
        // the device owns `token` (see above); the token is a `Request<T>`
        // (invariant).
        match unsafe { vq.add_sgs(&mut sgs[..n], out, token) } {
            Ok(()) => Ok(()),
            // SAFETY: the device did not take the token: ours again.
            Err(e) => Err((unsafe { Request::from_raw(token) }, e)),
        }
    }

    /// Prepare a notification (under the lock); send it after unlocking.
    pub fn kick_prepare(&mut self) -> Option<Notifier> {
        self.vq.as_mut()?.kick_prepare()
    }

    /// Take back one request the device finished. A GET_ID answer on the
    /// way is handed to its waiter (or dropped if it gave up).
    pub fn complete_one(&mut self) -> Option<Request<T>> {
        loop {
            let (token, _len) = self.vq.as_mut()?.get_buf()?;
            let is_id = self
                .id
                .as_ref()
                .is_some_and(|id| core::ptr::eq(Arc::as_ptr(id).cast(), token.as_ptr()));
            if is_id {
                if let Some(id) = self.id.take() {
                    if id.answer() {
                        self.late_id_answers = self.late_id_answers.saturating_add(1);
                    }
                }
                continue;
            }
            // SAFETY: every other token is a `Request<T>` added by `submit`
            // (type invariant), returned once by the device.
            return Some(unsafe { Request::from_raw(token) });
        }
    }

    /// Disable used-buffer interrupts.
    pub fn disable_cb(&mut self) {
        if let Some(vq) = self.vq.as_mut() {
            vq.disable_cb();
        }
    }

    /// Re-enable used-buffer interrupts; false if buffers arrived meanwhile.
    pub fn enable_cb(&mut self) -> bool {
        self.vq.as_mut().is_none_or(|vq| vq.enable_cb())
    }
}

impl<T: Operations<RequestData = BlkReq>> Drop for BlkVq<T> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            // Not reclaimed after a reset: the device may still write into
            // the buffers, so they must not be freed. Does not happen with
            // `Registration` (it resets the device and calls
            // `Driver::reclaim` before the driver data goes).
            pr_warn!("GET_ID buffer still owned by the device at teardown: leaked\n");
            core::mem::forget(id);
        }
    }
}
