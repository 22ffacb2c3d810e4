// SPDX-License-Identifier: GPL-2.0

//! A grant pool reports the mode it was built with.

use blkcore::grants::{
    GrantMode,
    GrantPool,
    PoolEntry, //
};

#[test]
fn a_pool_reports_its_mode() {
    let modes = [(true, true), (false, true), (false, false)];
    for (persistent, copy_data) in modes {
        let mode = GrantMode {
            persistent,
            copy_data,
        };
        let entries: Vec<PoolEntry<u32>> = (0..4).map(PoolEntry::new).collect();
        let pool = GrantPool::new(entries, mode).unwrap();
        assert_eq!(pool.mode(), mode);
        assert_eq!(pool.copy_data(), copy_data);
        assert_eq!((pool.capacity(), pool.available()), (4, 4));
    }
}
