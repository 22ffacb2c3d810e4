// SPDX-License-Identifier: GPL-2.0

//! One blkif ring (hardware queue): the shared pages, the event channel,
//! the ring's lifecycle across backend connections, and the interrupt
//! handler. The requests on it are `blkcore::datapath`'s business (see
//! [`crate::datapath`]); completions go back to blk-mq from here, after the
//! ring lock is dropped.

use kernel::{
    new_spinlock,
    new_spinlock_irq,
    prelude::*,
    sync::{
        aref::ARef,
        rcu,
        Arc,
        SpinLock,
        SpinLockIrq, //
    }, //
};

use crate::blkcore::{
    datapath::{
        Drained,
        Fault,
        QueueError,
        Request,
        RingStats,
        Status, //
    },
    grants::GrantStats,
    negotiate::Negotiated,
    ring::FrontRing,
};
mod done;
mod held;
mod scratch;
mod stuck;

use done::DoneList;
pub(crate) use scratch::{
    Prepared,
    Scratch, //
};

use crate::blkmq::{
    self,
    Operations, //
};
use crate::datapath::RingDataPath;
use crate::xen::{
    evtchn::{
        BoundIrq,
        Eoi,
        EventChannel,
        Handler,
        Notifier, //
    },
    grant::GrantTable,
    ring::SharedPages,
    xenbus::{
        self,
        Device,
        Xbt, //
    },
};

/// The block layer's side of a ring: requests of `O`, whose per-request
/// data carries the status the request ends with.
pub(crate) trait BlockOps: Operations<RequestData = blkmq::Status> {}

impl<O: Operations<RequestData = blkmq::Status>> BlockOps for O {}

/// A request owned by the driver.
pub(crate) type Rq<O> = blkmq::Request<O>;

/// Hands a finished request back to blk-mq (`blk_mq_complete_request`);
/// the operations' `complete` ends it with `status`.
pub(crate) fn complete<O: BlockOps>(mut rq: Rq<O>, status: Status) {
    *rq.data_mut() = match status {
        Status::Ok => blkmq::Status::OK,
        Status::NotSupp => blkmq::Status::NOTSUPP,
        Status::IoErr => blkmq::Status::IOERR,
    };
    rq.complete();
}

/// Ring state under the ring lock.
pub(crate) struct RingState<O: BlockOps> {
    pages: SharedPages,
    front: FrontRing,
    notifier: Notifier,
    io: Option<KBox<RingDataPath<Rq<O>>>>,
    /// Bad backend input seen: nothing more is queued or completed.
    broken: bool,
    /// The backend is closing: new requests fail (`blk_mark_disk_dead`
    /// upstream), those in flight still complete.
    dead: bool,
    /// A batch has requests not yet pushed to the backend.
    pending_push: bool,
    /// Data paths taken down while the backend still mapped the pages of
    /// requests on them: kept, with those requests (not ended), until it
    /// lets go (see [`RingState::retry_held`]).
    parked: KVec<KBox<RingDataPath<Rq<O>>>>,
}

/// One ring.
#[pin_data]
pub(crate) struct Ring<O: BlockOps> {
    index: u32,
    /// The xenbus device, for log lines that name it.
    dev: ARef<kernel::device::Device>,
    /// The request being queued, mapped or granted by the block glue
    /// before it takes the ring lock (see [`Scratch`]); always taken
    /// before `state`, never inside it ([`Ring::with_scratch_then_state`]).
    /// A plain spinlock,
    /// taken only by `queue_rq` and at connect, neither in interrupt
    /// context: blk-mq dispatches from the submitter's process context or
    /// from kblockd's work (`submit_bio` may sleep for a tag or a frozen
    /// queue, so nobody submits from an interrupt), and nothing here runs
    /// a hardware queue from the interrupt handler (an ended request
    /// restarts the queue asynchronously). So no softirq on this CPU can
    /// enter `queue_rq` while it is held; lockdep would report one.
    #[pin]
    scratch: SpinLock<Scratch>,
    #[pin]
    state: SpinLockIrq<RingState<O>>,
}

