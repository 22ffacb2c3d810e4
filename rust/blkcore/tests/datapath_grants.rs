// SPDX-License-Identifier: GPL-2.0

//! Grant-pool policy against a minimal GrantOps.

use std::collections::BTreeMap;

use blkcore::grants::*;

/// gref -> (frame, readonly, backend maps it).
#[derive(Default)]
struct Table {
    next: GrantRef,
    live: BTreeMap<GrantRef, (u32, bool, bool)>,
    ends: u32,
    forced: u32,
    fail: bool,
}

impl GrantOps for Table {
    type Frame = u32;
    fn grant(&mut self, frame: u32, readonly: bool) -> Result<GrantRef, GrantError> {
        if self.fail {
            return Err(GrantError::NoGrantRefs);
        }
        self.next += 1;
        self.live.insert(self.next, (frame, readonly, false));
        Ok(self.next)
    }
    fn try_end_access(&mut self, gref: GrantRef) -> bool {
        let e = self.live[&gref];
        if e.2 {
            return false;
        }
        self.live.remove(&gref);
        self.ends += 1;
        true
    }
    fn end_access(&mut self, gref: GrantRef) {
        self.live.remove(&gref);
        self.forced += 1;
    }
}

impl Table {
    fn backend_maps(&mut self, gref: GrantRef, mapped: bool) {
        self.live.get_mut(&gref).unwrap().2 = mapped;
    }
}

fn bounce(n: u32) -> Vec<PoolEntry<u32>> {
    (0..n).map(|i| PoolEntry::new(1000 + i)).collect()
}

const PERSISTENT: GrantMode = GrantMode {
    persistent: true,
    copy_data: true,
};
const DIRECT: GrantMode = GrantMode {
    persistent: false,
    copy_data: false,
};
const UNTRUSTED: GrantMode = GrantMode {
    persistent: false,
    copy_data: true,
};

#[test]
fn persistent_without_copy_is_refused() {
    let r = GrantPool::new(
        bounce(1),
        GrantMode {
            persistent: true,
            copy_data: false,
        },
    );
    assert!(matches!(r, Err(GrantError::PersistentWithoutCopy)));
}

#[test]
fn persistent_reuses_mapped_grants_lifo() {
    let mut t = Table::default();
    let mut p = GrantPool::new(bounce(4), PERSISTENT).unwrap();
    let a = p.get(&mut t, 7, true).unwrap();
    let b = p.get(&mut t, 8, true).unwrap();
    // Bounce frames, granted read-write, data frame ignored.
    assert_eq!((a.frame, b.frame), (1000, 1001));
    assert!(!t.live[&a.gref].1);
    t.backend_maps(a.gref, true);
    t.backend_maps(b.gref, true);
    assert_eq!(p.put(&mut t, a.handle), Ok(PutOutcome::Kept));
    assert_eq!(p.put(&mut t, b.handle), Ok(PutOutcome::Kept));
    assert_eq!(p.stats().held, 2);
    // LIFO: b (last put) first, then a, no grant op.
    let c = p.get(&mut t, 0, false).unwrap();
    let d = p.get(&mut t, 0, false).unwrap();
    assert_eq!((c.gref, d.gref), (b.gref, a.gref));
    assert!(c.reused && d.reused);
    let s = p.stats();
    assert_eq!((s.granted, s.reused, s.held, s.in_use), (2, 2, 0, 2));
    // Unmapped by the backend: revoked, goes to the tail.
    t.backend_maps(c.gref, false);
    assert_eq!(p.put(&mut t, c.handle), Ok(PutOutcome::Revoked));
    assert_eq!(p.entry(c.handle).unwrap().gref(), INVALID_GRANT_REF);
    assert!(!t.live.contains_key(&c.gref));
    assert_eq!(
        p.put(&mut t, c.handle),
        Err(GrantError::BadHandle(c.handle.0))
    );
    assert_eq!(p.put(&mut t, d.handle), Ok(PutOutcome::Kept));
    // Order now: d (held) at head, fresh entries, c at the tail.
    let e = p.get(&mut t, 0, false).unwrap();
    assert_eq!(e.gref, d.gref);
    assert_eq!(p.available(), 3);
}

#[test]
fn purge_revokes_only_dropped_grants_and_keeps_order() {
    let mut t = Table::default();
    let mut p = GrantPool::new(bounce(6), PERSISTENT).unwrap();
    let gs: Vec<_> = (0..6).map(|_| p.get(&mut t, 0, false).unwrap()).collect();
    for g in &gs {
        t.backend_maps(g.gref, true);
        p.put(&mut t, g.handle).unwrap();
    }
    assert_eq!(p.stats().held, 6);
    // Backend drops 1 and 4.
    t.backend_maps(gs[1].gref, false);
    t.backend_maps(gs[4].gref, false);
    assert_eq!(p.purge(&mut t), 2);
    assert_eq!(p.stats().held, 4);
    assert_eq!(p.purge(&mut t), 0);
    // Still-mapped ones come first, in LIFO order; then the revoked ones.
    let order: Vec<_> = (0..6).map(|_| p.get(&mut t, 0, false).unwrap()).collect();
    let reused: Vec<_> = order.iter().take(4).map(|g| g.gref).collect();
    assert_eq!(reused, vec![gs[5].gref, gs[3].gref, gs[2].gref, gs[0].gref]);
    assert!(order[4..].iter().all(|g| !g.reused));
    assert_eq!(p.get(&mut t, 0, false), Err(GrantError::Exhausted));
}

