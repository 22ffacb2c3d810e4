// SPDX-License-Identifier: GPL-2.0

//! Data-path micro-benchmarks: request mapping and grant get/put.
//! Figures only; nothing here asserts on time.

use std::hint::black_box;

use blkcore::blkif::BlkifRequestSegment;
use blkcore::grants::{GrantError, GrantMode, GrantOps, GrantPool, GrantRef, PoolEntry};
use blkcore::mapping::{
    encode_direct, encode_indirect, layout, map_pieces, Layout, MappedSegment, Piece, RwHeader,
    RwOp,
};
use criterion::{criterion_group, criterion_main, Criterion};

/// Trivial grant table: every grant succeeds; `mapped` says whether the
/// backend keeps grants mapped (persistent) or not.
struct Trivial {
    next: GrantRef,
    mapped: bool,
}

impl GrantOps for Trivial {
    type Frame = u32;
    fn grant(&mut self, _frame: u32, _readonly: bool) -> Result<GrantRef, GrantError> {
        self.next = self.next.wrapping_add(1);
        Ok(self.next)
    }
    fn try_end_access(&mut self, _gref: GrantRef) -> bool {
        !self.mapped
    }
    fn end_access(&mut self, _gref: GrantRef) {}
}

fn map_request(
    pieces: &[Piece<u32>],
    max: u32,
    out: &mut [MappedSegment<u32>],
    segs: &mut Vec<BlkifRequestSegment>,
    page: &mut [u8; 4096],
) -> [u8; 112] {
    let s = map_pieces(pieces, max, out).unwrap();
    segs.clear();
    segs.extend(
        out[..s.nr_segments as usize]
            .iter()
            .enumerate()
            .map(|(i, m)| m.to_blkif(i as u32)),
    );
    let hdr = RwHeader {
        op: RwOp::Write,
        id: 1,
        handle: 0,
        sector: 2048,
    };
    match layout(s.nr_segments, max).unwrap() {
        Layout::Direct => encode_direct(&hdr, segs).unwrap(),
        Layout::Indirect { pages } => {
            let mut grefs = [0u32; 8];
            for (s, d) in segs.iter().zip(page.chunks_exact_mut(8)) {
                s.encode_into(d);
            }
            for p in 0..pages {
                grefs[p as usize] = 9000 + p;
            }
            encode_indirect(&hdr, s.nr_segments, &grefs[..pages as usize], max).unwrap()
        }
    }
}

fn bench_mapping(c: &mut Criterion) {
    let mut out = vec![
        MappedSegment {
            page: 0u32,
            frame_offset: 0,
            first_sect: 0,
            last_sect: 0
        };
        256
    ];
    let mut segs = Vec::with_capacity(256);
    let mut page = [0u8; 4096];
    let small = [Piece {
        page: 7u32,
        offset: 0,
        len: 4096,
    }];
    c.bench_function("map_4k_request", |b| {
        b.iter(|| map_request(black_box(&small), 256, &mut out, &mut segs, &mut page))
    });
    let big: Vec<_> = (0..256u32)
        .map(|i| Piece {
            page: i,
            offset: 0,
            len: 4096,
        })
        .collect();
    c.bench_function("map_1m_request_indirect", |b| {
        b.iter(|| map_request(black_box(&big), 256, &mut out, &mut segs, &mut page))
    });
}

fn bench_grants(c: &mut Criterion) {
    for (name, mode, mapped) in [
        (
            "grant_get_put_persistent",
            GrantMode {
                persistent: true,
                copy_data: true,
            },
            true,
        ),
        (
            "grant_get_put_non_persistent",
            GrantMode {
                persistent: false,
                copy_data: false,
            },
            false,
        ),
    ] {
        let storage: Vec<_> = (0..1056u32).map(PoolEntry::new).collect();
        let mut pool = GrantPool::new(storage, mode).unwrap();
        let mut ops = Trivial { next: 0, mapped };
        c.bench_function(name, |b| {
            b.iter(|| {
                let g = pool.get(&mut ops, black_box(5), false).unwrap();
                pool.put(&mut ops, black_box(g.handle)).unwrap()
            })
        });
    }
}

criterion_group!(benches, bench_mapping, bench_grants);
criterion_main!(benches);
