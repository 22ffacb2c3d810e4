// SPDX-License-Identifier: GPL-2.0

//! The virtio-blk device as a vhost-user backend, and where each
//! misbehaviour of `crate::scenario` strikes (what it offers is in
//! `crate::config`, what a request does in `crate::request`).
//!
//! It runs under `vhost_user_backend::VhostUserDaemon`: the daemon's
//! thread answers QEMU's vhost-user messages (features, configuration,
//! memory table, rings) through the `VhostUserBackendMut` methods, and one
//! worker thread calls [`Blk::handle_event`] when the guest kicks a queue.
//! What outlives one call (a late write, configuration change
//! notifications) runs on a thread of its own holding [`Shared`], never
//! the device's lock: QEMU answers a configuration change by reading the
//! configuration space, which takes that lock.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::Backend;
use vhost_user_backend::{VhostUserBackendMut, VringRwLock, VringT};
use virtio_bindings::bindings::virtio_blk::*;
use virtio_queue::QueueT;
use vm_memory::{
    Bytes, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryLoadGuard, GuestMemoryMmap,
};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

use crate::channel::{self, Channel};
use crate::config::{BlkConfig, FEATURES, WCE_OFFSET, WITHDRAWN};
use crate::request::{gather, put_raw_used, Answer, Chain, Disk, HEADER_LEN, SECTOR};
use crate::scenario::{self, Scenario, Strike, TRIGGER_AFTER};

/// The guest's memory as the daemon hands it over.
type Mem = GuestMemoryAtomic<GuestMemoryMmap>;

/// The largest queue QEMU may set up (its `queue-size`, 128 by default).
const MAX_QUEUE_SIZE: usize = 1024;

/// The command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// The backing file.
    pub file: PathBuf,
    /// The misbehaviour, if any.
    pub scenario: Option<Scenario>,
    /// Where `fired NAME` is appended when it strikes.
    pub fired: Option<PathBuf>,
    /// Request queues.
    pub queues: u16,
    /// How long each flush waits before it is done and answered.
    pub flush_delay: Duration,
    /// How long each discard or write-zeroes waits likewise.
    pub discard_delay: Duration,
    /// How long each read and write waits likewise.
    pub request_delay: Duration,
}

/// What the device's threads share.
pub struct Shared {
    scenario: Option<Scenario>,
    fired_file: Option<PathBuf>,
    fired: AtomicBool,
    config: Mutex<BlkConfig>,
    channel: Mutex<Option<Channel>>,
}

/// A lock whose holder panicked is still good for this test tool: the
/// data under it is plain values.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One line on stderr.
pub fn log(msg: &str) {
    eprintln!("virtio-blk-backend: {msg}");
}

impl Shared {
    /// Records that the scenario struck, once: `fired NAME` appended to
    /// the fired file and printed, and what it did printed after it.
    fn fire(&self, what: &str) {
        let Some(s) = self.scenario else { return };
        if self.fired.swap(true, Ordering::SeqCst) {
            return;
        }
        let line = format!("fired {}", scenario::name(s));
        eprintln!("{line}");
        log(what);
        if let Some(p) = &self.fired_file {
            let r = OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(e) = r {
                log(&format!("{}: {e}", p.display()));
            }
        }
    }

    fn has_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Sends one configuration change notification, after `change` has
    /// been made to the configuration space. Returns whether it was sent.
    fn config_change(&self, change: impl FnOnce(&mut BlkConfig)) -> bool {
        change(&mut lock(&self.config));
        match lock(&self.channel).as_mut() {
            Some(c) => match c.config_changed() {
                Ok(()) => true,
                Err(e) => {
                    log(&format!("config change notification: {e}"));
                    false
                }
            },
            None => {
                log("config change: no backend request channel");
                false
            }
        }
    }

    /// Configuration changes sent from a thread of their own (see the
    /// module's comment), one per call of `step` with its index.
    fn config_changes(
        self: &Arc<Self>,
        n: u32,
        step: impl Fn(u32, &mut BlkConfig) + Send + 'static,
    ) {
        let me = Arc::clone(self);
        let spawned = thread::Builder::new()
            .name("config-change".into())
            .spawn(move || {
                // The first that cannot be sent ends them: the
                // connection is gone, or there never was a channel.
                for k in 0..n {
                    if !me.config_change(|c| step(k, c)) {
                        break;
                    }
                }
            });
        if let Err(e) = spawned {
            log(&format!("config change thread: {e}"));
        }
    }
}

