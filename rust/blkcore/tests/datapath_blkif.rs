// SPDX-License-Identifier: GPL-2.0

//! Wire format of blkif: sizes, byte layout, round trips.

use blkcore::blkif::*;
use proptest::prelude::*;

#[test]
fn ring_sizes_match_ring_h() {
    // __CONST_RING_SIZE(blkif, pages * 4096) for every valid page count.
    let expect = [
        32, 64, 64, 128, 128, 128, 128, 256, 256, 256, 256, 256, 256, 256, 512, 512,
    ];
    for (i, e) in expect.iter().enumerate() {
        assert_eq!(ring_size(i as u32 + 1), Some(*e), "pages {}", i + 1);
    }
    assert_eq!(ring_size(0), None);
    assert_eq!(ring_size(17), None);
    assert_eq!(BLKIF_MAX_RING_SIZE, 512);
}

#[test]
fn request_byte_layout() {
    let mut seg = [BlkifRequestSegment::default(); 11];
    seg[0] = BlkifRequestSegment {
        gref: 0x11223344,
        first_sect: 1,
        last_sect: 7,
        pad: 0,
    };
    seg[10] = BlkifRequestSegment {
        gref: 0xaabbccdd,
        first_sect: 0,
        last_sect: 0,
        pad: 0,
    };
    let r = BlkifRequest {
        operation: BLKIF_OP_WRITE,
        nr_segments: 11,
        handle: 0x5150,
        pad1: 0,
        id: 0x0102030405060708,
        sector_number: 0x1122334455667788,
        seg,
    };
    let b = r.encode();
    assert_eq!(b[0], 1);
    assert_eq!(b[1], 11);
    assert_eq!(&b[2..4], &[0x50, 0x51]);
    assert_eq!(&b[8..16], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(&b[16..24], &0x1122334455667788u64.to_le_bytes());
    assert_eq!(&b[24..30], &[0x44, 0x33, 0x22, 0x11, 1, 7]);
    assert_eq!(&b[104..110], &[0xdd, 0xcc, 0xbb, 0xaa, 0, 0]);
    assert_eq!(BlkifRequest::decode(&b), r);
    assert_eq!(Request::decode(&b), Request::ReadWrite(r));
}

#[test]
fn indirect_and_discard_layout() {
    let r = BlkifRequestIndirect {
        operation: BLKIF_OP_INDIRECT,
        indirect_op: BLKIF_OP_READ,
        nr_segments: 300,
        id: 9,
        sector_number: 77,
        handle: 3,
        indirect_grefs: [10, 11, 0, 0, 0, 0, 0, 0x12345678],
        ..Default::default()
    };
    let b = r.encode();
    assert_eq!(&b[0..4], &[6, 0, 0x2c, 0x01]);
    assert_eq!(&b[24..26], &[3, 0]);
    assert_eq!(&b[28..32], &[10, 0, 0, 0]);
    assert_eq!(&b[56..60], &0x12345678u32.to_le_bytes());
    assert!(b[60..].iter().all(|&x| x == 0));
    assert_eq!(BlkifRequestIndirect::decode(&b), r);
    let dec = Request::decode(&b);
    assert_eq!(dec.id(), 9);
    assert_eq!(dec.response_operation(), BLKIF_OP_READ);

    let d = BlkifRequestDiscard {
        operation: BLKIF_OP_DISCARD,
        flag: BLKIF_DISCARD_SECURE,
        id: 5,
        sector_number: 1 << 40,
        nr_sectors: 8,
        ..Default::default()
    };
    let b = d.encode();
    assert_eq!(&b[0..2], &[5, 1]);
    assert_eq!(&b[24..32], &8u64.to_le_bytes());
    assert!(b[32..].iter().all(|&x| x == 0));
    assert_eq!(Request::decode(&b), Request::Discard(d));
}

#[test]
fn response_layout() {
    let r = BlkifResponse {
        id: 0xdead,
        operation: BLKIF_OP_FLUSH_DISKCACHE,
        status: BLKIF_RSP_EOPNOTSUPP,
        ..Default::default()
    };
    let b = r.encode();
    assert_eq!(&b[0..8], &0xdeadu64.to_le_bytes());
    assert_eq!(b[8], 3);
    assert_eq!(&b[10..12], &[0xfe, 0xff]);
    assert_eq!(BlkifResponse::decode(&b), Some(r));
    assert_eq!(BlkifResponse::decode(&b[..15]), None);
}

#[test]
fn indirect_page_helpers() {
    assert_eq!(indirect_pages(0), 0);
    assert_eq!(indirect_pages(1), 1);
    assert_eq!(indirect_pages(512), 1);
    assert_eq!(indirect_pages(513), 2);
    assert_eq!(indirect_pages(BLKIF_MAX_INDIRECT_SEGMENTS), 8);
    let mut page = [0u8; 4096];
    let s = BlkifRequestSegment {
        gref: 42,
        first_sect: 2,
        last_sect: 5,
        pad: 0,
    };
    s.encode_into(&mut page[511 * 8..]);
    assert_eq!(indirect_segment(&page, 511), Some(s));
    assert_eq!(indirect_segment(&page, 512), None);
    assert_eq!(s.byte_len(), Some(4 * 512));
    assert_eq!(BlkifRequestSegment { last_sect: 8, ..s }.byte_len(), None);
    assert_eq!(BlkifRequestSegment { first_sect: 6, ..s }.byte_len(), None);
}

proptest! {
    #[test]
    fn any_entry_decodes_and_reencodes(bytes in prop::collection::vec(any::<u8>(), 112)) {
        let b: RingEntryBytes = bytes.try_into().unwrap();
        match Request::decode(&b) {
            Request::ReadWrite(r) => prop_assert_eq!(r.encode(), b),
            Request::Indirect(r) => prop_assert_eq!(&r.encode()[..64], &b[..64]),
            Request::Discard(r) => prop_assert_eq!(&r.encode()[..32], &b[..32]),
            Request::Unknown { operation, .. } => prop_assert_eq!(operation, b[0]),
        }
        let rsp = BlkifResponse::decode(&b).unwrap();
        prop_assert_eq!(&rsp.encode()[..], &b[..16]);
    }
}
