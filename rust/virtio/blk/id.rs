// SPDX-License-Identifier: GPL-2.0

//! [`IdRequest`]: the serial (`VIRTIO_BLK_T_GET_ID`), the one virtio-blk
//! request sent outside blk-mq, so that waiting for it can have a deadline.

use core::sync::atomic::{
    AtomicBool,
    AtomicU8,
    Ordering, //
};

use kernel::{
    bindings,
    prelude::*,
    sync::Arc,
    types::Opaque, //
};

use super::{
    status_to_blk,
    OUTHDR_BYTES,
    STATUS_NOT_WRITTEN,
    VIRTIO_BLK_ID_BYTES, //
};
use crate::blkcore::virtio::request::Command;

/// [`IdRequest::state`]: sent (or not yet), nobody decided its fate.
const ID_PENDING: u8 = 0;
/// [`IdRequest::state`]: the device answered before the waiter gave up.
const ID_ANSWERED: u8 = 1;
/// [`IdRequest::state`]: the waiter gave up; a later answer is dropped.
const ID_ABANDONED: u8 = 2;

/// A `VIRTIO_BLK_T_GET_ID` request (the device serial), sent on a request
/// virtqueue outside blk-mq by [`BlkVq::submit_get_id`](super::BlkVq::submit_get_id) and waited for with
/// a deadline by [`IdRequest::wait`].
///
/// Why outside blk-mq: a blk-mq request that the device never completes
/// holds its queue's usage count, so `blk_execute_rq` sleeps forever and
/// `del_gendisk` (which freezes the queue) would too. This one is a plain
/// buffer that nothing in the block layer waits for.
///
/// Lifetime: the object is shared (an [`Arc`]) by the waiter and the
/// virtqueue. The [`BlkVq`](super::BlkVq) keeps one reference for as long as the device
/// owns the buffers: until the device answers ([`BlkVq::complete_one`](super::BlkVq::complete_one)
/// drops it, also when the waiter has long given up) or, if it never does,
/// until the device is reset ([`BlkVq::reclaim`](super::BlkVq::reclaim)). The waiter keeps its own
/// reference while it reads. The last one frees it; a late answer never
/// touches freed memory and a missing one leaks nothing.
#[pin_data]
pub struct IdRequest {
    pub(super) hdr: [u8; OUTHDR_BYTES],
    /// The serial, written by the device; read only in `ID_ANSWERED`.
    pub(super) id: Opaque<[u8; VIRTIO_BLK_ID_BYTES]>,
    /// Status byte, written by the device; read only in `ID_ANSWERED`.
    pub(super) status: Opaque<u8>,
    /// Scatterlists of `hdr`, `id`, `status`, written once by
    /// `submit_get_id` (guarded by `submitted`) before the device sees them.
    pub(super) sgs: Opaque<[bindings::scatterlist; 3]>,
    pub(super) submitted: AtomicBool,
    /// `ID_PENDING`, then `ID_ANSWERED` (set by the interrupt handler) or
    /// `ID_ABANDONED` (set by the waiter on timeout), whichever comes first.
    state: AtomicU8,
    #[pin]
    done: Opaque<bindings::completion>,
}

// SAFETY: the device-written fields (`id`, `status`) are read only after
// the device returned the buffer (`state` is `ID_ANSWERED`, published with
// release/acquire), `sgs` is written once before the device sees it, the
// rest is atomics and a `struct completion` (usable from any thread).
unsafe impl Send for IdRequest {}
// SAFETY: see `Send`.
unsafe impl Sync for IdRequest {}

impl IdRequest {
    /// A GET_ID request for a device of byte order `le`
    /// ([`super::Device::is_little_endian`]), not yet sent.
    pub fn new(le: bool) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                hdr: Command::GetId.encode(0, 0, 0, le).hdr,
                id: Opaque::zeroed(),
                status: Opaque::new(STATUS_NOT_WRITTEN),
                sgs: Opaque::zeroed(),
                submitted: AtomicBool::new(false),
                state: AtomicU8::new(ID_PENDING),
                done <- Opaque::ffi_init(|slot: *mut bindings::completion| {
                    // SAFETY: `slot` is valid for writes, not yet initialised.
                    unsafe { bindings::init_completion(slot) }
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Give up on the answer without waiting: [`IdRequest::wait`] then
    /// returns at once, a later answer is dropped. No effect once answered.
    pub fn abandon(&self) {
        let _ = self.state.compare_exchange(
            ID_PENDING,
            ID_ABANDONED,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Wait at most `timeout_ms` (uninterruptibly) for the answer: the 20
    /// serial bytes (NUL-padded), `ETIMEDOUT` (the request is abandoned:
    /// a later answer is dropped), or the device's error status
    /// (`EOPNOTSUPP` when it has no serial). Sleeps.
    pub fn wait(&self, timeout_ms: u32) -> Result<[u8; VIRTIO_BLK_ID_BYTES]> {
        if self.state.load(Ordering::Relaxed) == ID_PENDING {
            let jiffies = kernel::time::msecs_to_jiffies(timeout_ms);
            // SAFETY: `done` was initialised by `new` and lives as long as
            // `self`.
            unsafe { bindings::wait_for_completion_timeout(self.done.get(), jiffies) };
        }
        // The state decides, not the wait's return value: an answer that
        // races with the timeout is used, and after this either the
        // interrupt handler or we own the decision, never both.
        match self.state.compare_exchange(
            ID_PENDING,
            ID_ABANDONED,
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Err(ID_ANSWERED) => {
                // SAFETY: `ID_ANSWERED`: the device returned the buffer and
                // writes no more; acquire pairs with `answer`'s release.
                let status = unsafe { self.status.get().read() };
                status_to_blk(status).to_result()?;
                // SAFETY: as above.
                Ok(unsafe { self.id.get().read() })
            }
            _ => Err(ETIMEDOUT),
        }
    }

    /// The device returned the buffer. True when the waiter had already
    /// given up (a late answer). Any context.
    pub(super) fn answer(&self) -> bool {
        let late = self
            .state
            .compare_exchange(
                ID_PENDING,
                ID_ANSWERED,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_err();
        // SAFETY: `done` was initialised by `new`; `complete_all` may be
        // called from interrupt context.
        unsafe { bindings::complete_all(self.done.get()) };
        late
    }
}