#[test]
fn direct_mode_grants_caller_frames_and_ends_on_completion() {
    let mut t = Table::default();
    let mut p = GrantPool::new(vec![PoolEntry::new(0u32); 2], DIRECT).unwrap();
    let a = p.get(&mut t, 55, true).unwrap();
    assert_eq!(a.frame, 55);
    assert_eq!(t.live[&a.gref], (55, true, false));
    assert_eq!(p.account_copy(512), Err(GrantError::CopyNotNegotiated));
    assert_eq!(p.put(&mut t, a.handle), Ok(PutOutcome::Revoked));
    assert!(t.live.is_empty());
    // A backend that keeps the mapping is an error; the grant is ended
    // with a deferred release (the frame stays with the grant table until
    // the backend unmaps it) and the entry is retired: its frame is never
    // granted again.
    let b = p.get(&mut t, 56, false).unwrap();
    t.backend_maps(b.gref, true);
    assert_eq!(
        p.put(&mut t, b.handle),
        Err(GrantError::StillMapped(b.gref))
    );
    assert_eq!((t.forced, t.live.contains_key(&b.gref)), (1, false));
    assert_eq!(p.available(), 1);
    let s = p.stats();
    assert_eq!(
        (s.granted, s.revoked, s.reused, s.bytes_copied, s.deferred),
        (2, 2, 0, 0, 1)
    );
    // Nothing is left for teardown to force, and it does not bring the
    // retired entry back.
    assert_eq!(p.teardown(&mut t), 0);
    assert_eq!(p.available(), 1);
    let c = p.get(&mut t, 57, false).unwrap();
    assert_ne!(c.handle, b.handle);
    assert_eq!(p.get(&mut t, 58, false), Err(GrantError::Exhausted));
}

#[test]
fn untrusted_bounces_but_never_keeps_grants() {
    let mut t = Table::default();
    let mut p = GrantPool::new(bounce(2), UNTRUSTED).unwrap();
    let a = p.get(&mut t, 9, true).unwrap();
    assert_eq!(a.frame, 1000);
    p.account_copy(4096).unwrap();
    t.backend_maps(a.gref, true);
    assert!(matches!(
        p.put(&mut t, a.handle),
        Err(GrantError::StillMapped(_))
    ));
    assert_eq!(p.stats().bytes_copied, 4096);
}

#[test]
fn grant_failure_leaves_pool_intact() {
    let mut t = Table {
        fail: true,
        ..Default::default()
    };
    let mut p = GrantPool::new(bounce(2), PERSISTENT).unwrap();
    assert_eq!(p.get(&mut t, 0, false), Err(GrantError::NoGrantRefs));
    assert_eq!(p.available(), 2);
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn teardown_revokes_everything() {
    let mut t = Table::default();
    let mut storage = bounce(8);
    let mut p = GrantPool::new(&mut storage[..], PERSISTENT).unwrap();
    let gs: Vec<_> = (0..8).map(|_| p.get(&mut t, 0, false).unwrap()).collect();
    for g in &gs[..4] {
        t.backend_maps(g.gref, true);
        p.put(&mut t, g.handle).unwrap();
    }
    // 4 held and mapped, 2 in use, 2 in use and mapped.
    t.backend_maps(gs[6].gref, true);
    t.backend_maps(gs[7].gref, true);
    let deferred = p.teardown(&mut t);
    assert_eq!(deferred, 6);
    assert!(t.live.is_empty());
    assert_eq!((t.ends, t.forced), (2, 6));
    assert!(p.entries().iter().all(|e| e.gref() == INVALID_GRANT_REF));
    let s = p.stats();
    assert_eq!((s.held, s.in_use, s.deferred), (0, 0, 6));
    assert_eq!(p.available(), 8);
    assert_eq!(p.capacity(), 8);
}

#[test]
fn empty_and_array_storage() {
    let mut t = Table::default();
    let mut p = GrantPool::new(Vec::<PoolEntry<u32>>::new(), PERSISTENT).unwrap();
    assert_eq!(p.get(&mut t, 0, false), Err(GrantError::Exhausted));
    assert_eq!(p.purge(&mut t), 0);
    assert_eq!(p.teardown(&mut t), 0);
    let mut p = GrantPool::new([PoolEntry::new(1u32); 3], DIRECT).unwrap();
    assert_eq!(p.mode(), DIRECT);
    assert!(!p.copy_data());
    assert!(p.get(&mut t, 4, false).is_ok());
}
