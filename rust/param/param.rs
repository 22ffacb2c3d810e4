// SPDX-License-Identifier: GPL-2.0

//! Module parameters visible in `/sys/module/<module>/parameters/`, with the
//! permissions upstream gives them.
//!
//! The kernel crate's `module!` parameters are set once at load and never
//! appear in sysfs (`perm: 0`, no `get` operation), so an administrator
//! could neither read what a loaded module runs with nor change a parameter
//! upstream lets them change (xen-blkfront's `feature_persistent`, 0644). The
//! parameters declared here use the C parameter operations
//! (`param_ops_uint`, `param_ops_int`, `param_ops_bool`): loading, `modinfo`
//! and sysfs behave exactly as for a C driver's `module_param()`.
//!
//! ```ignore
//! sysfs_params! {
//!     /// Doc comment.
//!     max_queues: u32 = 4, 0o444, "Maximum number of queues";
//! }
//! let n = params::max_queues.value();
//! ```

use core::cell::UnsafeCell;

/// The storage of one parameter: read by Rust, written by the C parameter
/// operations (at load, or through sysfs when the permissions allow it).
///
/// # Invariants
///
/// The only writers are the kernel's `param_set_*` functions, which store a
/// whole naturally aligned value of `T` (at most 4 bytes here) while holding
/// the module's parameter lock.
#[repr(transparent)]
pub struct Param<T: Copy>(UnsafeCell<T>);

// SAFETY: `value` reads with a single volatile load of a naturally aligned
// value of at most 4 bytes, which cannot tear against the C setter's single
// store (see the type invariants); nothing else touches the cell.
unsafe impl<T: Copy + Send> Sync for Param<T> {}

impl<T: Copy> Param<T> {
    #[doc(hidden)]
    pub const fn new(default: T) -> Self {
        Self(UnsafeCell::new(default))
    }

    /// The current value. A writable parameter may change between two
    /// calls: read it once per decision.
    pub fn value(&self) -> T {
        // SAFETY: the cell is valid for reads; see the `Sync` impl for why
        // a concurrent sysfs write cannot make the read tear.
        unsafe { core::ptr::read_volatile(self.0.get()) }
    }

    #[doc(hidden)]
    pub const fn as_arg(&self) -> *mut kernel::ffi::c_void {
        self.0.get().cast()
    }
}

#[doc(hidden)]
/// The bytes of `s` as an array (for `.modinfo` entries built by `concat!`).
pub const fn bytes<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// Declare module parameters with sysfs permissions. Each entry is
/// `name: type = default, permissions, "description";` with `type` one of
/// `u32`, `i32`, `bool` (modinfo's `uint`, `int`, `bool`); each becomes a
/// `static name: Param<type>` in a `params` module of the
/// invoking one (`module!` keeps `module_parameters` for its own).
macro_rules! sysfs_params {
    ($($(#[$attr:meta])* $name:ident: $ty:tt = $default:expr, $perm:expr, $desc:literal;)+) => {
    /// The module's parameters (`/sys/module/<module>/parameters/`).
    pub(crate) mod params {
    $(
        $(#[$attr])*
        #[expect(non_upper_case_globals, reason = "a parameter's name is its sysfs name")]
        pub(crate) static $name: $crate::param::Param<$ty> = $crate::param::Param::new($default);

        // The C tables that make it a module parameter: `.modinfo` entries
        // (what `modinfo` shows) and a `kernel_param` in `__param`, as
        // `module_param()` emits them.
        #[expect(unsafe_code, reason = "link sections, as the kernel crate's `module!` emits them")]
        const _: () = {
            const PARM: &str = concat!("parm=", stringify!($name), ":", $desc, "\0");
            const PARMTYPE: &str = concat!(
                "parmtype=", stringify!($name), ":", $crate::param::sysfs_params!(@type $ty), "\0"
            );
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARM_INFO: [u8; PARM.len()] = $crate::param::bytes(PARM);
            #[link_section = ".modinfo"]
            #[used(compiler)]
            static PARMTYPE_INFO: [u8; PARMTYPE.len()] = $crate::param::bytes(PARMTYPE);

            #[link_section = "__param"]
            #[used(compiler)]
            static KERNEL_PARAM: ::kernel::module_param::KernelParam =
                ::kernel::module_param::KernelParam::new(::kernel::bindings::kernel_param {
                    name: concat!(stringify!($name), "\0").as_ptr().cast(),
                    // `__this_module` is set up by the module loader and
                    // lives as long as the module (as in `module!`).
                    mod_: &raw mut ::kernel::bindings::__this_module,
                    ops: &raw const $crate::param::sysfs_params!(@ops $ty),
                    perm: $perm,
                    level: -1,
                    flags: 0,
                    __bindgen_anon_1: ::kernel::bindings::kernel_param__bindgen_ty_1 {
                        arg: $name.as_arg(),
                    },
                });
        };
    )+
    }
    };
    (@type u32) => { "uint" };
    (@type i32) => { "int" };
    (@type bool) => { "bool" };
    (@ops u32) => { ::kernel::bindings::param_ops_uint };
    (@ops i32) => { ::kernel::bindings::param_ops_int };
    (@ops bool) => { ::kernel::bindings::param_ops_bool };
}
pub(crate) use sysfs_params;
