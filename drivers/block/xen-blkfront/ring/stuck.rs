// SPDX-License-Identifier: GPL-2.0

//! A ring whose backend answers late, or not at all: it stays Connected
//! (nothing in xenstore says it is gone) and keeps requests past the
//! queue's `io_timeout`. A slow backend and a stalled one look the same
//! to one request; blk-mq's request timeout asks [`Ring::timed_out`],
//! which waits, as upstream does, unless the user set a limit or the
//! disk is being removed ([`crate::blkcore::stall`]).

use super::{
    BlockOps,
    DoneList,
    Fault,
    Ring, //
};
use crate::blkcore::stall::Silence;

impl<O: BlockOps> Ring<O> {
    /// A request of this ring waited a whole `io_timeout` (blk-mq's
    /// timeout work). Responses already on the ring are taken first (an
    /// event lost on the way ends nothing late). Then the ring is given up
    /// on only if it answered nothing for `limit_ms`
    /// ([`crate::blkcore::stall::give_up_limit`]; `None`: never): broken as
    /// for bad backend input, one line, every request in flight failed,
    /// those whose pages the backend maps held until it unmaps them.
    /// Held requests are retried here too: the disk's periodic retry
    /// stops before the removal's last drain, and a request held then
    /// would otherwise never end. While the disk is removed (`removing`)
    /// they are not waited for beyond this timeout
    /// ([`Ring::abandon_held`]). Returns whether the request ended or will
    /// end without another timeout (on a broken ring with none held).
    pub(crate) fn timed_out(&self, limit_ms: Option<u64>, removing: bool) -> bool {
        let mut done = DoneList::new();
        let (ended, finished, abandoned) = {
            let mut st = self.state.lock();
            // Does nothing on a broken ring.
            let _ = st.complete(self, &mut done);
            if !st.broken {
                if let Some(io) = st.io.as_deref_mut() {
                    let now_ms = io.clock_ms();
                    if let Silence::TooLong { silent_ms } = io.datapath.timed_out(now_ms, limit_ms)
                    {
                        let r = io.datapath.break_ring(
                            &mut io.grant_table,
                            Fault::Unanswered { silent_ms },
                            &mut |rq, s| done.push(rq, s),
                        );
                        self.report_broken(r, io.datapath.held());
                        st.broken = true;
                    }
                }
                // Else taken down (a reconnect): its requests come back.
            }
            let (held, finished) = st.retry_held(&mut done);
            let abandoned = if held != 0 && removing {
                st.abandon_held(&mut done)
            } else {
                0
            };
            (st.broken && held == abandoned, finished, abandoned)
        };
        // Freeing a data path may sleep (vfree): after the lock.
        drop(finished);
        done.finish();
        if abandoned != 0 {
            self.report_abandoned(abandoned);
        }
        ended
    }
}
