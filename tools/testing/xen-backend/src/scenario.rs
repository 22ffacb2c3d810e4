// SPDX-License-Identifier: GPL-2.0

//! The ways this backend misbehaves on purpose (`--misbehave NAME`). Each
//! starts once the frontend has sent [`TRIGGER_AFTER`] requests, so the
//! disk is connected and I/O is in flight when the fault comes.

/// Requests served well before a scenario strikes.
pub const TRIGGER_AFTER: u64 = 64;

/// One misbehaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A response whose id no request ever had.
    IdOutOfRange,
    /// A second response for a request already answered.
    IdNotInFlight,
    /// Every response written twice.
    DuplicateId,
    /// A response with another operation than its request's.
    WrongOperation,
    /// A response with a status that blkif does not define.
    UnknownStatus,
    /// `rsp_prod` set past the frontend's `req_prod`.
    RspProdPastReqProd,
    /// `rsp_prod` more than a ring ahead of the responses consumed.
    RspProdRingAhead,
    /// `rsp_prod` moved back and forth many times, with notifications.
    RspProdStorm,
    /// An indirect request answered with `BLKIF_OP_INDIRECT`.
    IndirectBadOperation,
    /// Requests consumed and never answered.
    Stall,
    /// Responses held until the frontend has disconnected, then written.
    AnswerAfterDisconnect,
    /// The backend goes to Closing with requests in flight.
    ClosingMidIo,
    /// The backend process exits with requests in flight.
    Killed,
    /// Data grants kept mapped after the response (persistent grants are
    /// not offered, so every data grant is mapped per request).
    KeepDataGrants,
    /// Nothing unmapped at disconnect: ring and grants stay mapped.
    KeepAllAtTeardown,
    /// Grant references the frontend never sent are mapped.
    MapUnsentGrant,
    /// `sector-size` changed after Connected.
    SectorSizeChange,
    /// `feature-persistent` changed after Connected.
    PersistentFlip,
    /// `sectors` shrunk below the I/O in flight.
    SectorsShrink,
    /// Garbage in the optional feature keys.
    GarbageOptionalKeys,
    /// Values far longer than any number.
    HugeValues,
    /// No `feature-flush-cache`, only `feature-barrier`: every flush and
    /// FUA write must arrive as a barrier (counted in `stats`).
    BarrierOnly,
    /// Flushes answered with `BLKIF_RSP_EOPNOTSUPP`.
    FlushNotSupported,
}

/// Every scenario with its name on the command line.
pub const ALL: &[(&str, Scenario)] = &[
    ("id-out-of-range", Scenario::IdOutOfRange),
    ("id-not-in-flight", Scenario::IdNotInFlight),
    ("duplicate-id", Scenario::DuplicateId),
    ("wrong-operation", Scenario::WrongOperation),
    ("unknown-status", Scenario::UnknownStatus),
    ("rsp-prod-past-req-prod", Scenario::RspProdPastReqProd),
    ("rsp-prod-ring-ahead", Scenario::RspProdRingAhead),
    ("rsp-prod-storm", Scenario::RspProdStorm),
    ("indirect-bad-operation", Scenario::IndirectBadOperation),
    ("stall", Scenario::Stall),
    ("answer-after-disconnect", Scenario::AnswerAfterDisconnect),
    ("closing-mid-io", Scenario::ClosingMidIo),
    ("killed", Scenario::Killed),
    ("keep-data-grants", Scenario::KeepDataGrants),
    ("keep-all-at-teardown", Scenario::KeepAllAtTeardown),
    ("map-unsent-grant", Scenario::MapUnsentGrant),
    ("sector-size-change", Scenario::SectorSizeChange),
    ("persistent-flip", Scenario::PersistentFlip),
    ("sectors-shrink", Scenario::SectorsShrink),
    ("garbage-optional-keys", Scenario::GarbageOptionalKeys),
    ("huge-values", Scenario::HugeValues),
    ("barrier-only", Scenario::BarrierOnly),
    ("flush-not-supported", Scenario::FlushNotSupported),
];

/// The scenario called `name`.
pub fn by_name(name: &str) -> Option<Scenario> {
    ALL.iter().find(|(n, _)| *n == name).map(|&(_, s)| s)
}

/// The name of `s`.
pub fn name(s: Scenario) -> &'static str {
    ALL.iter().find(|(_, x)| *x == s).map_or("?", |&(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, (n, s)) in ALL.iter().enumerate() {
            assert_eq!(by_name(n), Some(*s));
            assert_eq!(name(*s), *n);
            assert!(
                ALL[i + 1..].iter().all(|(m, t)| m != n && t != s),
                "{n} twice"
            );
        }
        assert_eq!(by_name("no-such-scenario"), None);
    }
}
