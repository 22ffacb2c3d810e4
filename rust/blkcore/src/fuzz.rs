// SPDX-License-Identifier: GPL-2.0

//! Fuzz entry points: one plain function per parser of backend/device
//! input. Each takes arbitrary bytes, drives the real parser and the code
//! that consumes its output, and checks the documented invariants.
//!
//! Convention for every target: it must never panic on any input; it
//! returns `Ok(Outcome)` (accepted or cleanly rejected, so harnesses can
//! report how deep inputs get) or `Err(Violation)` when an invariant does
//! not hold (a bug), which the harness (`rust/blkcore/fuzz-runner`, or a cargo-fuzz wrapper that
//! panics on `Err`) reports as a crash.
//!
//! Compiled for tests and with the `fuzzing` feature only, never into the
//! kernel modules.

use core::fmt::{self, Write};

pub(crate) mod datapath;
pub use datapath::fuzz_datapath;

use super::limits::{virtio_limits, xen_limits};
use super::negotiate::{
    frontend_trusted, negotiate, read_sectors, FrontendParams, BACKEND_KEYS, KEY_TRUSTED,
    MAX_INDIRECT_SEGMENTS,
};
use super::virtio::VirtioBlkConfig;
use super::xenstore::{utf8_or_invalid, SliceValues};

/// An invariant that did not hold: a bug in blkcore (or in the target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Violation(pub &'static str);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invariant violated: {}", self.0)
    }
}

/// What a fuzz target did with an input that broke no invariant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The parser accepted the input and its consumers ran.
    Accepted,
    /// The parser rejected the input with a well-formed error.
    Rejected,
}

fn ensure(cond: bool, what: &'static str) -> Result<(), Violation> {
    if cond {
        Ok(())
    } else {
        Err(Violation(what))
    }
}

/// Keys [`fuzz_xenstore_values`] can address by index besides
/// [`BACKEND_KEYS`] (indices past those): the frontend's own key and one
/// nobody reads.
pub const EXTRA_KEYS: [&str; 2] = [KEY_TRUSTED, "unknown-key"];

/// The key with index `i` (modulo the number of keys): [`BACKEND_KEYS`],
/// then [`EXTRA_KEYS`].
pub fn key_by_index(i: usize) -> &'static str {
    let i = i % (BACKEND_KEYS.len() + EXTRA_KEYS.len());
    match BACKEND_KEYS.get(i) {
        Some(k) => k,
        None => i
            .checked_sub(BACKEND_KEYS.len())
            .and_then(|j| EXTRA_KEYS.get(j))
            .copied()
            .unwrap_or(""),
    }
}

/// Most key/value pairs [`fuzz_xenstore_values`] keeps from one input.
pub const MAX_PAIRS: usize = 48;

/// Bytes of input [`fuzz_xenstore_values`] reads as [`FrontendParams`].
pub const XEN_PARAM_BYTES: usize = 6;

/// Formats into a fixed buffer, counting what did not fit: the error
/// messages must format without allocation and without failing.
struct FixedBuf {
    buf: [u8; 160],
    len: usize,
}

impl Write for FixedBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
            }
            self.len = self.len.saturating_add(1);
        }
        Ok(())
    }
}

fn formatted(value: &impl fmt::Display) -> Result<FixedBuf, Violation> {
    let mut out = FixedBuf {
        buf: [0; 160],
        len: 0,
    };
    write!(out, "{value}").map_err(|_| Violation("Display failed"))?;
    ensure(out.len > 0, "empty error message")?;
    Ok(out)
}

fn starts_with(buf: &FixedBuf, prefix: &str) -> bool {
    buf.buf.get(..prefix.len()) == Some(prefix.as_bytes())
}

/// Decode the input layout of [`fuzz_xenstore_values`].
fn xen_params(data: &[u8]) -> (FrontendParams, &[u8]) {
    let mut p = FrontendParams::UPSTREAM_DEFAULTS;
    let Some(head) = data.get(..XEN_PARAM_BYTES) else {
        return (p, data);
    };
    let byte = |i: usize| head.get(i).copied().unwrap_or(0);
    p.max_indirect_segments = u32::from(u16::from_le_bytes([byte(0), byte(1)]));
    p.max_queues = u32::from(byte(2));
    p.max_ring_page_order = u32::from(byte(3));
    p.feature_persistent = byte(4) & 1 != 0;
    p.trusted = byte(4) & 2 != 0;
    let rest = data.get(XEN_PARAM_BYTES..).unwrap_or(&[]);
    (p, rest)
}

