// SPDX-License-Identifier: GPL-2.0

//! Slow or stalled: what a request timeout says about the ring or queue
//! the request waits on, and when a driver gives up on it.
//!
//! blk-mq calls the driver's `timeout` for every request that waited the
//! queue's `io_timeout`, all the expired ones in one pass. An honest
//! backend or device that is merely slow (a throttled cloud disk with a
//! deep queue, a multipath failover, a long discard) keeps requests past
//! that timeout for as long as its storage stalls; the C drivers have no
//! `timeout` at all and wait for ever, and lose nothing. So do ours by
//! default ([`give_up_limit`] is `None`): a request timeout never fails a
//! request. Only a limit the user set, or the disk's removal, lets a
//! driver give up, and then only on a ring that answered *nothing* for
//! that long, measured in time ([`StallWatch`]), never in callbacks: the
//! second of two requests that expire together is not evidence of
//! anything.

/// How long a ring may answer nothing before its driver gives up on it,
/// in milliseconds; `None`: never.
///
/// `param_ms` is the module parameter (`give_up_after_ms`, 0 for never),
/// `timeout_ms` the queue's `io_timeout`. While the disk is being removed
/// (`removing`) a ring that answers nothing for a whole `io_timeout` is
/// given up on, whatever the parameter says, so that removal ends in
/// bounded time; one that answers goes on being waited for, so that an
/// honest backend's last writes reach it.
pub fn give_up_limit(param_ms: u32, timeout_ms: u32, removing: bool) -> Option<u64> {
    let set = (param_ms != 0).then_some(u64::from(param_ms));
    if removing {
        let removal = u64::from(timeout_ms);
        Some(set.map_or(removal, |p| p.min(removal)))
    } else {
        set
    }
}

/// What a request timeout found ([`StallWatch::timed_out`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Silence {
    /// Slow, or silent for less than the limit (or no limit): one more
    /// period.
    Tolerated,
    /// The ring answered nothing for `silent_ms`, at least the limit: the
    /// driver gives up on it (fails what it holds).
    TooLong {
        /// How long the ring has been seen answering nothing.
        silent_ms: u64,
    },
}

/// The answers a ring or queue had given when a request timeout first
/// found that count, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    answers: u64,
    at_ms: u64,
}

/// Tells a stalled ring from a slow one, from request timeouts alone: no
/// clock is read on the data path.
///
/// A timeout that finds the ring's answer count changed since the last
/// one starts a silence at that moment; one that finds it unchanged
/// measures the silence from there. The measure is never longer than the
/// real silence: the request that timed out at the start was not answered
/// (the count did not move), so it was in flight, and nothing was
/// answered, all along. It is shorter by at most the time between two
/// timeouts (one `io_timeout`): a driver gives up between the limit and
/// the limit plus one `io_timeout` after the last answer, late rather
/// than early.
///
/// # Invariants
///
/// `seen`, when set, holds a count and a time that a timeout saw together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StallWatch {
    seen: Option<Seen>,
}

impl StallWatch {
    /// No timeout seen yet.
    pub const fn new() -> Self {
        Self { seen: None }
    }

    /// A request timed out at `now_ms` (any monotonic clock in
    /// milliseconds) on a ring that has answered `answers` requests in all
    /// (responses taken, however: interrupt, polling, the timeout's own
    /// drain). `limit_ms` as [`give_up_limit`].
    pub fn timed_out(&mut self, answers: u64, now_ms: u64, limit_ms: Option<u64>) -> Silence {
        let since = match self.seen {
            Some(s) if s.answers == answers => s.at_ms,
            _ => {
                self.seen = Some(Seen {
                    answers,
                    at_ms: now_ms,
                });
                now_ms
            }
        };
        let silent_ms = now_ms.saturating_sub(since);
        match limit_ms {
            Some(limit) if silent_ms >= limit => Silence::TooLong { silent_ms },
            _ => Silence::Tolerated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_expire_together_are_not_a_stall() {
        let mut w = StallWatch::new();
        // 32 requests expire in one pass of blk-mq's timeout work.
        for _ in 0..32 {
            assert_eq!(w.timed_out(7, 5_000, Some(5_000)), Silence::Tolerated);
        }
    }

    #[test]
    fn without_a_limit_nothing_is_given_up() {
        let mut w = StallWatch::new();
        for t in 0..1000 {
            assert_eq!(w.timed_out(0, t * 30_000, None), Silence::Tolerated);
        }
    }
}
