// SPDX-License-Identifier: GPL-2.0

//! `QueueLimits::check_invariants` one rule at a time: each way of breaking
//! a rule is reported with that rule, and the edge of each rule is
//! accepted. `admits_requests_of` one limit at a time.

use blkcore::limits::{
    xen_limits,
    QueueLimits, //
};
use blkcore::negotiate::{
    negotiate,
    FrontendParams, //
};
use blkcore::xenstore::SliceValues;

/// Valid limits: 512-byte logical, 4 KiB physical blocks, discard, FUA.
const GOOD: QueueLimits = QueueLimits {
    logical_block_size: 512,
    physical_block_size: 4096,
    alignment_offset: 0,
    io_min: 4096,
    io_opt: 0,
    max_hw_sectors: 256,
    max_segments: 32,
    max_segment_size: 4096,
    seg_boundary_mask: 4095,
    discard_granularity: 4096,
    discard_alignment: 0,
    max_discard_sectors: u32::MAX,
    max_discard_segments: 1,
    max_secure_erase_sectors: 0,
    max_write_zeroes_sectors: 0,
    rotational: None,
    read_only: false,
    write_cache: true,
    fua: true,
};

const LBS: &str = "logical_block_size not a power of two in 512..=65536";
const PBS: &str = "physical_block_size not a power of two in logical..=64K";
const ALIGN: &str = "alignment_offset not below physical_block_size";
const IO_MIN: &str = "io_min not a multiple of physical_block_size";
const IO_OPT: &str = "io_opt not a multiple of physical_block_size";
const HW: &str = "max_hw_sectors below a page or not a multiple of the logical block";
const DISCARD_OFF: &str = "discard granularity/alignment without discard";
const DISCARD: &str = "discard granularity/alignment inconsistent";

fn check(f: impl FnOnce(&mut QueueLimits)) -> Result<(), &'static str> {
    let mut l = GOOD;
    f(&mut l);
    l.check_invariants()
}

/// Blocks of `lbs` logical and `pbs` physical bytes, everything else
/// consistent with them.
fn blocks(l: &mut QueueLimits, lbs: u32, pbs: u32) {
    l.logical_block_size = lbs;
    l.physical_block_size = pbs;
    l.io_min = pbs;
    l.discard_granularity = pbs;
}

#[test]
fn the_valid_limits_pass() {
    assert_eq!(GOOD.check_invariants(), Ok(()));
}

#[test]
fn logical_block_a_power_of_two_in_512_to_65536() {
    assert_eq!(
        check(|l| blocks(l, 1536, 4096)),
        Err(LBS),
        "not a power of two"
    );
    assert_eq!(check(|l| blocks(l, 256, 4096)), Err(LBS), "below 512");
    assert_eq!(
        check(|l| blocks(l, 128 << 10, 128 << 10)),
        Err(LBS),
        "above 64K"
    );
    assert_eq!(check(|l| blocks(l, 4096, 4096)), Ok(()));
    assert_eq!(check(|l| blocks(l, 64 << 10, 64 << 10)), Ok(()));
}

#[test]
fn physical_block_a_power_of_two_from_logical_to_64k() {
    assert_eq!(
        check(|l| blocks(l, 512, 3072)),
        Err(PBS),
        "not a power of two"
    );
    assert_eq!(check(|l| blocks(l, 1024, 512)), Err(PBS), "below logical");
    assert_eq!(check(|l| blocks(l, 512, 128 * 1024)), Err(PBS), "above 64K");
    assert_eq!(check(|l| blocks(l, 512, 64 * 1024)), Ok(()));
    assert_eq!(check(|l| blocks(l, 1024, 1024)), Ok(()));
}

#[test]
fn alignment_offset_below_the_physical_block() {
    assert_eq!(check(|l| l.alignment_offset = 4096), Err(ALIGN));
    assert_eq!(check(|l| l.alignment_offset = 3584), Ok(()));
}

#[test]
fn io_min_a_nonzero_multiple_of_the_physical_block() {
    assert_eq!(check(|l| l.io_min = 2048), Err(IO_MIN), "below");
    assert_eq!(check(|l| l.io_min = 6144), Err(IO_MIN), "not a multiple");
    assert_eq!(check(|l| l.io_min = 8192), Ok(()));
}

#[test]
fn io_opt_a_multiple_of_the_physical_block() {
    assert_eq!(check(|l| l.io_opt = 6144), Err(IO_OPT));
    assert_eq!(check(|l| l.io_opt = 8192), Ok(()));
}

#[test]
fn max_hw_sectors_a_page_and_whole_logical_blocks() {
    assert_eq!(check(|l| l.max_hw_sectors = 7), Err(HW), "below a page");
    assert_eq!(check(|l| l.max_hw_sectors = 8), Ok(()));
    let big = |l: &mut QueueLimits| blocks(l, 4096, 4096);
    assert_eq!(
        check(|l| {
            big(l);
            l.max_hw_sectors = 12;
        }),
        Err(HW),
        "not whole 4 KiB blocks"
    );
    assert_eq!(
        check(|l| {
            big(l);
            l.max_hw_sectors = 8;
        }),
        Ok(()),
        "one 4 KiB block"
    );
}