/// Fuzz negotiation over arbitrary backend xenstore contents.
///
/// Input: 6 bytes of [`FrontendParams`] (max_indirect_segments u16 LE,
/// max_queues u8, max_ring_page_order u8, flags u8: bit 0 persistent,
/// bit 1 trusted, one spare byte; inputs shorter than that use the
/// defaults), then lines separated by `\n`, each `key=value`. A key of a
/// single byte below 0x20 stands for [`key_by_index`]`(byte)`, so random
/// inputs reach every key. Values that are not UTF-8 are passed as
/// [`utf8_or_invalid`] does. At most [`MAX_PAIRS`] pairs are kept.
///
/// Checks: negotiation and `xen_limits` never panic; a success satisfies
/// the clamping rules and [`super::limits::QueueLimits::check_invariants`];
/// an error formats as `backend key '<key>' ...`.
pub fn fuzz_xenstore_values(data: &[u8]) -> Result<Outcome, Violation> {
    let (params, rest) = xen_params(data);
    let mut pairs: [(&str, &str); MAX_PAIRS] = [("", ""); MAX_PAIRS];
    let mut n = 0usize;
    for line in rest.split(|&b| b == b'\n') {
        let Some(slot) = pairs.get_mut(n) else {
            break;
        };
        let (key, value) = match line.iter().position(|&b| b == b'=') {
            Some(eq) => (
                line.get(..eq).unwrap_or(&[]),
                line.get(eq.saturating_add(1)..).unwrap_or(&[]),
            ),
            None => (line, &[][..]),
        };
        let key = match key {
            [b] if *b < 0x20 => key_by_index(usize::from(*b)),
            k => utf8_or_invalid(k),
        };
        *slot = (key, utf8_or_invalid(value));
        n = n.saturating_add(1);
    }
    let kv = SliceValues(pairs.get(..n).unwrap_or(&[]));

    // The frontend-directory reader and the resize path must behave too.
    if let Err(e) = frontend_trusted(&kv, params.trusted) {
        ensure(
            starts_with(&formatted(&e)?, "frontend key 'trusted'"),
            "trusted error does not name the key",
        )?;
    }
    match read_sectors(&kv) {
        Ok(s) => ensure(s <= u64::MAX / 512, "sectors overflow bytes")?,
        Err(e) => ensure(
            starts_with(&formatted(&e)?, "backend key 'sectors'"),
            "sectors error does not name the key",
        )?,
    }

    let neg = match negotiate(&kv, &params) {
        Ok(neg) => neg,
        Err(e) => {
            let msg = formatted(&e)?;
            ensure(
                starts_with(&msg, "backend key '"),
                "error not a backend key",
            )?;
            ensure(
                BACKEND_KEYS.contains(&e.key),
                "error names a key negotiation does not read",
            )?;
            return Ok(Outcome::Rejected);
        }
    };

    ensure(neg.queues >= 1, "zero queues")?;
    ensure(
        neg.queues <= params.max_queues.max(1),
        "queues above max_queues",
    )?;
    ensure(neg.ring_page_order <= 4, "ring order above 4")?;
    ensure(
        neg.ring_page_order <= params.max_ring_page_order,
        "ring order above param",
    )?;
    ensure(
        1u32.checked_shl(neg.ring_page_order) == Some(neg.ring_pages),
        "ring_pages != 1 << order",
    )?;
    ensure(
        neg.indirect_segments == 0
            || (neg.indirect_segments > 11
                && neg.indirect_segments <= params.max_indirect_segments
                && neg.indirect_segments <= MAX_INDIRECT_SEGMENTS),
        "indirect segments out of range",
    )?;
    ensure(
        neg.segments_per_request
            == if neg.indirect_segments == 0 {
                11
            } else {
                neg.indirect_segments
            },
        "segments_per_request inconsistent",
    )?;
    ensure(
        !neg.persistent || params.feature_persistent,
        "persistent without the param",
    )?;
    ensure(
        neg.copy_data == (neg.persistent || !params.trusted),
        "copy rule broken",
    )?;
    if let Some(min) = neg.minimum_io_size {
        ensure(min % neg.physical_sector_size == 0, "io_min not aligned")?;
    }
    if let Some(opt) = neg.optimal_io_size {
        ensure(opt % neg.physical_sector_size == 0, "io_opt not aligned")?;
    }

    let lim = xen_limits(&neg);
    lim.check_invariants().map_err(Violation)?;
    ensure(
        lim.logical_block_size == neg.sector_size,
        "logical != sector-size",
    )?;
    ensure(
        lim.physical_block_size == neg.physical_sector_size,
        "physical != physical-sector-size",
    )?;
    ensure(
        lim.max_segments == neg.segments_per_request,
        "max_segments != segments",
    )?;
    ensure(
        u64::from(lim.max_hw_sectors) == u64::from(neg.segments_per_request) * 8,
        "max_hw_sectors != segments * 8",
    )?;
    Ok(Outcome::Accepted)
}