/// A ring with its bound event channel (owned by the device).
pub(crate) struct BoundRing<O: BlockOps> {
    irq: Option<BoundIrq<Ring<O>>>,
    ring: Arc<Ring<O>>,
}

impl<O: BlockOps> BoundRing<O> {
    /// Allocates the shared ring (`nr_pages` pages) and event channel of
    /// ring `index` and binds the channel to the ring's handler.
    pub(crate) fn new(dev: &Device, index: u32, nr_pages: u32) -> Result<Self> {
        let (pages, front) = new_shared_ring(dev, nr_pages)?;
        let ring = Arc::pin_init(
            pin_init!(Ring {
                index,
                dev: ARef::from(dev.as_device()),
                scratch <- new_spinlock!(Scratch::unconnected()),
                state <- new_spinlock_irq!(RingState {
                    pages,
                    front,
                    notifier: Notifier::default(),
                    io: None,
                    broken: false,
                    dead: false,
                    pending_push: false,
                    parked: KVec::new(),
                }),
            }),
            GFP_KERNEL,
        )?;
        let mut h = Self { irq: None, ring };
        h.bind_irq(dev)?;
        Ok(h)
    }

    /// A new event channel bound to the ring's handler; the ring notifies
    /// through it.
    fn bind_irq(&mut self, dev: &Device) -> Result {
        let irq = EventChannel::alloc(dev)?.bind(c"blkif", self.ring.clone())?;
        self.ring.state.lock().notifier = irq.notifier();
        self.irq = Some(irq);
        Ok(())
    }

    /// Writes `ring-ref`/`ring-ref%u` and `event-channel` under `dir`.
    pub(crate) fn publish(&self, xbt: Xbt, dir: &CStr) -> Result {
        // Copy the references out: xenstore writes sleep, the lock spins.
        let mut refs = [0u32; crate::xen::ring::MAX_RING_PAGES];
        let n = {
            let st = self.ring.state.lock();
            let grefs = st.pages.grefs();
            for (d, s) in refs.iter_mut().zip(grefs) {
                *d = *s;
            }
            grefs.len()
        };
        let grefs = refs.get(..n).unwrap_or(&[]);
        if let [only] = grefs {
            xenbus::printf(xbt, dir, c"ring-ref", fmt!("{only}"))?;
        } else {
            for (i, g) in grefs.iter().enumerate() {
                let node = kernel::str::CString::try_from_fmt(fmt!("ring-ref{i}"))?;
                xenbus::printf(xbt, dir, &node, fmt!("{g}"))?;
            }
        }
        let port = self.irq.as_ref().map_or(0, |i| i.port());
        xenbus::printf(xbt, dir, c"event-channel", fmt!("{port}"))
    }

    /// The ring.
    pub(crate) fn ring(&self) -> &Arc<Ring<O>> {
        &self.ring
    }

    /// Unbinds the interrupt, then revokes every grant and fails whatever
    /// is still in flight. The shared pages go with the last `Arc<Ring>`.
    pub(crate) fn shutdown(mut self) {
        for rq in self.suspend() {
            complete(rq, Status::IoErr);
        }
    }

    /// The backend is gone but the disk stays (guest save/restore, a
    /// backend restart): unbinds the interrupt, revokes every grant and
    /// returns the requests that were in flight, for the caller to resubmit
    /// once [`BoundRing::reconnect`] and [`Ring::start`] ran. Until then the
    /// ring refuses new requests as busy.
    pub(crate) fn suspend(&mut self) -> KVec<Rq<O>> {
        // Data path and notifier first, under the lock: from then on the
        // handler finds nothing to do and nobody notifies through the
        // channel that is unbound next.
        let rqs = self.ring.take_down();
        // A `queue_rq` that read the notifier before `take_down` cleared it
        // may still be about to send its event (after the ring lock, see
        // `Ring::with_state_then_notify`): blk-mq dispatches inside an RCU
        // read-side section, so this waits for it; then unbind.
        rcu::synchronize_rcu();
        drop(self.irq.take());
        rqs
    }

