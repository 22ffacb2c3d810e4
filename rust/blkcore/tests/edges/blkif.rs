// SPDX-License-Identifier: GPL-2.0

//! The 8-byte segment descriptor (`struct blkif_request_segment`): what
//! `encode` returns is the little-endian wire form, the same bytes
//! `encode_into` writes.

use blkcore::blkif::{
    BlkifRequestSegment,
    BLKIF_SEGMENT_SIZE, //
};

const SEG: BlkifRequestSegment = BlkifRequestSegment {
    gref: 0x1122_3344,
    first_sect: 1,
    last_sect: 7,
    pad: 0xbeef,
};

#[test]
fn encode_is_gref_then_sectors_then_pad_little_endian() {
    assert_eq!(SEG.encode(), [0x44, 0x33, 0x22, 0x11, 1, 7, 0xef, 0xbe]);
}

#[test]
fn encode_and_encode_into_write_the_same_bytes() {
    let mut b = [0xaau8; BLKIF_SEGMENT_SIZE + 2];
    SEG.encode_into(&mut b);
    assert_eq!(b[..BLKIF_SEGMENT_SIZE], SEG.encode());
    assert_eq!(
        b[BLKIF_SEGMENT_SIZE..],
        [0xaa, 0xaa],
        "nothing past 8 bytes"
    );
    assert_eq!(BlkifRequestSegment::decode(&SEG.encode()), SEG);
}