/// The device.
pub struct Blk {
    shared: Arc<Shared>,
    disk: Disk,
    queues: u16,
    flush_delay: Duration,
    discard_delay: Duration,
    request_delay: Duration,
    mem: Option<Mem>,
    event_idx: bool,
    /// Requests answered so far.
    answered: u64,
    /// Sockets open before the connection (see `crate::channel`).
    sockets_before: HashSet<u64>,
    channels_seen: HashSet<u64>,
    /// `SET_FEATURES` received: one per start of the device.
    starts: u32,
    /// A ring was stopped or the device reset after a start.
    reset_seen: bool,
    /// features-withdrawn-on-reset has taken its features away.
    withdrawn: bool,
}

impl Blk {
    /// A device serving `opts.file`.
    pub fn new(opts: &Options) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(&opts.file)?;
        let bytes = file.metadata()?.len();
        let capacity = bytes / SECTOR;
        let config = BlkConfig::sane(capacity, opts.queues).for_scenario(opts.scenario);
        let serial = match opts.scenario {
            Some(s) => format!("vub-{}", scenario::name(s)),
            None => "vub".to_string(),
        };
        Ok(Blk {
            shared: Arc::new(Shared {
                scenario: opts.scenario,
                fired_file: opts.fired.clone(),
                fired: AtomicBool::new(false),
                config: Mutex::new(config),
                channel: Mutex::new(None),
            }),
            disk: Disk {
                file,
                bytes,
                serial: serial.into_bytes(),
            },
            queues: opts.queues,
            flush_delay: opts.flush_delay,
            discard_delay: opts.discard_delay,
            request_delay: opts.request_delay,
            mem: None,
            event_idx: false,
            answered: 0,
            sockets_before: channel::sockets_before(),
            channels_seen: HashSet::new(),
            starts: 0,
            reset_seen: false,
            withdrawn: false,
        })
    }

    fn scenario(&self) -> Option<Scenario> {
        self.shared.scenario
    }

    /// The trigger scenario, from the moment it may strike until it has.
    fn armed(&self) -> Option<Scenario> {
        self.scenario().filter(|s| {
            s.expect().strikes == Strike::Trigger
                && self.answered >= TRIGGER_AFTER
                && !self.shared.has_fired()
        })
    }

    /// The scenario, once it has struck.
    fn struck(&self) -> Option<Scenario> {
        self.scenario().filter(|_| self.shared.has_fired())
    }

    /// The wait of a request of `kind` on a slow device (`--flush-ms`,
    /// `--discard-ms`, `--request-ms`), with the request's name for the
    /// log; none for every other kind, or when its delay is 0.
    fn slow(&self, kind: Option<u32>) -> Option<(&'static str, Duration)> {
        let slow = match kind? {
            VIRTIO_BLK_T_FLUSH => ("flush", self.flush_delay),
            VIRTIO_BLK_T_DISCARD => ("discard", self.discard_delay),
            VIRTIO_BLK_T_WRITE_ZEROES => ("write-zeroes", self.discard_delay),
            VIRTIO_BLK_T_IN => ("read", self.request_delay),
            VIRTIO_BLK_T_OUT => ("write", self.request_delay),
            _ => return None,
        };
        (!slow.1.is_zero()).then_some(slow)
    }

    /// Whether queue `q` is no longer served (one-queue-stalls).
    fn silent(&self, q: usize) -> bool {
        q == 1 && self.struck() == Some(Scenario::OneQueueStalls)
    }

    /// Serves every request queue `q` has, until the guest adds no more.
    fn serve_queue(&mut self, q: usize, vring: &VringRwLock) {
        let Some(mem) = self.mem.clone() else {
            return;
        };
        let mut signal = false;
        'serve: loop {
            if self.event_idx {
                let _ = vring.disable_notification();
            }
            loop {
                if self.armed() == Some(Scenario::OneQueueStalls) {
                    self.shared
                        .fire("queue 1 no longer served, queue 0 goes on");
                }
                // What was answered before still gets its interrupt.
                if self.silent(q) {
                    break 'serve;
                }
                let chain = vring
                    .get_mut()
                    .get_queue_mut()
                    .pop_descriptor_chain(mem.memory());
                let Some(chain) = chain else { break };
                signal |= self.serve_chain(vring, &mem.memory(), Chain::new(chain));
            }
            if !self.event_idx || !matches!(vring.enable_notification(), Ok(true)) {
                break;
            }
        }
        if signal || vring.needs_notification().unwrap_or(true) {
            if let Err(e) = vring.signal_used_queue() {
                log(&format!("queue {q}: call: {e}"));
            }
        }
    }

    /// Serves one request; returns whether the queue must be signalled
    /// whatever the event index says (an element the queue did not count).
    fn serve_chain(
        &mut self,
        vring: &VringRwLock,
        mem: &GuestMemoryLoadGuard<GuestMemoryMmap>,
        c: Chain,
    ) -> bool {
        let mut hdr = [0u8; HEADER_LEN];
        let kind = if gather(mem, &c.readable, 0, &mut hdr) {
            Some(u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]))
        } else {
            None
        };
        let sector = u64::from_le_bytes([
            hdr[8], hdr[9], hdr[10], hdr[11], hdr[12], hdr[13], hdr[14], hdr[15],
        ]);
        let is_read = kind == Some(VIRTIO_BLK_T_IN);

        // A slow device, not a misbehaving one (the options exclude a
        // scenario): the request waits, then is done and answered as
        // always. The wait holds this worker, so the requests behind it,
        // on every queue, wait too, as behind a slow storage stack; it
        // also holds the device's lock, so QEMU's vhost-user messages
        // that take it (a config read, a ring stopped at a reset or an
        // unplug) wait for its end.
        if let Some((what, delay)) = self.slow(kind) {
            let t0 = Instant::now();
            thread::sleep(delay);
            let a = self.disk.execute(mem, &c, kind, sector);
            self.complete(vring, mem, &c, a);
            let status = if a.status == VIRTIO_BLK_S_OK as u8 {
                String::new()
            } else {
                format!(" (status {})", a.status)
            };
            // Reads and writes are many: only what is rare is logged.
            if !matches!(what, "read" | "write") {
                log(&format!(
                    "{what} answered after {} ms{status}",
                    t0.elapsed().as_millis()
                ));
            }
            return false;
        }

        // Requests consumed and never answered.
        if let Some(s) = self.armed() {
            match s {
                Scenario::Stall => {
                    self.shared
                        .fire("requests consumed and never answered from now on");
                }
                Scenario::NeedsReset => {
                    let a = self.disk.execute(mem, &c, kind, sector);
                    self.complete(vring, mem, &c, a);
                    self.shared.config_changes(1, |_, _| {});
                    self.shared.fire(
                        "one request answered, a config change sent, then no more answers \
                         (a vhost-user backend cannot set DEVICE_NEEDS_RESET)",
                    );
                    return false;
                }
                _ => {}
            }
        }
        match (self.struck(), kind) {
            (Some(Scenario::Stall | Scenario::NeedsReset), _) => return false,
            (Some(Scenario::GetIdNeverAnswered), Some(VIRTIO_BLK_T_GET_ID)) => return false,
            (None, Some(VIRTIO_BLK_T_GET_ID))
                if self.scenario() == Some(Scenario::GetIdNeverAnswered) =>
            {
                self.shared.fire("GET_ID consumed and never answered");
                return false;
            }
            _ => {}
        }

        // Answers the scenario gives in place of the request's own.
        let reads_fail = |s: Option<Scenario>| match s {
            Some(Scenario::UnsuppReads) => Some(VIRTIO_BLK_S_UNSUPP),
            Some(Scenario::IoerrReads) => Some(VIRTIO_BLK_S_IOERR),
            _ => None,
        };
        let zeroing = matches!(kind, Some(VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES));
        let flushing = kind == Some(VIRTIO_BLK_T_FLUSH);
        let instead = match self.scenario() {
            Some(s @ (Scenario::UnsuppReads | Scenario::IoerrReads)) if is_read => {
                if self.armed().is_some() {
                    let what = if s == Scenario::UnsuppReads {
                        "UNSUPP"
                    } else {
                        "IOERR"
                    };
                    self.shared
                        .fire(&format!("reads answered {what} from now on"));
                }
                reads_fail(self.struck())
            }
            Some(Scenario::DiscardErrors) if zeroing => {
                self.shared
                    .fire("discard and write-zeroes answered IOERR from now on");
                Some(VIRTIO_BLK_S_IOERR)
            }
            Some(Scenario::FlushErrors) if flushing => {
                self.shared.fire("flushes answered IOERR from now on");
                Some(VIRTIO_BLK_S_IOERR)
            }
            Some(Scenario::FeaturesWithdrawnOnReset) if self.withdrawn && (zeroing || flushing) => {
                Some(VIRTIO_BLK_S_UNSUPP)
            }
            _ => None,
        };
        let mut a = match instead {
            Some(st) => Answer::status(st),
            None => self.disk.execute(mem, &c, kind, sector),
        };

        let Some(s) = self.armed() else {
            self.complete(vring, mem, &c, a);
            return false;
        };
        // The trigger scenarios that strike on one answer.
        match s {
            Scenario::UsedIdOutOfRange => {
                let mut st = vring.get_mut();
                let queue = st.get_queue_mut();
                let id = u32::from(queue.size()) + 5;
                self.write_status(mem, &c, a.status);
                put_raw_used(mem, queue, id, a.used_len);
                drop(st);
                self.answered += 1;
                self.shared.fire(&format!(
                    "used element id {id} for head {} (which is never answered)",
                    c.head
                ));
                return true;
            }
            Scenario::UsedIdTwice => {
                self.complete(vring, mem, &c, a);
                if let Err(e) = vring.add_used(c.head, a.used_len) {
                    log(&format!("used ring: {e}"));
                }
                self.shared
                    .fire(&format!("used element for head {} written twice", c.head));
                return true;
            }
            Scenario::UsedLenTooLarge if is_read => {
                let len = c.writable_len().saturating_add(4096);
                a.used_len = u32::try_from(len).unwrap_or(u32::MAX);
                self.shared.fire(&format!(
                    "read at head {} used length {} for {} writable bytes",
                    c.head,
                    a.used_len,
                    c.writable_len()
                ));
            }
            Scenario::UsedLenTooSmall if is_read => {
                a.used_len = 0;
                self.shared
                    .fire(&format!("read at head {} used length 0", c.head));
            }
            Scenario::StatusNeverWritten => {
                self.add_used(vring, &c, a.used_len);
                self.shared.fire(&format!(
                    "head {} used without its status byte written",
                    c.head
                ));
                return false;
            }
            Scenario::UnknownStatus => {
                a.status = 7;
                self.shared
                    .fire(&format!("head {} answered with status 7", c.head));
            }
            Scenario::ConfigStorm => {
                let base = lock(&self.shared.config).capacity;
                self.shared
                    .config_changes(scenario::STORM_LENGTH, move |k, cfg| {
                        // Odd last index: the storm ends on the capacity it
                        // started from.
                        cfg.capacity = if k % 2 == 0 { base + 8 } else { base };
                    });
                self.shared.fire(&format!(
                    "{} config changes, the capacity {base} + 8 and back",
                    scenario::STORM_LENGTH
                ));
            }
            Scenario::CapacityHuge => {
                self.shared
                    .config_changes(1, |_, cfg| cfg.capacity = u64::MAX / 2);
                self.shared
                    .fire("capacity u64::MAX / 2 sectors, config change sent");
            }
            Scenario::BlkSizeChange => {
                self.shared.config_changes(1, |_, cfg| cfg.blk_size = 4096);
                self.shared.fire("blk_size 4096, config change sent");
            }
            Scenario::LateWriteAfterUsed if is_read && a.status == VIRTIO_BLK_S_OK as u8 => {
                let segs = c.data_in();
                let mem = self.mem.clone();
                let spawned = thread::Builder::new()
                    .name("late-write".into())
                    .spawn(move || {
                        thread::sleep(scenario::LATE_ACCESS_AFTER);
                        let Some(mem) = mem else { return };
                        let m = mem.memory();
                        for (addr, len) in segs {
                            let _ = m.write_slice(&vec![scenario::LATE_WRITE_BYTE; len], addr);
                        }
                        log("late write done");
                    });
                if let Err(e) = spawned {
                    log(&format!("late write thread: {e}"));
                }
                self.shared.fire(&format!(
                    "read at head {} answered OK, its buffers written with {:#04x} in {:?}",
                    c.head,
                    scenario::LATE_WRITE_BYTE,
                    scenario::LATE_ACCESS_AFTER
                ));
            }
            _ => {}
        }
        self.complete(vring, mem, &c, a);
        false
    }

    fn write_status(&self, mem: &GuestMemoryMmap, c: &Chain, status: u8) {
        if let Some(addr) = c.status_addr() {
            let _ = mem.write_obj(status, addr);
        }
    }

    fn add_used(&mut self, vring: &VringRwLock, c: &Chain, len: u32) {
        if let Err(e) = vring.add_used(c.head, len) {
            log(&format!("used ring: {e}"));
        }
        self.answered += 1;
    }

    /// The status byte written, then the used element.
    fn complete(&mut self, vring: &VringRwLock, mem: &GuestMemoryMmap, c: &Chain, a: Answer) {
        if c.status_addr().is_none() {
            // Nowhere to put a status: the chain goes back unanswered.
            self.add_used(vring, c, 0);
            return;
        }
        self.write_status(mem, c, a.status);
        self.add_used(vring, c, a.used_len);
    }
}

