// SPDX-License-Identifier: GPL-2.0

//! The virtio-blk device: its features and configuration space, the
//! requests served from the backing file, and where each misbehaviour of
//! `crate::scenario` strikes.
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
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::Backend;
use vhost_user_backend::{VhostUserBackendMut, VringRwLock, VringT};
use virtio_bindings::bindings::virtio_blk::*;
use virtio_bindings::bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::bindings::virtio_ring::{
    VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC,
};
use virtio_queue::{DescriptorChain, QueueT};
use vm_memory::{
    Bytes, GuestAddress, GuestAddressSpace, GuestMemoryAtomic, GuestMemoryLoadGuard,
    GuestMemoryMmap,
};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

use crate::channel::{self, Channel};
use crate::scenario::{self, Scenario, Strike, TRIGGER_AFTER};

/// The guest's memory as the daemon hands it over.
type Mem = GuestMemoryAtomic<GuestMemoryMmap>;

/// A sector, the unit of every offset and length in virtio-blk requests.
const SECTOR: u64 = 512;

/// `VHOST_USER_F_PROTOCOL_FEATURES`.
const PROTOCOL_FEATURES: u64 = 1 << 30;

/// The largest queue QEMU may set up (its `queue-size`, 128 by default).
const MAX_QUEUE_SIZE: usize = 1024;

/// The most data one request may carry here; a longer one is answered
/// IOERR rather than given a buffer of a guest-chosen size.
const MAX_REQUEST_BYTES: usize = 64 << 20;

/// The most sectors one discard or write-zeroes segment may cover
/// (`max_discard_sectors`, `max_write_zeroes_sectors`).
const MAX_ZERO_SECTORS: u32 = 32768;

/// The size of the virtio-blk request header.
const HEADER_LEN: usize = 16;

/// The size of one discard or write-zeroes segment.
const ZERO_SEGMENT_LEN: usize = 16;

/// The virtio-blk configuration space, as offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlkConfig {
    /// In 512-byte sectors.
    pub capacity: u64,
    /// Segments in one request.
    pub seg_max: u32,
    /// The logical block size.
    pub blk_size: u32,
    /// log2 of logical blocks per physical block.
    pub physical_block_exp: u8,
    /// Offset of the first aligned logical block.
    pub alignment_offset: u8,
    /// Suggested minimum I/O size, in logical blocks.
    pub min_io_size: u16,
    /// Optimal I/O size, in logical blocks.
    pub opt_io_size: u32,
    /// Writeback cache on (`VIRTIO_BLK_F_CONFIG_WCE`).
    pub wce: u8,
    /// Request queues.
    pub num_queues: u16,
    /// Discard limits.
    pub max_discard_sectors: u32,
    /// Discard segments in one request.
    pub max_discard_seg: u32,
    /// Discard granularity, in sectors.
    pub discard_sector_alignment: u32,
    /// Write-zeroes limits.
    pub max_write_zeroes_sectors: u32,
    /// Write-zeroes segments in one request.
    pub max_write_zeroes_seg: u32,
    /// Write-zeroes may deallocate.
    pub write_zeroes_may_unmap: u8,
}

impl BlkConfig {
    /// The sane configuration of a disk of `capacity` sectors.
    pub fn sane(capacity: u64, num_queues: u16) -> Self {
        Self {
            capacity,
            // Two descriptors of a queue of 128 go to the header and the
            // status byte.
            seg_max: 126,
            blk_size: 512,
            physical_block_exp: 0,
            alignment_offset: 0,
            min_io_size: 1,
            opt_io_size: 0,
            wce: 1,
            num_queues,
            max_discard_sectors: MAX_ZERO_SECTORS,
            max_discard_seg: 1,
            discard_sector_alignment: 8,
            max_write_zeroes_sectors: MAX_ZERO_SECTORS,
            max_write_zeroes_seg: 1,
            write_zeroes_may_unmap: 0,
        }
    }

