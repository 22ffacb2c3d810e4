// SPDX-License-Identifier: GPL-2.0

//! The xenstore keys the frontend reads: which ones (the backend's that
//! `blkcore::negotiate` reads, and our own), a snapshot of them as a
//! `blkcore::xenstore::KeyedValues`, and the handle in our nodename.

use kernel::{
    prelude::*,
    str::CString, //
};

use crate::blkcore::{
    negotiate as neg,
    xenstore::{
        utf8_or_invalid,
        KeyedValues, //
    },
};
use crate::xen::xenbus::{
    self,
    Xbt, //
};

/// A xenstore path as log lines show it. Paths are ASCII (xenstored
/// refuses others), so the fallback is only there to keep a log line from
/// failing.
pub(crate) fn shown_path(path: &CStr) -> &str {
    path.to_str().unwrap_or("?")
}

/// Every backend key `blkcore::negotiate` reads.
pub(crate) const BACKEND_KEYS: &[&str] = &[
    neg::KEY_MAX_RING_PAGE_ORDER,
    neg::KEY_MULTI_QUEUE_MAX_QUEUES,
    neg::KEY_SECTORS,
    neg::KEY_INFO,
    neg::KEY_SECTOR_SIZE,
    neg::KEY_PHYSICAL_SECTOR_SIZE,
    neg::KEY_FEATURE_BARRIER,
    neg::KEY_FEATURE_FLUSH_CACHE,
    neg::KEY_FEATURE_DISCARD,
    neg::KEY_DISCARD_GRANULARITY,
    neg::KEY_DISCARD_ALIGNMENT,
    neg::KEY_DISCARD_SECURE,
    neg::KEY_FEATURE_PERSISTENT,
    neg::KEY_FEATURE_MAX_INDIRECT_SEGMENTS,
    neg::KEY_MINIMUM_IO_SIZE,
    neg::KEY_OPTIMAL_IO_SIZE,
];

/// The backend keys `blkcore::negotiate::negotiate_rings` reads: all that
/// InitWait needs. Each key is a xenstore round trip (a missing one too),
/// and InitWait runs once per vbd in the one xenwatch thread, so the rest
/// of [`BACKEND_KEYS`] waits for Connected, where they are read once.
pub(crate) const RING_KEYS: &[&str] = &[
    neg::KEY_MAX_RING_PAGE_ORDER,
    neg::KEY_MULTI_QUEUE_MAX_QUEUES,
];

/// Keys `blkcore::negotiate` reads from the frontend's own directory.
pub(crate) const FRONTEND_KEYS: &[&str] = &[neg::KEY_TRUSTED];

/// The values of some keys of one xenstore directory, read once.
pub(crate) struct Snapshot {
    entries: KVec<(&'static str, KVec<u8>)>,
}

impl Snapshot {
    /// Reads `keys` from `dir` (missing keys are simply absent).
    pub(crate) fn read(dir: &CStr, keys: &[&'static str]) -> Result<Self> {
        let mut entries = KVec::with_capacity(keys.len(), GFP_KERNEL)?;
        for &key in keys {
            let node = CString::try_from_fmt(fmt!("{key}"))?;
            if let Some(v) = xenbus::read(Xbt::NIL, dir, &node)? {
                entries.push((key, v), GFP_KERNEL)?;
            }
        }
        Ok(Self { entries })
    }

    /// A snapshot made of literal values (tests).
    #[cfg(CONFIG_KUNIT)]
    pub(crate) fn from_pairs(pairs: &[(&'static str, &str)]) -> Result<Self> {
        let mut entries = KVec::with_capacity(pairs.len(), GFP_KERNEL)?;
        for (k, v) in pairs {
            let mut b = KVec::new();
            b.extend_from_slice(v.as_bytes(), GFP_KERNEL)?;
            entries.push((*k, b), GFP_KERNEL)?;
        }
        Ok(Self { entries })
    }
}

impl KeyedValues for Snapshot {
    fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| utf8_or_invalid(v))
    }
}

/// Parses the handle of a vbd from the last component of its nodename
/// (`device/vbd/51712` -> 51712). The ring's `handle` is a `blkif_vdev_t`
/// (16 bits), which the extended vbd ids of xvdq onward (`1 << 28 |
/// disk << 8`) do not fit: as upstream's `blkfront_probe`, the id is
/// truncated into it (no backend reads the field back to find the vbd).
pub(crate) fn handle_from_nodename(nodename: &[u8]) -> Option<u16> {
    let last = nodename.rsplit(|&b| b == b'/').next()?;
    let s = core::str::from_utf8(last).ok()?;
    let [lo, hi, _, _] = crate::blkcore::xenstore::parse_u32(s).ok()?.to_le_bytes();
    Some(u16::from_le_bytes([lo, hi]))
}
