// SPDX-License-Identifier: GPL-2.0

//! [`Request`]: the driver's handle on one block request, its data and
//! scatterlist.
//!
//! The PDU is `RequestData`, then [`SgChain`], then the request's inline
//! scatterlist (the tag set's `inline_sg` entries; none for a driver that
//! walks the pages, [`Request::page_runs`]). A request with more
//! data segments than that (a queue whose `max_segments` is larger) gets a
//! chained table from the kernel's scatterlist pools for the time it is in
//! flight (`sg_alloc_table_chained`, the inline entries as its first chunk,
//! as SCSI and NVMe do): no allocation for the common case, and none kept
//! per request for the rare large one.

use super::*;

/// The chained table of a request whose segments do not fit inline.
///
/// # Invariants
///
/// `table.sgl` is null, or a table from `sg_alloc_table_chained` whose first
/// chunk is the request's inline entries (the tag set's `inline_sg`); freed
/// (and the inline entries re-initialised) before the request goes back to
/// blk-mq.
///
/// The inline count is the tag set's, not kept here: every byte of the PDU
/// is allocated for each request of each queue (blk-mq rounds request plus
/// PDU up to a cache line), in flight or not.
#[repr(C)]
pub(super) struct SgChain {
    table: bindings::sg_table,
}

const fn align_up(n: usize, a: usize) -> usize {
    n.div_ceil(a) * a
}

/// Offset of the [`SgChain`] behind `RequestData` in the PDU.
pub(super) const fn chain_offset<R>() -> usize {
    align_up(size_of::<R>(), align_of::<SgChain>())
}

/// Offset of the inline scatterlist behind the [`SgChain`] in the PDU.
pub(super) const fn sg_offset<R>() -> usize {
    align_up(
        chain_offset::<R>() + size_of::<SgChain>(),
        align_of::<bindings::scatterlist>(),
    )
}

/// The PDU of `rq`: the `cmd_size` bytes blk-mq allocates right behind
/// each request. This is what `blk_mq_rq_to_pdu` does (`return rq + 1;`),
/// written out because the kernel crate's binding of that inline function
/// is an out-of-line helper call, and a request's handle reaches its PDU
/// several times per dispatch.
///
/// # Safety
///
/// `rq` must point to a request allocated by a tag set.
pub(super) unsafe fn pdu(rq: *mut bindings::request) -> *mut u8 {
    // SAFETY: blk-mq allocates `sizeof(struct request) + cmd_size` bytes
    // per request of a tag set (the caller's request), and the bindings'
    // `request` has the C layout of this kernel tree, so one past it is
    // the PDU, in the same allocation.
    unsafe { rq.add(1).cast() }
}

/// Owned handle on one request of a driver `T`.
///
/// # Invariants
///
/// `ptr` points to a live `struct request` allocated by a tag set of
/// `T` (so its PDU is a zeroed-then-driver-owned `T::RequestData` followed by
/// the tag set's scatterlist) that the block layer handed to the driver and
/// that has not been ended; at most one `Request` exists per request.
pub struct Request<T: Operations> {
    ptr: NonNull<bindings::request>,
    _p: PhantomData<T>,
}

// SAFETY: A request may be queued on one CPU and completed on another; the
// handle is unique, and `T::RequestData: Send`.
unsafe impl<T: Operations> Send for Request<T> {}

impl<T: Operations> Request<T> {
    /// # Safety
    ///
    /// `ptr` must satisfy the type invariants, and the caller gives up its
    /// own handle on the request.
    pub(super) unsafe fn from_ptr(ptr: *mut bindings::request) -> Self {
        Self {
            // SAFETY: blk-mq never passes a null request.
            ptr: unsafe { NonNull::new_unchecked(ptr) },
            _p: PhantomData,
        }
    }

    pub(super) fn raw(&self) -> *mut bindings::request {
        self.ptr.as_ptr()
    }

