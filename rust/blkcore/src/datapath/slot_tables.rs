// SPDX-License-Identifier: GPL-2.0

//! The buffers the ring's slots own a fixed share of: for the request each
//! slot holds, its data grants, its indirect pages and their grants, and
//! the reads to copy back. Each is one flat buffer allocated when the
//! backend connects (one allocation, however many slots), and handed out
//! one slot's share at a time: no other code knows where a slot's share
//! starts.

use super::{
    CopySeg,
    Geometry,
    GrantHandle,
    GrantRef,
    OutOfMemory,
    Storage, //
};
use core::ops::Range;

/// Per-slot buffers of a ring, by slot id: slot `id`'s share of each is
/// the `id`th run of its stride (`wire_max` data segments or
/// `indirect_pages` indirect pages of the [`Geometry`]). A buffer the
/// negotiated mode leaves unused is empty, and so is every share of it;
/// so is an id out of range.
pub(super) struct SlotTables<S: Storage, F: Copy> {
    /// The sizes the data path is built with: the slot count and strides.
    geo: Geometry,
    /// The frames the data path itself reads: a placeholder first, then
    /// (without bounce frames) each slot's own `indirect_pages` indirect
    /// pages. The bounce frames live in the grant pool's entries only.
    frames: S::Buf<F>,
    /// `wire_max` pool handles of data segments per slot (only with
    /// `copy_data`: without, data is granted before the ring lock).
    data_grants: S::Buf<GrantHandle>,
    /// `wire_max` grant references per slot of data granted before the
    /// ring lock (only without `copy_data`).
    direct_grefs: S::Buf<GrantRef>,
    /// `indirect_pages` pool handles of indirect pages per slot.
    indirect_grants: S::Buf<GrantHandle>,
    /// `wire_max` reads to copy back per slot (only with `copy_data`).
    copies: S::Buf<CopySeg<F>>,
}

impl<S: Storage, F: Copy> SlotTables<S, F> {
    /// The tables of a ring of sizes `geo`, with bounce frames if
    /// `copy_data`. Of the caller's frames `given` ([`Geometry::frames`])
    /// they keep the placeholder and the slots' own indirect pages, or
    /// with bounce frames the placeholder only.
    pub(super) fn new(geo: Geometry, copy_data: bool, given: &[F]) -> Result<Self, OutOfMemory> {
        let placeholder = *given.first().ok_or(OutOfMemory)?;
        // With bounce frames only the placeholder is read from here (the
        // pool's entries hold the rest): a second list of a thousand
        // frames per ring would be memory for nothing.
        let kept = if copy_data { 1 } else { given.len() };
        let mut j = 0usize;
        let frames = S::buf(kept, || {
            let f = given.get(j).copied().unwrap_or(placeholder);
            j += 1;
            f
        })?;
        let size = geo.ring_size as usize;
        let wire = geo.wire_max as usize;
        let ind = geo.indirect_pages as usize;
        let unset_copy = CopySeg {
            data: placeholder,
            bounce: placeholder,
            off: 0,
            len: 0,
        };
        // Data grants: through the pool with bounce frames, made before
        // the ring lock without.
        let (pooled, direct) = if copy_data {
            (size * wire, 0)
        } else {
            (0, size * wire)
        };
        Ok(Self {
            geo,
            frames,
            data_grants: S::buf(pooled, || GrantHandle(0))?,
            direct_grefs: S::buf(direct, || 0)?,
            indirect_grants: S::buf(size * ind, || GrantHandle(0))?,
            copies: S::buf(pooled, || unset_copy)?,
        })
    }

