// SPDX-License-Identifier: GPL-2.0

//! Request -> segment mapping.

use blkcore::blkif::*;
use blkcore::mapping::*;
use proptest::prelude::*;

fn seg0() -> MappedSegment<u32> {
    MappedSegment {
        page: 0,
        frame_offset: 0,
        first_sect: 0,
        last_sect: 0,
    }
}

#[test]
fn splits_at_frame_boundaries() {
    // A 16 KiB page, 3 KiB at offset 3 KiB, then 6 KiB at 2 KiB (crosses one boundary).
    let pieces = [
        Piece {
            page: 1u32,
            offset: 3072,
            len: 3072,
        },
        Piece {
            page: 2u32,
            offset: 2048,
            len: 6144,
        },
    ];
    let mut out = [seg0(); 16];
    let s = map_pieces(&pieces, 32, &mut out).unwrap();
    assert_eq!(
        s,
        MapSummary {
            nr_segments: 4,
            nr_sectors: 18
        }
    );
    let got: Vec<_> = out[..4]
        .iter()
        .map(|m| (m.page, m.frame_offset, m.first_sect, m.last_sect))
        .collect();
    assert_eq!(
        got,
        vec![(1, 0, 6, 7), (1, 4096, 0, 3), (2, 0, 4, 7), (2, 4096, 0, 7)]
    );
    assert_eq!(out[0].offset_in_frame(), 3072);
    assert_eq!(out[0].len(), 1024);
    assert!(!out[0].is_empty());
    let b = out[1].to_blkif(99);
    assert_eq!((b.gref, b.first_sect, b.last_sect), (99, 0, 3));
}

#[test]
fn rejects_bad_pieces() {
    let mut out = [seg0(); 16];
    let p = |offset, len| {
        [Piece {
            page: 0u32,
            offset,
            len,
        }]
    };
    assert_eq!(
        map_pieces(&p(100, 512), 32, &mut out),
        Err(MapError::Misaligned(0))
    );
    assert_eq!(
        map_pieces(&p(0, 513), 32, &mut out),
        Err(MapError::Misaligned(0))
    );
    // Offset and length off by the same amount: each misaligned on its own.
    assert_eq!(
        map_pieces(&p(100, 612), 32, &mut out),
        Err(MapError::Misaligned(0))
    );
    assert_eq!(
        map_pieces(&p(0, 0), 32, &mut out),
        Err(MapError::EmptyPiece(0))
    );
    assert_eq!(
        map_pieces(&p(0xffff_fe01, 1024), 32, &mut out),
        Err(MapError::Misaligned(0))
    );
    assert_eq!(
        map_pieces(&p(0xffff_fe00, 1024), 32, &mut out),
        Err(MapError::Overflow)
    );
    assert_eq!(map_pieces::<u32>(&[], 32, &mut out), Err(MapError::NoData));
    // 12 frames: too many for a non-indirect backend and for 11 slots of output.
    let big = [Piece {
        page: 0u32,
        offset: 0,
        len: 12 * 4096,
    }];
    assert_eq!(
        map_pieces(&big, 11, &mut out),
        Err(MapError::TooManySegments { max: 11 })
    );
    assert_eq!(
        map_pieces(&big, 32, &mut out[..11]),
        Err(MapError::TooManySegments { max: 11 })
    );
    assert!(map_pieces(&big, 32, &mut out).is_ok());
}

#[test]
fn layouts() {
    assert_eq!(layout(1, 0), Ok(Layout::Direct));
    assert_eq!(layout(11, 0), Ok(Layout::Direct));
    assert_eq!(layout(12, 0), Err(MapError::TooManySegments { max: 11 }));
    assert_eq!(layout(12, 32), Ok(Layout::Indirect { pages: 1 }));
    assert_eq!(layout(256, 256), Ok(Layout::Indirect { pages: 1 }));
    assert_eq!(layout(513, 1024), Ok(Layout::Indirect { pages: 2 }));
    assert_eq!(
        layout(4097, 8192),
        Err(MapError::TooManySegments { max: 4096 })
    );
}

