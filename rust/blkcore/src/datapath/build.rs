// SPDX-License-Identifier: GPL-2.0

//! Building the data path when the backend connects: its sizes
//! ([`Geometry`]) and every buffer, allocated once.

use super::*;

impl Geometry {
    /// Sizes for negotiation `n` on a ring of `ring_size` slots, `wire_max`
    /// segments per request on the wire.
    pub fn new(n: &Negotiated, ring_size: u32, wire_max: u32) -> Self {
        let ring_size = ring_size.min(BLKIF_MAX_RING_SIZE);
        let wire_max = wire_max.max(n.segments_per_request);
        let indirect = n.indirect_segments != 0;
        let ind_pages = if indirect {
            indirect_pages(wire_max)
        } else {
            0
        };
        // The pool is sized for the block layer's limit, like upstream; a
        // request that needs more frames (segments straddling pages) may
        // find it exhausted and is retried (Busy), never failed.
        let per_req = n.segments_per_request
            + if indirect {
                indirect_pages(n.segments_per_request)
            } else {
                0
            };
        Self {
            ring_size,
            wire_max,
            indirect_pages: ind_pages,
            pool_entries: per_req.saturating_mul(ring_size),
        }
    }

    /// Frames the caller provides to [`DataPath::new`]: with `copy_data`,
    /// one bounce frame per pool entry; without, one placeholder frame
    /// plus every slot's own indirect pages.
    pub fn frames(&self, copy_data: bool) -> usize {
        if copy_data {
            self.pool_entries.max(1) as usize
        } else {
            1 + (self.ring_size * self.indirect_pages) as usize
        }
    }
}

impl<S: Storage, F: Copy, Rq> DataPath<S, F, Rq> {
    /// The data path for negotiation `n` with sizes `geo`, device handle
    /// `handle`; `frames` are the caller's ([`Geometry::frames`] of them),
    /// kept alive by the caller as long as the data path; `now_ms` starts
    /// the purge clock.
    pub fn new(
        n: &Negotiated,
        geo: Geometry,
        handle: u16,
        frames: &[F],
        now_ms: u64,
    ) -> Result<Self, OutOfMemory> {
        if frames.len() != geo.frames(n.copy_data) {
            return Err(OutOfMemory);
        }
        let placeholder = *frames.first().ok_or(OutOfMemory)?;
        let mut i = 0usize;
        let entries = S::buf(geo.pool_entries as usize, || {
            let f = if n.copy_data {
                frames.get(i).copied().unwrap_or(placeholder)
            } else {
                placeholder
            };
            i += 1;
            PoolEntry::new(f)
        })?;
        let pool =
            GrantPool::new(entries, GrantMode::from_negotiated(n)).map_err(|_| OutOfMemory)?;
        Ok(Self {
            n: *n,
            handle,
            pool,
            inflight: S::buf(1, || InFlight::new(geo.ring_size))?,
            slots: S::buf(geo.ring_size as usize, || Slot {
                rq: None,
                nr_segments: 0,
                nr_data_grants: 0,
                nr_direct_grants: 0,
                nr_indirect_pages: 0,
                nr_copies: 0,
                held: false,
            })?,
            tables: SlotTables::new(geo, n.copy_data, frames)?,
            direct_grant_stats: GrantStats::default(),
            desc: S::buf(geo.wire_max as usize * BLKIF_SEGMENT_SIZE, || 0)?,
            indirect_grefs: S::buf(geo.indirect_pages as usize, || 0)?,
            last_purge_ms: now_ms,
            purge_countdown: PURGE_CHECK_EVERY,
            notes: BackendNotes::default(),
            unknown_status_seen: false,
            stats: RingStats::default(),
            stall: StallWatch::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::VecStorage;

    extern crate alloc;

    /// (frames given, frames the data path keeps) for negotiation byte `a`
    /// (32 indirect segments, one ring page).
    fn frames_kept(a: u8) -> (usize, usize) {
        let n = crate::fuzz::datapath::negotiated(a, 0);
        let geo = Geometry::new(&n, 32, 64);
        let given = alloc::vec![7u32; geo.frames(n.copy_data)];
        let dp = DataPath::<VecStorage, u32, u32>::new(&n, geo, 0, &given, 0).unwrap();
        (given.len(), dp.tables.frames_kept())
    }

    #[test]
    fn bounce_frames_are_kept_once_in_the_pool_only() {
        // Persistent grants, 32 indirect segments: 32 slots' bounce frames.
        let (given, kept) = frames_kept(0b11);
        assert!(given > 1000, "{given} bounce frames");
        assert_eq!(kept, 1);
    }

    #[test]
    fn own_indirect_pages_are_kept_without_bounce_frames() {
        let (given, kept) = frames_kept(0b10);
        assert!(given > 1);
        assert_eq!(kept, given);
    }
}
