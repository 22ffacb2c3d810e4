// SPDX-License-Identifier: GPL-2.0

//! Disk names and sizes as the C drivers print them: `vda`, `vdaa`
//! (virtio_blk's `virtblk_name_format`), `xvda`, `xvdb3` (xen-blkfront's
//! `xlvbd_alloc_gendisk` + `encode_disk_name`), the Xen virtual-device
//! number layout (`xen_translate_vdev`), and "1.07 GB/1.00 GiB" sizes
//! (`string_get_size`). Both drivers name disks with [`disk_name`].

use core::fmt;

/// A disk name: a prefix, bijective base-26 letters, an optional partition
/// number. At most 32 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskName {
    buf: [u8; 32],
    len: usize,
}

impl DiskName {
    /// The name.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(self.buf.get(..self.len).unwrap_or(&[])).unwrap_or("?")
    }

    fn push(&mut self, b: u8) -> Option<()> {
        *self.buf.get_mut(self.len)? = b;
        self.len = self.len.saturating_add(1);
        Some(())
    }
}

impl fmt::Display for DiskName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `prefix` + the letters of disk `index` (a..z, aa..zz, aaa..: bijective
/// base 26) + `partition` in decimal unless 0. `None` if it would not fit.
pub fn disk_name(prefix: &str, index: u32, partition: u32) -> Option<DiskName> {
    let mut name = DiskName {
        buf: [0; 32],
        len: 0,
    };
    for &b in prefix.as_bytes() {
        name.push(b)?;
    }
    let mut letters = [0u8; 8];
    let mut nl = 0;
    let mut n = index;
    loop {
        // `n % 26` is below 26: no overflow (the kernel has overflow
        // checks, and a panic path there is what objtool warns about).
        *letters.get_mut(nl)? = b'a'.wrapping_add((n % 26) as u8);
        nl = nl.saturating_add(1);
        if n < 26 {
            break;
        }
        n = (n / 26).saturating_sub(1);
    }
    for &l in letters.get(..nl)?.iter().rev() {
        name.push(l)?;
    }
    if partition != 0 {
        let mut digits = [0u8; 10];
        let mut nd = 0;
        let mut p = partition;
        while p > 0 {
            *digits.get_mut(nd)? = b'0'.wrapping_add((p % 10) as u8);
            nd = nd.saturating_add(1);
            p /= 10;
        }
        for &d in digits.get(..nd)?.iter().rev() {
            name.push(d)?;
        }
    }
    Some(name)
}

/// Minors per disk for the classic vdevice numbers.
pub const XEN_PARTS_PER_DISK: u32 = 16;
/// Minors per disk for extended (`1 << 28 | n`) vdevice numbers.
pub const XEN_PARTS_PER_EXT_DISK: u32 = 256;
const XEN_EXT_SHIFT: u32 = 28;

/// Where a Xen vdevice number puts the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VdevLayout {
    /// Minor of the vbd (whole disk or partition).
    pub minor: u32,
    /// Disk index (`xvda` = 0).
    pub index: u32,
    /// Minors per disk.
    pub parts: u32,
}

impl VdevLayout {
    /// The partition this vbd names (0: the whole disk).
    pub fn partition(&self) -> u32 {
        self.minor.checked_rem(self.parts).unwrap_or(0)
    }
}

/// `xen_translate_vdev` for classic numbers (IDE, SCSI and xvd majors),
/// extended numbers as they are; `None` for numbers upstream rejects.
pub fn xen_vdev_layout(vdevice: u32) -> Option<VdevLayout> {
    let (minor, index, parts) = match vdevice >> XEN_EXT_SHIFT {
        0 => {
            let major = vdevice >> 8;
            let minor = vdevice & 0xff;
            let scsi = |k: u32| {
                (
                    minor + k * 16 * XEN_PARTS_PER_DISK,
                    minor / XEN_PARTS_PER_DISK + k * 16,
                )
            };
            let (minor, index) = match major {
                3 => (minor / 64 * XEN_PARTS_PER_DISK, minor / 64),
                22 => ((minor / 64 + 2) * XEN_PARTS_PER_DISK, minor / 64 + 2),
                8 => (minor, minor / XEN_PARTS_PER_DISK),
                65..=71 => scsi(major - 65 + 1),
                128..=135 => scsi(major - 128 + 8),
                202 => (minor, minor / XEN_PARTS_PER_DISK),
                _ => return None,
            };
            (minor, index, XEN_PARTS_PER_DISK)
        }
        1 => {
            let minor = vdevice & !(1 << XEN_EXT_SHIFT);
            (
                minor,
                minor / XEN_PARTS_PER_EXT_DISK,
                XEN_PARTS_PER_EXT_DISK,
            )
        }
        _ => return None,
    };
    Some(VdevLayout {
        minor,
        index,
        parts,
    })
}

/// The name upstream xen-blkfront gives the disk of `vdevice`.
pub fn xen_disk_name(vdevice: u32) -> Option<DiskName> {
    let l = xen_vdev_layout(vdevice)?;
    disk_name("xvd", l.index, l.partition())
}