#[test]
fn at_least_one_segment_of_at_least_a_page() {
    assert_eq!(check(|l| l.max_segments = 0), Err("max_segments is 0"));
    assert_eq!(check(|l| l.max_segments = 1), Ok(()));
    assert_eq!(
        check(|l| l.max_segment_size = 4095),
        Err("max_segment_size below 4096")
    );
    assert_eq!(
        check(|l| {
            l.max_segment_size = 65536;
            l.seg_boundary_mask = 0;
        }),
        Ok(())
    );
}

#[test]
fn seg_boundary_span_a_power_of_two_of_a_page_and_a_segment() {
    let mask = "seg_boundary_mask + 1 not a power of two >= 4096 and >= max_segment_size";
    assert_eq!(
        check(|l| l.seg_boundary_mask = 2047),
        Err(mask),
        "below a page"
    );
    assert_eq!(
        check(|l| l.seg_boundary_mask = 6143),
        Err(mask),
        "not a power of two"
    );
    assert_eq!(
        check(|l| {
            l.max_segment_size = 16384;
            l.seg_boundary_mask = 8191;
        }),
        Err(mask),
        "narrower than a segment"
    );
    assert_eq!(
        check(|l| l.seg_boundary_mask = u64::MAX),
        Err(mask),
        "span overflows"
    );
    assert_eq!(
        check(|l| {
            l.max_segment_size = 16384;
            l.seg_boundary_mask = 16383;
        }),
        Ok(())
    );
}

#[test]
fn no_discard_granularity_or_alignment_without_discard() {
    let off = |l: &mut QueueLimits| {
        l.max_discard_sectors = 0;
        l.discard_granularity = 0;
    };
    assert_eq!(check(off), Ok(()));
    assert_eq!(
        check(|l| {
            off(l);
            l.discard_granularity = 4096;
        }),
        Err(DISCARD_OFF)
    );
    assert_eq!(
        check(|l| {
            off(l);
            l.discard_alignment = 512;
        }),
        Err(DISCARD_OFF)
    );
}

#[test]
fn discard_granularity_whole_blocks_and_alignment_below_it() {
    assert_eq!(
        check(|l| l.discard_granularity = 2048),
        Err(DISCARD),
        "below physical"
    );
    assert_eq!(
        check(|l| {
            blocks(l, 1024, 1024);
            l.discard_granularity = 1536;
        }),
        Err(DISCARD),
        "not whole logical blocks"
    );
    assert_eq!(check(|l| l.discard_alignment = 4096), Err(DISCARD));
    assert_eq!(check(|l| l.discard_alignment = 3584), Ok(()));
}

#[test]
fn at_least_one_discard_segment_and_fua_only_with_a_write_cache() {
    assert_eq!(
        check(|l| l.max_discard_segments = 0),
        Err("max_discard_segments is 0")
    );
    assert_eq!(
        check(|l| l.write_cache = false),
        Err("fua without write_cache")
    );
    assert_eq!(
        check(|l| {
            l.write_cache = false;
            l.fua = false;
        }),
        Ok(())
    );
}

#[test]
fn requests_are_admitted_under_limits_no_narrower() {
    let wider = QueueLimits {
        max_hw_sectors: 512,
        max_segments: 64,
        max_segment_size: 8192,
        seg_boundary_mask: 8191,
        ..GOOD
    };
    assert_eq!(GOOD.admits_requests_of(&GOOD), Ok(()));
    assert_eq!(wider.admits_requests_of(&GOOD), Ok(()));
    let narrower = |f: fn(&mut QueueLimits)| {
        let mut l = wider;
        f(&mut l);
        l.admits_requests_of(&wider)
    };
    assert_eq!(
        narrower(|l| l.max_hw_sectors = 511),
        Err("max_hw_sectors shrank")
    );
    assert_eq!(
        narrower(|l| l.max_segments = 63),
        Err("max_segments shrank")
    );
    assert_eq!(
        narrower(|l| l.max_segment_size = 4096),
        Err("max_segment_size shrank")
    );
    assert_eq!(
        narrower(|l| l.seg_boundary_mask = 4095),
        Err("seg_boundary_mask narrowed")
    );
    assert_eq!(
        narrower(|l| l.logical_block_size = 1024),
        Err("logical block size changed")
    );
    // No boundary (0) is the widest.
    assert_eq!(narrower(|l| l.seg_boundary_mask = 0), Ok(()));
}

#[test]
fn a_saturated_xen_request_size_stays_whole_logical_blocks() {
    let keys = [("sectors", "8"), ("info", "0"), ("sector-size", "4096")];
    let mut n = negotiate(&SliceValues(&keys), &FrontendParams::default()).unwrap();
    n.segments_per_request = u32::MAX;
    let l = xen_limits(&n);
    assert_eq!(l.max_hw_sectors, u32::MAX - 7, "rounded down to 8 sectors");
    assert_eq!(l.max_hw_sectors % 8, 0);
}