    /// The sizes the tables were built with.
    #[inline]
    pub(super) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The placeholder frame (indirect pages with bounce frames are the
    /// pool's, granted for it).
    #[inline]
    pub(super) fn placeholder(&self) -> Option<F> {
        self.frames.as_ref().first().copied()
    }

    /// Slot `id`'s pool handles of data segments: `wire_max` of them with
    /// bounce frames, none without.
    #[inline]
    pub(super) fn data_grants(&self, id: usize) -> &[GrantHandle] {
        share(self.data_grants.as_ref(), id, self.geo.wire_max)
    }

    /// Slot `id`'s data grants made before the ring lock: `wire_max` of
    /// them without bounce frames, none with.
    #[inline]
    pub(super) fn direct_grefs(&self, id: usize) -> &[GrantRef] {
        share(self.direct_grefs.as_ref(), id, self.geo.wire_max)
    }

    /// [`SlotTables::direct_grefs`], to end them.
    #[inline]
    pub(super) fn direct_grefs_mut(&mut self, id: usize) -> &mut [GrantRef] {
        share_mut(self.direct_grefs.as_mut(), id, self.geo.wire_max)
    }

    /// The first `nr` of [`SlotTables::direct_grefs`], to record a
    /// request's `nr` grants; `None` if the slot has fewer.
    #[inline]
    pub(super) fn first_direct_grefs_mut(
        &mut self,
        id: usize,
        nr: usize,
    ) -> Option<&mut [GrantRef]> {
        self.direct_grefs
            .as_mut()
            .get_mut(first(id, self.geo.wire_max, nr)?)
    }

    /// Slot `id`'s pool handles of indirect pages (`indirect_pages`).
    #[inline]
    pub(super) fn indirect_grants(&self, id: usize) -> &[GrantHandle] {
        share(self.indirect_grants.as_ref(), id, self.geo.indirect_pages)
    }

    /// Slot `id`'s reads to copy back: `wire_max` with bounce frames, none
    /// without.
    #[inline]
    pub(super) fn copies(&self, id: usize) -> &[CopySeg<F>] {
        share(self.copies.as_ref(), id, self.geo.wire_max)
    }

    /// The first `nr` of slot `id`'s data grants and of its reads to copy
    /// back (none without bounce frames), to record a request's `nr`
    /// segments ([`SlotTables::data_grants`], [`SlotTables::copies`]);
    /// `None` if the slot has fewer data grants.
    #[inline]
    pub(super) fn first_data_grants_and_copies_mut(
        &mut self,
        id: usize,
        nr: usize,
    ) -> Option<(&mut [GrantHandle], &mut [CopySeg<F>])> {
        let at = first(id, self.geo.wire_max, nr)?;
        let grants = self.data_grants.as_mut().get_mut(at.clone())?;
        let copies = match self.copies.as_mut() {
            // Without bounce frames: nothing to copy back, for any slot.
            [] => &mut [],
            all => all.get_mut(at)?,
        };
        Some((grants, copies))
    }

    /// Slot `id`'s own indirect pages (`indirect_pages` frames; none with
    /// bounce frames) and their pool handles, to record a request's
    /// indirect pages.
    #[inline]
    pub(super) fn indirect_mut(&mut self, id: usize) -> (&[F], &mut [GrantHandle]) {
        let at = range(id, self.geo.indirect_pages);
        // The slots' own frames follow the placeholder.
        let own = at.start.saturating_add(1)..at.end.saturating_add(1);
        (
            self.frames.as_ref().get(own).unwrap_or(&[]),
            self.indirect_grants.as_mut().get_mut(at).unwrap_or(&mut []),
        )
    }

    /// Frames kept: see [`SlotTables::new`].
    #[cfg(test)]
    pub(super) fn frames_kept(&self) -> usize {
        self.frames.as_ref().len()
    }
}

/// Where slot `id`'s share of a buffer of stride `stride` lies; past the
/// end of any buffer (empty) if the arithmetic overflows.
#[inline(always)]
fn range(id: usize, stride: u32) -> Range<usize> {
    let stride = stride as usize;
    let start = id.saturating_mul(stride);
    start..start.saturating_add(stride)
}

/// Where the first `nr` entries of slot `id`'s share lie, `None` if the
/// stride is shorter. One range, rather than the share cut again: the
/// submission path checks each buffer's bounds once per request.
#[inline(always)]
fn first(id: usize, stride: u32, nr: usize) -> Option<Range<usize>> {
    let stride = stride as usize;
    if nr > stride {
        return None;
    }
    let start = id.saturating_mul(stride);
    Some(start..start.saturating_add(nr))
}

/// Slot `id`'s share of `buf`; empty for an id out of range.
#[inline(always)]
fn share<T>(buf: &[T], id: usize, stride: u32) -> &[T] {
    buf.get(range(id, stride)).unwrap_or(&[])
}

/// Slot `id`'s share of `buf`; empty for an id out of range.
#[inline(always)]
fn share_mut<T>(buf: &mut [T], id: usize, stride: u32) -> &mut [T] {
    buf.get_mut(range(id, stride)).unwrap_or(&mut [])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::VecStorage;

    extern crate alloc;

    /// Tables of 4 slots, 3 segments and 2 indirect pages each; frames are
    /// their index.
    fn tables(copy_data: bool) -> SlotTables<VecStorage, u32> {
        let geo = Geometry {
            ring_size: 4,
            wire_max: 3,
            indirect_pages: 2,
            pool_entries: 20,
        };
        let given: alloc::vec::Vec<u32> = (0..geo.frames(copy_data) as u32).collect();
        SlotTables::new(geo, copy_data, &given).unwrap()
    }

    #[test]
    fn a_share_is_one_stride_and_shares_do_not_overlap() {
        let mut t = tables(false);
        for id in 0..4 {
            let g = t.direct_grefs_mut(id);
            assert_eq!(g.len(), 3);
            g.fill(id as u32 + 1);
            let (own, ind) = t.indirect_mut(id);
            assert_eq!(own, [1 + 2 * id as u32, 2 + 2 * id as u32]);
            assert_eq!(ind.len(), 2);
            ind.fill(GrantHandle(id as u32 + 1));
        }
        for id in 0..4 {
            let want = id as u32 + 1;
            assert!(t.direct_grefs(id).iter().all(|&g| g == want));
            assert!(t.indirect_grants(id).iter().all(|h| h.0 == want));
        }
        assert_eq!(t.placeholder(), Some(0));
    }

    #[test]
    fn unused_buffers_and_ids_out_of_range_have_empty_shares() {
        let mut t = tables(false);
        assert!(t.data_grants(0).is_empty() && t.copies(0).is_empty());
        for id in [4, usize::MAX / 2, usize::MAX] {
            assert!(t.direct_grefs_mut(id).is_empty());
            assert!(t.indirect_mut(id).0.is_empty() && t.indirect_mut(id).1.is_empty());
        }
        let mut t = tables(true);
        assert_eq!(t.frames_kept(), 1);
        assert!(t.direct_grefs(0).is_empty());
        let (own, ind) = t.indirect_mut(3);
        assert!(own.is_empty(), "the pool's frames, not the slot's own");
        assert_eq!(ind.len(), 2);
        let (g, c) = t.first_data_grants_and_copies_mut(3, 2).unwrap();
        assert_eq!((g.len(), c.len()), (2, 2));
        assert!(
            t.first_data_grants_and_copies_mut(3, 4).is_none(),
            "past the share"
        );
        assert!(t.first_data_grants_and_copies_mut(4, 1).is_none());
        assert!(t.first_data_grants_and_copies_mut(usize::MAX, 1).is_none());
        let mut t = tables(false);
        assert!(t.first_data_grants_and_copies_mut(0, 1).is_none());
        assert_eq!(t.first_direct_grefs_mut(3, 3).map(|g| g.len()), Some(3));
        assert!(t.first_direct_grefs_mut(3, 4).is_none());
        assert!(t.first_direct_grefs_mut(4, 1).is_none());
    }
}