    /// Gives a suspended ring new shared pages (`nr_pages`) and a new event
    /// channel, for a new backend; publish them with
    /// [`BoundRing::publish`].
    pub(crate) fn reconnect(&mut self, dev: &Device, nr_pages: u32) -> Result {
        let (pages, front) = new_shared_ring(dev, nr_pages)?;
        let (old_pages, stale) = {
            let mut st = self.ring.state.lock();
            // `suspend` must have left no way to the old channel: a notifier
            // or an unpushed batch surviving until here means a
            // `commit_rqs` in the window could notify a port closed (and
            // perhaps reused) since. Checked on every reconnect and
            // reported once per ring: it would be a bug in `suspend`.
            let stale = st.notifier.is_set() || st.pending_push;
            st.front = front;
            st.broken = false;
            st.dead = false;
            st.pending_push = false;
            (core::mem::replace(&mut st.pages, pages), stale)
        };
        if stale {
            dev_warn!(
                dev.as_device(),
                "ring {}: the old event channel's notifier survived the suspend\n",
                self.ring.index
            );
        }
        // Ends the old ring grants and frees the pages, outside the lock.
        drop(old_pages);
        self.bind_irq(dev)
    }
}

/// `nr_pages` granted shared pages with an empty front ring on them.
fn new_shared_ring(dev: &Device, nr_pages: u32) -> Result<(SharedPages, FrontRing)> {
    let mut pages = SharedPages::new(dev, nr_pages)?;
    let mut front = FrontRing::new(nr_pages).map_err(|_| EINVAL)?;
    front.init_shared(&mut pages);
    Ok((pages, front))
}

impl<O: BlockOps> Ring<O> {
    /// Builds the data path once the backend connected (see
    /// [`RingDataPath::new`]).
    pub(crate) fn start(&self, dev: &Device, n: &Negotiated, handle: u16, wire_max: u32) -> Result {
        let size = self.state.lock().front.size();
        let io = RingDataPath::new(n, handle, dev.otherend_id(), size, wire_max)?;
        let (segs, pre) = if io.datapath.grants_before_lock() {
            (
                KVec::new(),
                Some(io.datapath.new_pregranted().map_err(|_| ENOMEM)?),
            )
        } else {
            let wire_max = io.datapath.geometry().wire_max as usize;
            (KVec::with_capacity(wire_max, GFP_KERNEL)?, None)
        };
        let gt = GrantTable::new(dev.otherend_id());
        *self.scratch.lock() = Scratch { segs, pre, gt };
        let mut st = self.state.lock();
        st.io = Some(io);
        st.broken = false;
        st.dead = false;
        Ok(())
    }

    /// Takes the data path down: revokes all grants (those the backend
    /// still maps are ended with a deferred release) and returns the
    /// requests still in flight, untouched.
    fn take_down(&self) -> KVec<Rq<O>> {
        let mut rqs = KVec::new();
        let io = {
            let mut st = self.state.lock();
            // The event channel is unbound (or about to be): nothing may
            // notify through it any more, and a batch left unpushed goes
            // with the requests handed back.
            st.notifier = Notifier::default();
            st.pending_push = false;
            st.io.take()
        };
        let Some(mut boxed) = io else {
            return rqs;
        };
        let io = &mut *boxed;
        // Without memory for the list a request fails rather than leaks.
        let _ = rqs.reserve(io.datapath.geometry().ring_size as usize, GFP_KERNEL);
        let deferred = io.datapath.take_down(&mut io.grant_table, |rq| {
            if let Err(e) = rqs.push_within_capacity(rq) {
                complete(e.0, Status::IoErr);
            }
        });
        // The record an admin (and the tests) read after unload: every grant
        // made is revoked; those the backend still mapped are ended with a
        // deferred release, which frees them once the backend unmaps.
        let st = io.datapath.grant_stats();
        dev_info!(
            self.dev,
            "ring {} torn down: {} grants granted, {} revoked ({} released when the backend unmaps them)\n",
            self.index,
            st.granted,
            st.revoked,
            deferred
        );
        let held = io.datapath.held();
        if held != 0 {
            dev_warn!(
                self.dev,
                "ring {}: {} requests held: the backend still maps their pages\n",
                self.index,
                held
            );
            self.park(boxed);
        }
        rqs
    }

