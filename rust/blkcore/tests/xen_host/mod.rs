// SPDX-License-Identifier: GPL-2.0

//! A host for the Xen data path in integration tests: guest memory with
//! contents, a grant table that knows which grants the backend maps, a
//! backend that carries out the requests it finds on the ring against a
//! disk, and a rig that drives `DataPath` the way the kernel driver does
//! (granted before the ring lock without bounce frames, mapped and granted
//! under it with them).

use std::collections::BTreeMap;

use blkcore::blkif::{
    BlkifRequestSegment,
    BlkifResponse,
    Request as WireRequest,
    BLKIF_OP_READ,
    BLKIF_RSP_OKAY,
    SEGS_PER_INDIRECT_FRAME, //
};
use blkcore::datapath::pregrant::PreGranted;
use blkcore::datapath::{
    map_request,
    wire_segments,
    DataPath,
    Drained,
    Geometry,
    Memory,
    MemoryError,
    OutOfMemory,
    QueueError,
    Request,
    Status,
    Storage, //
};
use blkcore::grants::{
    GrantError,
    GrantOps,
    GrantRef, //
};
use blkcore::mapping::{
    MappedSegment,
    Piece, //
};
use blkcore::negotiate::{
    Discard,
    FlushKind,
    Negotiated, //
};
use blkcore::ring::{
    FrontRing,
    SharedRing,
    SliceRing, //
};

pub const PAGE: usize = 4096;
/// Frames 0..DATA_FRAMES are the requests' data pages; the data path's own
/// frames (bounce frames, indirect pages) come after them.
pub const DATA_FRAMES: u32 = 64;
/// The virtual device handle of the rig's disk.
pub const HANDLE: u16 = 7;

/// [`Storage`] on the heap.
pub struct VecStorage;

impl Storage for VecStorage {
    type Buf<T> = Vec<T>;

    fn buf<T>(len: usize, f: impl FnMut() -> T) -> Result<Vec<T>, OutOfMemory> {
        Ok(std::iter::repeat_with(f).take(len).collect())
    }
}

/// One live grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub frame: u32,
    pub readonly: bool,
    /// The backend maps it now.
    pub mapped: bool,
}

/// Guest memory and its grant table.
pub struct Host {
    pub frames: Vec<Vec<u8>>,
    pub grants: BTreeMap<GrantRef, Grant>,
    next: GrantRef,
    /// Grant references left (`None`: unlimited).
    pub refs_left: Option<u32>,
    /// Grants ended while the backend still mapped them (deferred).
    pub deferred: u32,
    /// Grants ended in all.
    pub ended: u32,
    /// The backend maps every grant as soon as it exists (a hostile one).
    pub map_on_grant: bool,
}

impl Host {
    pub fn new(frames: usize) -> Self {
        Self {
            frames: vec![vec![0u8; PAGE]; frames],
            grants: BTreeMap::new(),
            next: 100,
            refs_left: None,
            deferred: 0,
            ended: 0,
            map_on_grant: false,
        }
    }

    /// Fills frame `f` with `byte`.
    pub fn fill(&mut self, f: u32, byte: u8) {
        self.frames[f as usize].fill(byte);
    }
}

impl GrantOps for Host {
    type Frame = u32;

    fn grant(&mut self, frame: u32, readonly: bool) -> Result<GrantRef, GrantError> {
        assert!(
            (frame as usize) < self.frames.len(),
            "grant of frame {frame}"
        );
        if let Some(left) = &mut self.refs_left {
            *left = left.checked_sub(1).ok_or(GrantError::NoGrantRefs)?;
        }
        self.next += 1;
        self.grants.insert(
            self.next,
            Grant {
                frame,
                readonly,
                mapped: self.map_on_grant,
            },
        );
        Ok(self.next)
    }

    fn try_end_access(&mut self, gref: GrantRef) -> bool {
        let g = self
            .grants
            .get(&gref)
            .expect("end of a grant that is not live");
        if g.mapped {
            return false;
        }
        self.grants.remove(&gref);
        self.ended += 1;
        true
    }

    fn end_access(&mut self, gref: GrantRef) {
        let g = self
            .grants
            .remove(&gref)
            .expect("end of a grant that is not live");
        self.ended += 1;
        if g.mapped {
            self.deferred += 1;
        }
    }
}

impl Memory for Host {
    fn frame_in_page(&self, page: u32, frame_offset: u32) -> u32 {
        page + frame_offset / PAGE as u32
    }

    fn copy(
        &mut self,
        src: u32,
        src_off: u32,
        dst: u32,
        dst_off: u32,
        len: u32,
    ) -> Result<(), MemoryError> {
        let (so, d_o, len) = (src_off as usize, dst_off as usize, len as usize);
        assert!(
            so + len <= PAGE && d_o + len <= PAGE,
            "copy outside a frame"
        );
        let bytes = self.frames[src as usize][so..so + len].to_vec();
        self.frames[dst as usize][d_o..d_o + len].copy_from_slice(&bytes);
        Ok(())
    }