    /// The configuration a probe-time scenario offers instead.
    pub fn for_scenario(mut self, s: Option<Scenario>) -> Self {
        match s {
            Some(Scenario::SegMaxZero) => self.seg_max = 0,
            Some(Scenario::BlkSize8k) => self.blk_size = 8192,
            Some(Scenario::BlkSizeOdd) => self.blk_size = 1000,
            Some(Scenario::TopologyOdd) => {
                self.physical_block_exp = 3;
                self.alignment_offset = 9;
                self.min_io_size = 3;
                self.opt_io_size = 5;
            }
            Some(Scenario::CapacityLoffOverflow) => self.capacity = u64::MAX / 256,
            Some(Scenario::NumQueuesZero) => self.num_queues = 0,
            Some(Scenario::NumQueuesHuge) => self.num_queues = 65535,
            _ => {}
        }
        self
    }

    /// `struct virtio_blk_config` in little endian, zeroes after
    /// `write_zeroes_may_unmap` (the secure-erase and zoned fields, whose
    /// features are not offered).
    pub fn bytes(&self) -> [u8; 256] {
        let mut b = [0u8; 256];
        b[0..8].copy_from_slice(&self.capacity.to_le_bytes());
        // size_max (8..12) and geometry (16..20): features not offered.
        b[12..16].copy_from_slice(&self.seg_max.to_le_bytes());
        b[20..24].copy_from_slice(&self.blk_size.to_le_bytes());
        b[24] = self.physical_block_exp;
        b[25] = self.alignment_offset;
        b[26..28].copy_from_slice(&self.min_io_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.opt_io_size.to_le_bytes());
        b[32] = self.wce;
        b[34..36].copy_from_slice(&self.num_queues.to_le_bytes());
        b[36..40].copy_from_slice(&self.max_discard_sectors.to_le_bytes());
        b[40..44].copy_from_slice(&self.max_discard_seg.to_le_bytes());
        b[44..48].copy_from_slice(&self.discard_sector_alignment.to_le_bytes());
        b[48..52].copy_from_slice(&self.max_write_zeroes_sectors.to_le_bytes());
        b[52..56].copy_from_slice(&self.max_write_zeroes_seg.to_le_bytes());
        b[56] = self.write_zeroes_may_unmap;
        b
    }
}

/// The offset of `wce` in the configuration space, the one field the
/// driver may write.
const WCE_OFFSET: u32 = 32;

/// The virtio features offered.
pub const FEATURES: u64 = 1 << VIRTIO_BLK_F_SEG_MAX
    | 1 << VIRTIO_BLK_F_BLK_SIZE
    | 1 << VIRTIO_BLK_F_TOPOLOGY
    | 1 << VIRTIO_BLK_F_FLUSH
    | 1 << VIRTIO_BLK_F_CONFIG_WCE
    | 1 << VIRTIO_BLK_F_MQ
    | 1 << VIRTIO_BLK_F_DISCARD
    | 1 << VIRTIO_BLK_F_WRITE_ZEROES
    | 1 << VIRTIO_F_VERSION_1
    | 1 << VIRTIO_RING_F_EVENT_IDX
    | 1 << VIRTIO_RING_F_INDIRECT_DESC
    | PROTOCOL_FEATURES;

/// What features-withdrawn-on-reset takes away after the reset.
const WITHDRAWN: u64 = 1 << VIRTIO_BLK_F_FLUSH
    | 1 << VIRTIO_BLK_F_DISCARD
    | 1 << VIRTIO_BLK_F_WRITE_ZEROES
    | 1 << VIRTIO_BLK_F_MQ;

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
    /// Returns whether this was the first time.
    fn fire(&self, what: &str) -> bool {
        let Some(s) = self.scenario else { return false };
        if self.fired.swap(true, Ordering::SeqCst) {
            return false;
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
        true
    }

    fn has_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Sends one configuration change notification, after `change` has
    /// been made to the configuration space.
    fn config_change(&self, change: impl FnOnce(&mut BlkConfig)) {
        change(&mut lock(&self.config));
        match lock(&self.channel).as_mut() {
            Some(c) => {
                if let Err(e) = c.config_changed() {
                    log(&format!("config change notification: {e}"));
                }
            }
            None => log("config change: no backend request channel"),
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
                for k in 0..n {
                    me.config_change(|c| step(k, c));
                }
            });
        if let Err(e) = spawned {
            log(&format!("config change thread: {e}"));
        }
    }
}

