// SPDX-License-Identifier: GPL-2.0

//! virtio-blk request headers, ranges and status bytes on the wire.

use blkcore::virtio::request::{
    encode_range, encode_ranges, Command, RequestStatus, RANGE_BYTES, STATUS_NOT_WRITTEN,
    VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_OK, VIRTIO_BLK_S_UNSUPP, VIRTIO_BLK_T_DISCARD,
    VIRTIO_BLK_T_GET_ID, VIRTIO_BLK_T_IN, VIRTIO_BLK_T_OUT, VIRTIO_BLK_T_SECURE_ERASE,
    VIRTIO_BLK_T_WRITE_ZEROES,
};
use proptest::prelude::*;

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap())
}
fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b.try_into().unwrap())
}

#[test]
fn read_and_write_carry_their_sector_in_the_header() {
    let r = Command::Read.encode(2048, 8, 0x4004, true);
    assert_eq!(le32(&r.hdr[0..4]), VIRTIO_BLK_T_IN);
    assert_eq!(le32(&r.hdr[4..8]), 0x4004);
    assert_eq!(le64(&r.hdr[8..16]), 2048);
    assert!(r.has_data && !r.data_out && r.range.is_none());
    let w = Command::Write.encode(7, 1, 0, true);
    assert_eq!(le32(&w.hdr[0..4]), VIRTIO_BLK_T_OUT);
    assert!(w.has_data && w.data_out);
}

#[test]
fn legacy_big_endian_devices_get_big_endian_headers() {
    let r = Command::Write.encode(0x0102_0304, 8, 1, false);
    assert_eq!(r.hdr[0..4], VIRTIO_BLK_T_OUT.to_be_bytes());
    assert_eq!(r.hdr[4..8], 1u32.to_be_bytes());
    assert_eq!(r.hdr[8..16], 0x0102_0304u64.to_be_bytes());
}

#[test]
fn discard_and_write_zeroes_carry_a_little_endian_range() {
    for le in [true, false] {
        let d = Command::Discard.encode(4096, 256, 0, le);
        let range = d.range.expect("a range");
        assert_eq!(le64(&range[0..8]), 4096);
        assert_eq!(le32(&range[8..12]), 256);
        assert_eq!(le32(&range[12..16]), 0);
        // The header's sector is 0, like upstream.
        assert_eq!(d.hdr[8..16], [0; 8]);
        assert!(!d.has_data && !d.data_out);
        let t = if le {
            le32(&d.hdr[0..4])
        } else {
            u32::from_be_bytes(d.hdr[0..4].try_into().unwrap())
        };
        assert_eq!(t, VIRTIO_BLK_T_DISCARD);
    }
    let z = Command::WriteZeroes { unmap: true }.encode(8, 8, 0, true);
    assert_eq!(le32(&z.hdr[0..4]), VIRTIO_BLK_T_WRITE_ZEROES);
    assert_eq!(le32(&z.range.unwrap()[12..16]), 1);
    let z = Command::WriteZeroes { unmap: false }.encode(8, 8, 0, true);
    assert_eq!(le32(&z.range.unwrap()[12..16]), 0);
    let g = Command::GetId.encode(99, 0, 0, true);
    assert_eq!(le32(&g.hdr[0..4]), VIRTIO_BLK_T_GET_ID);
    assert!(g.range.is_none() && !g.has_data);
}

#[test]
fn secure_erase_is_type_14_with_a_range_and_no_flags() {
    for le in [true, false] {
        let e = Command::SecureErase.encode(1 << 40, 2048, 0, le);
        let t = if le {
            le32(&e.hdr[0..4])
        } else {
            u32::from_be_bytes(e.hdr[0..4].try_into().unwrap())
        };
        assert_eq!(t, VIRTIO_BLK_T_SECURE_ERASE);
        assert_eq!(VIRTIO_BLK_T_SECURE_ERASE, 14);
        let range = e.range.expect("a range");
        assert_eq!(le64(&range[0..8]), 1 << 40);
        assert_eq!(le32(&range[8..12]), 2048);
        assert_eq!(le32(&range[12..16]), 0);
        assert_eq!(e.hdr[8..16], [0; 8]);
        assert!(!e.has_data && !e.data_out);
    }
}

