// SPDX-License-Identifier: GPL-2.0

//! Grant table: granting 4 KiB frames to the backend domain and revoking
//! them, plus the frames themselves ([`Frame`], owned [`XenPages`]).
//!
//! Revocation follows xen-blkfront: [`GrantTable::try_end`] ends access
//! only if the backend no longer maps the frame (the reference is then
//! freed); [`GrantTable::end`] ends it unconditionally, deferring the
//! release (the grant table code takes its own page reference) until the
//! backend lets go, so the caller may free its page right after.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::{
    bindings,
    XEN_PAGE_SIZE, //
};
use crate::blkcore::mapping::Piece;

/// A grant reference (`grant_ref_t`).
pub type GrantRef = u32;

/// References claimed from the grant table per batch.
const BATCH: u16 = 16;

/// A 4 KiB frame (`struct page`) that can be granted, mapped and copied.
///
/// # Invariants
///
/// `self.0` points to a `struct page` that stays allocated for as long as
/// any copy of this `Frame` is used (granted, read or written). Frames are
/// only made by [`XenPages::frames`] (the owner outlives its grants: see
/// [`XenPages`]) and by [`request_frames`] for the pages of a request
/// blk-mq holds (the request outlives its grants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame(NonNull<bindings::page>);

// SAFETY: a page may be mapped and copied from any CPU.
unsafe impl Send for Frame {}
// SAFETY: as above; `Frame` has no interior state.
unsafe impl Sync for Frame {}

impl Frame {
    fn check(off: usize, len: usize) -> Result {
        match off.checked_add(len) {
            Some(end) if end <= XEN_PAGE_SIZE => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Maps the frame for the duration of `f` (`kmap_local_page`).
    fn with_mapped<R>(self, f: impl FnOnce(*mut u8) -> R) -> R {
        // SAFETY: by the type invariant the page is allocated.
        let va = unsafe { bindings::rxen_kmap_local_page(self.0.as_ptr()) }.cast::<u8>();
        let r = f(va);
        // SAFETY: `va` came from `rxen_kmap_local_page` just above; local
        // mappings are released in reverse order, which this nesting keeps.
        unsafe { bindings::rxen_kunmap_local(va.cast()) };
        r
    }

    /// Copies `len` bytes at `off` in this frame to `dst_off` in `dst`.
    /// The two frames must be different pages.
    pub fn copy_to(self, off: usize, dst: Frame, dst_off: usize, len: usize) -> Result {
        Self::check(off, len)?;
        Self::check(dst_off, len)?;
        if self == dst {
            return Err(EINVAL);
        }
        self.with_mapped(|src| {
            dst.with_mapped(|d| {
                // SAFETY: both mappings cover a whole page, the ranges were
                // checked above, and distinct pages do not overlap.
                unsafe { core::ptr::copy_nonoverlapping(src.add(off), d.add(dst_off), len) }
            })
        });
        Ok(())
    }

    /// Writes `data` at byte `off` of the frame.
    pub fn write(self, off: usize, data: &[u8]) -> Result {
        Self::check(off, data.len())?;
        self.with_mapped(|va| {
            // SAFETY: the mapping covers the page; range checked above;
            // `data` is not inside a page mapped only here.
            unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), va.add(off), data.len()) }
        });
        Ok(())
    }

    /// Reads `out.len()` bytes at `off` of the frame.
    pub fn read(self, off: usize, out: &mut [u8]) -> Result {
        Self::check(off, out.len())?;
        self.with_mapped(|va| {
            // SAFETY: the mapping covers the page; range checked above.
            unsafe { core::ptr::copy_nonoverlapping(va.add(off), out.as_mut_ptr(), out.len()) }
        });
        Ok(())
    }
}