impl VhostUserBackendMut for Blk {
    type Bitmap = ();
    type Vring = VringRwLock;

    fn num_queues(&self) -> usize {
        usize::from(self.queues)
    }

    fn max_queue_size(&self) -> usize {
        MAX_QUEUE_SIZE
    }

    fn features(&self) -> u64 {
        // Still all of them after features-withdrawn-on-reset: the vhost
        // crate checks SET_FEATURES against this, and QEMU 7.2, which
        // read them once at connect, acknowledges the old set again at
        // each start (refusing it would end the connection).
        FEATURES
    }

    fn acked_features(&mut self, _features: u64) {
        self.starts += 1;
        if self.scenario() == Some(Scenario::FeaturesWithdrawnOnReset)
            && self.reset_seen
            && !self.withdrawn
        {
            self.withdrawn = true;
            self.shared.fire(&format!(
                "started again after a reset: features {WITHDRAWN:#x} withdrawn, \
                 flush, discard and write-zeroes answered UNSUPP"
            ));
        }
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::BACKEND_REQ
    }

    fn reset_device(&mut self) {
        if self.starts > 0 {
            self.reset_seen = true;
        }
    }

    fn stop_vring(&mut self, _queue_index: u32) -> io::Result<()> {
        // QEMU 7.2 stops the rings (GET_VRING_BASE) when the guest resets
        // the device; it sends no RESET_DEVICE.
        if self.starts > 0 {
            self.reset_seen = true;
        }
        Ok(())
    }