/// The data path's encoder writes the slot whole (whatever was in it) and
/// agrees with the typed encoding of the same segments.
#[test]
fn encodes_wire_descriptors_over_a_dirty_slot() {
    let segs: Vec<BlkifRequestSegment> = (0..3)
        .map(|i| BlkifRequestSegment {
            gref: 100 + i,
            first_sect: i as u8,
            last_sect: 7,
            pad: 0,
        })
        .collect();
    let mut desc = vec![0u8; segs.len() * BLKIF_SEGMENT_SIZE];
    for (s, d) in segs.iter().zip(desc.chunks_exact_mut(BLKIF_SEGMENT_SIZE)) {
        s.encode_into(d);
    }
    let hdr = RwHeader {
        op: RwOp::Read,
        id: 17,
        handle: 0x5a5,
        sector: 1 << 40,
    };
    let mut entry = [0xa5u8; BLKIF_RING_ENTRY_SIZE];
    encode_direct_wire(&hdr, &desc, &mut entry).unwrap();
    let typed = BlkifRequest {
        operation: BLKIF_OP_READ,
        nr_segments: 3,
        handle: 0x5a5,
        id: 17,
        sector_number: 1 << 40,
        seg: core::array::from_fn(|i| segs.get(i).copied().unwrap_or_default()),
        ..BlkifRequest::default()
    };
    assert_eq!(entry, typed.encode());
    assert_eq!(entry, encode_direct(&hdr, &segs).unwrap());
    // 12 descriptors do not fit a slot; a torn one is refused.
    let twelve = [0u8; 12 * BLKIF_SEGMENT_SIZE];
    assert_eq!(
        encode_direct_wire(&hdr, &twelve, &mut entry),
        Err(MapError::TooManySegments { max: 11 })
    );
    assert_eq!(
        encode_direct_wire(&hdr, &desc[..7], &mut entry),
        Err(MapError::BadSegment(0))
    );
}

#[test]
fn encodes_direct_flush_discard() {
    let segs = [BlkifRequestSegment {
        gref: 5,
        first_sect: 0,
        last_sect: 7,
        pad: 0,
    }];
    let hdr = RwHeader {
        op: RwOp::Write,
        id: 3,
        handle: 0x300,
        sector: 64,
    };
    let b = encode_direct(&hdr, &segs).unwrap();
    let r = BlkifRequest::decode(&b);
    assert_eq!(
        (r.operation, r.nr_segments, r.handle, r.id, r.sector_number),
        (1, 1, 0x300, 3, 64)
    );
    assert_eq!(r.seg[0], segs[0]);
    assert_eq!(encode_direct(&hdr, &[]), Err(MapError::NoData));
    let bad = [BlkifRequestSegment {
        gref: 5,
        first_sect: 3,
        last_sect: 2,
        pad: 0,
    }];
    assert_eq!(encode_direct(&hdr, &bad), Err(MapError::BadSegment(0)));
    assert_eq!(
        encode_direct(&hdr, &[segs[0]; 12]),
        Err(MapError::TooManySegments { max: 11 })
    );
    // Eleven, the most a direct request holds, all on the wire.
    assert_eq!(
        BlkifRequest::decode(&encode_direct(&hdr, &[segs[0]; 11]).unwrap()).nr_segments,
        11
    );
    // Flush with data (FUA write) and without.
    assert!(encode_direct(
        &RwHeader {
            op: RwOp::Flush,
            ..hdr
        },
        &segs
    )
    .is_ok());
    let f = BlkifRequest::decode(&encode_flush(9, 1, false));
    assert_eq!(
        (f.operation, f.nr_segments, f.id),
        (BLKIF_OP_FLUSH_DISKCACHE, 0, 9)
    );
    assert_eq!(
        BlkifRequest::decode(&encode_flush(9, 1, true)).operation,
        BLKIF_OP_WRITE_BARRIER
    );
    let d = BlkifRequestDiscard::decode(&encode_discard(4, 100, 8, true).unwrap());
    assert_eq!(
        (d.operation, d.flag, d.id, d.sector_number, d.nr_sectors),
        (5, 1, 4, 100, 8)
    );
    assert_eq!(
        encode_discard(4, 100, 0, false),
        Err(MapError::EmptyDiscard)
    );
    assert_eq!(
        encode_discard(4, u64::MAX, 1, false),
        Err(MapError::Overflow)
    );
    assert!(RwOp::Write.backend_reads_only() && !RwOp::Read.backend_reads_only());
}

