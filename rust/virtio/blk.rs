// SPDX-License-Identifier: GPL-2.0

//! virtio-blk requests on top of our blk-mq abstraction: the request header
//! and status byte (include/uapi/linux/virtio_blk.h), the discard /
//! write-zeroes range, and a typed virtqueue whose tokens are blk-mq
//! requests.
//!
//! A request's header, range, status byte and their scatterlist entries live
//! in its blk-mq PDU ([`BlkReq`]), the data in the request's own
//! scatterlist; the request handle itself is the virtqueue token, so the
//! buffers stay untouched from `submit` until the device returns them.

use core::marker::PhantomData;

use kernel::{
    bindings,
    prelude::*, //
};

use super::{
    Notifier,
    Virtqueue, //
};
use crate::blkmq::{
    Operations,
    Request,
    Status, //
};

/// `VIRTIO_BLK_T_IN`: read.
pub const VIRTIO_BLK_T_IN: u32 = 0;
/// `VIRTIO_BLK_T_OUT`: write.
pub const VIRTIO_BLK_T_OUT: u32 = 1;
/// `VIRTIO_BLK_T_FLUSH`: flush the write cache.
pub const VIRTIO_BLK_T_FLUSH: u32 = 4;
/// `VIRTIO_BLK_T_GET_ID`: read the serial (20 bytes).
pub const VIRTIO_BLK_T_GET_ID: u32 = 8;
/// `VIRTIO_BLK_T_DISCARD`.
pub const VIRTIO_BLK_T_DISCARD: u32 = 11;
/// `VIRTIO_BLK_T_WRITE_ZEROES`.
pub const VIRTIO_BLK_T_WRITE_ZEROES: u32 = 13;
/// `VIRTIO_BLK_S_OK`.
pub const VIRTIO_BLK_S_OK: u8 = 0;
/// `VIRTIO_BLK_S_UNSUPP`.
pub const VIRTIO_BLK_S_UNSUPP: u8 = 2;
/// `VIRTIO_BLK_ID_BYTES`: length of the serial.
pub const VIRTIO_BLK_ID_BYTES: usize = 20;
/// `VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP`.
pub const VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP: u32 = 1;

/// Map a device status byte to a block status (upstream `virtblk_result`).
pub fn status_to_blk(status: u8) -> Status {
    match status {
        VIRTIO_BLK_S_OK => Status::OK,
        VIRTIO_BLK_S_UNSUPP => Status::NOTSUPP,
        _ => Status::IOERR,
    }
}

/// What the device is asked to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Read the request's data from its sector.
    Read,
    /// Write the request's data to its sector.
    Write,
    /// Flush the write cache.
    Flush,
    /// Discard the request's range.
    Discard,
    /// Zero the request's range; `unmap` allows deallocation.
    WriteZeroes {
        /// Set `VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP`.
        unmap: bool,
    },
    /// Read the serial into the request's data (a driver-private request).
    GetId,
}

/// `struct virtio_blk_outhdr`.
#[repr(C)]
struct OutHdr {
    type_: u32,
    ioprio: u32,
    sector: u64,
}

/// `struct virtio_blk_discard_write_zeroes` (always little-endian).
#[repr(C)]
struct Range {
    sector: u64,
    num_sectors: u32,
    flags: u32,
}

/// The blk-mq per-request data of a virtio-blk request.
pub struct BlkReq {
    hdr: OutHdr,
    range: Range,
    status: u8,
    has_range: bool,
    data_out: bool,
    nsg: u32,
    hdr_sg: bindings::scatterlist,
    range_sg: bindings::scatterlist,
    status_sg: bindings::scatterlist,
}

// SAFETY: integers, bools and scatterlists (integers): all-zero is valid.
unsafe impl Zeroable for BlkReq {}

impl BlkReq {
    /// The status byte the device wrote (valid after completion).
    pub fn status(&self) -> Status {
        status_to_blk(self.status)
    }
}

fn to_dev32(v: u32, le: bool) -> u32 {
    if le {
        v.to_le()
    } else {
        v.to_be()
    }
}

fn to_dev64(v: u64, le: bool) -> u64 {
    if le {
        v.to_le()
    } else {
        v.to_be()
    }
}