    /// Give the handle away as an opaque token (e.g. a virtqueue cookie).
    pub fn into_raw(self) -> NonNull<c_void> {
        self.ptr.cast()
    }

    /// Take a handle back from [`Request::into_raw`].
    ///
    /// # Safety
    ///
    /// `token` must come from `into_raw` on a `Request<T>` and be used once.
    pub unsafe fn from_raw(token: NonNull<c_void>) -> Self {
        // INVARIANT: the token was a valid `Request<T>` handle, given back once.
        Self {
            ptr: token.cast(),
            _p: PhantomData,
        }
    }

    /// The operation.
    pub fn op(&self) -> ReqOp {
        // SAFETY: `self.raw()` is a live request (type invariant).
        let flags = unsafe { (*self.raw()).cmd_flags };
        let op = flags & ((1u32 << bindings::REQ_OP_BITS) - 1);
        match op {
            bindings::req_op_REQ_OP_READ => ReqOp::Read,
            bindings::req_op_REQ_OP_WRITE => ReqOp::Write,
            bindings::req_op_REQ_OP_FLUSH => ReqOp::Flush,
            bindings::req_op_REQ_OP_DISCARD => ReqOp::Discard,
            bindings::req_op_REQ_OP_SECURE_ERASE => ReqOp::SecureErase,
            bindings::req_op_REQ_OP_WRITE_ZEROES => ReqOp::WriteZeroes,
            bindings::req_op_REQ_OP_DRV_IN => ReqOp::DrvIn,
            bindings::req_op_REQ_OP_DRV_OUT => ReqOp::DrvOut,
            other => ReqOp::Other(other),
        }
    }

    /// `REQ_NOUNMAP`: a write-zeroes that must not deallocate.
    pub fn no_unmap(&self) -> bool {
        // SAFETY: `self.raw()` is a live request (type invariant).
        let flags = unsafe { (*self.raw()).cmd_flags };
        flags & (1u32 << bindings::req_flag_bits___REQ_NOUNMAP) != 0
    }

    /// `REQ_FUA`: the data must be on stable storage when the request
    /// completes (only sent when the queue advertises FUA).
    pub fn is_fua(&self) -> bool {
        // SAFETY: `self.raw()` is a live request (type invariant).
        let flags = unsafe { (*self.raw()).cmd_flags };
        flags & (1u32 << bindings::req_flag_bits___REQ_FUA) != 0
    }

    /// First sector (512 bytes) of the request (`blk_rq_pos`).
    pub fn sector(&self) -> u64 {
        // SAFETY: `self.raw()` is a live request (type invariant).
        unsafe { (*self.raw()).__sector }
    }

    /// Length in bytes (`blk_rq_bytes`).
    pub fn bytes(&self) -> u32 {
        // SAFETY: `self.raw()` is a live request (type invariant).
        unsafe { (*self.raw()).__data_len }
    }

    /// Length in 512-byte sectors (`blk_rq_sectors`).
    pub fn sectors(&self) -> u32 {
        self.bytes() >> 9
    }

    /// I/O priority (`req_get_ioprio`).
    pub fn ioprio(&self) -> u16 {
        // SAFETY: `self.raw()` is a live request (type invariant), its `bio`
        // null or live.
        unsafe {
            let bio = (*self.raw()).bio;
            if bio.is_null() {
                0
            } else {
                (*bio).bi_ioprio
            }
        }
    }

