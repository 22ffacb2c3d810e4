// SPDX-License-Identifier: GPL-2.0

//! The calls this backend makes into Xen's userspace libraries (Debian's
//! libxen-dev 4.17): xenstore, grant mapping (gntdev), event channels.
//! Each handle closes itself when dropped.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr, CString};
use std::io;
use std::ptr::NonNull;

#[repr(C)]
struct XsHandle {
    _opaque: [u8; 0],
}
#[repr(C)]
struct GntHandle {
    _opaque: [u8; 0],
}
#[repr(C)]
struct EvtHandle {
    _opaque: [u8; 0],
}

/// `struct xs_permissions`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct XsPermission {
    /// The domain.
    pub id: c_uint,
    /// `XS_PERM_*`.
    pub perms: c_uint,
}

/// `XS_PERM_NONE`.
pub const XS_PERM_NONE: c_uint = 0;
/// `XS_PERM_READ`.
pub const XS_PERM_READ: c_uint = 1;

const PROT_READ: c_int = 1;
const PROT_WRITE: c_int = 2;

#[link(name = "xenstore")]
extern "C" {
    fn xs_open(flags: c_ulong) -> *mut XsHandle;
    fn xs_close(h: *mut XsHandle);
    fn xs_read(h: *mut XsHandle, t: u32, path: *const c_char, len: *mut c_uint) -> *mut c_void;
    fn xs_write(
        h: *mut XsHandle,
        t: u32,
        path: *const c_char,
        data: *const c_void,
        len: c_uint,
    ) -> bool;
    fn xs_rm(h: *mut XsHandle, t: u32, path: *const c_char) -> bool;
    fn xs_set_permissions(
        h: *mut XsHandle,
        t: u32,
        path: *const c_char,
        perms: *mut XsPermission,
        num: c_uint,
    ) -> bool;
    fn xs_watch(h: *mut XsHandle, path: *const c_char, token: *const c_char) -> bool;
    fn xs_fileno(h: *mut XsHandle) -> c_int;
    fn xs_check_watch(h: *mut XsHandle) -> *mut *mut c_char;
    fn xs_transaction_start(h: *mut XsHandle) -> u32;
    fn xs_transaction_end(h: *mut XsHandle, t: u32, abort: bool) -> bool;
}

#[link(name = "xengnttab")]
extern "C" {
    fn xengnttab_open(logger: *mut c_void, flags: c_uint) -> *mut GntHandle;
    fn xengnttab_close(h: *mut GntHandle) -> c_int;
    fn xengnttab_map_domain_grant_refs(
        h: *mut GntHandle,
        count: u32,
        domid: u32,
        refs: *mut u32,
        prot: c_int,
    ) -> *mut c_void;
    fn xengnttab_unmap(h: *mut GntHandle, addr: *mut c_void, count: u32) -> c_int;
    fn xengnttab_set_max_grants(h: *mut GntHandle, count: u32) -> c_int;
}

#[link(name = "xenevtchn")]
extern "C" {
    fn xenevtchn_open(logger: *mut c_void, flags: c_uint) -> *mut EvtHandle;
    fn xenevtchn_close(h: *mut EvtHandle) -> c_int;
    fn xenevtchn_fd(h: *mut EvtHandle) -> c_int;
    fn xenevtchn_notify(h: *mut EvtHandle, port: u32) -> c_int;
    fn xenevtchn_bind_interdomain(h: *mut EvtHandle, domid: u32, remote: u32) -> c_int;
    fn xenevtchn_unbind(h: *mut EvtHandle, port: u32) -> c_int;
    fn xenevtchn_pending(h: *mut EvtHandle) -> c_int;
    fn xenevtchn_unmask(h: *mut EvtHandle, port: u32) -> c_int;
}

