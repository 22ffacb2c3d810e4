// SPDX-License-Identifier: GPL-2.0

//! The disk's statistics file (debugfs `xen_blkfront_rs-<disk>/stats`).

use core::sync::atomic::Ordering;

use kernel::sync::Arc;

use super::Queues;
use crate::blkcore::{
    datapath::RingStats,
    grants::GrantStats, //
};

/// Per-disk statistics, summed over the rings (debugfs
/// `xen_blkfront_rs-<disk>/stats`).
pub(crate) struct StatsView {
    queues: Arc<Queues>,
}

impl StatsView {
    pub(super) fn new(queues: Arc<Queues>) -> Self {
        Self { queues }
    }
}

impl core::fmt::Debug for StatsView {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut t = RingStats::default();
        let mut g = GrantStats::default();
        let mut bounce = false;
        let mut slots = 0u32;
        for r in self.queues.rings.iter() {
            slots = slots.max(r.with_state(|st| st.size()));
            if let Some((rs, gs, copy)) = r.with_state(|st| st.stats()) {
                t.add(&rs);
                g.add(&gs);
                bounce |= copy;
            }
        }
        writeln!(f, "rings: {}", self.queues.rings.len())?;
        // Slots of the rings now (a reconnect may bring smaller ones).
        writeln!(f, "ring_slots: {}", slots)?;
        writeln!(
            f,
            "rings_served: {}",
            self.queues.served.load(Ordering::Relaxed)
        )?;
        writeln!(f, "bounce_buffer: {}", u8::from(bounce))?;
        writeln!(f, "requests: {}", t.requests)?;
        writeln!(f, "indirect_requests: {}", t.indirect_requests)?;
        writeln!(
            f,
            "requeued_as_bios: {}",
            self.queues.requeued_as_bios.load(Ordering::Relaxed)
        )?;
        writeln!(
            f,
            "resent_batch_ends: {}",
            self.queues.resent_batch_ends.load(Ordering::Relaxed)
        )?;
        writeln!(
            f,
            "batch_ends_unpublished: {}",
            self.queues.batch_ends_unpublished.load(Ordering::Relaxed)
        )?;
        writeln!(f, "bytes_copied: {}", g.bytes_copied)?;
        writeln!(f, "grants_granted: {}", g.granted)?;
        writeln!(f, "grants_revoked: {}", g.revoked)?;
        writeln!(f, "grants_reused: {}", g.reused)?;
        writeln!(f, "grants_deferred: {}", g.deferred)?;
        writeln!(f, "persistent_grants_held: {}", g.held)?;
        writeln!(f, "grants_in_use: {}", g.in_use)?;
        writeln!(f, "notifications: {}", t.notifications)?;
        writeln!(f, "busy: {}", t.busy)?;
        writeln!(f, "out_of_grants: {}", t.out_of_grants)?;
        writeln!(f, "interrupts: {}", t.interrupts)?;
        writeln!(f, "spurious_interrupts: {}", t.spurious_interrupts)?;
        writeln!(f, "responses: {}", t.responses)?;
        writeln!(f, "request_timeouts: {}", t.timeouts)?;
        writeln!(f, "backend_errors: {}", t.errors)
    }
}
