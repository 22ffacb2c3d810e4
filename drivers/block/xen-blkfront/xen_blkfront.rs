// SPDX-License-Identifier: GPL-2.0

//! Xen block frontend in Rust (`xen_blkfront_rs`).
//!
//! Binds xenbus devices of type `vbd` and exposes them as blk-mq disks.
//! Every decision (ring and segment limits, persistent grants, whether data is
//! copied, queue limits) is made by `blkcore`; this crate is the glue. All
//! `unsafe` is in `rust/xen` (xenbus, grants, rings, event channels) and
//! `rust/blkmq` (block layer).

#![deny(unsafe_code)]

use core::sync::atomic::Ordering;

use kernel::prelude::*;

#[path = "../../../rust/blkcore/src/tree.rs"]
#[expect(
    dead_code,
    unreachable_pub,
    reason = "blkcore is a crate of its own on the host, whose API is public; each module uses its own part of it"
)]
mod blkcore;

#[path = "../../../rust/xen/xen.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    unreachable_pub,
    reason = "an abstraction's API is public, as in the kernel crate"
)]
mod xen;

#[path = "../../../rust/blkmq/blkmq.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "shared by both modules (each uses its own part; RqList is the virtio driver's); an abstraction's API is public"
)]
mod blkmq;

#[path = "../../../rust/param/param.rs"]
#[allow(unsafe_code, reason = "the abstractions, where all unsafe code lives")]
#[expect(
    unreachable_pub,
    reason = "an abstraction's API is public, as in the kernel crate"
)]
mod param;

mod conn;
mod datapath;
mod disk;
mod fault;
mod front;
mod ring;
mod xenstore_keys;

module! {
    type: XenBlkfront,
    name: "xen_blkfront_rs",
    authors: ["blkfront-rs developers"],
    description: "Xen virtual block device frontend (Rust)",
    license: "GPL",
    // Upstream xen-blkfront's aliases: the xenbus device type (what udev
    // and the initramfs load by), the old module name and the block major.
    alias: ["xen:vbd", "xenblk", "block-major-202-*"],
}

param::sysfs_params! {
    /// Segments per request we offer (upstream's name, default and
    /// permissions for each parameter).
    max_indirect_segments: u32 = 32, 0o444,
        "Maximum segments per request: the smaller of this and the backend's feature-max-indirect-segments is used; 11 or less disables indirect descriptors (default 32, like xen-blkfront)";
    /// Rings per disk we offer.
    max_queues: u32 = 4, 0o444,
        "Maximum number of hardware queues/rings per virtual disk (default 4, capped at the number of online CPUs)";
    /// Ring pages we offer, as an order.
    max_ring_page_order: u32 = 0, 0o444,
        "Maximum order of pages of each shared ring (default 0, max 4)";
    /// Writable, as upstream: read each time the frontend connects.
    feature_persistent: bool = true, 0o644,
        "Offer persistent grants to the backend (default true; writable, applies from the next connection)";
    /// Writable, as upstream: read each time the frontend connects.
    trusted: bool = true, 0o644,
        "Trust the backend with direct access to I/O pages; false bounces all data (default true; writable, applies from the next connection)";
    /// Ours: upstream has no request timeout and waits for ever.
    give_up_after_ms: u32 = 0, 0o644,
        "0 (default): a backend that answers nothing, however long, is waited for, like xen-blkfront; N: a ring with requests in flight that answered none for N ms is given up on, its requests and new ones fail until the backend reconnects (checked at each io_timeout: after N to N + io_timeout ms). Removing the disk gives up on a ring silent for one io_timeout, whatever this says (writable)";
}

/// Module parameters as `blkcore` inputs; `persistent` is the
/// `feature-persistent` published to this backend.
pub(crate) fn frontend_params(
    trusted_node: bool,
    persistent: bool,
) -> blkcore::negotiate::FrontendParams {
    let cpus = xen::num_online_cpus().max(1);
    blkcore::negotiate::FrontendParams {
        max_indirect_segments: params::max_indirect_segments.value(),
        max_queues: params::max_queues.value().min(cpus),
        max_ring_page_order: params::max_ring_page_order.value(),
        feature_persistent: persistent,
        trusted: trusted_node,
    }
}