#[test]
fn encodes_indirect_one_mib() {
    // 1 MiB in 4 KiB pages: 256 segments, one indirect page.
    let pieces: Vec<_> = (0..256u32)
        .map(|i| Piece {
            page: i,
            offset: 0,
            len: 4096,
        })
        .collect();
    let mut out = vec![seg0(); 256];
    let s = map_pieces(&pieces, 256, &mut out).unwrap();
    assert_eq!(
        s,
        MapSummary {
            nr_segments: 256,
            nr_sectors: 2048
        }
    );
    assert_eq!(layout(256, 256), Ok(Layout::Indirect { pages: 1 }));
    let segs: Vec<_> = out
        .iter()
        .enumerate()
        .map(|(i, m)| m.to_blkif(1000 + i as u32))
        .collect();
    // The data path copies each descriptor's 8 wire bytes into the page.
    let mut page = [0u8; 4096];
    for (s, d) in segs.iter().zip(page.chunks_exact_mut(8)) {
        s.encode_into(d);
    }
    assert_eq!(indirect_segment(&page, 255).unwrap().gref, 1255);
    assert_eq!(indirect_segment(&page, 255).unwrap().last_sect, 7);
    let hdr = RwHeader {
        op: RwOp::Read,
        id: 1,
        handle: 0,
        sector: 0,
    };
    // The largest indirect request: every indirect page blkif allows.
    let most = BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * SEGS_PER_INDIRECT_FRAME;
    let grefs: Vec<u32> = (0..BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST).collect();
    let r = BlkifRequestIndirect::decode(&encode_indirect(&hdr, most, &grefs, most).unwrap());
    assert_eq!(
        (r.nr_segments, r.indirect_grefs),
        (most as u16, [0, 1, 2, 3, 4, 5, 6, 7])
    );
    let r = BlkifRequestIndirect::decode(&encode_indirect(&hdr, 256, &[77], 256).unwrap());
    assert_eq!(
        (
            r.operation,
            r.indirect_op,
            r.nr_segments,
            r.indirect_grefs[0]
        ),
        (6, 0, 256, 77)
    );
    assert_eq!(
        encode_indirect(&hdr, 256, &[], 256),
        Err(MapError::IndirectGrefs {
            needed: 1,
            given: 0
        })
    );
    assert_eq!(
        encode_indirect(&hdr, 256, &[1], 32),
        Err(MapError::TooManySegments { max: 32 })
    );
    assert!(encode_indirect(&hdr, 11, &[1], 32).is_err());
    assert_eq!(
        encode_indirect(
            &RwHeader {
                op: RwOp::Flush,
                ..hdr
            },
            256,
            &[1],
            256
        ),
        Err(MapError::IndirectOp(BLKIF_OP_FLUSH_DISKCACHE))
    );
}

/// Pieces from (page, first sector, sectors) triples, each cut to end
/// inside a page of `sectors_per_page` sectors.
fn sector_pieces(raw: Vec<(u32, u32, u32)>, sectors_per_page: u32) -> Vec<Piece<u32>> {
    raw.into_iter()
        .map(|(page, off, len)| Piece {
            page,
            offset: off * 512,
            len: len.min(sectors_per_page - off).max(1) * 512,
        })
        .collect()
}

