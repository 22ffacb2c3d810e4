// SPDX-License-Identifier: GPL-2.0

//! `virtio-blk-backend`: a vhost-user-blk device that serves a raw file to
//! one QEMU guest and can misbehave on purpose, to test virtio-blk drivers
//! against a device that does not keep to the spec.
//!
//!   virtio-blk-backend --list
//!   virtio-blk-backend --socket PATH --file IMG [--misbehave NAME]
//!                      [--fired FILE] [--queues N]
//!                      [--flush-ms N] [--discard-ms N] [--request-ms N]
//!
//! `--list` prints one scenario a line, its name then what a driver must
//! show when it strikes (`scenario::list_line`). Otherwise the device
//! listens on PATH, serves one vhost-user connection (QEMU's
//! `-chardev socket,path=PATH -device vhost-user-blk-pci,...`, with guest
//! RAM shared) and exits 0 when QEMU disconnects. Without `--misbehave` it
//! behaves; with it, once the scenario strikes, `fired NAME` is appended
//! to FILE and printed on stderr. `--flush-ms` and `--discard-ms` make a
//! device that behaves but is slow: it answers each flush, or each
//! discard and write-zeroes, OK but only N ms after taking it (not with
//! `--misbehave`: the scenarios' expectations assume a prompt device).

mod blk;
mod channel;
mod config;
mod request;
mod scenario;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use vhost_user_backend::VhostUserDaemon;
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};

use blk::{log, Blk, Options};

fn usage() -> ExitCode {
    eprintln!(
        "usage: virtio-blk-backend --list\n       virtio-blk-backend --socket PATH --file IMG \
         [--misbehave NAME] [--fired FILE] [--queues N]\n                          \
         [--flush-ms N] [--discard-ms N] [--request-ms N]"
    );
    ExitCode::from(2)
}

/// The options and the socket's path.
fn parse(args: &[String]) -> Result<(Options, PathBuf), String> {
    let mut socket = None;
    let mut file = None;
    let mut opts = Options {
        file: PathBuf::new(),
        scenario: None,
        fired: None,
        queues: 2,
        flush_delay: Duration::ZERO,
        discard_delay: Duration::ZERO,
        request_delay: Duration::ZERO,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{a}: missing value"))
        };
        match a.as_str() {
            "--socket" => socket = Some(PathBuf::from(val()?)),
            "--file" => file = Some(PathBuf::from(val()?)),
            "--fired" => opts.fired = Some(PathBuf::from(val()?)),
            "--queues" => {
                let v = val()?;
                opts.queues =
                    v.parse::<u16>().ok().filter(|&n| n >= 1).ok_or_else(|| {
                        format!("--queues: '{v}' is not a number from 1 to 65535")
                    })?;
            }
            "--flush-ms" => opts.flush_delay = millis(a, &val()?)?,
            "--discard-ms" => opts.discard_delay = millis(a, &val()?)?,
            "--request-ms" => opts.request_delay = millis(a, &val()?)?,
            "--misbehave" => {
                let v = val()?;
                opts.scenario = Some(
                    scenario::by_name(&v)
                        .ok_or_else(|| format!("no scenario '{v}' (see --list)"))?,
                );
            }
            _ => return Err(format!("unknown argument '{a}'")),
        }
    }
    let (Some(socket), Some(file)) = (socket, file) else {
        return Err("--socket and --file are required".into());
    };
    if opts.scenario.is_some()
        && !(opts.flush_delay.is_zero()
            && opts.discard_delay.is_zero()
            && opts.request_delay.is_zero())
    {
        return Err(
            "--flush-ms, --discard-ms and --request-ms are for a device without --misbehave".into(),
        );
    }
    opts.file = file;
    Ok((opts, socket))
}

/// The value of a `--*-ms` option.
fn millis(opt: &str, v: &str) -> Result<Duration, String> {
    v.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| format!("{opt}: '{v}' is not a number of milliseconds"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--list") {
        for (name, s) in scenario::ALL {
            println!("{}", scenario::list_line(name, *s));
        }
        return ExitCode::SUCCESS;
    }
    let (opts, socket) = match parse(&args) {
        Ok(v) => v,
        Err(e) => {
            log(&e);
            return usage();
        }
    };
    let dev = match Blk::new(&opts) {
        Ok(d) => d,
        Err(e) => {
            log(&format!("{}: {e}", opts.file.display()));
            return ExitCode::FAILURE;
        }
    };
    let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
    let mut daemon =
        match VhostUserDaemon::new("virtio-blk-backend".into(), Arc::new(RwLock::new(dev)), mem) {
            Ok(d) => d,
            Err(e) => {
                log(&format!("daemon: {e}"));
                return ExitCode::FAILURE;
            }
        };
    // Listens, serves the one connection and returns when QEMU hangs up
    // (a disconnect is not an error).
    match daemon.serve(&socket) {
        Ok(()) => {
            log("QEMU disconnected");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log(&format!("{}: {e}", socket.display()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &str) -> Vec<String> {
        a.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn slow_device_options() {
        let (o, _) = parse(&args("--socket s --file f --flush-ms 40000 --discard-ms 5")).unwrap();
        assert_eq!(o.flush_delay, Duration::from_secs(40));
        assert_eq!(o.discard_delay, Duration::from_millis(5));
        assert!(parse(&args("--socket s --file f --flush-ms x")).is_err());
        // Slow, or misbehaving: not both.
        assert!(parse(&args("--socket s --file f --misbehave stall --flush-ms 1")).is_err());
        assert!(parse(&args("--socket s --file f --misbehave stall --flush-ms 0")).is_ok());
    }
}