#[pin_data]
struct XenBlkfront {
    /// Dropped first: every disk is gone before the major is released.
    #[pin]
    reg: xen::xenbus::Registration<front::Blkfront>,
    /// `202 xvd` in /proc/devices, as upstream registers it.
    _major: Option<blkmq::major::BlockMajor>,
}

impl kernel::InPlaceModule for XenBlkfront {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let avail = xen::pv_disks_available();
        pr_info!(
            "loading (max_indirect_segments={}, max_queues={}, max_ring_page_order={}, feature_persistent={})\n",
            params::max_indirect_segments.value(),
            params::max_queues.value(),
            params::max_ring_page_order.value(),
            params::feature_persistent.value(),
        );
        pin_init::pin_init_scope(move || {
            if !avail {
                pr_info!("not a Xen guest with PV disks\n");
                return Err(ENODEV);
            }
            // Before the xenbus driver: probing starts at its registration.
            let major = match blkmq::major::BlockMajor::register(disk::XENVBD_MAJOR, c"xvd") {
                Ok(m) => {
                    disk::HAVE_XENVBD_MAJOR.store(true, Ordering::Release);
                    Some(m)
                }
                Err(e) => {
                    pr_info!(
                        "major {} (xvd) is taken ({:?}; xen-blkfront loaded?): disks get dynamic device numbers\n",
                        disk::XENVBD_MAJOR,
                        e
                    );
                    None
                }
            };
            Ok(try_pin_init!(Self {
                reg <- xen::xenbus::Registration::new(),
                _major: major,
            }))
        })
    }
}

#[kunit_tests(xen_blkfront_rs)]
mod tests {
    use kernel::prelude::*;

    use super::blkcore::{
        blkif::{
            self,
            BlkifResponse, //
        },
        negotiate::{
            negotiate,
            negotiate_rings,
            FrontendParams,
            Negotiated, //
        },
        xenstore::Reason,
    };
    use super::datapath::test_hooks::TestIo;
    use super::disk::{
        disk_name,
        xvd_minors,
        Minors, //
    };
    use super::xenstore_keys::{
        handle_from_nodename,
        Snapshot, //
    };

    const GOOD: &[(&str, &str)] = &[
        ("sectors", "2097152"),
        ("info", "0"),
        ("sector-size", "512"),
        ("physical-sector-size", "4096"),
        ("feature-flush-cache", "1"),
        ("feature-persistent", "1"),
        ("feature-max-indirect-segments", "256"),
        ("max-ring-page-order", "4"),
        ("multi-queue-max-queues", "4"),
        ("minimum-io-size", "4096"),
        ("optimal-io-size", "1048576"),
    ];

