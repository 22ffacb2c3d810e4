// SPDX-License-Identifier: GPL-2.0

//! The stall watch against its specification, over any sequence of request
//! timeouts: the silence it measures is the time since the first timeout
//! of the unbroken run that saw the current answer count, it gives up
//! exactly when that reaches the limit, and never without one.

use blkcore::stall::{
    give_up_limit,
    Silence,
    StallWatch, //
};
use proptest::prelude::*;

/// One request timeout: answers since the previous one, and the time
/// since it (0: the same pass of blk-mq's timeout work).
fn timeouts() -> impl Strategy<Value = Vec<(u64, u64)>> {
    proptest::collection::vec(
        (
            prop_oneof![3 => Just(0u64), 1 => 1u64..4],
            prop_oneof![Just(0u64), 0u64..40_000],
        ),
        1..60,
    )
}

proptest! {
    #[test]
    fn the_silence_is_the_unbroken_run_of_one_answer_count(
        seq in timeouts(),
        limit in prop::option::of(1u64..60_000),
    ) {
        let mut w = StallWatch::new();
        let (mut answers, mut now) = (0u64, 0u64);
        let mut run_start = None::<(u64, u64)>;
        for (more, dt) in seq {
            answers += more;
            now += dt;
            let start = match run_start {
                Some((a, t)) if a == answers => t,
                _ => {
                    run_start = Some((answers, now));
                    now
                }
            };
            let silent_ms = now - start;
            let want = match limit {
                Some(l) if silent_ms >= l => Silence::TooLong { silent_ms },
                _ => Silence::Tolerated,
            };
            prop_assert_eq!(w.timed_out(answers, now, limit), want);
        }
    }

    #[test]
    fn removal_always_has_a_limit_of_at_most_one_timeout(param in any::<u32>(), timeout in any::<u32>()) {
        let l = give_up_limit(param, timeout, true);
        prop_assert!(l.is_some_and(|l| l <= u64::from(timeout)));
        if param != 0 {
            prop_assert_eq!(l, Some(u64::from(param.min(timeout))));
        }
    }
}

#[test]
fn by_default_nothing_is_given_up() {
    assert_eq!(give_up_limit(0, 30_000, false), None);
    assert_eq!(give_up_limit(0, 5_000, false), None);
    assert_eq!(give_up_limit(60_000, 5_000, false), Some(60_000));
    assert_eq!(give_up_limit(0, 30_000, true), Some(30_000));
}

#[test]
fn the_throttled_disk_of_the_report_is_waited_for() {
    // 32 readers on a disk answering two requests a second, `io_timeout`
    // 5 s: after 5 s about 22 requests are still in flight and expire in
    // one pass, then again every 5 s; answers keep coming between passes.
    // Without a limit, and with one of a single timeout.
    for param in [0, 5_000] {
        let mut w = StallWatch::new();
        let limit = give_up_limit(param, 5_000, false);
        let mut answers = 10;
        for pass in 1..=4u64 {
            for _ in 0..22 {
                assert_eq!(
                    w.timed_out(answers, pass * 5_000, limit),
                    Silence::Tolerated,
                    "limit {param}"
                );
            }
            answers += 10;
        }
    }
}