    /// The backend is gone for good (it went Closed): no response will
    /// come, so every request still in flight fails now instead of hanging
    /// removal; the responses it wrote before it went are taken first (a
    /// write it completed is not reported failed). Returns how many failed.
    pub(crate) fn fail_in_flight(&self) -> u32 {
        let mut done = DoneList::new();
        let failed = {
            let mut st = self.state.lock();
            // Does nothing on a broken ring.
            let _ = st.complete(self, &mut done);
            st.io.as_deref_mut().map_or(0, |io| {
                io.datapath
                    .fail_in_flight(&mut io.grant_table, &mut |rq, s| done.push(rq, s))
            })
        };
        done.finish();
        failed
    }

    /// Test-only fault injection: the ring breaks as if the backend had
    /// sent a bad response.
    #[cfg(CONFIG_FAULT_INJECTION)]
    pub(crate) fn inject_break(&self) {
        let mut done = DoneList::new();
        {
            let mut st = self.state.lock();
            if let Some(io) = st.io.as_deref_mut() {
                let r =
                    io.datapath
                        .break_ring(&mut io.grant_table, Fault::Injected, &mut |rq, s| {
                            done.push(rq, s)
                        });
                self.report_broken(r, io.datapath.held());
                st.broken = true;
            }
        }
        done.finish();
    }

    /// One line for a ring the backend broke; `held` requests wait for
    /// the backend to unmap their pages (see [`Ring::retry_held`]).
    fn report_broken(&self, r: Drained, held: u32) {
        if let Drained::Broken { fault, failed } = r {
            dev_alert!(
                self.dev,
                "ring {}: {}; disabled for further use, {} requests in flight failed, {} held until the backend unmaps their pages\n",
                self.index,
                // blkcore's `Fault` implements `core::fmt::Display`.
                core::format_args!("{fault}"),
                failed,
                held
            );
        }
    }

    /// Lock-protected access for the block glue.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut RingState<O>) -> R) -> R {
        let mut st = self.state.lock();
        f(&mut st)
    }

    /// Whether requests queued on the ring wait to be published to the
    /// backend (a batch not yet ended).
    pub(crate) fn has_unpublished(&self) -> bool {
        self.with_state(|st| st.pending_push)
    }

    /// Like [`Ring::with_state`] for a `f` that may publish requests
    /// ([`RingState::push`]): the event the backend asked for is sent
    /// after the ring lock is dropped, so interrupts are not held off for
    /// the hypercall (upstream sends it under its lock).
    ///
    /// Only for blk-mq's dispatch callbacks (`queue_rq`, `commit_rqs`):
    /// blk-mq runs them inside an RCU read-side section
    /// (`blk_mq_run_dispatch_ops`; rust/blkmq never makes a tag set
    /// `BLK_MQ_F_BLOCKING`), which began before the notifier was read, and
    /// [`BoundRing::suspend`] waits for those (`synchronize_rcu()`, as
    /// `blk_mq_wait_quiesce_done` does) before it unbinds the channel: no
    /// event goes to a channel unbound (or reused) meanwhile.
    pub(crate) fn with_state_then_notify<R>(
        &self,
        f: impl FnOnce(&mut RingState<O>) -> (R, Notifier),
    ) -> R {
        let (r, notifier) = self.with_state(f);
        notifier.notify();
        r
    }
}

impl<O: BlockOps> RingState<O> {
    /// Revokes now the persistent grants the backend stopped mapping (the
    /// idle-disk purge: the I/O paths purge as they go). Returns how many.
    pub(crate) fn purge_idle(&mut self) -> u32 {
        match self.io.as_deref_mut() {
            Some(io) if !self.broken => io.purge_now(),
            _ => 0,
        }
    }

    /// Entries of the ring (queue depth).
    pub(crate) fn size(&self) -> u32 {
        self.front.size()
    }

    /// The ring fails new requests: bad backend input was seen on it, or
    /// the backend is closing.
    pub(crate) fn refuses_requests(&self) -> bool {
        self.broken || self.dead
    }

    /// The backend is going away: fail new requests from now on.
    pub(crate) fn mark_dead(&mut self) {
        self.dead = true;
    }