    fn set_event_idx(&mut self, enabled: bool) {
        self.event_idx = enabled;
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        let bytes = lock(&self.shared.config).bytes();
        let mut out = vec![0u8; size as usize];
        let start = (offset as usize).min(bytes.len());
        let end = start.saturating_add(size as usize).min(bytes.len());
        out[..end - start].copy_from_slice(&bytes[start..end]);
        if let Some(s) = self.scenario() {
            if s.expect().strikes == Strike::Probe && s != Scenario::FeaturesWithdrawnOnReset {
                self.shared.fire(&format!(
                    "config space offered: {:?}",
                    *lock(&self.shared.config)
                ));
            }
        }
        out
    }

    fn set_config(&mut self, offset: u32, buf: &[u8]) -> io::Result<()> {
        // Only the writeback flag is the driver's to write.
        if offset == WCE_OFFSET && buf.len() == 1 {
            lock(&self.shared.config).wce = buf[0];
        }
        Ok(())
    }

    fn update_memory(&mut self, mem: Mem) -> io::Result<()> {
        self.mem = Some(mem);
        Ok(())
    }

    fn set_backend_req_fd(&mut self, backend: Backend) {
        match Channel::find(backend, &self.sockets_before, &mut self.channels_seen) {
            Some(c) => *lock(&self.shared.channel) = Some(c),
            None => log("backend request channel: socket not found"),
        }
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        // Without one the daemon cannot stop its worker thread when QEMU
        // disconnects, and dropping the daemon waits for that thread.
        match new_event_consumer_and_notifier(EventFlag::NONBLOCK) {
            Ok(pair) => Some(pair),
            Err(e) => {
                log(&format!("exit event: {e}"));
                None
            }
        }
    }