#[test]
fn only_ok_is_success() {
    assert_eq!(RequestStatus::from_byte(VIRTIO_BLK_S_OK), RequestStatus::Ok);
    assert_eq!(
        RequestStatus::from_byte(VIRTIO_BLK_S_UNSUPP),
        RequestStatus::Unsupported
    );
    assert_eq!(
        RequestStatus::from_byte(VIRTIO_BLK_S_IOERR),
        RequestStatus::IoError
    );
    // The "not yet written" marker the driver puts there, and anything else.
    assert_eq!(
        RequestStatus::from_byte(STATUS_NOT_WRITTEN),
        RequestStatus::IoError
    );
}

#[test]
fn only_the_three_statuses_of_the_spec_are_defined() {
    let defined: Vec<u8> = (0..=u8::MAX)
        .filter(|&b| RequestStatus::is_defined(b))
        .collect();
    assert_eq!(
        defined,
        [VIRTIO_BLK_S_OK, VIRTIO_BLK_S_IOERR, VIRTIO_BLK_S_UNSUPP]
    );
    assert!(!RequestStatus::is_defined(STATUS_NOT_WRITTEN));
}

#[test]
fn multi_range_discard_fills_one_range_per_bio() {
    let mut out = [0u8; 3 * RANGE_BYTES];
    let ranges = [(0u64, 8u32), (1 << 33, 2048), (4096, 1)];
    assert_eq!(encode_ranges(ranges, 0, &mut out), Some(3));
    for (i, (sector, n)) in ranges.iter().enumerate() {
        let r = &out[i * RANGE_BYTES..(i + 1) * RANGE_BYTES];
        assert_eq!(
            (le64(&r[0..8]), le32(&r[8..12]), le32(&r[12..16])),
            (*sector, *n, 0)
        );
    }
    // The same bytes as a single range's encoding.
    assert_eq!(
        out[RANGE_BYTES..2 * RANGE_BYTES],
        encode_range(1 << 33, 2048, 0)
    );
    let d = Command::Discard.encode(4096, 1, 0, false);
    assert_eq!(d.range, Some(encode_range(4096, 1, 0)));
}

#[test]
fn multi_range_refuses_a_count_that_does_not_fill_the_buffer() {
    let mut out = [0u8; 2 * RANGE_BYTES];
    // Fewer bios than the request's segment count, or more.
    assert_eq!(encode_ranges([(0, 8)], 0, &mut out), None);
    assert_eq!(encode_ranges([(0, 8), (8, 8), (16, 8)], 0, &mut out), None);
    assert_eq!(encode_ranges([], 0, &mut [0u8; 0]), None);
    assert_eq!(
        encode_ranges([(0, 8)], 0, &mut [0u8; RANGE_BYTES + 1]),
        None
    );
    assert_eq!(Command::Read.range_flags(), None);
    assert_eq!(Command::WriteZeroes { unmap: true }.range_flags(), Some(1));
}

proptest! {
    #[test]
    fn any_status_byte_but_zero_fails(b in 1u8..) {
        prop_assert_ne!(RequestStatus::from_byte(b), RequestStatus::Ok);
    }

    #[test]
    fn header_round_trips(sector in any::<u64>(), ioprio in any::<u32>(), le in any::<bool>(), write in any::<bool>()) {
        let cmd = if write { Command::Write } else { Command::Read };
        let e = cmd.encode(sector, 8, ioprio, le);
        let (t, p, s) = if le {
            (le32(&e.hdr[0..4]), le32(&e.hdr[4..8]), le64(&e.hdr[8..16]))
        } else {
            (
                u32::from_be_bytes(e.hdr[0..4].try_into().unwrap()),
                u32::from_be_bytes(e.hdr[4..8].try_into().unwrap()),
                u64::from_be_bytes(e.hdr[8..16].try_into().unwrap()),
            )
        };
        prop_assert_eq!((t, p, s), (cmd.wire_type(), ioprio, sector));
    }

    #[test]
    fn multi_range_round_trips(ranges in prop::collection::vec((any::<u64>(), any::<u32>()), 1..64), flags in any::<u32>(), extra in 0usize..3) {
        let mut out = vec![0u8; (ranges.len() + extra) * RANGE_BYTES];
        let got = encode_ranges(ranges.iter().copied(), flags, &mut out);
        if extra != 0 {
            prop_assert_eq!(got, None);
        } else {
            prop_assert_eq!(got, Some(ranges.len()));
            for (r, (sector, n)) in out.chunks_exact(RANGE_BYTES).zip(&ranges) {
                prop_assert_eq!((le64(&r[0..8]), le32(&r[8..12]), le32(&r[12..16])), (*sector, *n, flags));
            }
        }
    }
}