/// Bytes of input [`fuzz_virtio_config`] reads before the config space.
pub const VIRTIO_HEADER_BYTES: usize = 12;

/// Fuzz the virtio-blk config parser and limit computation.
///
/// Input: negotiated features (u64 LE), the transport's max DMA size
/// (u32 LE; 0 means unlimited), then the config space bytes (any length;
/// shorter inputs are zero-padded in the header only).
///
/// Checks: parse and `virtio_limits` never panic; a parsed config has the
/// documented ranges; the limits satisfy
/// [`super::limits::QueueLimits::check_invariants`]; errors format as
/// `virtio-blk config <field> ...`, clamp warnings as
/// `device config: <field> <value>, using <value>` and only for a value
/// that changed.
pub fn fuzz_virtio_config(data: &[u8]) -> Result<Outcome, Violation> {
    let mut header = [0u8; VIRTIO_HEADER_BYTES];
    for (dst, src) in header.iter_mut().zip(data.iter()) {
        *dst = *src;
    }
    let config = data.get(VIRTIO_HEADER_BYTES..).unwrap_or(&[]);
    let [f0, f1, f2, f3, f4, f5, f6, f7, d0, d1, d2, d3] = header;
    let features = u64::from_le_bytes([f0, f1, f2, f3, f4, f5, f6, f7]);
    let dma = match u32::from_le_bytes([d0, d1, d2, d3]) {
        0 => usize::MAX,
        v => usize::try_from(v).unwrap_or(usize::MAX),
    };

    let cfg = match VirtioBlkConfig::parse(config, features) {
        Ok(cfg) => cfg,
        Err(e) => {
            ensure(
                starts_with(&formatted(&e)?, "virtio-blk config "),
                "config error badly formatted",
            )?;
            return Ok(Outcome::Rejected);
        }
    };
    ensure(
        cfg.blk_size.is_power_of_two() && (512..=64 * 1024).contains(&cfg.blk_size),
        "blk_size out of range",
    )?;
    for clamp in cfg.clamps.iter() {
        ensure(clamp.value != clamp.used, "a clamp that changed nothing")?;
        ensure(
            starts_with(&formatted(clamp)?, "device config: "),
            "clamp warning badly formatted",
        )?;
    }
    ensure(
        cfg.physical_block_size() <= 64 * 1024,
        "physical block above 64K",
    )?;
    ensure((1..=32766).contains(&cfg.seg_max), "seg_max out of range")?;
    ensure(cfg.num_queues >= 1, "zero queues")?;
    ensure(
        cfg.size_max.is_none_or(|s| s >= 4096),
        "size_max below a page",
    )?;

    match virtio_limits(&cfg, dma) {
        Ok(lim) => {
            lim.check_invariants().map_err(Violation)?;
            ensure(lim.logical_block_size == cfg.blk_size, "lbs != blk_size")?;
            ensure(lim.max_segments == cfg.seg_max, "max_segments != seg_max")?;
            ensure(
                lim.physical_block_size == cfg.physical_block_size(),
                "physical mismatch",
            )?;
        }
        Err(e) => {
            // Only a too-small transport DMA limit may fail after parse.
            ensure(dma < 4096, "virtio_limits failed on a parsed config")?;
            ensure(
                starts_with(&formatted(&e)?, "virtio-blk config "),
                "limits error badly formatted",
            )?;
            return Ok(Outcome::Rejected);
        }
    }
    Ok(Outcome::Accepted)
}

