// SPDX-License-Identifier: GPL-2.0

//! Requests finished under the ring lock, handed back to blk-mq after it
//! is dropped, with the features the backend withdrew meanwhile.

use kernel::prelude::*;

use crate::datapath::Withdrawn;

use super::{
    complete,
    BlockOps,
    Rq,
    Status, //
};

/// Finished requests collected under the ring lock, completed after it is
/// dropped.
pub(crate) struct DoneList<O: BlockOps> {
    items: [Option<(Rq<O>, Status)>; 32],
    len: usize,
    overflow: KVec<(Rq<O>, Status)>,
    /// Taken off the disk's live queue limits through the first request
    /// completed (every request of a ring is of the one disk): the request
    /// the backend refused is among them (a flush or discard has no pages
    /// to hold it back).
    withdrawn: Withdrawn,
}

impl<O: BlockOps> DoneList<O> {
    pub(super) fn new() -> Self {
        Self {
            items: [const { None }; 32],
            len: 0,
            overflow: KVec::new(),
            withdrawn: Withdrawn::default(),
        }
    }

    /// Features the backend withdrew (see [`DoneList::finish`]).
    pub(super) fn withdraw(&mut self, w: Withdrawn) {
        self.withdrawn.discard |= w.discard;
        self.withdrawn.write_cache |= w.write_cache;
    }

    pub(super) fn push(&mut self, rq: Rq<O>, status: Status) {
        if let Some(slot) = self.items.get_mut(self.len) {
            *slot = Some((rq, status));
            self.len += 1;
        } else if self.overflow.reserve(1, GFP_ATOMIC).is_ok() {
            let _ = self.overflow.push_within_capacity((rq, status));
        } else {
            // Out of memory in the handler: complete right away.
            complete(rq, status);
        }
    }

    pub(super) fn finish(self) {
        let w = self.withdrawn;
        let mut all = Iterator::chain(self.items.into_iter().flatten(), self.overflow);
        // The first request carries the withdrawal; the others only end.
        if let Some((rq, status)) = all.next() {
            if w.discard {
                rq.withdraw_discard();
            }
            if w.write_cache {
                rq.withdraw_write_cache();
            }
            complete(rq, status);
        }
        for (rq, status) in all {
            complete(rq, status);
        }
    }
}