extern "C" {
    fn free(p: *mut c_void);
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// A connection to xenstored.
pub struct XenStore(NonNull<XsHandle>);

impl XenStore {
    /// Opens the connection.
    pub fn open() -> io::Result<Self> {
        // SAFETY: no pointer arguments; a null return is handled.
        NonNull::new(unsafe { xs_open(0) })
            .map(Self)
            .ok_or_else(|| last_error("xs_open"))
    }

    /// Reads a node (`None` when it does not exist). Values that are not
    /// UTF-8 come back lossily converted: the caller validates them.
    pub fn read(&self, path: &str) -> Option<String> {
        let p = cstr(path).ok()?;
        let mut len: c_uint = 0;
        // SAFETY: the handle is open (type invariant), `p` is a C string
        // and `len` a valid out-pointer; the result is malloc'd or null.
        let v = unsafe { xs_read(self.0.as_ptr(), 0, p.as_ptr(), &mut len) };
        if v.is_null() {
            return None;
        }
        // SAFETY: xs_read returned `len` readable bytes at `v`.
        let bytes = unsafe { std::slice::from_raw_parts(v.cast::<u8>(), len as usize) };
        let s = String::from_utf8_lossy(bytes).into_owned();
        // SAFETY: `v` came from malloc in libxenstore and is not used again.
        unsafe { free(v) };
        Some(s)
    }

    /// Writes a node.
    pub fn write(&self, path: &str, value: &str) -> io::Result<()> {
        self.write_in(0, path, value)
    }

    /// Writes a node in transaction `t` (0: none).
    fn write_in(&self, t: u32, path: &str, value: &str) -> io::Result<()> {
        let p = cstr(path)?;
        let len = c_uint::try_from(value.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: the handle is open, `p` a C string, `value` `len` bytes.
        if unsafe { xs_write(self.0.as_ptr(), t, p.as_ptr(), value.as_ptr().cast(), len) } {
            Ok(())
        } else {
            Err(last_error(&format!("xs_write {path}")))
        }
    }

    /// Removes a node and its children.
    pub fn rm(&self, path: &str) {
        if let Ok(p) = cstr(path) {
            // SAFETY: the handle is open and `p` a C string.
            unsafe { xs_rm(self.0.as_ptr(), 0, p.as_ptr()) };
        }
    }

    /// Creates directory `dir` with permissions `perms` (the first entry
    /// names the owner and what every other domain may do; children
    /// inherit them) and the nodes `(name, value)` under it, in one
    /// transaction: a watcher sees all of it or nothing.
    pub fn create_dir(
        &self,
        dir: &str,
        perms: &[XsPermission],
        nodes: &[(&str, String)],
    ) -> io::Result<()> {
        for _ in 0..16 {
            // SAFETY: the handle is open.
            let t = unsafe { xs_transaction_start(self.0.as_ptr()) };
            if t == 0 {
                return Err(last_error("xs_transaction_start"));
            }
            let r = self
                .write_in(t, dir, "")
                .and_then(|()| self.set_permissions_in(t, dir, perms))
                .and_then(|()| {
                    nodes
                        .iter()
                        .try_for_each(|(n, v)| self.write_in(t, &format!("{dir}/{n}"), v))
                });
            // SAFETY: `t` is this handle's open transaction, ended once.
            let committed = unsafe { xs_transaction_end(self.0.as_ptr(), t, r.is_err()) };
            r?;
            if committed {
                return Ok(());
            }
            if io::Error::last_os_error().raw_os_error() != Some(11) {
                return Err(last_error("xs_transaction_end"));
            }
        }
        Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            "xenstore transaction kept conflicting",
        ))
    }

    fn set_permissions_in(&self, t: u32, path: &str, perms: &[XsPermission]) -> io::Result<()> {
        let p = cstr(path)?;
        let mut v = perms.to_vec();
        let n = c_uint::try_from(v.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: the handle is open, `p` a C string, `v` holds `n` entries.
        if unsafe { xs_set_permissions(self.0.as_ptr(), t, p.as_ptr(), v.as_mut_ptr(), n) } {
            Ok(())
        } else {
            Err(last_error(&format!("xs_set_permissions {path}")))
        }
    }

    /// Watches a node and everything under it.
    pub fn watch(&self, path: &str, token: &str) -> io::Result<()> {
        let (p, t) = (cstr(path)?, cstr(token)?);
        // SAFETY: the handle is open; both are C strings.
        if unsafe { xs_watch(self.0.as_ptr(), p.as_ptr(), t.as_ptr()) } {
            Ok(())
        } else {
            Err(last_error(&format!("xs_watch {path}")))
        }
    }

    /// The descriptor that becomes readable when a watch fires.
    pub fn fd(&self) -> c_int {
        // SAFETY: the handle is open.
        unsafe { xs_fileno(self.0.as_ptr()) }
    }

    /// Drains the fired watches (without blocking); returns their paths.
    pub fn fired(&self) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            // SAFETY: the handle is open; the result is null or a malloc'd
            // array of at least two C strings, freed in one go below.
            let v = unsafe { xs_check_watch(self.0.as_ptr()) };
            if v.is_null() {
                return out;
            }
            // SAFETY: element 0 is the path, a valid C string (see above).
            let path = unsafe { CStr::from_ptr(*v) };
            out.push(path.to_string_lossy().into_owned());
            // SAFETY: the array was malloc'd by libxenstore; not used again.
            unsafe { free(v.cast()) };
        }
    }
}

