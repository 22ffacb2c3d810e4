// SPDX-License-Identifier: GPL-2.0

//! Safe abstractions over the Xen frontend C APIs that the 7.3 `kernel`
//! crate lacks: xenbus drivers and xenstore ([`xenbus`]), the grant table
//! and granted pages ([`grant`]), shared rings ([`ring`]) and event channels
//! ([`evtchn`]).
//!
//! All `unsafe` of the Xen driver lives here. The C side is `shim.c`; its
//! prototypes in `shim.h` are turned into [`bindings`] by Kbuild (bindgen
//! over the header, allowlisted to what it declares). The generated types are
//! distinct from `kernel::bindings`' ones; nothing of them leaks out of this
//! module except through the wrappers.
//!
//! Only `PAGE_SIZE == XEN_PAGE_SIZE` (4 KiB, x86_64) is supported; the shim
//! checks it at build time.

pub mod evtchn;
pub mod grant;
pub mod periodic;
pub mod ring;
pub mod xenbus;

/// Bindings generated from `shim.h` at build time.
#[allow(
    dead_code,
    improper_ctypes,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    unsafe_op_in_unsafe_fn,
    unreachable_pub,
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::restriction,
    clippy::nursery,
    reason = "bindgen output over shim.h, not written by hand; opaque 16-byte \
              aligned structs come out as u128 arrays, which rustc < 1.89 \
              calls FFI-unsafe although only pointers to them cross"
)]
pub(crate) mod bindings {
    use kernel::ffi;
    include!("bindings_generated.rs");
}

/// Size of a Xen page (and of a kernel page: see the module docs).
pub const XEN_PAGE_SIZE: usize = 4096;

/// Whether the kernel runs as a Xen guest with PV disks allowed
/// (`xen_domain() && xen_has_pv_disk_devices()`).
pub fn pv_disks_available() -> bool {
    // SAFETY: reads global Xen state only.
    unsafe { bindings::rxen_pv_disks_available() }
}

/// Whether the guest is an HVM or PVH domain (`xen_hvm_domain()`).
pub fn hvm_domain() -> bool {
    // SAFETY: reads global Xen state only.
    unsafe { bindings::rxen_hvm_domain() }
}

/// Whether this HVM guest still has its emulated disks plugged next to
/// the PV ones (`xen_has_pv_and_legacy_disk_devices()`).
pub fn pv_and_legacy_disks() -> bool {
    // SAFETY: reads global Xen state only.
    unsafe { bindings::rxen_pv_and_legacy_disks() }
}

/// Number of online CPUs (`num_online_cpus()`), to cap the queue count.
pub fn num_online_cpus() -> u32 {
    // SAFETY: reads a global counter.
    unsafe { bindings::rxen_num_online_cpus() }
}
