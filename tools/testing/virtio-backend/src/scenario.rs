// SPDX-License-Identifier: GPL-2.0

//! The ways this device misbehaves on purpose (`--misbehave NAME`). Most
//! start once [`TRIGGER_AFTER`] requests have been answered, so the disk
//! is up and I/O is in flight when the fault comes; the others strike in
//! the configuration space the driver reads at probe, or on one request
//! type ([`Strike`]).

use std::time::Duration;

pub use hostile_scenarios::{by_name, list_line, name, Outcome};

/// Requests answered well before a scenario strikes.
pub const TRIGGER_AFTER: u64 = 64;

/// How long after its used element a read's data buffers are written over
/// (late-write-after-used): long enough for a driver that ends the request
/// at the used element to have handed the pages back to their owner, who
/// has read them by then.
pub const LATE_ACCESS_AFTER: Duration = Duration::from_secs(3);

/// What that late write puts in every byte of the buffers.
pub const LATE_WRITE_BYTE: u8 = 0x5a;

/// How many configuration change notifications config-storm sends.
pub const STORM_LENGTH: u32 = 1000;

/// One misbehaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A used element whose id is no descriptor head the driver made
    /// available (the queue size + 5); the request it stands for is never
    /// answered.
    UsedIdOutOfRange,
    /// One request's used element written twice in a row.
    UsedIdTwice,
    /// A read's used length 4096 bytes more than its writable buffers.
    UsedLenTooLarge,
    /// A read's used length 0: not even the status byte counted.
    UsedLenTooSmall,
    /// A used element added without the status byte written: the driver
    /// finds whatever its buffer held.
    StatusNeverWritten,
    /// A request answered with status 7, which virtio-blk does not define.
    UnknownStatus,
    /// Every read from the trigger on answered `VIRTIO_BLK_S_UNSUPP`.
    UnsuppReads,
    /// Every read from the trigger on answered `VIRTIO_BLK_S_IOERR`: bad
    /// but within the spec.
    IoerrReads,
    /// Requests consumed and never answered.
    Stall,
    /// One request answered, then nothing more: a vhost-user backend
    /// cannot set `DEVICE_NEEDS_RESET` in the device status (QEMU owns
    /// it), so this sends a configuration change notification and stops
    /// answering, as a device that wants a reset would. QEMU 7.2 passes a
    /// notification on only when the capacity changed, so to the guest
    /// this is a stall after one answer.
    NeedsReset,
    /// [`STORM_LENGTH`] configuration change notifications in a row.
    /// QEMU 7.2 passes one to the guest only when the capacity changed,
    /// so the capacity goes up by 8 sectors and back with each, ending
    /// where it started.
    ConfigStorm,
    /// The capacity changed to `u64::MAX / 2` sectors (a byte size no
    /// `loff_t` holds), with a configuration change notification.
    CapacityHuge,
    /// `blk_size` changed to 4096 at runtime, with a configuration change
    /// notification (QEMU 7.2 forwards only a new capacity to the guest:
    /// there the driver never sees it).
    BlkSizeChange,
    /// Queue 1 no longer served while queue 0 goes on.
    OneQueueStalls,
    /// A read answered OK, then [`LATE_ACCESS_AFTER`] later its data
    /// buffers written with [`LATE_WRITE_BYTE`]. A device can do this and
    /// the driver cannot stop it: recorded, not judged.
    LateWriteAfterUsed,
    /// `seg_max` 0 at probe.
    SegMaxZero,
    /// `blk_size` 8192 at probe (larger than a page).
    BlkSize8k,
    /// `blk_size` 1000 at probe (not a power of two).
    BlkSizeOdd,
    /// At probe `physical_block_exp` 3, `alignment_offset` 9 (not below
    /// the 8 logical blocks of a physical one), `min_io_size` 3 (not a
    /// multiple of them), `opt_io_size` 5.
    TopologyOdd,
    /// A capacity of `u64::MAX / 256` sectors at probe: its byte size does
    /// not fit a `loff_t`.
    CapacityLoffOverflow,
    /// `num_queues` 0 with `VIRTIO_BLK_F_MQ` offered (QEMU 7.2 puts its own
    /// `num-queues` in the guest's view of the field: the guest never
    /// sees the 0).
    NumQueuesZero,
    /// `num_queues` 65535 (QEMU 7.2 puts its own `num-queues` there too).
    NumQueuesHuge,
    /// `VIRTIO_BLK_T_GET_ID` consumed and never answered; everything else
    /// is.
    GetIdNeverAnswered,
    /// Discard and write-zeroes requests answered `VIRTIO_BLK_S_IOERR`.
    DiscardErrors,
    /// Flushes answered `VIRTIO_BLK_S_IOERR`: the cache did not reach
    /// stable storage.
    FlushErrors,
    /// Once the driver has reset the device and started it again, flush,
    /// discard and write-zeroes are gone and `VIRTIO_BLK_F_FLUSH`,
    /// `_DISCARD`, `_WRITE_ZEROES` and `_MQ` no longer offered. QEMU 7.2
    /// reads the features once, at connect, and keeps acknowledging the
    /// old ones, so the guest sees the withdrawal only as those requests
    /// answered `VIRTIO_BLK_S_UNSUPP`.
    FeaturesWithdrawnOnReset,
}