    /// (first sector, sectors) of each bio of the request
    /// (`__rq_for_each_bio`): the ranges of a discard the block layer merged
    /// from several bios when the queue allows several discard segments
    /// (then it counts them in `nr_phys_segments`).
    pub fn bio_ranges(&self) -> BioRanges<'_> {
        BioRanges {
            // SAFETY: `self.raw()` is a live request (type invariant).
            bio: unsafe { (*self.raw()).bio },
            _rq: PhantomData,
        }
    }

    /// Number of data segments (`blk_rq_nr_phys_segments`).
    pub fn nr_phys_segments(&self) -> u32 {
        // SAFETY: `self.raw()` is a live request (type invariant).
        u32::from(unsafe { (*self.raw()).nr_phys_segments })
    }

    /// The driver's per-request data.
    pub fn data(&self) -> &T::RequestData {
        // SAFETY: the PDU starts with an initialised `T::RequestData`
        // (zeroed in `init_request`), owned by this unique handle.
        unsafe { &*pdu(self.raw()).cast::<T::RequestData>() }
    }

    /// The driver's per-request data, mutably.
    pub fn data_mut(&mut self) -> &mut T::RequestData {
        // SAFETY: as in `data`; `&mut self` makes the access exclusive.
        unsafe { &mut *pdu(self.raw()).cast::<T::RequestData>() }
    }

    /// The request's scatterlist as [`Request::map_sg`] filled it: the
    /// inline entries, or the chained table that starts with them. For
    /// rust/ abstractions that hand it to hardware.
    pub fn sg_ptr(&self) -> *mut bindings::scatterlist {
        let chain = self.sg_chain();
        // SAFETY: `chain` is this request's `SgChain` (see `sg_chain`).
        let sgl = unsafe { (*chain).table.sgl };
        if sgl.is_null() {
            self.inline_sg()
        } else {
            sgl
        }
    }

    /// Whether the mapped data took a chained table (more segments than the
    /// tag set's inline `max_segments`).
    pub fn sg_chained(&self) -> bool {
        // SAFETY: `sg_chain` gives this request's `SgChain`.
        unsafe { !(*self.sg_chain()).table.sgl.is_null() }
    }

    fn sg_chain(&self) -> *mut SgChain {
        // SAFETY: the PDU is `cmd_size` bytes: `T::RequestData`, the
        // `SgChain` at `chain_offset`, the inline scatterlist (`TagSet::new`).
        unsafe { pdu(self.raw()).add(chain_offset::<T::RequestData>()).cast() }
    }

    fn inline_sg(&self) -> *mut bindings::scatterlist {
        // SAFETY: as in `sg_chain`.
        unsafe { pdu(self.raw()).add(sg_offset::<T::RequestData>()).cast() }
    }

    /// What the request took for one dispatch, given back on every way it
    /// goes back to blk-mq (ended, requeued, rejected, given back): its
    /// chained table and what the driver's [`Operations::release`] frees.
    pub(super) fn release(&mut self) {
        self.release_sg();
        T::release(self.data_mut());
    }

    /// Give back a chained table, if [`Request::map_sg`] took one, and make
    /// the inline entries a plain table again (the chain link was written
    /// into their last entry).
    fn release_sg(&mut self) {
        #[cfg(CONFIG_SG_POOL)]
        {
            let chain = self.sg_chain();
            // SAFETY: `chain` is this request's `SgChain`.
            if unsafe { (*chain).table.sgl.is_null() } {
                return;
            }
            let inline = self.tag_set().inline_sg;
            // SAFETY: the table came from `sg_alloc_table_chained` with the
            // `inline` inline entries as its first chunk (type invariant of
            // `SgChain`), and nothing uses it any more.
            unsafe {
                bindings::sg_free_table_chained(&raw mut (*chain).table, inline);
                (*chain).table = pin_init::zeroed();
                bindings::sg_init_table(self.inline_sg(), inline);
            }
            self.tag_set().sg_chains_out.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Take a chained table of `nsegs` entries whose first chunk is the
    /// `inline` inline entries.
    #[cfg(CONFIG_SG_POOL)]
    fn chain_sg(&mut self, nsegs: u32, inline: u32) -> Result {
        let chain = self.sg_chain();
        let n = kernel::ffi::c_int::try_from(nsegs).map_err(|_| code::EINVAL)?;
        // SAFETY: `chain` is this request's `SgChain`, its table unused (a
        // request goes back to blk-mq only through `release`, which gives
        // a table back); the first chunk is the request's `inline` inline
        // entries (the tag set's `inline_sg`). On failure the call frees
        // what it took and leaves `sgl` null, but may have written to the
        // inline entries.
        let ret = unsafe {
            bindings::sg_alloc_table_chained(&raw mut (*chain).table, n, self.inline_sg(), inline)
        };
        if ret != 0 {
            // SAFETY: the inline entries, no longer part of any table.
            unsafe { bindings::sg_init_table(self.inline_sg(), inline) };
            return Err(code::ENOMEM);
        }
        self.tag_set().sg_chains_out.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn tag_set(&self) -> &TagSet<T> {
        // SAFETY: the request belongs to a queue of a `TagSet<T>`, whose
        // first field is the `blk_mq_tag_set` (`#[repr(C)]`), alive while
        // any of its requests is.
        unsafe { &*(*(*self.raw()).q).tag_set.cast::<TagSet<T>>() }
    }

    /// Pointer to the driver data, for rust/ abstractions that hand parts of
    /// it to hardware (headers, status bytes).
    pub fn data_ptr(&self) -> *mut T::RequestData {
        // SAFETY: `self.raw()` is a live request (type invariant).
        unsafe { pdu(self.raw()).cast() }
    }

    /// The runs of the request's data inside one page, in order (the
    /// single-page `bio_vec`s of its bios, as `rq_for_each_segment` walks
    /// them), read through `buf` (the caller's, so that the iterator
    /// itself is two words to move). For drivers that need the pages, not
    /// a scatterlist: no `blk_rq_map_sg` into the PDU to read back. Two
    /// runs may be contiguous in one page (the block layer merged bios
    /// there); merging them is the caller's. `EIO` for a request whose data
    /// is not its bios (a special payload).
    #[inline]
    pub fn page_runs<'a>(&'a self, buf: &'a mut PageRunBuf) -> Result<PageRuns<'a, T>> {
        // SAFETY: `self.raw()` is a live request handed to the driver (type
        // invariant), so its bios stay as they are until it ends, which the
        // borrow in `PageRuns` outlives not; `buf.cursor` is valid for
        // writes, `buf.runs` has room for `PAGE_RUNS_BATCH` entries.
        let got = unsafe {
            shim::blkfront_rs_rq_pages_start(
                self.raw().cast(),
                buf.cursor.as_mut_ptr(),
                buf.runs.as_mut_ptr().cast(),
                PAGE_RUNS_BATCH as u32,
            )
        };
        // Negative: not bios (`-EIO`).
        let got = usize::try_from(got).map_err(|_| code::EIO)?;
        Ok(PageRuns {
            buf,
            got: got.min(PAGE_RUNS_BATCH),
            next: 0,
            _rq: PhantomData,
        })
    }

    /// Map the data to the scatterlist (`blk_rq_map_sg`); returns the number
    /// of entries used (0 for a request without data). More segments than
    /// the inline entries take a chained table (`ENOMEM` when the pools
    /// are out: retry later), given back when the request goes back to
    /// blk-mq (ended, requeued or rejected). `EIO` on a tag set made
    /// without inline entries (see [`TagSet::new`]).
    pub fn map_sg(&mut self) -> Result<u32> {
        let nsegs = self.nr_phys_segments();
        if nsegs == 0 {
            return Ok(0);
        }
        let inline = self.tag_set().inline_sg;
        if inline == 0 {
            // A tag set without inline entries is for drivers that walk
            // the pages (`page_runs`) and map no scatterlist.
            return Err(code::EIO);
        }
        if nsegs > inline {
            if !CAN_CHAIN_SG {
                return Err(code::EIO);
            }
            #[cfg(CONFIG_SG_POOL)]
            self.chain_sg(nsegs, inline)?;
        }
        let mut last: *mut bindings::scatterlist = core::ptr::null_mut();
        // SAFETY: the request is live and owned; `sg_ptr` is the inline
        // table (`inline` >= `nsegs` entries, initialised in `init_request`)
        // or the chained table of `nsegs` entries allocated above.
        let n = unsafe { bindings::__blk_rq_map_sg(self.raw(), self.sg_ptr(), &mut last) };
        u32::try_from(n).map_err(|_| code::EIO)
    }

    /// Give the request back to blk-mq from `queue_rq` with
    /// `status` (blk-mq requeues or ends it; the driver must not).
    pub fn reject(self, status: Status) -> Rejected<T> {
        Rejected { rq: self, status }
    }

    /// Mark the request as started (`blk_mq_start_request`), before handing
    /// it to the device.
    pub fn start(&mut self) {
        // SAFETY: the request is live and owned.
        unsafe { bindings::blk_mq_start_request(self.raw()) }
    }

    /// The device refused a discard: the request's disk stops advertising
    /// discard and secure erase at once (`discard_max_bytes` reads 0; later
    /// discards fail in the block layer as not supported), as upstream's
    /// `blk_queue_disable_discard` and `blk_queue_disable_secure_erase`.
    /// Any context.
    pub fn withdraw_discard(&self) {
        self.withdraw(shim::BLKFRONT_RS_WITHDRAW_DISCARD);
    }

    /// The device refused a flush: the request's disk loses its volatile
    /// write cache and FUA (`write_cache` reads "write through"; the block
    /// layer stops sending flushes), shortly after: in process context.
    /// Any context.
    pub fn withdraw_write_cache(&self) {
        self.withdraw(shim::BLKFRONT_RS_WITHDRAW_WRITE_CACHE);
    }

    fn withdraw(&self, what: u32) {
        // SAFETY: the request is live, so is its queue; a queue of a tag
        // set of ours belongs to a disk our shim allocated (its private
        // data is the shim's) until the disk is put, after every request
        // ended.
        unsafe {
            let disk = (*(*self.raw()).q).disk;
            if !disk.is_null() {
                shim::blkfront_rs_blkmq_withdraw(disk.cast(), what);
            }
        }
    }

    /// The device is done with the request: schedule [`Operations::complete`]
    /// (`blk_mq_complete_request`, may run it on the submitting CPU).
    pub fn complete(self) {
        // SAFETY: the request is live; ownership passes to blk-mq, which
        // gives it back in `complete_callback`.
        unsafe { bindings::blk_mq_complete_request(self.raw()) };
    }

    /// Give the request back to blk-mq to be dispatched again later
    /// (`blk_mq_requeue_request`, without kicking): it waits on the
    /// queue's requeue list until [`GenDisk::kick_requeue_list`].
    pub fn requeue(self) {
        self.requeue_kicking(false);
    }

    /// Like [`Request::requeue`], and kick the requeue list (blk-mq
    /// dispatches the request again soon): for a started request the
    /// device could not take in [`Operations::queue_rqs`], as upstream's
    /// `virtblk_add_req_batch`.
    pub fn requeue_and_kick(self) {
        self.requeue_kicking(true);
    }

    fn requeue_kicking(mut self, kick: bool) {
        self.release();
        // SAFETY: the request is live and owned (started by the driver);
        // this consumes the handle, blk-mq owns the request again.
        unsafe { bindings::blk_mq_requeue_request(self.raw(), kick) };
    }

    /// End the request with `status` (`blk_mq_end_request`).
    pub fn end(mut self, status: Status) {
        self.release();
        // SAFETY: the request is live and owned; this consumes the handle.
        unsafe { bindings::blk_mq_end_request(self.raw(), status.as_raw()) };
    }
}

/// Iterator over the bios of a request: see [`Request::bio_ranges`].
///
/// # Invariants
///
/// `bio` is null or a bio of a request borrowed for `'a`, whose bio chain
/// does not change while the driver owns it.
pub struct BioRanges<'a> {
    bio: *mut bindings::bio,
    _rq: PhantomData<&'a ()>,
}

impl Iterator for BioRanges<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        if self.bio.is_null() {
            return None;
        }
        // SAFETY: a bio of the borrowed request (type invariant).
        let (sector, bytes, next) = unsafe {
            let b = &*self.bio;
            (b.bi_iter.bi_sector, b.bi_iter.bi_size, b.bi_next)
        };
        self.bio = next;
        Some((sector, bytes >> 9))
    }
}