    fn with(over: &[(&'static str, &'static str)]) -> Result<KVec<(&'static str, &'static str)>> {
        let mut v = KVec::new();
        for p in Iterator::chain(over.iter(), GOOD.iter()) {
            v.push(*p, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// Outer error: allocation; inner: the negotiation verdict.
    fn nego(
        pairs: &[(&'static str, &'static str)],
    ) -> Result<core::result::Result<Negotiated, Reason>> {
        let s = Snapshot::from_pairs(pairs)?;
        Ok(negotiate(&s, &FrontendParams::default()).map_err(|e| e.reason))
    }

    /// Device numbers under major 202 like `xlvbd_alloc_gendisk`, and a
    /// minor range can be held once.
    #[test]
    fn xvd_minors_and_reservation() -> Result {
        assert_eq!(xvd_minors(51712), Some((0, 16))); // xvda
        assert_eq!(xvd_minors(51728), Some((16, 16))); // xvdb
        assert_eq!(xvd_minors(51713), Some((1, 1))); // xvda1 as a disk
        assert_eq!(xvd_minors(0x800), Some((0, 16))); // sda
        assert_eq!(xvd_minors((1 << 28) | (16 << 8)), Some((4096, 256))); // xvdq
        assert_eq!(xvd_minors((1 << 28) | 256), None); // extended, classic range: dynamic
        assert_eq!(xvd_minors(2 << 28), None);
        // The top of the fixed range, unused by the test guests' disks.
        let a = Minors::reserve(4064, 16)?;
        assert_eq!(Minors::reserve(4064, 16).err(), Some(EBUSY));
        assert_eq!(Minors::reserve(4070, 1).err(), Some(EBUSY));
        let b = Minors::reserve(4080, 16)?;
        drop(a);
        let c = Minors::reserve(4070, 1)?;
        assert_eq!(Minors::reserve(4090, 16).err(), Some(EINVAL)); // past the range

        // An extended disk's 256, far above the test guests' disks.
        let d = Minors::reserve(4000 << 8, 256)?;
        assert_eq!(Minors::reserve(4000 << 8, 256).err(), Some(EBUSY));
        assert_eq!(Minors::reserve((4000 << 8) + 16, 256).err(), Some(EINVAL));
        drop((b, c, d));
        Ok(())
    }

    #[test]
    fn indirect_frame_holds_512_segments() {
        assert_eq!(blkif::SEGS_PER_INDIRECT_FRAME, 512);
        assert!(blkif::BLKIF_MAX_SEGMENTS_PER_REQUEST < blkif::SEGS_PER_INDIRECT_FRAME);
    }

    #[test]
    fn disk_names_match_upstream() -> Result {
        assert_eq!(disk_name(51712)?.as_str(), "xvda");
        assert_eq!(disk_name(51728)?.as_str(), "xvdb");
        assert_eq!(disk_name(51713)?.as_str(), "xvda1");
        assert_eq!(disk_name(768)?.as_str(), "xvda");
        assert_eq!(
            disk_name((1 << 28) | (26 * 256))
                .map_err(|_| EINVAL)?
                .as_str(),
            "xvdaa"
        );
        assert!(disk_name(0x1234).is_err());
        assert!(disk_name(3 << 28).is_err());
        Ok(())
    }

    #[test]
    fn handle_parsing() {
        assert_eq!(handle_from_nodename(b"device/vbd/51712"), Some(51712));
        assert_eq!(handle_from_nodename(b"device/vbd/x"), None);
        // xvdq: extended id 1 << 28 | 16 << 8, truncated as upstream does.
        assert_eq!(handle_from_nodename(b"device/vbd/268439552"), Some(4096));
        assert_eq!(handle_from_nodename(b"device/vbd/4294967296"), None);
    }

    #[test]
    fn snapshot_feeds_negotiation() -> Result {
        let n = nego(GOOD)?.map_err(|_| EINVAL)?;
        assert_eq!(n.sector_size, 512);
        assert_eq!(n.physical_sector_size, 4096);
        assert_eq!(n.minimum_io_size, Some(4096));
        assert_eq!(n.optimal_io_size, Some(1048576));
        assert_eq!(n.indirect_segments, 32);
        assert!(n.persistent && n.copy_data);
        Ok(())
    }

    #[test]
    fn ring_phase_needs_no_disk_keys() -> Result {
        let s = Snapshot::from_pairs(&[
            ("max-ring-page-order", "4"),
            ("multi-queue-max-queues", "2"),
        ])
        .map_err(|_| EINVAL)?;
        let p = FrontendParams {
            max_ring_page_order: 2,
            max_queues: 8,
            ..FrontendParams::default()
        };
        let n = negotiate_rings(&s, &p);
        assert_eq!((n.queues, n.ring_pages), (2, 4));
        // A broken ring key counts as absent: one page.
        let s = Snapshot::from_pairs(&[("max-ring-page-order", "-1")]).map_err(|_| EINVAL)?;
        assert_eq!(negotiate_rings(&s, &p).ring_pages, 1);
        Ok(())
    }

    /// The reason the first ignored optional key of `pairs` was ignored
    /// (the negotiation itself must succeed).
    fn ignored(pairs: &[(&'static str, &'static str)]) -> Result<Option<Reason>> {
        let n = nego(pairs)?.map_err(|_| EINVAL)?;
        Ok(n.ignored.first.map(|e| e.reason))
    }

    #[test]
    fn bad_required_keys_fail_and_bad_optional_keys_are_ignored() -> Result {
        assert_eq!(
            ignored(&with(&[("physical-sector-size", "3000")])?)?,
            Some(Reason::NotPowerOfTwo)
        );
        assert_eq!(
            ignored(&with(&[("minimum-io-size", "6144")])?)?,
            Some(Reason::NotPowerOfTwo)
        );
        assert!(ignored(&with(&[("optimal-io-size", "1000")])?)?.is_some());
        assert_eq!(
            ignored(&with(&[("feature-persistent", "yes")])?)?,
            Some(Reason::NotBoolean)
        );
        assert_eq!(ignored(GOOD)?, None);
        assert_eq!(
            nego(&with(&[("sectors", "12abc")])?)?.err(),
            Some(Reason::NotDecimal)
        );
        assert_eq!(
            nego(&[("info", "0"), ("sector-size", "512")])?.err(),
            Some(Reason::Missing)
        );
        assert!(nego(&with(&[("sector-size", "\u{fffd}")])?)?.is_err());
        Ok(())
    }

    fn rsp(id: u64, op: u8, status: i16) -> BlkifResponse {
        BlkifResponse {
            id,
            operation: op,
            status,
            ..BlkifResponse::default()
        }
    }

    #[test]
    fn bad_responses_fail_what_is_in_flight_and_disable_the_ring() -> Result {
        use super::blkcore::datapath::Drained;
        // Each kind of bad response, on a fresh data path with two
        // requests in flight: the pass reports a broken ring, and nothing
        // is left in flight or holding a grant.
        let bad = |first: u32| -> [BlkifResponse; 4] {
            [
                rsp(5000, blkif::BLKIF_OP_READ, 0),
                rsp(u64::from(first) + 7, blkif::BLKIF_OP_READ, 0),
                rsp(u64::from(first), blkif::BLKIF_OP_WRITE, 0),
                rsp(u64::MAX, blkif::BLKIF_OP_READ, 0),
            ]
        };
        for i in 0..4 {
            let n = nego(GOOD)?.map_err(|_| EINVAL)?;
            let mut io = TestIo::new(&n)?;
            let first = io.alloc(blkif::BLKIF_OP_READ, 1).ok_or(EINVAL)?;
            io.alloc(blkif::BLKIF_OP_READ, 1).ok_or(EINVAL)?;
            assert_eq!(io.in_flight(), 2);
            let r = bad(first).get(i).copied().ok_or(EINVAL)?;
            assert!(matches!(
                io.respond_and_drain(&r),
                Drained::Broken { failed: 2, .. }
            ));
            assert_eq!(io.in_flight(), 0);
            assert_eq!(io.grant_stats().in_use, 0);
        }
        // The right response completes; a duplicate breaks the ring.
        let n = nego(GOOD)?.map_err(|_| EINVAL)?;
        let mut io = TestIo::new(&n)?;
        let id = io.alloc(blkif::BLKIF_OP_READ, 1).ok_or(EINVAL)?;
        io.alloc(blkif::BLKIF_OP_READ, 1).ok_or(EINVAL)?;
        let good = rsp(u64::from(id), blkif::BLKIF_OP_READ, 0);
        assert_eq!(io.respond_and_drain(&good), Drained::Responses);
        assert_eq!(io.in_flight(), 1);
        assert!(matches!(
            io.respond_and_drain(&good),
            Drained::Broken { failed: 1, .. }
        ));
        assert_eq!(io.in_flight(), 0);
        Ok(())
    }

    #[test]
    fn frames_check_bounds_and_copy() -> Result {
        use super::xen::grant::XenPages;
        let pages = XenPages::new(2).map_err(|_| EINVAL)?;
        let mut frames = pages.frames();
        let (a, b) = (frames.next().ok_or(EINVAL)?, frames.next().ok_or(EINVAL)?);
        assert!(a.write(4090, &[0u8; 8]).is_err());
        assert!(a.write(100, b"hello").is_ok());
        assert!(a.copy_to(100, b, 4092, 5).is_err());
        assert!(a.copy_to(100, b, 200, 5).is_ok());
        let mut out = [0u8; 5];
        b.read(200, &mut out).map_err(|_| EINVAL)?;
        assert_eq!(&out, b"hello");
        // A frame never copies onto itself.
        assert!(a.copy_to(0, a, 8, 8).is_err());
        Ok(())
    }

    #[test]
    fn pages_in_blocks_are_as_many_distinct_zeroed_frames_as_asked() -> Result {
        use super::xen::grant::XenPages;
        // Two blocks of 16, then 4 and 1: every block size the loop takes.
        let pages = XenPages::new(37).map_err(|_| EINVAL)?;
        let mut frames = KVec::new();
        for f in pages.frames() {
            // Zeroed, and its own: no frame before it was this page (each
            // marks its first and last byte once read).
            let (mut head, mut tail) = ([0xffu8], [0xffu8]);
            f.read(0, &mut head).map_err(|_| EINVAL)?;
            f.read(4095, &mut tail).map_err(|_| EINVAL)?;
            assert_eq!((head, tail), ([0], [0]));
            f.write(0, &[1]).map_err(|_| EINVAL)?;
            f.write(4095, &[1]).map_err(|_| EINVAL)?;
            frames.push(f, GFP_KERNEL)?;
        }
        assert_eq!(frames.len(), 37);
        for (i, a) in frames.iter().enumerate() {
            assert!(frames.iter().skip(i + 1).all(|b| b != a));
        }
        assert_eq!(XenPages::new(0).map_err(|_| EINVAL)?.frames().count(), 0);
        Ok(())
    }

    #[test]
    fn unknown_status_is_an_io_error_not_a_panic() -> Result {
        use super::blkcore::datapath::Status;
        let n = nego(GOOD)?.map_err(|_| EINVAL)?;
        let mut io = TestIo::new(&n)?;
        for op in [
            blkif::BLKIF_OP_FLUSH_DISKCACHE,
            blkif::BLKIF_OP_READ,
            blkif::BLKIF_OP_WRITE,
        ] {
            let id = io.alloc(op, 0).ok_or(EINVAL)?;
            assert_eq!(
                io.complete(&rsp(u64::from(id), op, 0x7fff)),
                Ok(Status::IoErr)
            );
        }
        assert!(io.flushes());
        // Named once, for the first of them (the hostile backend's
        // "unknown-status" scenario checks the line).
        assert_eq!(
            io.notes().unknown_status,
            Some((0x7fff, blkif::BLKIF_OP_FLUSH_DISKCACHE))
        );
        assert_eq!(io.notes().unknown_status, None);
        Ok(())
    }

    #[test]
    fn refused_flush_and_discard_turn_the_feature_off() -> Result {
        use super::blkcore::datapath::Status;
        let eopnotsupp = -2;
        let n = nego(&with(&[("feature-discard", "1")])?)?.map_err(|_| EINVAL)?;
        let mut io = TestIo::new(&n)?;
        assert!(io.flushes() && io.discards());
        // A failed empty flush is an error, and the feature stays.
        let id = io.alloc(blkif::BLKIF_OP_FLUSH_DISKCACHE, 0).ok_or(EINVAL)?;
        let r = rsp(u64::from(id), blkif::BLKIF_OP_FLUSH_DISKCACHE, -1);
        assert_eq!(io.complete(&r), Ok(Status::IoErr));
        assert!(io.flushes());
        // An unsupported one completes (nothing to flush at a backend that
        // cannot) and later flushes no longer go out.
        let id = io.alloc(blkif::BLKIF_OP_FLUSH_DISKCACHE, 0).ok_or(EINVAL)?;
        let r = rsp(u64::from(id), blkif::BLKIF_OP_FLUSH_DISKCACHE, eopnotsupp);
        assert_eq!(io.complete(&r), Ok(Status::Ok));
        assert!(!io.flushes());
        // A refused discard ends EOPNOTSUPP and turns discard off.
        let id = io.alloc(blkif::BLKIF_OP_DISCARD, 0).ok_or(EINVAL)?;
        let r = rsp(u64::from(id), blkif::BLKIF_OP_DISCARD, eopnotsupp);
        assert_eq!(io.complete(&r), Ok(Status::NotSupp));
        assert!(!io.discards());
        Ok(())
    }

    #[test]
    fn block_requests_map_to_ring_requests_with_their_fua_flag() {
        use super::blkcore::datapath::Request;
        use super::blkmq::ReqOp;
        use super::disk::ring_request;
        assert_eq!(
            ring_request(ReqOp::Write, true, 8, 8),
            Some(Request::Write {
                sector: 8,
                fua: true
            })
        );
        assert_eq!(
            ring_request(ReqOp::Write, false, 8, 8),
            Some(Request::Write {
                sector: 8,
                fua: false
            })
        );
        assert_eq!(
            ring_request(ReqOp::Flush, false, 0, 0),
            Some(Request::Flush)
        );
        assert_eq!(
            ring_request(ReqOp::SecureErase, false, 8, 16),
            Some(Request::Discard {
                sector: 8,
                nr_sectors: 16,
                secure: true
            })
        );
        assert_eq!(ring_request(ReqOp::WriteZeroes, false, 0, 8), None);
    }
}
