// SPDX-License-Identifier: GPL-2.0

//! A ring whose backend stopped answering: it stays Connected (nothing in
//! xenstore says it is gone) but takes no request off the ring, or answers
//! none. Only time tells: blk-mq's request timeout (the queue's
//! `io_timeout`) asks [`Ring::timed_out`].

use super::{
    BlockOps,
    DoneList,
    Fault,
    Ring, //
};

impl<O: BlockOps> Ring<O> {
    /// A request of this ring waited a whole timeout period of
    /// `timeout_ms` (blk-mq's timeout work). Responses already on the ring
    /// are taken first; then a ring that answered nothing since the last
    /// timeout is stuck (the backend stays Connected but stopped serving
    /// it: nothing else would ever end its requests, nor the disk's
    /// removal) and is broken as for bad backend input: one line, every
    /// request in flight failed, those whose pages the backend maps held
    /// until it unmaps them. A ring that answered others is slow: one more
    /// period. Returns whether the request ended or will end without
    /// another timeout (on a broken ring: failed, or held).
    pub(crate) fn timed_out(&self, timeout_ms: u32) -> bool {
        let mut done = DoneList::new();
        let ended = {
            let mut st = self.state.lock();
            // Does nothing on a broken ring.
            let _ = st.complete(self, &mut done);
            if st.broken {
                true
            } else if let Some(io) = st.io.as_deref_mut() {
                let stuck = io.datapath.answered_nothing_since_last_timeout();
                if stuck {
                    let r = io.datapath.break_ring(
                        &mut io.grant_table,
                        Fault::Unanswered { timeout_ms },
                        &mut |rq, s| done.push(rq, s),
                    );
                    self.report_broken(r, io.datapath.held());
                    st.broken = true;
                }
                stuck
            } else {
                // Taken down (a reconnect): its requests come back.
                false
            }
        };
        done.finish();
        ended
    }
}