/// Runs read per call into the shim: most requests are read by the one
/// call [`Request::page_runs`] makes.
const PAGE_RUNS_BATCH: usize = 16;

/// One run of a request's data inside one page (see
/// [`Request::page_runs`]).
#[derive(Clone, Copy, Debug)]
pub struct PageRun {
    /// The page.
    pub page: NonNull<bindings::page>,
    /// Byte offset of the run in the page.
    pub offset: u32,
    /// Length of the run in bytes.
    pub len: u32,
}

/// Where [`Request::page_runs`] reads a request's runs: a cursor in its
/// bios and a batch of runs (the shim's). Left uninitialized: the shim
/// writes what it returns.
pub struct PageRunBuf {
    cursor: MaybeUninit<shim::blkfront_rs_rq_pages>,
    runs: [MaybeUninit<shim::blkfront_rs_page_run>; PAGE_RUNS_BATCH],
}

impl PageRunBuf {
    /// An empty buffer (on the caller's stack: 280 bytes).
    #[inline]
    pub fn new() -> Self {
        Self {
            cursor: MaybeUninit::uninit(),
            runs: [const { MaybeUninit::uninit() }; PAGE_RUNS_BATCH],
        }
    }
}

impl Default for PageRunBuf {
    fn default() -> Self {
        Self::new()
    }
}

