// SPDX-License-Identifier: GPL-2.0

//! Requests held because the backend still maps their pages: answered (or
//! failed with their ring) while the backend kept a grant of the caller's
//! own page, they are not ended until it lets go, since ending one gives
//! the page back to its owner (the page cache, an O_DIRECT buffer) while
//! the backend could still write it. The data path holds them
//! (`blkcore::datapath::DataPath::retry_held`); here they are retried from
//! the disk's periodic work and, at removal, waited for. A data path taken
//! down with requests held is parked on its ring until they end.

use kernel::{
    prelude::*,
    time::{
        delay::fsleep,
        Delta, //
    },
};

use super::{
    BlockOps,
    DoneList,
    Ring,
    RingState,
    Rq, //
};
use crate::datapath::RingDataPath;

impl<O: BlockOps> Ring<O> {
    /// Keeps a taken-down data path whose requests are held (see
    /// [`RingState::retry_held`]). Without memory to keep it, it is leaked:
    /// its held requests then never end (removal waits for them), but no
    /// page goes back while the backend can write it.
    pub(super) fn park(&self, io: KBox<RingDataPath<Rq<O>>>) {
        let mut st = self.state.lock();
        if st.parked.reserve(1, GFP_ATOMIC).is_ok() {
            if let Err(e) = st.parked.push_within_capacity(io) {
                KBox::leak(e.0);
            }
        } else {
            KBox::leak(io);
        }
    }

    /// Tries again to end the requests held because the backend still
    /// maps their pages; those it let go of fail now. Returns how many are
    /// still held.
    pub(crate) fn retry_held(&self) -> u32 {
        let mut done = DoneList::new();
        let (held, finished) = self.state.lock().retry_held(&mut done);
        // Freeing a data path may sleep (vfree): after the lock.
        drop(finished);
        done.finish();
        held
    }

    /// Waits until no request is held (see [`Ring::retry_held`]), retrying
    /// every 100 ms: the block layer cannot delete the disk before they
    /// end, and they should not end before the backend unmaps their pages.
    /// Said every 10 s. Bounded: a backend that never unmaps would hold
    /// the removal, and with it the xenwatch thread (every later xenbus
    /// event of the guest), for ever; after 30 s ([`HELD_AT_REMOVAL_TRIES`]) the held
    /// requests end anyway ([`Ring::abandon_held`]).
    pub(crate) fn wait_held(&self) {
        let mut tries = 0u32;
        loop {
            let held = self.retry_held();
            if held == 0 {
                return;
            }
            if tries >= HELD_AT_REMOVAL_TRIES {
                self.abandon_held();
                return;
            }
            if tries % 100 == 0 {
                dev_notice!(
                    self.dev,
                    "ring {}: waiting for the backend to unmap the pages of {} held requests\n",
                    self.index,
                    held
                );
            }
            tries = tries.wrapping_add(1);
            fsleep(Delta::from_millis(100));
        }
    }

    /// The disk is going and the backend still maps the pages of held
    /// requests: they end with an I/O error, and their grants with a
    /// deferred release (the grant table keeps each page, leaked, until
    /// the backend unmaps it; none is freed under it). One line.
    pub(crate) fn abandon_held(&self) {
        let mut done = DoneList::new();
        let ended = self.state.lock().abandon_held(&mut done);
        done.finish();
        if ended != 0 {
            self.report_abandoned(ended);
        }
    }

    /// The line of [`Ring::abandon_held`].
    pub(super) fn report_abandoned(&self, ended: u32) {
        dev_warn!(
            self.dev,
            "ring {}: the backend still maps the pages of {} held requests at removal: failed, their pages left to the grant table until it unmaps them\n",
            self.index,
            ended
        );
    }
}

/// How long a removal waits for the backend to unmap the pages of held
/// requests ([`Ring::wait_held`]), in tries 100 ms apart: 30 s.
const HELD_AT_REMOVAL_TRIES: u32 = 300;

impl<O: BlockOps> RingState<O> {
    /// [`Ring::retry_held`] under the lock: the live data path's and the
    /// parked ones'. Returns how many requests are still held, and one
    /// parked data path that holds none any more, for the caller to free
    /// after the lock.
    pub(super) fn retry_held(
        &mut self,
        done: &mut DoneList<O>,
    ) -> (u32, Option<KBox<RingDataPath<Rq<O>>>>) {
        let mut held = 0u32;
        if let Some(io) = self.io.as_deref_mut() {
            io.datapath
                .retry_held(&mut io.grant_table, &mut |rq, s| done.push(rq, s));
            held = held.saturating_add(io.datapath.held());
        }
        let mut finished = None;
        for (i, io) in self.parked.iter_mut().enumerate() {
            let io = &mut **io;
            io.datapath
                .retry_held(&mut io.grant_table, &mut |rq, s| done.push(rq, s));
            let h = io.datapath.held();
            held = held.saturating_add(h);
            if h == 0 && finished.is_none() {
                finished = Some(i);
            }
        }
        (held, finished.and_then(|i| self.parked.remove(i).ok()))
    }

    /// [`Ring::abandon_held`] under the lock: the live data path's and the
    /// parked ones'. Returns how many requests ended. The parked data
    /// paths stay (their grants' deferred releases are the grant table's
    /// now; they go with the ring).
    pub(super) fn abandon_held(&mut self, done: &mut DoneList<O>) -> u32 {
        let mut ended = 0u32;
        if let Some(io) = self.io.as_deref_mut() {
            ended = ended.saturating_add(
                io.datapath
                    .abandon_held(&mut io.grant_table, &mut |rq, s| done.push(rq, s)),
            );
        }
        for io in self.parked.iter_mut() {
            let io = &mut **io;
            ended = ended.saturating_add(
                io.datapath
                    .abandon_held(&mut io.grant_table, &mut |rq, s| done.push(rq, s)),
            );
        }
        ended
    }
}
