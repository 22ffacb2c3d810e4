// SPDX-License-Identifier: GPL-2.0

//! virtio-blk requests on the wire (include/uapi/linux/virtio_blk.h): the
//! request header (`struct virtio_blk_outhdr`, in the device's byte order),
//! the discard / write-zeroes range (`struct
//! virtio_blk_discard_write_zeroes`, always little-endian) and the status
//! byte. rust/virtio puts these bytes into the request's PDU.

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
/// `VIRTIO_BLK_T_SECURE_ERASE`.
pub const VIRTIO_BLK_T_SECURE_ERASE: u32 = 14;
/// `VIRTIO_BLK_S_OK`.
pub const VIRTIO_BLK_S_OK: u8 = 0;
/// `VIRTIO_BLK_S_IOERR`.
pub const VIRTIO_BLK_S_IOERR: u8 = 1;
/// `VIRTIO_BLK_S_UNSUPP`.
pub const VIRTIO_BLK_S_UNSUPP: u8 = 2;
/// What the driver puts in a request's status byte before sending it: a
/// value virtio-blk does not define, so a device that answers without
/// writing the byte fails the request instead of passing it as OK.
pub const STATUS_NOT_WRITTEN: u8 = 0xff;
/// `VIRTIO_BLK_ID_BYTES`: length of the serial.
pub const VIRTIO_BLK_ID_BYTES: usize = 20;
/// `VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP`.
pub const VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP: u32 = 1;
/// Bytes of the request header.
pub const OUTHDR_BYTES: usize = 16;
/// Bytes of one discard / write-zeroes range.
pub const RANGE_BYTES: usize = 16;

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
    /// Securely erase the request's range (`VIRTIO_BLK_F_SECURE_ERASE`).
    SecureErase,
    /// Read the serial.
    GetId,
}

/// How a request ended, from the device's status byte
/// (upstream `virtblk_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestStatus {
    /// `VIRTIO_BLK_S_OK`.
    Ok,
    /// `VIRTIO_BLK_S_UNSUPP`.
    Unsupported,
    /// `VIRTIO_BLK_S_IOERR`, or any other value (never trusted as success).
    IoError,
}

impl RequestStatus {
    /// Whether `b` is a status virtio-blk defines (OK, IOERR, UNSUPP):
    /// anything else is a device that broke the protocol, or one that
    /// never wrote the byte (the driver sets [`STATUS_NOT_WRITTEN`] before
    /// each request).
    pub fn is_defined(b: u8) -> bool {
        matches!(
            b,
            VIRTIO_BLK_S_OK | VIRTIO_BLK_S_IOERR | VIRTIO_BLK_S_UNSUPP
        )
    }

    /// The status byte `b` as the device wrote it.
    pub fn from_byte(b: u8) -> Self {
        match b {
            VIRTIO_BLK_S_OK => Self::Ok,
            VIRTIO_BLK_S_UNSUPP => Self::Unsupported,
            _ => Self::IoError,
        }
    }
}

/// The buffers of one request, ready for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// `struct virtio_blk_outhdr` in the device's byte order.
    pub hdr: [u8; OUTHDR_BYTES],
    /// The range of a discard, write-zeroes or secure-erase request.
    pub range: Option<[u8; RANGE_BYTES]>,
    /// The request carries data (read or write).
    pub has_data: bool,
    /// The data goes to the device (a write).
    pub data_out: bool,
}

impl Command {
    /// The wire type.
    pub fn wire_type(self) -> u32 {
        match self {
            Self::Read => VIRTIO_BLK_T_IN,
            Self::Write => VIRTIO_BLK_T_OUT,
            Self::Flush => VIRTIO_BLK_T_FLUSH,
            Self::Discard => VIRTIO_BLK_T_DISCARD,
            Self::WriteZeroes { .. } => VIRTIO_BLK_T_WRITE_ZEROES,
            Self::SecureErase => VIRTIO_BLK_T_SECURE_ERASE,
            Self::GetId => VIRTIO_BLK_T_GET_ID,
        }
    }

    /// The `flags` of this command's ranges, or `None` for a command that
    /// carries none (read, write, flush, GET_ID).
    pub fn range_flags(self) -> Option<u32> {
        match self {
            Self::Discard | Self::SecureErase => Some(0),
            Self::WriteZeroes { unmap } => Some(if unmap {
                VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP
            } else {
                0
            }),
            _ => None,
        }
    }

    /// The buffers for this command on `nr_sectors` sectors at `sector`
    /// with I/O priority `ioprio`; `le`: the device is little-endian
    /// (virtio 1.0, or a legacy device on a little-endian CPU). Like
    /// upstream, the header's sector is 0 for everything but reads and
    /// writes: discard, write-zeroes and secure erase carry theirs in the
    /// range (upstream's `virtblk_setup_discard_write_zeroes_erase`).
    pub fn encode(self, sector: u64, nr_sectors: u32, ioprio: u32, le: bool) -> Encoded {
        let data = matches!(self, Self::Read | Self::Write);
        let hdr_sector = if data { sector } else { 0 };
        let mut hdr = [0u8; OUTHDR_BYTES];
        let (t, p, s) = if le {
            (
                self.wire_type().to_le_bytes(),
                ioprio.to_le_bytes(),
                hdr_sector.to_le_bytes(),
            )
        } else {
            (
                self.wire_type().to_be_bytes(),
                ioprio.to_be_bytes(),
                hdr_sector.to_be_bytes(),
            )
        };
        hdr[0..4].copy_from_slice(&t);
        hdr[4..8].copy_from_slice(&p);
        hdr[8..16].copy_from_slice(&s);
        let range = self
            .range_flags()
            .map(|f| encode_range(sector, nr_sectors, f));
        Encoded {
            hdr,
            range,
            has_data: data,
            data_out: self == Self::Write,
        }
    }
}

/// One `struct virtio_blk_discard_write_zeroes`: little-endian whatever the
/// device's byte order (the spec says so).
pub fn encode_range(sector: u64, nr_sectors: u32, flags: u32) -> [u8; RANGE_BYTES] {
    let mut r = [0u8; RANGE_BYTES];
    r[0..8].copy_from_slice(&sector.to_le_bytes());
    r[8..12].copy_from_slice(&nr_sectors.to_le_bytes());
    r[12..16].copy_from_slice(&flags.to_le_bytes());
    r
}

/// The ranges of a multi-range request (discards the block layer merged
/// from several bios, up to the device's `max_discard_seg`), given as
/// (first sector, sectors), one [`encode_range`] after the other in `out`,
/// which they must fill exactly (the driver sizes it from the request's
/// segment count): the number of ranges, or `None` when there were more or
/// fewer ranges than `out` holds, or none.
pub fn encode_ranges(
    ranges: impl IntoIterator<Item = (u64, u32)>,
    flags: u32,
    out: &mut [u8],
) -> Option<usize> {
    if out.is_empty() || out.len() % RANGE_BYTES != 0 {
        return None;
    }
    let mut slots = out.chunks_exact_mut(RANGE_BYTES);
    let mut n = 0;
    for (sector, nr_sectors) in ranges {
        slots
            .next()?
            .copy_from_slice(&encode_range(sector, nr_sectors, flags));
        n += 1;
    }
    (slots.next().is_none()).then_some(n)
}
