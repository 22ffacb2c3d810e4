// SPDX-License-Identifier: GPL-2.0

//! Shared ring pages (`xenbus_setup_ring` / `xenbus_teardown_ring`), 1..=16
//! pages granted to the backend, with byte-level access for the ring
//! protocol (the index logic itself is `blkcore::ring`).

use core::ptr::NonNull;

use kernel::{
    error::to_result,
    prelude::*, //
};

use super::{
    bindings,
    xenbus::Device,
    XEN_PAGE_SIZE, //
};

/// Most pages of one ring (`XENBUS_MAX_RING_GRANTS`).
pub const MAX_RING_PAGES: usize = 16;

/// A shared ring area granted to the backend.
///
/// # Invariants
///
/// `vaddr` points to `nr_pages * 4096` zero-initialised bytes allocated by
/// `xenbus_setup_ring()`, granted as `grefs[..nr_pages]`; both are released
/// on drop with `xenbus_teardown_ring()`.
pub struct SharedPages {
    vaddr: NonNull<u8>,
    nr_pages: u32,
    grefs: [u32; MAX_RING_PAGES],
}

// SAFETY: the area is plain memory; access goes through `&mut self` or
// volatile reads.
unsafe impl Send for SharedPages {}
// SAFETY: `&self` methods only do volatile reads.
unsafe impl Sync for SharedPages {}

impl SharedPages {
    /// Allocates and grants `nr_pages` (1..=16) pages to `dev`'s backend.
    pub fn new(dev: &Device, nr_pages: u32) -> Result<Self> {
        if nr_pages == 0 || nr_pages as usize > MAX_RING_PAGES {
            return Err(EINVAL);
        }
        let mut grefs = [0u32; MAX_RING_PAGES];
        let mut va: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: `dev` is live; `va` and `grefs` (16 entries >= nr_pages)
        // are valid for writes.
        to_result(unsafe {
            bindings::rxen_xenbus_setup_ring(dev.raw(), &mut va, nr_pages, grefs.as_mut_ptr())
        })?;
        let vaddr = NonNull::new(va.cast::<u8>()).ok_or(ENOMEM)?;
        Ok(Self {
            vaddr,
            nr_pages,
            grefs,
        })
    }

    /// Grant references of the pages, in order.
    pub fn grefs(&self) -> &[u32] {
        self.grefs.get(..self.nr_pages as usize).unwrap_or(&[])
    }

    fn len(&self) -> usize {
        self.nr_pages as usize * XEN_PAGE_SIZE
    }

    fn check(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|e| e <= self.len())
    }

    /// Volatile read of the little-endian `u32` at `off` (ring indexes the
    /// backend writes concurrently). Out-of-range offsets read as 0.
    pub fn load_u32(&self, off: usize) -> u32 {
        if !self.check(off, 4) || off % 4 != 0 {
            return 0;
        }
        // SAFETY: in bounds and aligned (the area is page aligned).
        unsafe { core::ptr::read_volatile(self.vaddr.as_ptr().add(off).cast::<u32>()) }
    }

    /// Volatile write of a `u32` at `off` (ignored when out of range).
    pub fn store_u32(&mut self, off: usize, v: u32) {
        if !self.check(off, 4) || off % 4 != 0 {
            return;
        }
        // SAFETY: in bounds and aligned.
        unsafe { core::ptr::write_volatile(self.vaddr.as_ptr().add(off).cast::<u32>(), v) }
    }

    /// Copies `data` into the area at `off` (ignored when out of range),
    /// 8 bytes at a time: a ring entry (112 bytes) is 14 moves, not a call
    /// to `memcpy`, under the ring lock.
    pub fn write_bytes(&mut self, off: usize, data: &[u8]) {
        if !self.check(off, data.len()) {
            return;
        }
        let words = data.chunks_exact(8);
        let tail = words.remainder();
        for (i, w) in words.enumerate() {
            let v = u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
            // SAFETY: in bounds (checked above: `i * 8 + 8 <= data.len()`);
            // unaligned writes are allowed.
            unsafe { core::ptr::write_unaligned(self.vaddr.as_ptr().add(off + i * 8).cast(), v) }
        }
        let at = off + (data.len() - tail.len());
        // SAFETY: in bounds; `tail` is not in the shared area.
        unsafe {
            core::ptr::copy_nonoverlapping(tail.as_ptr(), self.vaddr.as_ptr().add(at), tail.len())
        }
    }

    /// Copies bytes at `off` out of the area, once, with volatile reads
    /// (the backend may change them concurrently). Out of range: zeros.
    pub fn read_bytes(&self, off: usize, out: &mut [u8]) {
        if !self.check(off, out.len()) {
            out.fill(0);
            return;
        }
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: in bounds (checked above).
            *b = unsafe { core::ptr::read_volatile(self.vaddr.as_ptr().add(off + i)) };
        }
    }

    /// `virt_wmb()`.
    #[inline]
    pub fn wmb(&self) {
        virt_barrier(Barrier::Write);
    }

    /// `virt_rmb()`.
    #[inline]
    pub fn rmb(&self) {
        virt_barrier(Barrier::Read);
    }

    /// `virt_mb()`.
    #[inline]
    pub fn mb(&self) {
        virt_barrier(Barrier::Full);
    }
}

/// Which `virt_*mb()`.
#[derive(Clone, Copy)]
enum Barrier {
    Read,
    Write,
    Full,
}

/// `virt_rmb()`, `virt_wmb()` or `virt_mb()`: once or twice per request
/// and per interrupt. On x86-64 inline, as C has them, not a call into the
/// shim; other architectures call the kernel's.
#[inline(always)]
fn virt_barrier(b: Barrier) {
    #[cfg(target_arch = "x86_64")]
    match b {
        // SAFETY: an empty asm block that may touch memory: a compiler
        // barrier, which is what x86's `__smp_rmb()` and `__smp_wmb()` are
        // (it reorders neither loads with loads nor stores with stores).
        Barrier::Read | Barrier::Write => unsafe {
            core::arch::asm!("", options(nostack, preserves_flags))
        },
        // SAFETY: x86's `__smp_mb()`, the kernel's very instruction: a
        // locked add of 0 to the word below the stack pointer orders every
        // earlier load and store before every later one; it may touch
        // memory, so it is a compiler barrier too.
        Barrier::Full => unsafe { core::arch::asm!("lock add dword ptr [rsp - 4], 0") },
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: barriers.
    unsafe {
        match b {
            Barrier::Read => bindings::rxen_virt_rmb(),
            Barrier::Write => bindings::rxen_virt_wmb(),
            Barrier::Full => bindings::rxen_virt_mb(),
        }
    }
}

impl Drop for SharedPages {
    fn drop(&mut self) {
        let mut va: *mut core::ffi::c_void = self.vaddr.as_ptr().cast();
        // SAFETY: by the type invariant the area and grants came from
        // `xenbus_setup_ring` with `nr_pages` pages; teardown ends access
        // (deferred if still mapped) and frees the pages.
        unsafe {
            bindings::rxen_xenbus_teardown_ring(&mut va, self.nr_pages, self.grefs.as_mut_ptr())
        };
    }
}
