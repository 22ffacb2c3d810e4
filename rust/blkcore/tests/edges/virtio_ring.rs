// SPDX-License-Identifier: GPL-2.0

//! How many segments a virtio-blk request may have so that it fits its
//! ring: at probe with the serial request (GET_ID) held on the ring and
//! never answered, and at a restore onto a ring that may have shrunk.

use blkcore::limits::{
    ring_fit_segments,
    virtio_ring_fit,
    virtio_ring_fits_after_restore,
    RingFit,
    GET_ID_DESCRIPTORS,
    VIRTIO_REQUEST_OVERHEAD, //
};

/// Descriptors a request of `segs` segments takes without indirect
/// descriptors.
fn descriptors(segs: u32) -> u32 {
    segs + VIRTIO_REQUEST_OVERHEAD
}

#[test]
fn a_largest_request_fits_beside_an_unanswered_get_id() {
    // QEMU seg-max-adjust=off offers 126 segments on any ring.
    for ring in [8u32, 16, 64, 128, 256, 1024] {
        let fit = virtio_ring_fit(ring, false, 126);
        assert!(fit.get_id, "ring {ring}");
        assert!(
            descriptors(fit.max_segments) + GET_ID_DESCRIPTORS <= ring,
            "ring {ring}: {} segments and GET_ID do not fit",
            fit.max_segments
        );
    }
    // The cap only lowers seg_max.
    assert_eq!(virtio_ring_fit(1024, false, 126).max_segments, 126);
    assert_eq!(virtio_ring_fit(128, false, 126).max_segments, 123);
}

#[test]
fn a_ring_too_small_for_both_gives_up_the_serial() {
    // 4 descriptors: a one-segment request (3) or GET_ID (3), not both.
    assert_eq!(
        virtio_ring_fit(4, false, 126),
        RingFit {
            max_segments: 2,
            get_id: false
        }
    );
    assert_eq!(
        virtio_ring_fit(6, false, 126),
        RingFit {
            max_segments: 1,
            get_id: true
        }
    );
}

#[test]
fn indirect_descriptors_need_no_cap() {
    assert_eq!(
        virtio_ring_fit(4, true, 126),
        RingFit {
            max_segments: 126,
            get_id: true
        }
    );
    assert_eq!(ring_fit_segments(1, true, 0), Some(u32::MAX));
    assert_eq!(ring_fit_segments(1, true, 1), None);
}

#[test]
fn ring_fit_at_its_edges() {
    assert_eq!(ring_fit_segments(3, false, 0), Some(1));
    assert_eq!(ring_fit_segments(2, false, 0), None);
    assert_eq!(ring_fit_segments(6, false, 3), Some(1));
    assert_eq!(ring_fit_segments(5, false, 3), None);
    assert_eq!(ring_fit_segments(0, false, 3), None);
}

#[test]
fn a_restore_onto_a_smaller_ring_is_noticed() {
    // Probed on 256 descriptors: 126 segments.
    let segs = virtio_ring_fit(256, false, 126).max_segments;
    assert!(virtio_ring_fits_after_restore(256, false, segs));
    assert!(virtio_ring_fits_after_restore(128, false, segs));
    assert!(!virtio_ring_fits_after_restore(64, false, segs));
    // Exactly the request's descriptors: fits (nothing else is held).
    assert!(virtio_ring_fits_after_restore(
        descriptors(segs),
        false,
        segs
    ));
    assert!(!virtio_ring_fits_after_restore(
        descriptors(segs) - 1,
        false,
        segs
    ));
    assert!(virtio_ring_fits_after_restore(4, true, segs));
}

proptest::proptest! {
    /// Any ring and seg_max: a request of the capped size fits beside an
    /// unanswered GET_ID, or the serial is not asked for and it fits alone.
    #[test]
    fn the_capped_request_always_fits(ring in 3u32..4096, seg_max in 1u32..=32766) {
        let fit = virtio_ring_fit(ring, false, seg_max);
        let held = if fit.get_id { GET_ID_DESCRIPTORS } else { 0 };
        proptest::prop_assert!(descriptors(fit.max_segments) + held <= ring);
        proptest::prop_assert!((1..=seg_max).contains(&fit.max_segments));
    }
}
