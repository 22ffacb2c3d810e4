// SPDX-License-Identifier: GPL-2.0

//! One virtio-blk request: its descriptor chain read into buffers, and
//! what a behaving device does with it against the backing file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{fence, Ordering};

use virtio_bindings::bindings::virtio_blk::*;
use virtio_queue::{DescriptorChain, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use crate::config::MAX_ZERO_SECTORS;

/// A sector, the unit of every offset and length in virtio-blk requests.
pub const SECTOR: u64 = 512;

/// The most data one request may carry here; a longer one is answered
/// IOERR rather than given a buffer of a guest-chosen size.
const MAX_REQUEST_BYTES: usize = 64 << 20;

/// The size of the virtio-blk request header.
pub const HEADER_LEN: usize = 16;

/// The size of one discard or write-zeroes segment.
const ZERO_SEGMENT_LEN: usize = 16;

/// The buffers of one descriptor chain.
pub struct Chain {
    /// The head descriptor's index, the id of its used element.
    pub head: u16,
    /// Device-readable: the header, then the data of a write or the
    /// segments of a discard.
    pub readable: Vec<(GuestAddress, usize)>,
    /// Device-writable: the data of a read or of GET_ID, then the status
    /// byte (the last byte).
    pub writable: Vec<(GuestAddress, usize)>,
}

impl Chain {
    pub fn new<M>(chain: DescriptorChain<M>) -> Self
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

    pub fn writable_len(&self) -> usize {
        self.writable.iter().map(|s| s.1).sum()
    }

    pub fn readable_len(&self) -> usize {
        self.readable.iter().map(|s| s.1).sum()
    }

    /// The writable buffers but the status byte.
    pub fn data_in(&self) -> Vec<(GuestAddress, usize)> {
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
    pub fn status_addr(&self) -> Option<GuestAddress> {
        let (a, l) = *self.writable.iter().rev().find(|s| s.1 > 0)?;
        a.0.checked_add(l as u64 - 1).map(GuestAddress)
    }
}

/// Copies out of the guest: `out.len()` bytes from `segs`, after `skip`.
pub fn gather(
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
pub struct Answer {
    /// The status byte.
    pub status: u8,
    /// Bytes written to the writable buffers, the status byte included.
    pub used_len: u32,
}

impl Answer {
    /// Only a status byte.
    pub const fn status(status: u32) -> Self {
        Answer {
            status: status as u8,
            used_len: 1,
        }
    }
}

/// The backing file.
pub struct Disk {
    /// The raw image.
    pub file: File,
    /// Its size: no request goes past it, whatever the configuration
    /// space claims.
    pub bytes: u64,
    /// What GET_ID answers.
    pub serial: Vec<u8>,
}

impl Disk {
    /// Does what the request asks.
    pub fn execute(
        &self,
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
                .is_some_and(|end| end <= self.bytes)
        };
        match kind {
            VIRTIO_BLK_T_IN => {
                let data = c.data_in();
                let len: usize = data.iter().map(|s| s.1).sum();
                if len > MAX_REQUEST_BYTES || !in_range(len) {
                    return ioerr;
                }
                let mut buf = vec![0u8; len];
                if self.file.read_exact_at(&mut buf, sector * SECTOR).is_err()
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
                    || self.file.write_all_at(&buf, sector * SECTOR).is_err()
                {
                    return ioerr;
                }
                ok(0)
            }
            VIRTIO_BLK_T_FLUSH => match self.file.sync_data() {
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
                    if end > self.bytes {
                        return ioerr;
                    }
                    // Discarded ranges read back as zeroes too, as with
                    // QEMU's discard=unmap on a raw file.
                    let zeroes = vec![0u8; count as usize * SECTOR as usize];
                    if self.file.write_all_at(&zeroes, start * SECTOR).is_err() {
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
pub fn put_raw_used(mem: &GuestMemoryMmap, queue: &mut virtio_queue::Queue, id: u32, len: u32) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