    fn write(&mut self, dst: u32, off: u32, bytes: &[u8]) -> Result<(), MemoryError> {
        let off = off as usize;
        assert!(off + bytes.len() <= PAGE, "write outside a frame");
        self.frames[dst as usize][off..off + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }
}

/// A backend that carries out each request against `disk` and answers it.
pub struct Backend {
    pub disk: Vec<u8>,
    req_cons: u32,
    /// Keep every grant mapped after answering (a persistent backend).
    pub keep_mapped: bool,
    /// Every request seen, in order.
    pub seen: Vec<WireRequest>,
}

impl Backend {
    pub fn new(sectors: usize) -> Self {
        Self {
            disk: vec![0u8; sectors * 512],
            req_cons: 0,
            keep_mapped: false,
            seen: Vec::new(),
        }
    }

    /// The frame behind `gref`, mapping it (it must be live).
    fn map(host: &mut Host, gref: GrantRef) -> Grant {
        let g = host
            .grants
            .get_mut(&gref)
            .unwrap_or_else(|| panic!("the request names grant {gref}, which is not live"));
        g.mapped = true;
        *g
    }

    /// The data segments of `r` (reading indirect pages through their
    /// grants), and the grants the request made the backend map.
    fn segments(
        host: &mut Host,
        r: &WireRequest,
    ) -> (u64, Vec<BlkifRequestSegment>, Vec<GrantRef>) {
        match r {
            WireRequest::ReadWrite(rw) => {
                let segs = rw.seg[..usize::from(rw.nr_segments)].to_vec();
                (rw.sector_number, segs, Vec::new())
            }
            WireRequest::Indirect(ind) => {
                let n = u32::from(ind.nr_segments);
                let pages = n.div_ceil(SEGS_PER_INDIRECT_FRAME) as usize;
                let mut segs = Vec::new();
                for (p, &gref) in ind.indirect_grefs[..pages].iter().enumerate() {
                    let frame = Self::map(host, gref).frame as usize;
                    let here = (n as usize - p * 512).min(512);
                    for i in 0..here {
                        let d = &host.frames[frame][i * 8..i * 8 + 8];
                        segs.push(BlkifRequestSegment::decode(d));
                    }
                }
                (
                    ind.sector_number,
                    segs,
                    ind.indirect_grefs[..pages].to_vec(),
                )
            }
            _ => (0, Vec::new(), Vec::new()),
        }
    }

    /// Carries out every request pushed since the last call, answering
    /// each with `status(request)` (data moves only for `OKAY`), and
    /// publishes the responses. Returns how many.
    pub fn answer(
        &mut self,
        host: &mut Host,
        ring: &mut SliceRing<'_>,
        size: u32,
        mut status: impl FnMut(&WireRequest) -> i16,
    ) -> u32 {
        let prod = ring.load_req_prod();
        let mut rsp_prod = ring.load_rsp_prod();
        let mut n = 0;
        while self.req_cons != prod {
            let r = WireRequest::decode(&ring.read_request(self.req_cons & (size - 1)));
            self.req_cons = self.req_cons.wrapping_add(1);
            let st = status(&r);
            let (sector, segs, mut used) = Self::segments(host, &r);
            let op = r.response_operation();
            let mut at = sector as usize * 512;
            for s in &segs {
                let g = Self::map(host, s.gref);
                used.push(s.gref);
                let off = usize::from(s.first_sect) * 512;
                let len = s.byte_len().expect("segment within its frame") as usize;
                let frame = &mut host.frames[g.frame as usize];
                if st == BLKIF_RSP_OKAY {
                    if op == BLKIF_OP_READ {
                        assert!(!g.readonly, "a read into a read-only grant");
                        frame[off..off + len].copy_from_slice(&self.disk[at..at + len]);
                    } else {
                        self.disk[at..at + len].copy_from_slice(&frame[off..off + len]);
                    }
                }
                at += len;
            }
            if !self.keep_mapped {
                for g in used {
                    if let Some(g) = host.grants.get_mut(&g) {
                        g.mapped = false;
                    }
                }
            }
            let rsp = BlkifResponse {
                id: r.id(),
                operation: op,
                status: st,
                ..BlkifResponse::default()
            };
            ring.write_response(rsp_prod & (size - 1), &rsp);
            rsp_prod = rsp_prod.wrapping_add(1);
            self.seen.push(r);
            n += 1;
        }
        ring.store_rsp_prod(rsp_prod);
        n
    }
}

/// Negotiated parameters for a mode: `persistent` (implies copies),
/// `copy` (bounce frames: an untrusted backend), `indirect` segments (0:
/// direct only), flush kind, discard.
pub fn negotiated(
    persistent: bool,
    copy: bool,
    indirect: u32,
    flush: Option<FlushKind>,
    discard: bool,
) -> Negotiated {
    Negotiated {
        queues: 1,
        ring_page_order: 0,
        ring_pages: 1,
        persistent,
        indirect_segments: indirect,
        segments_per_request: if indirect == 0 { 11 } else { indirect },
        flush,
        discard: discard.then_some(Discard {
            granularity: 4096,
            alignment: 0,
            secure: true,
        }),
        sectors: 1 << 16,
        info: 0,
        sector_size: 512,
        physical_sector_size: 512,
        minimum_io_size: None,
        optimal_io_size: None,
        copy_data: persistent || copy,
        ignored: Default::default(),
    }
}

/// A data path on a one-page ring with its host, backend and caller state.
pub struct Rig {
    pub dp: DataPath<VecStorage, u32, u32>,
    pub host: Host,
    pub backend: Backend,
    pub front: FrontRing,
    pub ring_mem: Vec<u8>,
    pub pre: PreGranted<VecStorage>,
    pub mapped: Vec<MappedSegment<u32>>,
    /// Requests ended, in order.
    pub done: Vec<(u32, Status)>,
}

impl Rig {
    pub fn new(n: Negotiated) -> Self {
        let mut ring_mem = vec![0u8; PAGE];
        let mut front = FrontRing::new(1).unwrap();
        front.init_shared(&mut SliceRing::new(&mut ring_mem));
        let geo = Geometry::new(&n, front.size(), wire_segments(&n, 512));
        let nframes = geo.frames(n.copy_data);
        let frames: Vec<u32> = (0..nframes as u32).map(|i| DATA_FRAMES + i).collect();
        let dp = DataPath::new(&n, geo, HANDLE, &frames, 0).unwrap();
        let pre = dp.new_pregranted().unwrap();
        let unset = MappedSegment {
            page: 0,
            frame_offset: 0,
            first_sect: 0,
            last_sect: 0,
        };
        Self {
            dp,
            host: Host::new(DATA_FRAMES as usize + nframes),
            backend: Backend::new(1 << 12),
            front,
            ring_mem,
            pre,
            mapped: vec![unset; geo.wire_max as usize],
            done: Vec::new(),
        }
    }