    /// Usable, with a slot and an id free for a read or write.
    pub(crate) fn has_room(&mut self) -> bool {
        let front = &self.front;
        !self.broken
            && self
                .io
                .as_deref_mut()
                .is_some_and(|io| io.datapath.has_room(front))
    }

    /// Whether the data path is up and healthy.
    pub(crate) fn usable(&self) -> bool {
        self.io.is_some() && !self.broken
    }

    /// Counters (ring + grant pool, whether data is copied) for
    /// statistics.
    pub(crate) fn stats(&self) -> Option<(RingStats, GrantStats, bool)> {
        self.io.as_ref().map(|io| {
            (
                io.datapath.stats(),
                io.datapath.grant_stats(),
                io.datapath.copy_data(),
            )
        })
    }

    /// Puts one request on the ring (not yet visible to the backend: see
    /// [`RingState::push`]), with its data as the block glue prepared it in
    /// its [`Scratch`]. On `Err` grants still in a [`Prepared::Granted`]
    /// are the caller's to end (the ring was not reached). Inline: each
    /// caller passes one kind of [`Prepared`].
    #[inline(always)]
    pub(crate) fn queue(
        &mut self,
        rq: Rq<O>,
        req: Request,
        data: Prepared<'_>,
    ) -> Result<(), (Rq<O>, QueueError)> {
        if self.refuses_requests() {
            return Err((rq, QueueError::Io));
        }
        let Some(io) = self.io.as_deref_mut() else {
            return Err((rq, QueueError::Busy));
        };
        let (gt, front, pages) = (&mut io.grant_table, &mut self.front, &mut self.pages);
        match data {
            Prepared::Mapped(segs) => io.datapath.queue(gt, front, pages, rq, req, segs),
            Prepared::Granted(pre) => io.datapath.queue_granted(gt, front, pages, rq, req, pre),
        }?;
        self.pending_push = true;
        Ok(())
    }

    /// Publishes queued requests (`RING_PUSH_REQUESTS_AND_CHECK_NOTIFY`):
    /// once per batch. Returns the notifier to call once the ring lock is
    /// dropped if the backend asked for an event (a default one, which does
    /// nothing, if not).
    #[must_use]
    #[inline(always)]
    pub(crate) fn push(&mut self) -> Notifier {
        if !self.pending_push {
            return Notifier::default();
        }
        self.pending_push = false;
        if let Some(io) = self.io.as_deref_mut() {
            io.maybe_purge();
        }
        if !self.front.push_requests_and_check_notify(&mut self.pages) {
            return Notifier::default();
        }
        if let Some(io) = self.io.as_deref_mut() {
            io.datapath.notified();
        }
        self.notifier
    }

    /// Consumes the backend's responses (`blkif_interrupt`); finished
    /// requests are appended to `done`.
    ///
    /// Bad backend input disables the ring for good: one line names the
    /// fault, every request still in flight fails (`BLK_STS_IOERR`) right
    /// away, and the event channel stays masked. Upstream leaves those
    /// requests on the ring, where they hang removal and unload forever.
    fn complete(&mut self, ring: &Ring<O>, done: &mut DoneList<O>) -> Eoi {
        if self.broken {
            return Eoi::None;
        }
        let Some(io) = self.io.as_deref_mut() else {
            return Eoi::Spurious;
        };
        let r = io.datapath.drain(
            &mut io.grant_table,
            &mut self.front,
            &mut self.pages,
            &mut |rq, s| done.push(rq, s),
        );
        done.withdraw(io.report_notes(&ring.dev));
        match r {
            Drained::Responses => {
                io.maybe_purge();
                Eoi::Done
            }
            Drained::NonePending => {
                io.maybe_purge();
                Eoi::Spurious
            }
            Drained::Broken { .. } => {
                ring.report_broken(r, io.datapath.held());
                self.broken = true;
                Eoi::None
            }
        }
    }
}

impl<O: BlockOps> Handler for Ring<O> {
    fn handle(&self) -> Eoi {
        let mut done = DoneList::new();
        let eoi = {
            let mut st = self.state.lock();
            st.complete(self, &mut done)
        };
        done.finish();
        eoi
    }
}