/// Every scenario with its name on the command line.
pub const ALL: &[(&str, Scenario)] = &[
    ("used-id-out-of-range", Scenario::UsedIdOutOfRange),
    ("used-id-twice", Scenario::UsedIdTwice),
    ("used-len-too-large", Scenario::UsedLenTooLarge),
    ("used-len-too-small", Scenario::UsedLenTooSmall),
    ("status-never-written", Scenario::StatusNeverWritten),
    ("unknown-status", Scenario::UnknownStatus),
    ("unsupp-reads", Scenario::UnsuppReads),
    ("ioerr-reads", Scenario::IoerrReads),
    ("stall", Scenario::Stall),
    ("needs-reset", Scenario::NeedsReset),
    ("config-storm", Scenario::ConfigStorm),
    ("capacity-huge", Scenario::CapacityHuge),
    ("blk-size-change", Scenario::BlkSizeChange),
    ("one-queue-stalls", Scenario::OneQueueStalls),
    ("late-write-after-used", Scenario::LateWriteAfterUsed),
    ("seg-max-zero", Scenario::SegMaxZero),
    ("blk-size-8k", Scenario::BlkSize8k),
    ("blk-size-odd", Scenario::BlkSizeOdd),
    ("topology-odd", Scenario::TopologyOdd),
    ("capacity-loff-overflow", Scenario::CapacityLoffOverflow),
    ("num-queues-zero", Scenario::NumQueuesZero),
    ("num-queues-huge", Scenario::NumQueuesHuge),
    ("get-id-never-answered", Scenario::GetIdNeverAnswered),
    ("discard-errors", Scenario::DiscardErrors),
    ("flush-errors", Scenario::FlushErrors),
    (
        "features-withdrawn-on-reset",
        Scenario::FeaturesWithdrawnOnReset,
    ),
];

/// When a scenario strikes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strike {
    /// In the configuration space or features the driver reads at probe.
    Probe,
    /// Once [`TRIGGER_AFTER`] requests were answered.
    Trigger,
    /// On the first request of one type.
    Request,
}

/// What a frontend that defends itself shows for a scenario.
pub type Expect = hostile_scenarios::Expect<Strike>;