    fn handle_event(
        &mut self,
        device_event: u16,
        evset: EventSet,
        vrings: &[VringRwLock],
        _thread_id: usize,
    ) -> io::Result<()> {
        if evset != EventSet::IN {
            return Ok(());
        }
        let q = usize::from(device_event);
        if let Some(vring) = vrings.get(q) {
            self.serve_queue(q, vring);
        }
        // Never an error: the daemon's worker would stop serving.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::GuestAddress;

    /// Queue size of the test ring.
    const QSIZE: u16 = 16;
    const DESC: u64 = 0x0;
    const AVAIL: u64 = 0x1000;
    const USED: u64 = 0x2000;
    /// Headers, data and status bytes go here, one 8 KiB slot per head.
    const BUFS: u64 = 0x10000;

    /// A device on a 1 MiB image, with one ring in 1 MiB of guest memory.
    struct Rig {
        dev: Blk,
        mem: Mem,
        vring: VringRwLock,
        avail_idx: u16,
        dir: TempDir,
    }

    struct TempDir(PathBuf);

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl Rig {
        fn new(name: &str, scenario: Option<Scenario>) -> Self {
            Self::with_options(name, |o| o.scenario = scenario)
        }

        /// A rig whose device has the options `set` makes of the default.
        fn with_options(name: &str, set: impl FnOnce(&mut Options)) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("virtio-backend-test-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let img = dir.join("disk.img");
            std::fs::write(&img, vec![0u8; 1 << 20]).unwrap();
            let mut opts = Options {
                file: img,
                scenario: None,
                fired: Some(dir.join("fired")),
                queues: 2,
                flush_delay: Duration::ZERO,
                request_delay: Duration::ZERO,
                discard_delay: Duration::ZERO,
            };
            set(&mut opts);
            let mut dev = Blk::new(&opts).unwrap();
            let mem = GuestMemoryAtomic::new(
                GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 1 << 20)]).unwrap(),
            );
            dev.update_memory(mem.clone()).unwrap();
            let vring = VringRwLock::new(mem.clone(), QSIZE).unwrap();
            vring.set_queue_size(QSIZE);
            vring.set_queue_info(DESC, AVAIL, USED).unwrap();
            vring.set_queue_ready(true);
            vring.set_enabled(true);
            Rig {
                dev,
                mem,
                vring,
                avail_idx: 0,
                dir: TempDir(dir),
            }
        }

        fn m(&self) -> GuestMemoryLoadGuard<GuestMemoryMmap> {
            self.mem.memory()
        }

        fn desc(&self, i: u16, addr: u64, len: u32, write: bool, next: Option<u16>) {
            let flags = u16::from(next.is_some()) | if write { 2 } else { 0 };
            let a = GuestAddress(DESC + u64::from(i) * 16);
            let m = self.m();
            m.write_obj(addr, a).unwrap();
            m.write_obj(len, GuestAddress(a.0 + 8)).unwrap();
            m.write_obj(flags, GuestAddress(a.0 + 12)).unwrap();
            m.write_obj(next.unwrap_or(0), GuestAddress(a.0 + 14))
                .unwrap();
        }

        /// Makes a request of `kind` at `sector` available at head `head`
        /// (heads 0, 3, 6, ...: three descriptors each): the header, one
        /// data buffer of `len` bytes (none if 0), the status byte
        /// (primed with 0xff).
        fn submit(&mut self, head: u16, kind: u32, sector: u64, len: u32, write_data: bool) {
            let slot = BUFS + u64::from(head) * 0x2000;
            let m = self.m();
            m.write_obj(kind, GuestAddress(slot)).unwrap();
            m.write_obj(0u32, GuestAddress(slot + 4)).unwrap();
            m.write_obj(sector, GuestAddress(slot + 8)).unwrap();
            m.write_obj(0xffu8, GuestAddress(slot + 0x1fff)).unwrap();
            drop(m);
            if len > 0 {
                self.desc(head, slot, 16, false, Some(head + 1));
                self.desc(head + 1, slot + 0x100, len, write_data, Some(head + 2));
            } else {
                self.desc(head, slot, 16, false, Some(head + 2));
            }
            self.desc(head + 2, slot + 0x1fff, 1, true, None);
            let m = self.m();
            let pos = u64::from(self.avail_idx % QSIZE);
            m.write_obj(head, GuestAddress(AVAIL + 4 + pos * 2))
                .unwrap();
            self.avail_idx = self.avail_idx.wrapping_add(1);
            m.write_obj(self.avail_idx, GuestAddress(AVAIL + 2))
                .unwrap();
        }

        fn serve(&mut self) {
            self.dev.serve_queue(0, &self.vring);
        }

        fn used_idx(&self) -> u16 {
            self.m().read_obj(GuestAddress(USED + 2)).unwrap()
        }

        /// The used element at position `i`: id and length.
        fn used(&self, i: u16) -> (u32, u32) {
            let a = USED + 4 + u64::from(i % QSIZE) * 8;
            let m = self.m();
            (
                m.read_obj(GuestAddress(a)).unwrap(),
                m.read_obj(GuestAddress(a + 4)).unwrap(),
            )
        }

        fn status(&self, head: u16) -> u8 {
            let slot = BUFS + u64::from(head) * 0x2000;
            self.m().read_obj(GuestAddress(slot + 0x1fff)).unwrap()
        }

        /// Answers `n` flushes, one at a time.
        fn flushes(&mut self, n: u64) {
            for _ in 0..n {
                self.submit(0, VIRTIO_BLK_T_FLUSH, 0, 0, false);
                self.serve();
            }
        }
    }

    #[test]
    fn write_then_read_back() {
        let mut r = Rig::new("rw", None);
        let slot = BUFS + 0x100;
        r.m()
            .write_slice(&[0xabu8; 512], GuestAddress(slot))
            .unwrap();
        r.submit(0, VIRTIO_BLK_T_OUT, 3, 512, false);
        r.serve();
        assert_eq!(r.used_idx(), 1);
        assert_eq!(r.used(0), (0, 1));
        assert_eq!(r.status(0), 0);
        let rslot = BUFS + 3 * 0x2000 + 0x100;
        r.submit(3, VIRTIO_BLK_T_IN, 3, 1024, true);
        r.serve();
        assert_eq!(r.used(1), (3, 1025));
        assert_eq!(r.status(3), 0);
        let mut back = [0u8; 1024];
        r.m().read_slice(&mut back, GuestAddress(rslot)).unwrap();
        assert!(back[..512].iter().all(|&b| b == 0xab));
        assert!(back[512..].iter().all(|&b| b == 0));
    }

    #[test]
    fn odd_requests_get_errors_not_panics() {
        let mut r = Rig::new("odd", None);
        // Past the end, a sector whose byte offset overflows, an unknown
        // type, a discard without segments.
        r.submit(0, VIRTIO_BLK_T_IN, 2048, 512, true);
        r.submit(3, VIRTIO_BLK_T_OUT, u64::MAX / 2, 512, false);
        r.submit(6, 99, 0, 0, false);
        r.submit(9, VIRTIO_BLK_T_DISCARD, 0, 0, false);
        r.serve();
        assert_eq!(r.used_idx(), 4);
        assert_eq!(r.status(0), VIRTIO_BLK_S_IOERR as u8);
        assert_eq!(r.status(3), VIRTIO_BLK_S_IOERR as u8);
        assert_eq!(r.status(6), VIRTIO_BLK_S_UNSUPP as u8);
        assert_eq!(r.status(9), VIRTIO_BLK_S_IOERR as u8);
        // A discard segment reaching past the end of the disk.
        let slot = BUFS + 0x100;
        let m = r.m();
        m.write_obj(2040u64, GuestAddress(slot)).unwrap();
        m.write_obj(16u32, GuestAddress(slot + 8)).unwrap();
        drop(m);
        r.submit(0, VIRTIO_BLK_T_DISCARD, 0, 16, false);
        // A chain with nothing writable: no status to write.
        r.desc(12, BUFS, 16, false, None);
        let m = r.m();
        m.write_obj(
            12u16,
            GuestAddress(AVAIL + 4 + u64::from(r.avail_idx % QSIZE) * 2),
        )
        .unwrap();
        r.avail_idx += 1;
        m.write_obj(r.avail_idx, GuestAddress(AVAIL + 2)).unwrap();
        drop(m);
        r.serve();
        assert_eq!(r.status(0), VIRTIO_BLK_S_IOERR as u8);
        assert_eq!(r.used(5), (12, 0));
    }

    #[test]
    fn get_id_answers_the_serial() {
        let mut r = Rig::new("id", Some(Scenario::FlushErrors));
        r.submit(0, VIRTIO_BLK_T_GET_ID, 0, 20, true);
        r.serve();
        assert_eq!(r.used(0), (0, 21));
        let mut id = [0u8; 20];
        r.m()
            .read_slice(&mut id, GuestAddress(BUFS + 0x100))
            .unwrap();
        assert_eq!(&id, b"vub-flush-errors\0\0\0\0");
    }

    #[test]
    fn used_id_out_of_range_strikes_after_the_trigger() {
        let mut r = Rig::new("oor", Some(Scenario::UsedIdOutOfRange));
        r.flushes(TRIGGER_AFTER);
        assert!(!r.dev.shared.has_fired());
        assert!((0..TRIGGER_AFTER as u16).all(|i| r.used(i).0 == 0));
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert!(r.dev.shared.has_fired());
        assert_eq!(r.used_idx(), TRIGGER_AFTER as u16 + 1);
        assert_eq!(r.used(TRIGGER_AFTER as u16).0, u32::from(QSIZE) + 5);
        // Then it behaves again.
        r.submit(6, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.used(TRIGGER_AFTER as u16 + 1), (6, 1));
        let fired = std::fs::read_to_string(r.dir.0.join("fired")).unwrap();
        assert_eq!(fired, "fired used-id-out-of-range\n");
    }

    #[test]
    fn used_id_twice_writes_one_head_twice() {
        let mut r = Rig::new("twice", Some(Scenario::UsedIdTwice));
        r.flushes(TRIGGER_AFTER);
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        let n = TRIGGER_AFTER as u16;
        assert_eq!(r.used_idx(), n + 2);
        assert_eq!(r.used(n), (3, 1));
        assert_eq!(r.used(n + 1), (3, 1));
    }

    #[test]
    fn stall_answers_nothing_after_the_trigger() {
        let mut r = Rig::new("stall", Some(Scenario::Stall));
        r.flushes(TRIGGER_AFTER + 3);
        assert_eq!(r.used_idx(), TRIGGER_AFTER as u16);
        assert!(r.dev.shared.has_fired());
    }

    #[test]
    fn status_scenarios() {
        let mut r = Rig::new("status7", Some(Scenario::UnknownStatus));
        r.flushes(TRIGGER_AFTER);
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.status(3), 7);

        let mut r = Rig::new("nostatus", Some(Scenario::StatusNeverWritten));
        r.flushes(TRIGGER_AFTER);
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.status(3), 0xff);
        assert_eq!(r.used(TRIGGER_AFTER as u16), (3, 1));

        let mut r = Rig::new("short", Some(Scenario::UsedLenTooSmall));
        r.flushes(TRIGGER_AFTER);
        // Not a read: not struck yet.
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert!(!r.dev.shared.has_fired());
        r.submit(6, VIRTIO_BLK_T_IN, 0, 512, true);
        r.serve();
        assert_eq!(r.used(TRIGGER_AFTER as u16 + 1), (6, 0));
        assert_eq!(r.status(6), 0);

        let mut r = Rig::new("long", Some(Scenario::UsedLenTooLarge));
        r.flushes(TRIGGER_AFTER);
        r.submit(6, VIRTIO_BLK_T_IN, 0, 512, true);
        r.serve();
        assert_eq!(r.used(TRIGGER_AFTER as u16), (6, 513 + 4096));
    }

    #[test]
    fn request_scenarios() {
        let mut r = Rig::new("flusherr", Some(Scenario::FlushErrors));
        r.submit(0, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.status(0), VIRTIO_BLK_S_IOERR as u8);
        assert!(r.dev.shared.has_fired());

        let mut r = Rig::new("noid", Some(Scenario::GetIdNeverAnswered));
        r.submit(0, VIRTIO_BLK_T_GET_ID, 0, 20, true);
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.used_idx(), 1);
        assert_eq!(r.used(0), (3, 1));
    }

    #[test]
    fn reads_fail_only_after_the_trigger() {
        let mut r = Rig::new("ioerr", Some(Scenario::IoerrReads));
        r.submit(0, VIRTIO_BLK_T_IN, 0, 512, true);
        r.serve();
        assert_eq!(r.status(0), 0);
        r.flushes(TRIGGER_AFTER);
        r.submit(3, VIRTIO_BLK_T_IN, 0, 512, true);
        r.serve();
        assert_eq!(r.status(3), VIRTIO_BLK_S_IOERR as u8);
        assert_eq!(r.used(TRIGGER_AFTER as u16 + 1), (3, 1));
    }

    #[test]
    fn probe_scenarios_fire_when_the_config_is_read() {
        let r = Rig::new("seg0", Some(Scenario::SegMaxZero));
        assert!(!r.dev.shared.has_fired());
        let cfg = r.dev.get_config(0, 60);
        assert_eq!(cfg.len(), 60);
        assert_eq!(&cfg[12..16], &[0, 0, 0, 0]);
        assert!(r.dev.shared.has_fired());
        // Past the end of the space: zeroes, no panic.
        assert_eq!(r.dev.get_config(0x1000, 8), vec![0; 8]);
    }

    #[test]
    fn slow_flush_is_answered_ok_after_its_delay() {
        let delay = Duration::from_millis(50);
        let mut r = Rig::with_options("slowflush", |o| o.flush_delay = delay);
        r.submit(0, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        let t0 = Instant::now();
        r.serve();
        assert!(t0.elapsed() >= delay);
        assert_eq!(r.used_idx(), 1);
        assert_eq!(r.used(0), (0, 1));
        assert_eq!(r.status(0), VIRTIO_BLK_S_OK as u8);
        assert!(!r.dev.shared.has_fired());
    }

    #[test]
    fn slow_discard_is_done_after_its_delay() {
        let delay = Duration::from_millis(50);
        let mut r = Rig::with_options("slowdiscard", |o| o.discard_delay = delay);
        // Sector 8 written, then discarded (one segment: 8 sectors at 8).
        let slot = BUFS + 0x100;
        r.m()
            .write_slice(&[0xabu8; 4096], GuestAddress(slot))
            .unwrap();
        r.submit(0, VIRTIO_BLK_T_OUT, 8, 4096, false);
        r.serve();
        assert_eq!(r.status(0), VIRTIO_BLK_S_OK as u8);
        let seg = BUFS + 3 * 0x2000 + 0x100;
        let m = r.m();
        m.write_obj(8u64, GuestAddress(seg)).unwrap();
        m.write_obj(8u32, GuestAddress(seg + 8)).unwrap();
        m.write_obj(0u32, GuestAddress(seg + 12)).unwrap();
        drop(m);
        r.submit(3, VIRTIO_BLK_T_DISCARD, 0, 16, false);
        let t0 = Instant::now();
        r.serve();
        assert!(t0.elapsed() >= delay);
        assert_eq!(r.used(1), (3, 1));
        assert_eq!(r.status(3), VIRTIO_BLK_S_OK as u8);
        r.submit(6, VIRTIO_BLK_T_IN, 8, 4096, true);
        r.serve();
        assert_eq!(r.status(6), VIRTIO_BLK_S_OK as u8);
        let mut back = [0xffu8; 4096];
        r.m()
            .read_slice(&mut back, GuestAddress(BUFS + 6 * 0x2000 + 0x100))
            .unwrap();
        assert!(back.iter().all(|&b| b == 0));
    }

    #[test]
    fn features_withdrawn_after_a_reset() {
        let mut r = Rig::new("withdrawn", Some(Scenario::FeaturesWithdrawnOnReset));
        r.dev.acked_features(FEATURES);
        r.submit(0, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.status(0), 0);
        r.dev.stop_vring(0).unwrap();
        r.dev.acked_features(FEATURES);
        assert!(r.dev.shared.has_fired());
        r.submit(3, VIRTIO_BLK_T_FLUSH, 0, 0, false);
        r.serve();
        assert_eq!(r.status(3), VIRTIO_BLK_S_UNSUPP as u8);
    }
}
