// SPDX-License-Identifier: GPL-2.0

//! The ways this backend misbehaves on purpose (`--misbehave NAME`). Most
//! start once the frontend has sent [`TRIGGER_AFTER`] requests, so the
//! disk is connected and I/O is in flight when the fault comes; the
//! others strike in the keys, on flushes or at teardown ([`Strike`]).

use std::time::Duration;

pub use hostile_scenarios::{by_name, list_line, name, Outcome};

/// Requests served well before a scenario strikes.
pub const TRIGGER_AFTER: u64 = 64;

/// How long after its response a request answered with its data grants
/// still mapped has its pages touched (late-write-*, late-read-*): long
/// enough for a frontend that ends the request at the response to have
/// handed the pages back to their owner, who has used them by then.
pub const LATE_ACCESS_AFTER: Duration = Duration::from_secs(3);

/// What that late write puts in every byte of the pages.
pub const LATE_WRITE_BYTE: u8 = 0x5a;

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
    /// Requests left on the ring, never consumed (so never mapped), while
    /// the backend stays Connected, through the detach too: the toolstack
    /// then removes the frontend's node first, as `xl block-detach
    /// --force` does, the backend's state still Connected.
    StallConnected,
    /// Responses held until the frontend has disconnected, then written.
    AnswerAfterDisconnect,
    /// The backend goes to Closing with requests in flight.
    ClosingMidIo,
    /// The backend process exits with requests in flight.
    Killed,
    /// Data grants kept mapped after the response (persistent grants are
    /// not offered, so every data grant is mapped per request).
    KeepDataGrants,
    /// The first read after the trigger answered OKAY with its data
    /// grants still mapped; [`LATE_ACCESS_AFTER`] later every byte of its
    /// pages is written [`LATE_WRITE_BYTE`], then they are unmapped
    /// (persistent grants are not offered, as for `KeepDataGrants`).
    LateWriteAfterResponse,
    /// As `LateWriteAfterResponse`, the read coming from the page cache
    /// (the guest reads through it): the pages written late are the
    /// cache's own.
    LateWriteCached,
    /// As `LateWriteAfterResponse`, the frontend told not to trust the
    /// backend (`trusted` = 0 in its own node, as a toolstack writes it):
    /// the pages the backend writes late are the frontend's bounce frames,
    /// never the caller's.
    LateWriteBounce,
    /// With persistent grants: the first read after the trigger answered,
    /// then [`LATE_ACCESS_AFTER`] later every byte of the persistent frames
    /// it used is written [`LATE_WRITE_BYTE`] (they stay mapped, as
    /// persistent grants do). The frontend copied the data out at the
    /// response: what it handed back must not change.
    LateWritePersistent,
    /// The first write after the trigger answered OKAY with its data
    /// grants still mapped; [`LATE_ACCESS_AFTER`] later the backend reads
    /// its pages again and says in its `test-late-read` node whether they
    /// still hold what it wrote to the disk, then unmaps them. A frontend
    /// that ended the write at its response has let its owner reuse the
    /// page by then (late-write-check writes every block from one buffer).
    LateReadAfterResponse,
    /// The responses to what is in flight published without a
    /// notification, then Closing a second later: a frontend that fails
    /// what is in flight once the backend is gone, without reading the
    /// ring first, reports requests the backend completed as failed.
    ClosingAfterAnswering,
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
    /// No `feature-flush-cache`, only `feature-barrier`, and no indirect
    /// segments: every flush and FUA write must arrive as a barrier, the
    /// FUA write's carrying its data (counted in `stats`).
    BarrierOnly,
    /// Flushes answered with `BLKIF_RSP_EOPNOTSUPP`.
    FlushNotSupported,
    /// Flushes answered with `BLKIF_RSP_ERROR`: the cache did not reach
    /// stable storage.
    FlushError,
    /// `feature-discard` offered, every discard answered with
    /// `BLKIF_RSP_EOPNOTSUPP`.
    DiscardNotSupported,
    /// As `KeepDataGrants`, and never unmapped: at the detach the backend
    /// goes Closing and removes the vbd, then stays, its mappings held,
    /// until it is killed ([`LINGERS`]).
    NeverUnmaps,
    /// At the detach the frontend's node is removed first, the backend
    /// still Connected (`xl block-detach --force`), and for
    /// [`FORCED_SERVE`] it goes on serving: what the removal writes then
    /// (the page cache's dirty pages) is answered with its data grants
    /// kept mapped, never unmapped; then the vbd goes and the backend
    /// stays until it is killed ([`LINGERS`]).
    NeverUnmapsForced,
    /// Once armed and a read waits on a ring, no request is taken off for
    /// 5 s; meanwhile every data grant reference seen in an earlier
    /// request and carried by none on a ring is mapped (writable if it
    /// can be): the references a frontend grants for a request it then
    /// sends back unsent (no room). Those still mapped once the rings are
    /// served again and [`LATE_ACCESS_AFTER`] has passed are written
    /// [`LATE_WRITE_BYTE`] over and unmapped; their count goes to the
    /// backend's `test-predicted` node. Persistent grants and indirect
    /// segments are not offered.
    MapPredictedGrants,
}

