// SPDX-License-Identifier: GPL-2.0

//! Where the block glue prepares a request before it takes the ring lock
//! ([`Scratch`]), and the one order the two locks are taken in
//! ([`Ring::with_scratch_then_state`]).

use kernel::prelude::*;

use super::{
    BlockOps,
    Ring,
    RingState,
    Rq, //
};
use crate::blkcore::{
    datapath::{
        pregrant::PreGranted,
        QueueError, //
    },
    mapping::MappedSegment,
};
use crate::datapath::KernelStorage;
use crate::xen::{
    evtchn::Notifier,
    grant::{
        Frame,
        GrantTable, //
    },
};

/// Where the block glue prepares a request before it takes the ring lock;
/// sized when the backend connects (no room before: requests wait).
pub(crate) struct Scratch {
    /// With bounce frames: the request's per-frame segments, granted
    /// through the pool under the ring lock.
    pub(crate) segs: KVec<MappedSegment<Frame>>,
    /// Without: the request's segments granted as they are walked.
    pub(crate) pre: Option<PreGranted<KernelStorage>>,
    /// Grants to the backend made here (its own batch of claimed
    /// references: the ring's is under the ring lock).
    pub(crate) gt: GrantTable,
}

impl Scratch {
    /// Before the first connection: no room (requests wait).
    pub(super) fn unconnected() -> Self {
        Self {
            segs: KVec::new(),
            pre: None,
            gt: GrantTable::new(0),
        }
    }
}

/// A request's data as [`Scratch`] holds it for [`RingState::queue`].
pub(crate) enum Prepared<'a> {
    /// Mapped to per-frame segments (with bounce frames).
    Mapped(&'a [MappedSegment<Frame>]),
    /// Granted (without); empty for a flush or discard.
    Granted(&'a mut PreGranted<KernelStorage>),
}

impl<O: BlockOps> Ring<O> {
    /// Runs `f` with the ring's [`Scratch`] locked and the way to the ring
    /// lock ([`StateAfterScratch`]): the one order the two locks are taken
    /// in (the ring lock is never held while waiting for the scratch).
    /// Only for blk-mq's `queue_rq` (see [`Ring::with_state_then_notify`]).
    pub(crate) fn with_scratch_then_state<R>(
        &self,
        f: impl FnOnce(&mut Scratch, StateAfterScratch<'_, O>) -> R,
    ) -> R {
        let mut scratch = self.scratch.lock();
        f(&mut scratch, StateAfterScratch { ring: self })
    }
}

/// The ring lock of a ring whose [`Scratch`] is held (made by
/// [`Ring::with_scratch_then_state`]).
pub(crate) struct StateAfterScratch<'a, O: BlockOps> {
    ring: &'a Ring<O>,
}

impl<O: BlockOps> StateAfterScratch<'_, O> {
    /// Whether the ring would take a read or write now (see
    /// [`crate::blkcore::datapath::DataPath::has_room`]): asked before a
    /// request's pages are granted, so that none is granted for a request
    /// that goes back unsent. `Err` as [`StateAfterScratch::queue`] would
    /// give: `Io` on a ring that refuses requests, `Busy` otherwise.
    pub(crate) fn room(&self) -> Result<(), QueueError> {
        self.ring.with_state(|st| {
            if st.refuses_requests() {
                Err(QueueError::Io)
            } else if st.has_room() {
                Ok(())
            } else {
                Err(QueueError::Busy)
            }
        })
    }

    /// Runs `queue` (one of the ring's queueing entries) on `rq` under the
    /// ring lock if the ring can take requests, and publishes the batch if
    /// this request is its `last`. On `Err` the request comes back, not
    /// ended, with why.
    #[inline(always)]
    pub(crate) fn queue(
        &self,
        rq: Rq<O>,
        last: bool,
        queue: impl FnOnce(&mut RingState<O>, Rq<O>) -> Result<(), (Rq<O>, QueueError)>,
    ) -> Result<(), (Rq<O>, QueueError)> {
        self.ring.with_state_then_notify(|st| {
            if !st.usable() {
                let e = if st.refuses_requests() {
                    QueueError::Io
                } else {
                    QueueError::Busy
                };
                return (Err((rq, e)), Notifier::default());
            }
            let r = queue(st, rq);
            (r, if last { st.push() } else { Notifier::default() })
        })
    }
}