/// First minor and number of minors upstream gives the disk of `vdevice`
/// under major 202: a whole disk gets its partitions' minors, a vbd that
/// names a partition gets one; `None` for extended numbers and past
/// `fixed_minors` (those get dynamic numbers).
pub fn xvd_minors(vdevice: u32, fixed_minors: u32) -> Option<(u32, u32)> {
    let l = xen_vdev_layout(vdevice)?;
    let count = if l.partition() == 0 { l.parts } else { 1 };
    (l.minor.checked_add(count)? <= fixed_minors && count <= 64).then_some((l.minor, count))
}

/// The minor bits of a device number (`MINORBITS`).
const MINOR_BITS: u32 = 20;

/// First minor and number of minors upstream gives the disk of an
/// extended `vdevice` (libxl's ids from the 17th disk on, `1 << 28 |
/// disk << 8`) under major 202: a whole disk's 256, when they lie above
/// `fixed_minors` (the classic numbers' range) and within the minor bits;
/// `None` otherwise, and for a vbd that names a partition (those get
/// dynamic numbers).
pub fn xvd_ext_minors(vdevice: u32, fixed_minors: u32) -> Option<(u32, u32)> {
    if vdevice >> XEN_EXT_SHIFT != 1 {
        return None;
    }
    let l = xen_vdev_layout(vdevice)?;
    let end = l.minor.checked_add(l.parts)?;
    (l.partition() == 0 && l.minor >= fixed_minors && end <= 1 << MINOR_BITS)
        .then_some((l.minor, l.parts))
}

/// Why an HVM guest leaves a vbd to the emulated disk (upstream's
/// `blkfront_probe` guards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HvmRefusal {
    /// The emulated IDE/SCSI disks were not unplugged and the vbd names one
    /// of their majors: binding it would give two drivers one disk.
    EmulatedDiskNotUnplugged {
        /// The vbd's classic major (3, 8, 22, 65.., ...).
        major: u32,
    },
    /// A CD-ROM vbd: an HVM guest keeps its emulated CD-ROM.
    Cdrom,
    /// The frontend has no `device-type` node.
    NoDeviceType,
}

impl fmt::Display for HvmRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmulatedDiskNotUnplugged { major } => write!(
                f,
                "HVM guest with its emulated disks not unplugged: vbd of major {major} left to them"
            ),
            Self::Cdrom => write!(f, "HVM guest: a CD-ROM vbd is left to the emulated drive"),
            Self::NoDeviceType => write!(f, "HVM guest: no device-type for this vbd"),
        }
    }
}

/// Upstream's HVM guards for `vdevice`: `pv_and_legacy` is
/// `xen_has_pv_and_legacy_disk_devices()` (emulated disks still plugged),
/// `device_type` the frontend's `device-type` node. Only for HVM (and PVH)
/// guests; a PV guest binds every vbd.
pub fn hvm_refusal(
    vdevice: u32,
    pv_and_legacy: bool,
    device_type: Option<&[u8]>,
) -> Option<HvmRefusal> {
    if pv_and_legacy && vdevice >> XEN_EXT_SHIFT == 0 {
        let major = vdevice >> 8;
        if major != XENVBD_MAJOR {
            return Some(HvmRefusal::EmulatedDiskNotUnplugged { major });
        }
    }
    match device_type {
        None => Some(HvmRefusal::NoDeviceType),
        Some(t) if t.starts_with(b"cdrom") => Some(HvmRefusal::Cdrom),
        Some(_) => None,
    }
}

/// The block major of xvd disks (`XENVBD_MAJOR`).
pub const XENVBD_MAJOR: u32 = 202;

/// `string_get_size()`-like "1.07 GB" / "1.00 GiB" rendering of `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HumanSize {
    /// The size.
    pub bytes: u64,
    /// Powers of 1024 (KiB, MiB, ...) rather than 1000.
    pub binary: bool,
}

impl fmt::Display for HumanSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DEC: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
        const BIN: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
        let div: u64 = if self.binary { 1024 } else { 1000 };
        let (mut unit, mut scale) = (0usize, 1u64);
        while self.bytes / scale >= div && unit < 6 {
            scale *= div;
            unit += 1;
        }
        let units = if self.binary { &BIN } else { &DEC };
        let name = units.get(unit).copied().unwrap_or("?");
        if unit == 0 {
            return write!(f, "{} B", self.bytes);
        }
        // Three significant digits, rounded (no 128-bit division: the
        // kernel has no __udivti3).
        let (mut i, rem) = (self.bytes / scale, self.bytes % scale);
        let mut frac = (rem + scale / 200) / (scale / 100);
        if frac >= 100 {
            i += 1;
            frac -= 100;
        }
        if i >= 100 {
            write!(f, "{} {}", i + u64::from(frac >= 50), name)
        } else if i >= 10 {
            let mut tenths = (frac + 5) / 10;
            if tenths == 10 {
                i += 1;
                tenths = 0;
            }
            write!(f, "{}.{} {}", i, tenths, name)
        } else {
            write!(f, "{}.{:02} {}", i, frac, name)
        }
    }
}