impl Scenario {
    /// What the driver must show. No arm for all: a new scenario does not
    /// compile without its own.
    pub const fn expect(self) -> Expect {
        use Outcome::*;
        use Strike::*;
        let (strikes, outcome, fault_named) = match self {
            // A used element that names no request in flight means the
            // ring can no longer be trusted: the driver stops using it and
            // ends every request with an error, in bounded time.
            Scenario::UsedIdOutOfRange => (Trigger, Eio, true),
            // Once a head comes back twice the driver cannot know which
            // completion is real: the same as an id out of range.
            Scenario::UsedIdTwice => (Trigger, Eio, true),
            // The used length of a virtio-blk request is advisory in
            // practice: upstream's driver and QEMU's device never rely on
            // it, and the virtio core's check of it was reverted for
            // devices that got it wrong. The data and the status byte are
            // what the device wrote (fio's crc32c checks the data), so a
            // compatible driver ignores the length.
            Scenario::UsedLenTooLarge => (Trigger, Succeeds, false),
            Scenario::UsedLenTooSmall => (Trigger, Succeeds, false),
            // The driver cannot tell an unwritten status from a written
            // one unless it poisons the byte first (a value no device
            // writes); one that does sees the poison and fails the request.
            Scenario::StatusNeverWritten => (Trigger, Eio, true),
            // An undefined status is not a success: EIO, named.
            Scenario::UnknownStatus => (Trigger, Eio, true),
            // Within the spec: reads fail (UNSUPP is "not supported", not
            // EIO, as upstream maps it), nothing to name beyond the block
            // layer's own error lines.
            Scenario::UnsuppReads => (Trigger, Fails, false),
            Scenario::IoerrReads => (Trigger, Eio, false),
            // Requests that never come back must time out and fail; the
            // driver says so.
            Scenario::Stall => (Trigger, Eio, true),
            // The device asks for a reset it cannot get from a vhost-user
            // backend; to the guest it is a stall after one answer.
            Scenario::NeedsReset => (Trigger, Eio, true),
            // Capacity changes up and back, each one legal: the disk and
            // its I/O go on; logging every one is allowed, not required.
            Scenario::ConfigStorm => (Trigger, Succeeds, false),
            // A capacity whose byte size overflows must be clamped or
            // refused, and said; I/O to the old range goes on.
            Scenario::CapacityHuge => (Trigger, Succeeds, true),
            // The logical block size cannot change under a live queue: a
            // driver that sees the change keeps the old size and says so.
            // But QEMU 7.2 passes on only a new capacity (its
            // vhost_user_blk_handle_config_change) and answers the guest's
            // reads of the configuration space from its own copy: the
            // guest never sees the new size, so nothing can be named.
            Scenario::BlkSizeChange => (Trigger, Succeeds, false),
            // Requests on the silent queue must time out and fail (the
            // rest go on): the same as a stall for fio's requests there.
            Scenario::OneQueueStalls => (Trigger, Eio, true),
            // The driver cannot see or stop it (only an IOMMU or bounce
            // buffers could): fio's buffer, handed back at the answer, is
            // written 3 s later, and if fio reused it for a write by then
            // the disk gets the device's bytes. Recorded only.
            Scenario::LateWriteAfterUsed => (Trigger, Unchecked, false),
            // Advisory fields: clamped to a sane value with a warning
            // line, the disk works.
            Scenario::SegMaxZero => (Probe, Succeeds, true),
            // Past the block layer's largest logical block on the test
            // kernel (no large folios: BLK_MAX_BLOCK_SIZE is a page), so
            // refused there, as upstream, with the field and value; a
            // kernel with large folios (Debian's: 64 KiB) takes it (the
            // host tests of the config's clamps cover that).
            Scenario::BlkSize8k => (Probe, Refused, true),
            // Not a power of two: no block layer can address it, so the
            // probe is refused (as upstream) with the field and value.
            Scenario::BlkSizeOdd => (Probe, Refused, true),
            Scenario::TopologyOdd => (Probe, Succeeds, true),
            // Clamped to the block layer's largest capacity, said.
            Scenario::CapacityLoffOverflow => (Probe, Succeeds, true),
            // MQ with no queue: a driver that sees it uses one queue and
            // says so. But QEMU 7.2 writes its own num-queues over the
            // field (vhost_user_blk_update_config): the guest sees a sane
            // value and has nothing to name.
            Scenario::NumQueuesZero => (Probe, Succeeds, false),
            // More queues than the transport has: limited to those, and
            // QEMU replaces the value anyway.
            Scenario::NumQueuesHuge => (Probe, Succeeds, false),
            // Only the serial is missing: the disk must still come up and
            // serve max-size I/O whether or not the driver asks for it.
            Scenario::GetIdNeverAnswered => (Request, Succeeds, false),
            // fio's reads and writes succeed; only discards fail.
            Scenario::DiscardErrors => (Request, Succeeds, false),
            // A failed flush is an I/O error: the forced write fails.
            Scenario::FlushErrors => (Request, Fails, false),
            // Requests the device no longer serves fail; the disk and its
            // reads and writes go on.
            Scenario::FeaturesWithdrawnOnReset => (Probe, Succeeds, false),
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
            Strike::Probe => "probe",
            Strike::Trigger => "trigger",
            Strike::Request => "request",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sound() {
        hostile_scenarios::assert_table_is_sound::<Scenario>(|s| s == Strike::Probe);
    }
}