/// Zeroed pages owned in blocks of contiguous pages (a ring's bounce
/// frames or indirect pages): a thousand frames cost a list of a few dozen
/// blocks (about 1 KiB), not an entry per page (8 KiB, three `vmalloc`
/// pages). Each page is an order-0 page of its own (the blocks are split),
/// so a grant's deferred release can hold one page past the others.
/// Blocks of up to [`XenPages::MAX_BLOCK_ORDER`], smaller ones when the
/// guest's memory is fragmented: allocating never fails for want of
/// contiguous memory while single pages are free.
///
/// # Invariants
///
/// Each `(first, n)` of `blocks` is `n` pages from `first` on, allocated
/// by `rxen_alloc_pages_split` and owned here: each is freed on drop.
/// Users must end all grants of the frames (with [`GrantTable::try_end`]
/// succeeding or [`GrantTable::end`]) before dropping it.
pub struct XenPages {
    blocks: KVec<(NonNull<bindings::page>, usize)>,
}

// SAFETY: the pages are exclusively owned.
unsafe impl Send for XenPages {}
// SAFETY: `&XenPages` only hands out `Frame`s.
unsafe impl Sync for XenPages {}

impl XenPages {
    /// The largest block tried: 16 pages (64 KiB), within what the page
    /// allocator keeps on hand in a guest that has run a while.
    pub const MAX_BLOCK_ORDER: u32 = 4;

    /// Allocates `count` zeroed pages (`GFP_NOIO`).
    pub fn new(count: usize) -> Result<Self> {
        let mut pages = Self {
            blocks: KVec::with_capacity(count.div_ceil(1 << Self::MAX_BLOCK_ORDER), GFP_KERNEL)?,
        };
        let (mut left, mut order) = (count, Self::MAX_BLOCK_ORDER);
        while left > 0 {
            // The largest block not beyond what is left.
            while order > 0 && (1usize << order) > left {
                order -= 1;
            }
            // Room first: a block allocated is always recorded (and freed).
            pages.blocks.reserve(1, GFP_KERNEL)?;
            // SAFETY: plain allocation.
            let first = unsafe { bindings::rxen_alloc_pages_split(order) };
            match NonNull::new(first) {
                Some(first) => {
                    let n = 1usize << order;
                    pages
                        .blocks
                        .push_within_capacity((first, n))
                        .map_err(|_| ENOMEM)?;
                    left -= n;
                }
                None if order > 0 => order -= 1,
                None => return Err(ENOMEM),
            }
        }
        Ok(pages)
    }

    /// The frames of the pages (valid while `self` lives), block by block.
    pub fn frames(&self) -> impl Iterator<Item = Frame> + '_ {
        self.blocks.iter().flat_map(|&(first, n)| {
            (0..n).map(move |i| {
                // SAFETY: `i < n`: a page of the block (type invariant).
                let p = unsafe { bindings::rxen_page_of_block(first.as_ptr(), i) };
                // INVARIANT: a page owned by `self` (see above).
                Frame(NonNull::new(p).unwrap_or(first))
            })
        })
    }
}

impl Drop for XenPages {
    fn drop(&mut self) {
        for f in self.frames() {
            // SAFETY: by the type invariant we own each page of each block,
            // order-0 pages since the split.
            unsafe { bindings::rxen_free_page(f.0.as_ptr()) };
        }
    }
}

/// Grants to one backend domain, with a small reserve of claimed
/// references (`gnttab_alloc_grant_references` /
/// `gnttab_claim_grant_reference`).
///
/// # Invariants
///
/// `head` holds `left` references allocated from the grant table and not
/// yet claimed; they are freed on drop.
pub struct GrantTable {
    domid: u16,
    head: u32,
    left: u16,
    /// Grants the caller said are coming ([`GrantTable::will_grant`]): a
    /// refill claims that many at once.
    coming: u16,
}

impl GrantTable {
    /// Grants for domain `domid`.
    pub fn new(domid: u16) -> Self {
        Self {
            domid,
            head: 0,
            left: 0,
            coming: 0,
        }
    }

    /// Says that about `n` grants follow (a request's segments), so that
    /// the reserve is refilled for all of them at once: each refill takes
    /// the grant table's lock with interrupts off, and a Xen PV guest pays
    /// a hypercall when it turns them back on with an event pending (16 of
    /// them per 1 MiB request in batches of 16; upstream allocates a
    /// request's references in one call). A hint: more or fewer grants may
    /// follow.
    pub fn will_grant(&mut self, n: u32) {
        self.coming = u16::try_from(n).unwrap_or(u16::MAX);
    }

