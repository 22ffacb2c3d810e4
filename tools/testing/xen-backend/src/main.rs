// SPDX-License-Identifier: GPL-2.0

//! `blkif-backend`: a userspace blkif backend for one vbd, run in dom0 in
//! place of xen-blkback to test frontends against a backend that can
//! misbehave on purpose. It creates the vbd itself (frontend
//! and backend xenstore nodes, as a toolstack's block-attach does), speaks
//! the xenbus handshake, maps rings and data grants through gntdev, and
//! serves requests from a file.
//!
//!   blkif-backend --list
//!   blkif-backend --domid D --devid V --file F [--size MiB] [--queues N]
//!                 [--ring-order N] [--persistent 0|1] [--indirect N]
//!                 [--physical-sector-size N] [--info VDISK_FLAGS] [--misbehave NAME]
//!                 [--request-ms N] [--flush-ms N] [--discard-ms N] [--restart]
//!
//! `--list` prints one scenario a line, its name then what a frontend
//! must show when it strikes (`scenario::list_line`); without
//! `--misbehave` the backend behaves. `--request-ms`, `--flush-ms` and
//! `--discard-ms` make it honest but slow: each read or write, flush or
//! barrier, discard answered that many ms after it was served.
//! `--restart` takes over the vbd a killed backend process left (the
//! nodes stay, the backend goes back to InitWait and the frontend
//! reconnects), as a restarted userspace backend or driver domain does. Writing anything to the backend
//! node's `test-stop` detaches the vbd as `xl block-detach` does (Closing,
//! the frontend closes, nodes removed) and ends the process; the counters
//! are published in its `test-stats` node (see `io::Stats::line`), and its
//! `test-fired` node says what the misbehaviour did once it has struck.

mod backend;
mod io;
mod ring;
mod scenario;
mod xen;

use std::process::ExitCode;
use std::time::Duration;

use backend::{Backend, Config};

fn usage() -> ExitCode {
    eprintln!(
        "usage: blkif-backend --list\n       blkif-backend --domid D --devid V --file F [--size MiB] \
         [--queues N] [--ring-order N] [--persistent 0|1] [--indirect N] \
         [--physical-sector-size N] [--info VDISK_FLAGS] [--misbehave NAME] \
         [--request-ms N] [--flush-ms N] [--discard-ms N] [--restart]"
    );
    ExitCode::from(2)
}

fn parse(args: &[String]) -> Result<Config, String> {
    let mut c = Config::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a}: missing value"))
        };
        let num = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{a}: '{v}' is not a number"))
        };
        match a.as_str() {
            "--domid" => c.domid = num(val()?)? as u32,
            "--devid" => c.devid = num(val()?)? as u32,
            "--file" => c.file = val()?,
            "--size" => c.size_mib = Some(num(val()?)?),
            "--queues" => c.max_queues = num(val()?)? as u32,
            "--ring-order" => c.max_ring_order = num(val()?)? as u32,
            "--persistent" => c.features.persistent = num(val()?)? != 0,
            "--indirect" => c.features.max_indirect = num(val()?)? as u32,
            "--physical-sector-size" => c.physical_sector_size = num(val()?)? as u32,
            "--info" => c.info = num(val()?)? as u32,
            "--restart" => c.restart = true,
            "--request-ms" => c.slow.request = Duration::from_millis(num(val()?)?),
            "--flush-ms" => c.slow.flush = Duration::from_millis(num(val()?)?),
            "--discard-ms" => c.slow.discard = Duration::from_millis(num(val()?)?),
            "--misbehave" => {
                let v = val()?;
                c.scenario = Some(
                    scenario::by_name(&v)
                        .ok_or_else(|| format!("no scenario '{v}' (see --list)"))?,
                );
            }
            _ => return Err(format!("unknown argument '{a}'")),
        }
    }
    if c.domid == 0 || c.devid == 0 || c.file.is_empty() {
        return Err("--domid, --devid and --file are required".into());
    }
    Ok(c)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--list") {
        for (name, s) in scenario::ALL {
            println!("{}", scenario::list_line(name, *s));
        }
        return ExitCode::SUCCESS;
    }
    let cfg = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("blkif-backend: {e}");
            return usage();
        }
    };
    match Backend::new(cfg).and_then(|mut b| b.run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blkif-backend: {e}");
            ExitCode::FAILURE
        }
    }
}