/// The buffers of one descriptor chain.
struct Chain {
    head: u16,
    /// Device-readable: the header, then the data of a write or the
    /// segments of a discard.
    readable: Vec<(GuestAddress, usize)>,
    /// Device-writable: the data of a read or of GET_ID, then the status
    /// byte (the last byte).
    writable: Vec<(GuestAddress, usize)>,
}

impl Chain {
    fn new<M>(chain: DescriptorChain<M>) -> Self
    where
        M: std::ops::Deref,
        M::Target: vm_memory::GuestMemory,
    {
        let head = chain.head_index();
        let (mut readable, mut writable) = (Vec::new(), Vec::new());
        // The chain iterator follows indirect tables and stops at a loop
        // (after as many descriptors as the queue has), or at a bad one.
        for d in chain {
            let seg = (d.addr(), d.len() as usize);
            if d.is_write_only() {
                writable.push(seg);
            } else {
                readable.push(seg);
            }
        }
        Chain {
            head,
            readable,
            writable,
        }
    }

    fn writable_len(&self) -> usize {
        self.writable.iter().map(|s| s.1).sum()
    }

    fn readable_len(&self) -> usize {
        self.readable.iter().map(|s| s.1).sum()
    }

    /// The writable buffers but the status byte.
    fn data_in(&self) -> Vec<(GuestAddress, usize)> {
        let mut left = self.writable_len().saturating_sub(1);
        let mut v = Vec::new();
        for &(a, l) in &self.writable {
            if left == 0 {
                break;
            }
            let n = l.min(left);
            v.push((a, n));
            left -= n;
        }
        v
    }

    /// Where the status byte goes.
    fn status_addr(&self) -> Option<GuestAddress> {
        let (a, l) = *self.writable.iter().rev().find(|s| s.1 > 0)?;
        a.0.checked_add(l as u64 - 1).map(GuestAddress)
    }
}

/// Copies out of the guest: `out.len()` bytes from `segs`, after `skip`.
fn gather(
    mem: &GuestMemoryMmap,
    segs: &[(GuestAddress, usize)],
    mut skip: usize,
    out: &mut [u8],
) -> bool {
    let mut done = 0;
    for &(a, l) in segs {
        if done == out.len() {
            break;
        }
        if skip >= l {
            skip -= l;
            continue;
        }
        let n = (l - skip).min(out.len() - done);
        let Some(addr) = a.0.checked_add(skip as u64) else {
            return false;
        };
        if mem
            .read_slice(&mut out[done..done + n], GuestAddress(addr))
            .is_err()
        {
            return false;
        }
        done += n;
        skip = 0;
    }
    done == out.len()
}

/// Copies into the guest: `data` over `segs`, from their start.
fn scatter(mem: &GuestMemoryMmap, segs: &[(GuestAddress, usize)], data: &[u8]) -> bool {
    let mut done = 0;
    for &(a, l) in segs {
        if done == data.len() {
            break;
        }
        let n = l.min(data.len() - done);
        if mem.write_slice(&data[done..done + n], a).is_err() {
            return false;
        }
        done += n;
    }
    done == data.len()
}

/// How one request is answered.
#[derive(Clone, Copy, Debug)]
struct Answer {
    status: u8,
    /// Bytes written to the writable buffers, the status byte included.
    used_len: u32,
}

impl Answer {
    const fn status(status: u32) -> Self {
        Answer {
            status: status as u8,
            used_len: 1,
        }
    }
}

