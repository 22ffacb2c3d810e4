// SPDX-License-Identifier: GPL-2.0

//! The sizes the Xen data path is built with: segments on the wire, grant
//! pool, indirect pages, and the frames a caller provides.

use blkcore::datapath::{wire_segments, Geometry};
use blkcore::negotiate::{negotiate, FrontendParams, Negotiated};
use blkcore::xenstore::SliceValues;

fn nego(indirect: &'static str, persistent: &'static str, params: FrontendParams) -> Negotiated {
    let keys = [
        ("sectors", "2097152"),
        ("info", "0"),
        ("sector-size", "512"),
        ("feature-persistent", persistent),
        ("feature-max-indirect-segments", indirect),
    ];
    negotiate(&SliceValues(&keys), &params).expect("negotiates")
}

#[test]
fn wire_segments_double_within_the_backend_limit() {
    let n = nego("256", "1", FrontendParams::default());
    assert_eq!(n.indirect_segments, 32);
    assert_eq!(wire_segments(&n, 256), 64);
    assert_eq!(wire_segments(&n, 40), 40);
    assert_eq!(wire_segments(&n, 0), 32);
    let direct = nego("0", "1", FrontendParams::default());
    assert_eq!(wire_segments(&direct, 256), 11);
}

#[test]
fn pool_like_upstream_and_frames_per_mode() {
    // Default blkfront: (32 segments + 1 indirect page) * 32 slots = 1056,
    // blkback's max_persistent_grants.
    let n = nego("256", "1", FrontendParams::default());
    let g = Geometry::new(&n, 32, wire_segments(&n, 256));
    assert_eq!(g.pool_entries, 1056);
    assert_eq!(g.wire_max, 64);
    assert_eq!(g.indirect_pages, 1);
    // Persistent: copies, one bounce frame per pool entry.
    assert!(n.copy_data);
    assert_eq!(g.frames(true), 1056);
    // Trusted, not persistent: no copies; a placeholder and each slot's
    // indirect page.
    let n = nego("256", "0", FrontendParams::default());
    assert!(!n.copy_data);
    let g = Geometry::new(&n, 32, wire_segments(&n, 256));
    assert_eq!(g.frames(false), 1 + 32);
    // 256 segments: 512 on the wire, 1 indirect page holds 512
    // descriptors.
    let params = FrontendParams {
        max_indirect_segments: 256,
        ..FrontendParams::default()
    };
    let n = nego("256", "1", params);
    let g = Geometry::new(&n, 64, wire_segments(&n, 256));
    assert_eq!(g.wire_max, 256);
    assert_eq!(g.pool_entries, (256 + 1) * 64);
    // No indirect: 11 segments, no indirect pages.
    let n = nego("0", "1", FrontendParams::default());
    let g = Geometry::new(&n, 32, wire_segments(&n, 0));
    assert_eq!(
        (g.wire_max, g.indirect_pages, g.pool_entries),
        (11, 0, 11 * 32)
    );
    // Ring sizes past the protocol's are clamped.
    assert_eq!(
        Geometry::new(&n, 1 << 20, 11).ring_size,
        blkcore::blkif::BLKIF_MAX_RING_SIZE
    );
}