    /// Queues request `tag` on `pieces` (none for flush and discard) as
    /// the kernel driver does.
    pub fn submit(
        &mut self,
        tag: u32,
        req: Request,
        pieces: &[Piece<u32>],
    ) -> Result<(), QueueError> {
        let mut ring = SliceRing::new(&mut self.ring_mem);
        let rw = matches!(req, Request::Read { .. } | Request::Write { .. });
        let r = if self.dp.grants_before_lock() {
            // As the kernel: room first, nothing granted for a request
            // the ring would send back.
            if rw && !self.dp.has_room(&self.front) {
                return Err(QueueError::Busy);
            }
            self.pre.begin(&mut self.host, &req);
            match self
                .pre
                .grant_pieces(&mut self.host, pieces.iter().map(|p| Ok::<_, ()>(*p)))
            {
                Ok(()) => self.dp.queue_granted(
                    &mut self.host,
                    &mut self.front,
                    &mut ring,
                    tag,
                    req,
                    &mut self.pre,
                ),
                Err(e) => {
                    self.pre.end_unsent(&mut self.host);
                    return Err(e);
                }
            }
        } else {
            let segs = map_request(pieces, &mut self.mapped)?;
            self.dp
                .queue(&mut self.host, &mut self.front, &mut ring, tag, req, segs)
        };
        r.map_err(|(back, e)| {
            assert_eq!(back, tag, "the refused request comes back");
            e
        })
    }

    /// Makes the queued requests visible to the backend.
    pub fn push(&mut self) {
        let mut ring = SliceRing::new(&mut self.ring_mem);
        if self.front.push_requests_and_check_notify(&mut ring) {
            self.dp.notified();
        }
    }

    /// The backend answers what was pushed with `status(request)`.
    pub fn answer(&mut self, status: impl FnMut(&WireRequest) -> i16) -> u32 {
        let size = self.front.size();
        let mut ring = SliceRing::new(&mut self.ring_mem);
        self.backend.answer(&mut self.host, &mut ring, size, status)
    }

    /// The interrupt handler's pass; ended requests go to `done`.
    pub fn drain(&mut self) -> Drained {
        let mut ring = SliceRing::new(&mut self.ring_mem);
        let done = &mut self.done;
        self.dp
            .drain(&mut self.host, &mut self.front, &mut ring, &mut |t, s| {
                done.push((t, s))
            })
    }

    /// Push, answer everything with `status`, drain.
    pub fn run(&mut self, status: i16) -> Drained {
        self.push();
        self.answer(|_| status);
        self.drain()
    }

    /// Puts a response the backend made up on the ring.
    pub fn inject(&mut self, rsp: BlkifResponse) {
        let size = self.front.size();
        let mut ring = SliceRing::new(&mut self.ring_mem);
        let prod = ring.load_rsp_prod();
        ring.write_response(prod & (size - 1), &rsp);
        ring.store_rsp_prod(prod.wrapping_add(1));
    }
}

/// `n` whole data pages from `first`.
pub fn pages(first: u32, n: u32) -> Vec<Piece<u32>> {
    (first..first + n)
        .map(|page| Piece {
            page,
            offset: 0,
            len: PAGE as u32,
        })
        .collect()
}

/// The operation a wire request asks for (`indirect_op` for indirect).
pub fn op_of(r: &WireRequest) -> u8 {
    r.response_operation()
}