/// The device.
pub struct Blk {
    shared: Arc<Shared>,
    disk: File,
    /// The backing file's size: no request goes past it, whatever the
    /// configuration space claims.
    disk_bytes: u64,
    queues: u16,
    mem: Option<Mem>,
    event_idx: bool,
    serial: Vec<u8>,
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
        let disk = OpenOptions::new().read(true).write(true).open(&opts.file)?;
        let disk_bytes = disk.metadata()?.len();
        let capacity = disk_bytes / SECTOR;
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
            disk,
            disk_bytes,
            queues: opts.queues,
            mem: None,
            event_idx: false,
            serial: serial.into_bytes(),
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
        loop {
            if self.event_idx {
                let _ = vring.disable_notification();
            }
            loop {
                if self.armed() == Some(Scenario::OneQueueStalls) {
                    self.shared
                        .fire("queue 1 no longer served, queue 0 goes on");
                }
                if self.silent(q) {
                    return;
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

        // Requests consumed and never answered.
        if let Some(s) = self.armed() {
            match s {
                Scenario::Stall => {
                    self.shared
                        .fire("requests consumed and never answered from now on");
                }
                Scenario::NeedsReset => {
                    let a = self.execute(mem, &c, kind, sector);
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
                    self.shared
                        .fire(&format!("reads answered {} from now on", scenario::name(s)));
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
            None => self.execute(mem, &c, kind, sector),
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
                        thread::sleep(scenario::LATE_WRITE_AFTER);
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
                    scenario::LATE_WRITE_AFTER
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

    /// Does what the request asks.
    fn execute(
        &mut self,
        mem: &GuestMemoryMmap,
        c: &Chain,
        kind: Option<u32>,
        sector: u64,
    ) -> Answer {
        let ok = |used_len: usize| Answer {
            status: VIRTIO_BLK_S_OK as u8,
            used_len: u32::try_from(used_len.saturating_add(1)).unwrap_or(u32::MAX),
        };
        let ioerr = Answer::status(VIRTIO_BLK_S_IOERR);
        let Some(kind) = kind else {
            return ioerr;
        };
        let in_range = |len: usize| {
            sector
                .checked_mul(SECTOR)
                .and_then(|o| o.checked_add(len as u64))
                .is_some_and(|end| end <= self.disk_bytes)
        };
        match kind {
            VIRTIO_BLK_T_IN => {
                let data = c.data_in();
                let len: usize = data.iter().map(|s| s.1).sum();
                if len > MAX_REQUEST_BYTES || !in_range(len) {
                    return ioerr;
                }
                let mut buf = vec![0u8; len];
                if self.disk.read_exact_at(&mut buf, sector * SECTOR).is_err()
                    || !scatter(mem, &data, &buf)
                {
                    return ioerr;
                }
                ok(len)
            }
            VIRTIO_BLK_T_OUT => {
                let len = c.readable_len().saturating_sub(HEADER_LEN);
                if len > MAX_REQUEST_BYTES || !in_range(len) {
                    return ioerr;
                }
                let mut buf = vec![0u8; len];
                if !gather(mem, &c.readable, HEADER_LEN, &mut buf)
                    || self.disk.write_all_at(&buf, sector * SECTOR).is_err()
                {
                    return ioerr;
                }
                ok(0)
            }
            VIRTIO_BLK_T_FLUSH => match self.disk.sync_data() {
                Ok(()) => ok(0),
                Err(_) => ioerr,
            },
            VIRTIO_BLK_T_GET_ID => {
                let data = c.data_in();
                let room: usize = data.iter().map(|s| s.1).sum();
                let mut id = [0u8; VIRTIO_BLK_ID_BYTES as usize];
                let n = self.serial.len().min(id.len());
                id[..n].copy_from_slice(&self.serial[..n]);
                let n = room.min(id.len());
                if !scatter(mem, &data, &id[..n]) {
                    return ioerr;
                }
                ok(n)
            }
            VIRTIO_BLK_T_DISCARD | VIRTIO_BLK_T_WRITE_ZEROES => {
                let len = c.readable_len().saturating_sub(HEADER_LEN);
                if len == 0 || len % ZERO_SEGMENT_LEN != 0 || len > 64 * ZERO_SEGMENT_LEN {
                    return ioerr;
                }
                let mut segs = vec![0u8; len];
                if !gather(mem, &c.readable, HEADER_LEN, &mut segs) {
                    return ioerr;
                }
                for s in segs.chunks_exact(ZERO_SEGMENT_LEN) {
                    let start =
                        u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                    let count = u32::from_le_bytes([s[8], s[9], s[10], s[11]]);
                    if count > MAX_ZERO_SECTORS {
                        return ioerr;
                    }
                    let Some(end) = start
                        .checked_add(u64::from(count))
                        .and_then(|e| e.checked_mul(SECTOR))
                    else {
                        return ioerr;
                    };
                    if end > self.disk_bytes {
                        return ioerr;
                    }
                    // Discarded ranges read back as zeroes too, as with
                    // QEMU's discard=unmap on a raw file.
                    let zeroes = vec![0u8; count as usize * SECTOR as usize];
                    if self.disk.write_all_at(&zeroes, start * SECTOR).is_err() {
                        return ioerr;
                    }
                }
                ok(0)
            }
            _ => Answer::status(VIRTIO_BLK_S_UNSUPP),
        }
    }
}

/// Writes a used element the way the queue would, but with any `id`
/// (the queue's own `add_used` refuses one past its size).
fn put_raw_used(mem: &GuestMemoryMmap, queue: &mut virtio_queue::Queue, id: u32, len: u32) {
    let size = queue.size().max(1);
    let next = queue.next_used();
    let ring = queue.used_ring();
    // flags and idx (4 bytes), then elements of id and len (8 bytes each).
    let elem = ring.wrapping_add(4 + u64::from(next % size) * 8);
    let _ = mem.write_obj(id.to_le(), GuestAddress(elem));
    let _ = mem.write_obj(len.to_le(), GuestAddress(elem.wrapping_add(4)));
    let next = next.wrapping_add(1);
    queue.set_next_used(next);
    fence(Ordering::SeqCst);
    let _ = mem.store(
        next.to_le(),
        GuestAddress(ring.wrapping_add(2)),
        Ordering::Release,
    );
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

    #[test]
    fn config_layout() {
        let b = BlkConfig::sane(2048, 2).bytes();
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 2048);
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 126);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 512);
        assert_eq!(u16::from_le_bytes(b[26..28].try_into().unwrap()), 1);
        assert_eq!(u16::from_le_bytes(b[34..36].try_into().unwrap()), 2);
        assert_eq!(
            u32::from_le_bytes(b[48..52].try_into().unwrap()),
            MAX_ZERO_SECTORS
        );
    }

    #[test]
    fn probe_scenarios_change_the_config() {
        let sane = BlkConfig::sane(2048, 2);
        for (n, s) in scenario::ALL {
            let c = sane.for_scenario(Some(*s));
            let probe_config =
                s.expect().strikes == Strike::Probe && *s != Scenario::FeaturesWithdrawnOnReset;
            assert_eq!(c != sane, probe_config, "{n}");
        }
    }

    #[test]
    fn withdrawn_features_were_offered() {
        assert_eq!(FEATURES & WITHDRAWN, WITHDRAWN);
    }

    #[test]
    fn status_is_the_last_writable_byte() {
        let c = Chain {
            head: 0,
            readable: vec![(GuestAddress(0x1000), 16)],
            writable: vec![(GuestAddress(0x2000), 512), (GuestAddress(0x3000), 1)],
        };
        assert_eq!(c.status_addr(), Some(GuestAddress(0x3000)));
        assert_eq!(c.data_in(), vec![(GuestAddress(0x2000), 512)]);
        let merged = Chain {
            head: 0,
            readable: vec![],
            writable: vec![(GuestAddress(0x2000), 513)],
        };
        assert_eq!(merged.status_addr(), Some(GuestAddress(0x2200)));
        assert_eq!(merged.data_in(), vec![(GuestAddress(0x2000), 512)]);
    }

    #[test]
    fn gather_and_scatter_cross_segments() {
        let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 0x10000)]).unwrap();
        let segs = [(GuestAddress(0x100), 3), (GuestAddress(0x800), 5)];
        assert!(scatter(&mem, &segs, &[1, 2, 3, 4, 5, 6, 7, 8]));
        let mut out = [0u8; 6];
        assert!(gather(&mem, &segs, 2, &mut out));
        assert_eq!(out, [3, 4, 5, 6, 7, 8]);
        // Past the buffers, or outside guest memory: refused, no panic.
        let mut big = [0u8; 9];
        assert!(!gather(&mem, &segs, 0, &mut big));
        assert!(!scatter(&mem, &[(GuestAddress(0xfffe), 4)], &[0; 4]));
    }
}
