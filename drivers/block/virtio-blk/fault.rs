// SPDX-License-Identifier: GPL-2.0

//! Test-only fault injection (debugfs `virtio_blk_rs/inject`, only in
//! kernels with `CONFIG_FAULT_INJECTION`): writing `freeze-nomem` makes the
//! next freeze (a system sleep, a transport reset) fail with `ENOMEM` where
//! it allocates, before it stops anything: the disk must go on serving
//! requests, as if the sleep had never been asked for.

#![cfg(CONFIG_FAULT_INJECTION)]

use kernel::{
    debugfs,
    prelude::*,
    uaccess::UserSliceReader, //
};

use crate::virtio;

/// The module's `inject` file.
pub(crate) struct FaultInjector;

impl debugfs::Reader for FaultInjector {
    fn read_from_slice(&self, reader: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 16];
        let n = reader.len().min(buf.len());
        reader.read_slice(buf.get_mut(..n).ok_or(EINVAL)?)?;
        match buf.get(..n).map(|b| b.trim_ascii_end()) {
            Some(b"freeze-nomem") => {
                virtio::fault::fail_next_freeze_allocation();
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }
}

/// The module's debugfs directory and its `inject` file (none when debugfs
/// is unavailable: a test then fails to find the file, the module loads).
pub(crate) struct Injection {
    _inject: Option<Pin<KBox<debugfs::File<FaultInjector>>>>,
    _dir: debugfs::Dir,
}

impl Injection {
    pub(crate) fn new() -> Self {
        let dir = debugfs::Dir::new(c"virtio_blk_rs");
        let inject = KBox::pin_init(dir.write_only_file(c"inject", FaultInjector), GFP_KERNEL).ok();
        Self {
            _inject: inject,
            _dir: dir,
        }
    }
}