/// How long never-unmaps-forced serves after the frontend's node was
/// removed: the removal's last writes come in that time.
pub const FORCED_SERVE: Duration = Duration::from_secs(10);

/// The scenarios whose backend stays after the detach with data grants
/// still mapped, until dom0 kills it.
pub const LINGERS: &[Scenario] = &[Scenario::NeverUnmaps, Scenario::NeverUnmapsForced];

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
    ("stall-connected", Scenario::StallConnected),
    ("answer-after-disconnect", Scenario::AnswerAfterDisconnect),
    ("closing-mid-io", Scenario::ClosingMidIo),
    ("killed", Scenario::Killed),
    ("keep-data-grants", Scenario::KeepDataGrants),
    (
        "late-write-after-response",
        Scenario::LateWriteAfterResponse,
    ),
    ("late-write-cached", Scenario::LateWriteCached),
    ("late-write-bounce", Scenario::LateWriteBounce),
    ("late-write-persistent", Scenario::LateWritePersistent),
    ("late-read-after-response", Scenario::LateReadAfterResponse),
    ("closing-after-answering", Scenario::ClosingAfterAnswering),
    ("keep-all-at-teardown", Scenario::KeepAllAtTeardown),
    ("map-unsent-grant", Scenario::MapUnsentGrant),
    ("sector-size-change", Scenario::SectorSizeChange),
    ("persistent-flip", Scenario::PersistentFlip),
    ("sectors-shrink", Scenario::SectorsShrink),
    ("garbage-optional-keys", Scenario::GarbageOptionalKeys),
    ("huge-values", Scenario::HugeValues),
    ("barrier-only", Scenario::BarrierOnly),
    ("flush-not-supported", Scenario::FlushNotSupported),
    ("flush-error", Scenario::FlushError),
    ("discard-not-supported", Scenario::DiscardNotSupported),
    ("never-unmaps", Scenario::NeverUnmaps),
    ("never-unmaps-forced", Scenario::NeverUnmapsForced),
    ("map-predicted-grants", Scenario::MapPredictedGrants),
];

/// When a scenario strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strike {
    /// In the keys published before the frontend probes.
    Keys,
    /// On every flush, from the first.
    Flushes,
    /// On every discard, from the first.
    Discards,
    /// Once [`TRIGGER_AFTER`] requests were served; the backend then
    /// writes its `test-fired` node.
    Trigger,
    /// At the disconnect: nothing of it shows before the detach.
    Teardown,
}

/// What a frontend that defends itself shows for a scenario.
pub type Expect = hostile_scenarios::Expect<Strike>;