proptest! {
    /// Pieces merged as the kernel walk merges them ([`merged`], which
    /// the kernel's `request_frames` runs) cover the same bytes in the same
    /// order, map to no more segments than the pieces as they came, and no
    /// two merged pieces in a row could have been one.
    #[test]
    fn merging_pieces_keeps_their_bytes_and_never_adds_segments(pieces in prop::collection::vec((0u32..3, 0u32..8, 1u32..8), 1..20)) {
        let pieces = sector_pieces(pieces, 8);
        let merged: Vec<Piece<u32>> = merged(pieces.iter().map(|p| Ok::<_, ()>(*p)))
            .collect::<Result<_, _>>()
            .unwrap();
        for w in merged.windows(2) {
            let mut first = w[0];
            prop_assert!(!first.extend(&w[1]), "{:?} then {:?}", w[0], w[1]);
        }
        let bytes = |ps: &[Piece<u32>]| {
            ps.iter()
                .flat_map(|p| (p.offset / 512..(p.offset + p.len) / 512).map(move |s| (p.page, s)))
                .collect::<Vec<_>>()
        };
        prop_assert_eq!(bytes(&merged), bytes(&pieces));
        let mut out = vec![seg0(); 4096];
        let as_came = map_pieces(&pieces, 4096, &mut out).unwrap();
        let as_merged = map_pieces(&merged, 4096, &mut out).unwrap();
        prop_assert!(as_merged.nr_segments <= as_came.nr_segments);
        prop_assert_eq!(as_merged.nr_sectors, as_came.nr_sectors);
    }

    /// Segments cover exactly the pieces' bytes, in order, never crossing a frame.
    #[test]
    fn mapping_covers_pieces(pieces in prop::collection::vec((0u32..4, 0u32..32, 1u32..32), 1..20)) {
        let pieces = sector_pieces(pieces, 32);
        let mut out = vec![seg0(); 4096];
        let s = map_pieces(&pieces, 4096, &mut out).unwrap();
        let mut covered = Vec::new();
        for m in &out[..s.nr_segments as usize] {
            prop_assert!(m.first_sect <= m.last_sect && m.last_sect < 8);
            prop_assert_eq!(m.frame_offset % 4096, 0);
            covered.push((m.page, m.frame_offset + m.offset_in_frame(), m.len()));
        }
        // Merge back per piece and compare.
        let mut i = 0;
        for p in &pieces {
            let (mut pos, end) = (p.offset, p.offset + p.len);
            while pos < end {
                let (pg, off, len) = covered[i];
                prop_assert_eq!((pg, off), (p.page, pos));
                pos += len;
                i += 1;
            }
            prop_assert_eq!(pos, end);
        }
        prop_assert_eq!(i, covered.len());
        let total: u64 = pieces.iter().map(|p| u64::from(p.len / 512)).sum();
        prop_assert_eq!(s.nr_sectors, total);
    }
}

#[test]
fn merging_passes_a_walk_error_on_at_once() {
    let p = |page, offset| {
        Ok(Piece {
            page,
            offset,
            len: 512,
        })
    };
    let got: Vec<Result<Piece<u32>, &str>> =
        merged([p(1, 0), p(1, 512), Err("walk"), p(2, 0)]).collect();
    assert_eq!(
        got,
        [
            Err("walk"),
            Ok(Piece {
                page: 2,
                offset: 0,
                len: 512
            })
        ]
    );
}

#[test]
fn a_piece_extends_only_with_the_bytes_right_after_it_in_its_page() {
    let p = |page: u32, offset: u32, len: u32| Piece { page, offset, len };
    let mut run = p(1, 512, 1024);
    assert!(run.extend(&p(1, 1536, 512)));
    assert_eq!(run, p(1, 512, 1536));
    // A gap, an overlap, another page, a piece before it: no change.
    for next in [
        p(1, 2560, 512),
        p(1, 1536, 512),
        p(2, 2048, 512),
        p(1, 0, 512),
    ] {
        assert!(!run.extend(&next), "{next:?}");
        assert_eq!(run, p(1, 512, 1536));
    }
    // A length that would overflow is not merged.
    let mut huge = p(1, 0, u32::MAX - 511);
    assert!(!huge.extend(&p(1, u32::MAX - 511, 1024)));
    assert_eq!(huge.len, u32::MAX - 511);
}

#[test]
fn fua_writes_become_barriers_only_on_barrier_backends() {
    use blkcore::negotiate::FlushKind;
    assert_eq!(
        RwOp::for_data(true, true, Some(FlushKind::Barrier)),
        RwOp::WriteBarrier
    );
    assert_eq!(
        RwOp::for_data(true, true, Some(FlushKind::Flush)),
        RwOp::Flush
    );
    assert_eq!(RwOp::for_data(true, true, None), RwOp::Write);
    assert_eq!(
        RwOp::for_data(true, false, Some(FlushKind::Barrier)),
        RwOp::Write
    );
    assert_eq!(
        RwOp::for_data(false, true, Some(FlushKind::Barrier)),
        RwOp::Read
    );
    assert_eq!(
        RwOp::for_data(true, true, Some(FlushKind::Barrier)).wire(),
        BLKIF_OP_WRITE_BARRIER
    );
}
