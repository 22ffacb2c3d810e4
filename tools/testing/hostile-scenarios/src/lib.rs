// SPDX-License-Identifier: GPL-2.0

//! What the misbehaving test backends (tools/testing/xen-backend's
//! `blkif-backend`, tools/testing/virtio-backend's `virtio-blk-backend`)
//! share: each scenario declares what a frontend that defends itself
//! shows ([`Expect`]), and `--list` prints it as one line of five plain
//! words ([`list_line`]) that the guest scripts parse (guest/common.sh
//! `declared`).

#![forbid(unsafe_code)]

/// What becomes of the disk and of the I/O in flight when a scenario
/// strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The probe is refused: no disk, no I/O.
    Refused,
    /// The disk comes up and every request succeeds.
    Succeeds,
    /// The disk comes up and requests fail with EIO.
    Eio,
    /// The disk comes up and requests fail, not necessarily with EIO.
    Fails,
    /// The disk comes up; what becomes of the requests is recorded, not
    /// asserted: the backend does what no frontend can stop (it writes
    /// guest memory after answering), so their data may be wrong; or
    /// whether they meet the fault at all is a race (the guest script
    /// checks the fault's effect itself).
    Unchecked,
}

/// What a frontend that defends itself shows for a scenario that strikes
/// at `S` (each backend's own moments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect<S> {
    /// When it strikes.
    pub strikes: S,
    /// The disk and its requests.
    pub outcome: Outcome,
    /// The frontend names the fault in one kernel line at warning level
    /// or above.
    pub fault_named: bool,
}

/// A backend's table of scenarios.
pub trait Scenario: Copy + Eq + core::fmt::Debug + 'static {
    /// When one strikes.
    type Strike: Copy + Eq + core::fmt::Debug;
    /// Every scenario with its name on the command line.
    const ALL: &'static [(&'static str, Self)];
    /// What the frontend must show.
    fn expect(self) -> Expect<Self::Strike>;
    /// The word of `--list` for `s` ("strikes=WORD").
    fn strike_word(s: Self::Strike) -> &'static str;
}

/// One line of `--list`: the name, then the expectation as words the
/// guest parses ("strikes=trigger disk=up io=eio fault=named").
pub fn list_line<S: Scenario>(name: &str, s: S) -> String {
    let e = s.expect();
    let (disk, io) = match e.outcome {
        Outcome::Refused => ("refused", "none"),
        Outcome::Succeeds => ("up", "ok"),
        Outcome::Eio => ("up", "eio"),
        Outcome::Fails => ("up", "fail"),
        Outcome::Unchecked => ("up", "any"),
    };
    let fault = if e.fault_named { "named" } else { "optional" };
    format!(
        "{name} strikes={} disk={disk} io={io} fault={fault}",
        S::strike_word(e.strikes)
    )
}

/// The scenario called `name`.
pub fn by_name<S: Scenario>(name: &str) -> Option<S> {
    S::ALL.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The name of `s`.
pub fn name<S: Scenario>(s: S) -> &'static str {
    S::ALL
        .iter()
        .find(|(_, x)| *x == s)
        .map_or("?", |&(n, _)| n)
}

/// Panics unless `S`'s table is one a guest can use: names unique and
/// round-tripping, each `--list` line five plain words (the host joins
/// them with ':' and ',' into one word), a refusal only where `probe_time`
/// says the scenario strikes before the disk exists. For each backend's
/// tests.
pub fn assert_table_is_sound<S: Scenario>(probe_time: impl Fn(S::Strike) -> bool) {
    for (i, (n, s)) in S::ALL.iter().enumerate() {
        assert_eq!(by_name::<S>(n), Some(*s));
        assert_eq!(name(*s), *n);
        assert!(
            S::ALL[i + 1..].iter().all(|(m, t)| m != n && t != s),
            "{n} twice"
        );
        let line = list_line(n, *s);
        let words: Vec<&str> = line.split(' ').collect();
        assert_eq!(words.len(), 5, "{line}");
        assert_eq!(words[0], *n);
        assert!(
            line.chars()
                .all(|c| c.is_ascii_alphanumeric() || " -=".contains(c)),
            "{line}"
        );
        let e = s.expect();
        if e.outcome == Outcome::Refused {
            assert!(
                probe_time(e.strikes),
                "{n}: refused, but strikes after the probe"
            );
        }
    }
    assert_eq!(by_name::<S>("no-such-scenario"), None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Toy {
        Early,
        Late,
    }

    impl Scenario for Toy {
        type Strike = bool;
        const ALL: &'static [(&'static str, Self)] = &[("early", Toy::Early), ("late", Toy::Late)];
        fn expect(self) -> Expect<bool> {
            match self {
                Toy::Early => Expect {
                    strikes: true,
                    outcome: Outcome::Refused,
                    fault_named: true,
                },
                Toy::Late => Expect {
                    strikes: false,
                    outcome: Outcome::Eio,
                    fault_named: false,
                },
            }
        }
        fn strike_word(s: bool) -> &'static str {
            if s {
                "probe"
            } else {
                "trigger"
            }
        }
    }

    #[test]
    fn lines_say_the_expectation() {
        assert_eq!(
            list_line("early", Toy::Early),
            "early strikes=probe disk=refused io=none fault=named"
        );
        assert_eq!(
            list_line("late", Toy::Late),
            "late strikes=trigger disk=up io=eio fault=optional"
        );
        assert_table_is_sound::<Toy>(|s| s);
    }

    #[test]
    #[should_panic(expected = "refused, but strikes after the probe")]
    fn a_refusal_after_the_probe_is_caught() {
        assert_table_is_sound::<Toy>(|_| false);
    }
}
