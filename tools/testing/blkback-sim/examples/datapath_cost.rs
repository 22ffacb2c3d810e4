// SPDX-License-Identifier: GPL-2.0

//! The workload of `tools/testing/bench/datapath-instructions.sh`: fills the
//! ring with writes of `SEGS` one-frame segments and drains it, `ROUNDS`
//! times, through the data path the kernel driver runs (blkcore) against
//! the simulated blkback. The script counts blkcore's instructions per
//! request under callgrind; this program only does the work.
//!
//! Usage: `datapath_cost p0|p1 SEGS [ROUNDS]` (p1: persistent grants).

use blkback_sim::backend::BackendConfig;
use blkback_sim::frontend::FrontendConfig;
use blkback_sim::harness::{
    Sim,
    SimConfig, //
};

fn main() {
    let mut args = std::env::args().skip(1);
    let persistent = match args.next().as_deref() {
        Some("p0") => false,
        Some("p1") => true,
        _ => {
            eprintln!("usage: datapath_cost p0|p1 SEGS [ROUNDS]");
            std::process::exit(2);
        }
    };
    let segs: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(32);
    let rounds: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let front = FrontendConfig {
        feature_persistent: persistent,
        trusted: true,
        max_indirect_segments: segs.max(32),
        ring_pages: 1,
        start_idx: 0,
    };
    let back = BackendConfig {
        persistent,
        sectors: 1 << 22,
        ..BackendConfig::default()
    };
    let mut sim = Sim::new(
        SimConfig {
            front,
            back,
            guest_frames: 40_000,
        },
        1,
    );
    for _ in 0..rounds {
        if let Err(e) = sim.fill_ring(segs) {
            eprintln!("datapath_cost: {e:?}");
            std::process::exit(1);
        }
    }
    println!(
        "requests {} segments {}",
        sim.stats.completed,
        sim.stats.completed * u64::from(segs)
    );
}
