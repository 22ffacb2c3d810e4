// SPDX-License-Identifier: GPL-2.0

//! The frontend's private ring indices as the driver reads them back
//! (after attaching to a ring whose indices are not 0, and across the
//! wrap of the free-running `u32`).

use blkcore::blkif::BlkifResponse;
use blkcore::ring::{
    FrontRing,
    SharedRing,
    SliceRing, //
};

#[test]
fn indices_follow_requests_and_responses_from_where_they_start() {
    for start in [100u32, u32::MAX - 1] {
        let mut mem = vec![0u8; 4096];
        let mut ring = SliceRing::new(&mut mem);
        let mut front = FrontRing::attach(1, start).unwrap();
        ring.store_req_prod(start);
        ring.store_rsp_prod(start);
        assert_eq!((front.req_prod_pvt(), front.rsp_cons()), (start, start));
        for _ in 0..3 {
            front.put_request(&mut ring, &[0u8; 112]).unwrap();
        }
        assert_eq!(front.req_prod_pvt(), start.wrapping_add(3));
        front.push_requests_and_check_notify(&mut ring);
        // The backend answers two of them.
        for i in 0..2u32 {
            let slot = start.wrapping_add(i) & (front.size() - 1);
            ring.write_response(slot, &BlkifResponse::default());
        }
        ring.store_rsp_prod(start.wrapping_add(2));
        let rp = front.response_prod(&mut ring).unwrap();
        while front.take_response(&ring, rp).is_some() {}
        assert_eq!(front.rsp_cons(), start.wrapping_add(2), "start {start}");
        assert_eq!(front.in_flight(), 1);
    }
}

#[test]
fn a_response_to_every_slot_at_once_is_accepted() {
    let mut mem = vec![0u8; 4096];
    let mut ring = SliceRing::new(&mut mem);
    let mut front = FrontRing::new(1).unwrap();
    front.init_shared(&mut ring);
    let size = front.size();
    for _ in 0..size {
        front.put_request(&mut ring, &[0u8; 112]).unwrap();
    }
    front.push_requests_and_check_notify(&mut ring);
    ring.store_rsp_prod(size);
    assert_eq!(front.response_prod(&mut ring), Ok(size));
    ring.store_rsp_prod(size + 1);
    assert!(
        front.response_prod(&mut ring).is_err(),
        "one more than the ring"
    );
}