impl Scenario {
    /// What the frontend must show. No arm for all: a new scenario does
    /// not compile without its own.
    pub const fn expect(self) -> Expect {
        use Outcome::*;
        use Strike::*;
        let (strikes, outcome, fault_named) = match self {
            Scenario::IdOutOfRange => (Trigger, Eio, true),
            Scenario::IdNotInFlight => (Trigger, Eio, true),
            Scenario::DuplicateId => (Trigger, Eio, true),
            Scenario::WrongOperation => (Trigger, Eio, true),
            Scenario::UnknownStatus => (Trigger, Eio, true),
            Scenario::RspProdPastReqProd => (Trigger, Eio, true),
            Scenario::RspProdRingAhead => (Trigger, Eio, true),
            Scenario::RspProdStorm => (Trigger, Eio, true),
            Scenario::IndirectBadOperation => (Trigger, Eio, true),
            Scenario::Stall => (Trigger, Eio, true),
            // Nothing tells the frontend that the backend is gone but the
            // time its requests wait: they must end (with EIO) once the
            // ring answered nothing for a whole timeout period, named once.
            Scenario::StallConnected => (Trigger, Eio, true),
            // The requests held fail when the disk goes; the answers come
            // once the frontend has closed, with nothing left to check.
            Scenario::AnswerAfterDisconnect => (Trigger, Eio, false),
            Scenario::ClosingMidIo => (Trigger, Eio, true),
            Scenario::Killed => (Trigger, Eio, true),
            // The first grant found still mapped breaks the ring.
            Scenario::KeepDataGrants => (Trigger, Eio, true),
            // The read's pages must not go back to their owner while the
            // backend can still write them: the frontend holds the read
            // until the backend unmaps, then fails it (its caller never
            // trusts the buffer); the grant found still mapped is a
            // protocol error that breaks the ring, named once.
            Scenario::LateWriteAfterResponse => (Trigger, Eio, true),
            Scenario::LateWriteCached => (Trigger, Eio, true),
            // The bounce frame the backend still maps is retired (never
            // reused); the data was copied out at the response, so the
            // read itself succeeds; the grant found still mapped breaks
            // the ring, named once.
            Scenario::LateWriteBounce => (Trigger, Eio, true),
            // Nothing the frontend can see: persistent frames stay mapped
            // by design, and the data left them at the response.
            Scenario::LateWritePersistent => (Trigger, Succeeds, false),
            // As late-write-after-response, for a write: held until the
            // backend lets go, then failed; the ring breaks, named once.
            Scenario::LateReadAfterResponse => (Trigger, Eio, true),
            // What the backend answered succeeds (the ring is read before
            // what is left fails: nothing is left), later requests fail as
            // the backend is closing; nothing to name.
            Scenario::ClosingAfterAnswering => (Trigger, Eio, false),
            Scenario::KeepAllAtTeardown => (Teardown, Succeeds, false),
            Scenario::MapUnsentGrant => (Trigger, Succeeds, false),
            // While Connected only `sectors` is read again: these two go
            // unheeded. The shrink reaches the disk's size (xen-hostile.sh
            // checks it); whether fio's requests meet it is a race with the
            // xenstore watch, recorded.
            Scenario::SectorSizeChange => (Trigger, Succeeds, false),
            Scenario::PersistentFlip => (Trigger, Succeeds, false),
            Scenario::SectorsShrink => (Trigger, Unchecked, false),
            // Each bad optional key is ignored with its default (no
            // indirect, persistent grants, flush, discard; one ring of one
            // page), named in one line; the disk works.
            Scenario::GarbageOptionalKeys => (Keys, Succeeds, true),
            Scenario::HugeValues => (Keys, Refused, true),
            Scenario::BarrierOnly => (Keys, Succeeds, false),
            Scenario::FlushNotSupported => (Flushes, Succeeds, true),
            // A failed flush is an I/O error, not a missing feature: the
            // forced write fails and flushes go on (upstream reports an
            // empty flush's error as success and stops flushing). fio's
            // plain writes carry no flush.
            Scenario::FlushError => (Flushes, Succeeds, false),
            // The refusal withdraws discard (named once): the queue stops
            // advertising it. fio sends no discard.
            Scenario::DiscardNotSupported => (Discards, Succeeds, true),
            // As keep-data-grants while connected; the removal that
            // follows ends without the backend's unmap (the held requests
            // fail, their pages left to the grant table) and leaves
            // xenbus free: xen-hostile.sh attaches a second vbd meanwhile.
            Scenario::NeverUnmaps => (Trigger, Eio, true),
            // fio ends before the detach; the removal's own writes are
            // held (answered with their pages mapped), then failed within
            // an io_timeout of the removal: xen-hostile.sh checks that
            // the disk went before the backend was killed.
            Scenario::NeverUnmapsForced => (Teardown, Succeeds, false),
            // Nothing to see but late: a frontend that grants only what it
            // sends gives the backend nothing to map (xen-hostile.sh checks
            // the backend's count, and late-write-check the buffers).
            Scenario::MapPredictedGrants => (Trigger, Succeeds, false),
        };
        Expect {
            strikes,
            outcome,
            fault_named,
        }
    }
}

impl hostile_scenarios::Scenario for Scenario {
    type Strike = Strike;
    const ALL: &'static [(&'static str, Self)] = ALL;
    fn expect(self) -> Expect {
        Scenario::expect(self)
    }
    fn strike_word(s: Strike) -> &'static str {
        match s {
            Strike::Keys => "keys",
            Strike::Flushes => "flushes",
            Strike::Discards => "discards",
            Strike::Trigger => "trigger",
            Strike::Teardown => "teardown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sound() {
        hostile_scenarios::assert_table_is_sound::<Scenario>(|s| s == Strike::Keys);
    }
}