/// Ring responses from a (possibly hostile) backend: the whole response
/// loop of [`super::ring::fuzz_entry`] (producer-index check, copy-once
/// decode, id / operation validation, final check). Its invariants are
/// "no panic, no endless loop, no allocation"; it has no verdict to report,
/// so every input counts as accepted.
pub fn fuzz_responses(data: &[u8]) -> Result<Outcome, Violation> {
    super::ring::fuzz_entry(data);
    Ok(Outcome::Accepted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    const BLKBACK: &[u8] = b"\x20\x00\x04\x04\x03\x00sectors=2097152\ninfo=0\nsector-size=512\n\
physical-sector-size=4096\nfeature-flush-cache=1\nfeature-discard=1\n\
discard-granularity=4096\nfeature-persistent=1\nfeature-max-indirect-segments=256\n\
max-ring-page-order=4\nmulti-queue-max-queues=4";

    #[test]
    fn xen_seed_is_accepted_and_junk_rejected() {
        assert_eq!(fuzz_xenstore_values(BLKBACK), Ok(Outcome::Accepted));
        assert_eq!(fuzz_xenstore_values(b""), Ok(Outcome::Rejected));
        // Index-encoded keys: \x02 = sectors, \x03 = info, \x04 = sector-size.
        let indexed = b"\x20\x00\x01\x00\x00\x00\x02=8\n\x03=0\n\x04=4096";
        assert_eq!(fuzz_xenstore_values(indexed), Ok(Outcome::Accepted));
        let bad = b"\x20\x00\x01\x00\x00\x00\x02=8\n\x03=0\n\x04=4097";
        assert_eq!(fuzz_xenstore_values(bad), Ok(Outcome::Rejected));
    }

    #[test]
    fn virtio_inputs() {
        let mut data = Vec::new();
        data.extend_from_slice(&0u64.to_le_bytes());
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&64u64.to_le_bytes());
        assert_eq!(fuzz_virtio_config(&data), Ok(Outcome::Accepted));
        // BLK_SIZE on with blk_size 0.
        let mut bad = Vec::new();
        bad.extend_from_slice(&(1u64 << 6).to_le_bytes());
        bad.extend_from_slice(&0u32.to_le_bytes());
        bad.extend_from_slice(&[0u8; 24]);
        assert_eq!(fuzz_virtio_config(&bad), Ok(Outcome::Rejected));
        // seg_max 0 and a 64 KiB block: accepted, seg_max clamped.
        let mut odd = Vec::new();
        odd.extend_from_slice(&((1u64 << 2) | (1u64 << 6)).to_le_bytes());
        odd.extend_from_slice(&0u32.to_le_bytes());
        odd.extend_from_slice(&[0u8; 20]);
        odd.extend_from_slice(&65536u32.to_le_bytes());
        assert_eq!(fuzz_virtio_config(&odd), Ok(Outcome::Accepted));
        // Transport DMA limit below a page: rejected by virtio_limits.
        let mut small = Vec::new();
        small.extend_from_slice(&0u64.to_le_bytes());
        small.extend_from_slice(&512u32.to_le_bytes());
        small.extend_from_slice(&64u64.to_le_bytes());
        assert_eq!(fuzz_virtio_config(&small), Ok(Outcome::Rejected));
    }

    #[test]
    fn fixed_buf_truncates_without_failing() -> Result<(), Violation> {
        let long = "x".repeat(400);
        let buf = formatted(&long)?;
        assert_eq!(buf.len, 400);
        assert!(starts_with(&buf, "xxx"));
        assert!(!starts_with(&buf, "y"));
        assert_eq!(
            std::format!("{}", Violation("boom")),
            "invariant violated: boom"
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn xen_target_never_fails(data in prop::collection::vec(any::<u8>(), 0..200)) {
            prop_assert!(fuzz_xenstore_values(&data).is_ok());
        }

        #[test]
        fn xen_target_mutated_seed(pos in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut data = BLKBACK.to_vec();
            let i = pos.index(data.len());
            data[i] = byte;
            prop_assert!(fuzz_xenstore_values(&data).is_ok());
        }

        #[test]
        fn virtio_target_never_fails(data in prop::collection::vec(any::<u8>(), 0..120)) {
            prop_assert!(fuzz_virtio_config(&data).is_ok());
        }
    }
}