/// Fill in `rq`'s header (and range), map its data and start it. `le`:
/// the device's byte order ([`super::Device::is_little_endian`]).
/// `Err` means the request could not be prepared: return that status.
pub fn prepare<T: Operations<RequestData = BlkReq>>(
    rq: &mut Request<T>,
    cmd: Command,
    le: bool,
) -> core::result::Result<(), Status> {
    let (type_, sector, range, has_data) = match cmd {
        Command::Read => (VIRTIO_BLK_T_IN, rq.sector(), None, true),
        Command::Write => (VIRTIO_BLK_T_OUT, rq.sector(), None, true),
        Command::Flush => (VIRTIO_BLK_T_FLUSH, 0, None, false),
        Command::GetId => (VIRTIO_BLK_T_GET_ID, 0, None, true),
        Command::Discard => (VIRTIO_BLK_T_DISCARD, 0, Some(0), false),
        Command::WriteZeroes { unmap } => (
            VIRTIO_BLK_T_WRITE_ZEROES,
            0,
            Some(if unmap {
                VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP
            } else {
                0
            }),
            false,
        ),
    };
    let (pos, nr) = (rq.sector(), rq.sectors());
    let ioprio = u32::from(rq.ioprio());
    let nsg = if has_data {
        rq.map_sg().map_err(|_| Status::IOERR)?
    } else {
        0
    };
    let d = rq.data_mut();
    d.hdr = OutHdr {
        type_: to_dev32(type_, le),
        ioprio: to_dev32(ioprio, le),
        sector: to_dev64(sector, le),
    };
    d.has_range = range.is_some();
    if let Some(flags) = range {
        d.range = Range {
            sector: pos.to_le(),
            num_sectors: nr.to_le(),
            flags: flags.to_le(),
        };
    }
    d.status = 0xff;
    d.data_out = cmd == Command::Write;
    d.nsg = nsg;
    rq.start();
    Ok(())
}

/// A virtqueue whose buffers are virtio-blk requests of blk-mq driver `T`.
///
/// # Invariants
///
/// Every token in the virtqueue is a `Request<T>` added by `submit`.
pub struct BlkVq<T: Operations<RequestData = BlkReq>> {
    vq: Virtqueue,
    _p: PhantomData<T>,
}

impl<T: Operations<RequestData = BlkReq>> BlkVq<T> {
    /// Use `vq` (fresh from `find_vqs`, no buffers) for virtio-blk requests.
    pub fn new(vq: Virtqueue) -> Self {
        Self {
            vq,
            _p: PhantomData,
        }
    }

    /// The underlying virtqueue.
    pub fn vq(&mut self) -> &mut Virtqueue {
        &mut self.vq
    }

    /// Free descriptors.
    pub fn num_free(&self) -> u32 {
        self.vq.num_free()
    }

    /// Add a prepared request. On failure (`ENOSPC`: ring full, `ENOMEM`)
    /// the request is given back.
    pub fn submit(&mut self, rq: Request<T>) -> core::result::Result<(), (Request<T>, Error)> {
        let p = rq.data_ptr();
        let data_sg = rq.sg_ptr();
        let mut sgs: [*mut bindings::scatterlist; 4] = [core::ptr::null_mut(); 4];
        let mut n = 0;
        // SAFETY: `p` is this request's PDU, owned through `rq`; the
        // scatterlists point into it (or to the request's data mapped by
        // `map_sg`), and all stay untouched until the token comes back from
        // `complete_one` (the request handle is the token), or the reset.
        let (nsg, data_out) = unsafe {
            bindings::sg_init_one(&raw mut (*p).hdr_sg, (&raw const (*p).hdr).cast(), 16);
            sgs[n] = &raw mut (*p).hdr_sg;
            n += 1;
            if (*p).has_range {
                bindings::sg_init_one(&raw mut (*p).range_sg, (&raw const (*p).range).cast(), 16);
                sgs[n] = &raw mut (*p).range_sg;
                n += 1;
            }
            ((*p).nsg, (*p).data_out)
        };
        let mut out = n as u32;
        if nsg > 0 {
            sgs[n] = data_sg;
            n += 1;
            if data_out {
                out += 1;
            }
        }
        // SAFETY: as above.
        unsafe {
            bindings::sg_init_one(&raw mut (*p).status_sg, (&raw const (*p).status).cast(), 1);
            sgs[n] = &raw mut (*p).status_sg;
        }
        n += 1;
        let token = rq.into_raw();
        // SAFETY: the buffers stay valid and untouched while the device
        // owns `token` (see above); the token is a `Request<T>` (invariant).
        match unsafe { self.vq.add_sgs(&mut sgs[..n], out, token) } {
            Ok(()) => Ok(()),
            // SAFETY: the device did not take the token: ours again.
            Err(e) => Err((unsafe { Request::from_raw(token) }, e)),
        }
    }

    /// Prepare a notification (under the lock); send it after unlocking.
    pub fn kick_prepare(&mut self) -> Option<Notifier> {
        self.vq.kick_prepare()
    }

    /// Take back one request the device finished.
    pub fn complete_one(&mut self) -> Option<Request<T>> {
        let (token, _len) = self.vq.get_buf()?;
        // SAFETY: every token is a `Request<T>` added by `submit` (type
        // invariant), returned once by the device.
        Some(unsafe { Request::from_raw(token) })
    }

    /// Disable used-buffer interrupts.
    pub fn disable_cb(&mut self) {
        self.vq.disable_cb()
    }

    /// Re-enable used-buffer interrupts; false if buffers arrived meanwhile.
    pub fn enable_cb(&mut self) -> bool {
        self.vq.enable_cb()
    }
}
