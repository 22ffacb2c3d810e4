// SPDX-License-Identifier: GPL-2.0

//! Requests finished under the ring lock, handed back to blk-mq after it
//! is dropped.

use kernel::prelude::*;

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
}

impl<O: BlockOps> DoneList<O> {
    pub(super) fn new() -> Self {
        Self {
            items: [const { None }; 32],
            len: 0,
            overflow: KVec::new(),
        }
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
        for (rq, status) in self.items.into_iter().flatten() {
            complete(rq, status);
        }
        for (rq, status) in self.overflow {
            complete(rq, status);
        }
    }
}