impl Drop for XenStore {
    fn drop(&mut self) {
        // SAFETY: the handle is open and dropped only once.
        unsafe { xs_close(self.0.as_ptr()) };
    }
}

/// A gntdev handle: maps pages another domain granted to this one.
pub struct GrantTable(NonNull<GntHandle>);

/// Pages mapped from another domain, contiguous in this process.
///
/// # Invariants
/// `addr` points to `pages` mapped 4 KiB pages until `GrantTable::unmap`.
pub struct Mapping {
    addr: NonNull<u8>,
    pages: u32,
}

impl Mapping {
    /// The mapped bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: by the type invariant `addr` maps `pages` whole pages,
        // readable (and writable if mapped so; writes to a read-only
        // mapping fault, which the callers avoid: see `GrantTable::map`).
        unsafe { std::slice::from_raw_parts_mut(self.addr.as_ptr(), self.pages as usize * 4096) }
    }
}

// SAFETY: the mapping is plain memory; the backend uses it from one thread.
unsafe impl Send for Mapping {}

impl GrantTable {
    /// Opens /dev/xen/gntdev, allowing `max` grants mapped at once.
    pub fn open(max: u32) -> io::Result<Self> {
        // SAFETY: a null logger selects the default; null return handled.
        let h = NonNull::new(unsafe { xengnttab_open(std::ptr::null_mut(), 0) })
            .ok_or_else(|| last_error("xengnttab_open"))?;
        // SAFETY: the handle was just opened.
        if unsafe { xengnttab_set_max_grants(h.as_ptr(), max) } != 0 {
            // Older gntdev drivers have no per-handle limit: not fatal.
            eprintln!("blkif-backend: xengnttab_set_max_grants({max}) failed");
        }
        Ok(Self(h))
    }

    /// Maps `refs` granted by `domid`, writable when `write`.
    pub fn map(&self, domid: u32, refs: &[u32], write: bool) -> io::Result<Mapping> {
        let mut r = refs.to_vec();
        let n = u32::try_from(r.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
        let prot = if write {
            PROT_READ | PROT_WRITE
        } else {
            PROT_READ
        };
        // SAFETY: the handle is open and `r` holds `n` references.
        let p = unsafe {
            xengnttab_map_domain_grant_refs(self.0.as_ptr(), n, domid, r.as_mut_ptr(), prot)
        };
        NonNull::new(p.cast::<u8>())
            .map(|addr| Mapping { addr, pages: n })
            .ok_or_else(|| last_error(&format!("map grants {refs:?} of domain {domid}")))
    }

    /// Unmaps pages mapped by `map`.
    pub fn unmap(&self, m: Mapping) -> io::Result<()> {
        // SAFETY: `m` came from `map` on this handle and is consumed.
        if unsafe { xengnttab_unmap(self.0.as_ptr(), m.addr.as_ptr().cast(), m.pages) } == 0 {
            Ok(())
        } else {
            Err(last_error("xengnttab_unmap"))
        }
    }
}

impl Drop for GrantTable {
    fn drop(&mut self) {
        // SAFETY: the handle is open and dropped once; closing unmaps
        // nothing that is still mapped (gntdev keeps those until munmap).
        unsafe { xengnttab_close(self.0.as_ptr()) };
    }
}

/// An event channel handle (/dev/xen/evtchn).
pub struct EventChannels(NonNull<EvtHandle>);

impl EventChannels {
    /// Opens the device.
    pub fn open() -> io::Result<Self> {
        // SAFETY: a null logger selects the default; null return handled.
        NonNull::new(unsafe { xenevtchn_open(std::ptr::null_mut(), 0) })
            .map(Self)
            .ok_or_else(|| last_error("xenevtchn_open"))
    }