    // Once per batch of references, out of the per-segment path.
    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> Result {
        for n in [self.coming.max(BATCH), BATCH, 1] {
            let mut head = 0u32;
            // SAFETY: `head` is valid for writes.
            if unsafe { bindings::rxen_gnttab_alloc_grant_references(n, &mut head) } == 0 {
                self.head = head;
                self.left = n;
                return Ok(());
            }
        }
        Err(ENOSPC)
    }

    /// Grants the backend access to `frame`
    /// (`gnttab_grant_foreign_access_ref`), read-only if `readonly`.
    ///
    /// Inlined into the data path's grant loop: it runs for every segment.
    #[inline(always)]
    pub fn grant(&mut self, frame: Frame, readonly: bool) -> Result<GrantRef> {
        if self.left == 0 {
            self.refill()?;
        }
        // SAFETY: `head` holds `left` > 0 unclaimed references; by
        // `Frame`'s invariant the page stays allocated while granted.
        let r = unsafe {
            bindings::rxen_gnttab_grant_page(&mut self.head, self.domid, frame.0.as_ptr(), readonly)
        };
        let gref = u32::try_from(r).map_err(|_| ENOSPC)?;
        self.left -= 1;
        self.coming = self.coming.saturating_sub(1);
        Ok(gref)
    }

    /// Ends access if the backend no longer maps `gref`, freeing the
    /// reference (`gnttab_try_end_foreign_access`). Returns `false` (and
    /// changes nothing) if it is still mapped.
    pub fn try_end(&mut self, gref: GrantRef) -> bool {
        // SAFETY: ending access of one of our references has no memory
        // safety requirements on our side.
        unsafe { bindings::rxen_gnttab_try_end_foreign_access(gref) != 0 }
    }

    /// Ends access unconditionally (`gnttab_end_foreign_access(ref,
    /// NULL)`): a still-mapped frame gets an extra page reference and is
    /// released by the grant table code once the backend unmaps it.
    pub fn end(&mut self, gref: GrantRef) {
        // SAFETY: see above; NULL page: the grant code takes its own ref.
        unsafe { bindings::rxen_gnttab_end_foreign_access(gref, core::ptr::null_mut()) };
    }
}

impl Drop for GrantTable {
    fn drop(&mut self) {
        if self.left > 0 {
            // SAFETY: by the type invariant `head` holds unclaimed refs.
            unsafe { bindings::rxen_gnttab_free_grant_references(self.head) };
        }
    }
}

/// The data of a started block request as frames, page by page (its
/// bios' `bio_vec`s, through `rust/blkmq`): each run's frame, byte offset
/// and length. Runs contiguous in one page come merged
/// ([`blkcore::mapping::merged`]): the block layer counted them as one
/// segment, so they must take one frame's segment on the ring, not two (a
/// page is one Xen frame: `PAGE_SIZE == XEN_PAGE_SIZE`, see the crate
/// root). Read through `buf` (see [`Request::page_runs`]). An iterator,
/// not a callback: the caller's per-frame work (granting) is inlined into
/// its loop.
///
/// The frames stay valid until the request is ended: the block layer pins
/// a request's pages while it is in flight, and the driver keeps the
/// `Request` (and with it the frames it recorded) until completion.
///
/// [`blkcore::mapping::merged`]: crate::blkcore::mapping::merged
/// [`Request::page_runs`]: crate::blkmq::Request::page_runs
#[inline]
pub fn request_frames<'a, T: crate::blkmq::Operations>(
    rq: &'a crate::blkmq::Request<T>,
    buf: &'a mut crate::blkmq::PageRunBuf,
) -> Result<impl Iterator<Item = Result<Piece<Frame>>> + 'a> {
    let runs = rq.page_runs(buf)?.map(|run| {
        run.map(|run| Piece {
            page: Frame(run.page.cast()),
            offset: run.offset,
            len: run.len,
        })
    });
    Ok(crate::blkcore::mapping::merged(runs))
}