/// Iterator of [`Request::page_runs`].
///
/// # Invariants
///
/// `buf.cursor` was set up by `blkfront_rs_rq_pages_start` on a request
/// that the borrow `'a` keeps live; the first `got` entries of `buf.runs`
/// were written by the shim (`got <= PAGE_RUNS_BATCH`), `next <= got` of
/// them returned.
pub struct PageRuns<'a, T: Operations> {
    buf: &'a mut PageRunBuf,
    got: usize,
    next: usize,
    _rq: PhantomData<&'a Request<T>>,
}

impl<T: Operations> Iterator for PageRuns<'_, T> {
    /// `EIO` for a run without a page (never seen: blk-mq's bios always
    /// have pages; a driver fails such a request).
    type Item = Result<PageRun>;

    #[inline]
    fn next(&mut self) -> Option<Result<PageRun>> {
        if self.next == self.got {
            // Fewer than asked for last time: the data ended.
            if self.got < PAGE_RUNS_BATCH {
                return None;
            }
            // SAFETY: `buf.cursor` was set up on a live request (type
            // invariant); `buf.runs` has room for `PAGE_RUNS_BATCH` entries.
            let got = unsafe {
                shim::blkfront_rs_rq_pages_read(
                    self.buf.cursor.as_mut_ptr(),
                    self.buf.runs.as_mut_ptr().cast(),
                    PAGE_RUNS_BATCH as u32,
                )
            };
            self.got = (got as usize).min(PAGE_RUNS_BATCH);
            self.next = 0;
            if self.got == 0 {
                return None;
            }
        }
        let run = self.buf.runs.get(self.next)?;
        self.next += 1;
        // SAFETY: the shim wrote the first `got` entries (type invariant),
        // `next - 1 < got`.
        let run = unsafe { run.assume_init_ref() };
        Some(
            NonNull::new(run.page.cast::<bindings::page>())
                .map(|page| PageRun {
                    page,
                    offset: run.offset,
                    len: run.length,
                })
                .ok_or(code::EIO),
        )
    }
}