    /// Binds the other domain's `remote` port; returns the local port.
    pub fn bind(&self, domid: u32, remote: u32) -> io::Result<u32> {
        // SAFETY: the handle is open.
        let p = unsafe { xenevtchn_bind_interdomain(self.0.as_ptr(), domid, remote) };
        u32::try_from(p)
            .map_err(|_| last_error(&format!("bind event channel {remote} of domain {domid}")))
    }

    /// Unbinds a local port.
    pub fn unbind(&self, port: u32) {
        // SAFETY: the handle is open.
        unsafe { xenevtchn_unbind(self.0.as_ptr(), port) };
    }

    /// Notifies the other end of a local port.
    pub fn notify(&self, port: u32) {
        // SAFETY: the handle is open.
        unsafe { xenevtchn_notify(self.0.as_ptr(), port) };
    }

    /// The descriptor that becomes readable when a port fires.
    pub fn fd(&self) -> c_int {
        // SAFETY: the handle is open.
        unsafe { xenevtchn_fd(self.0.as_ptr()) }
    }

    /// The next port that fired (unmasked again), if any.
    pub fn pending(&self) -> Option<u32> {
        // SAFETY: the handle is open.
        let p = u32::try_from(unsafe { xenevtchn_pending(self.0.as_ptr()) }).ok()?;
        // SAFETY: the handle is open.
        unsafe { xenevtchn_unmask(self.0.as_ptr(), p) };
        Some(p)
    }
}

impl Drop for EventChannels {
    fn drop(&mut self) {
        // SAFETY: the handle is open and dropped once.
        unsafe { xenevtchn_close(self.0.as_ptr()) };
    }
}

#[repr(C)]
struct PollFd {
    fd: c_int,
    events: i16,
    revents: i16,
}

extern "C" {
    fn poll(fds: *mut PollFd, n: c_ulong, timeout: c_int) -> c_int;
    fn fallocate(fd: c_int, mode: c_int, offset: i64, len: i64) -> c_int;
}

/// Waits up to `ms` for any of `fds` to become readable; returns which.
pub fn wait_readable(fds: &[c_int], ms: i32) -> Vec<bool> {
    let mut p: Vec<PollFd> = fds
        .iter()
        .map(|&fd| PollFd {
            fd,
            events: 1,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` holds `p.len()` initialised entries.
    unsafe { poll(p.as_mut_ptr(), p.len() as c_ulong, ms) };
    p.iter().map(|e| e.revents != 0).collect()
}

/// Deallocates a byte range of a file (discard): FALLOC_FL_PUNCH_HOLE |
/// FALLOC_FL_KEEP_SIZE.
pub fn punch_hole(fd: c_int, offset: u64, len: u64) -> io::Result<()> {
    let (o, l) = (i64::try_from(offset), i64::try_from(len));
    let (Ok(o), Ok(l)) = (o, l) else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    // SAFETY: plain system call on a descriptor the caller owns.
    if unsafe { fallocate(fd, 3, o, l) } == 0 {
        Ok(())
    } else {
        Err(last_error("fallocate"))
    }
}
