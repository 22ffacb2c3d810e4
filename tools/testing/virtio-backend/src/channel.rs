// SPDX-License-Identifier: GPL-2.0

//! The backend request channel (`VHOST_USER_SET_BACKEND_REQ_FD`), used
//! here for one message: `VHOST_USER_BACKEND_CONFIG_CHANGE_MSG`.
//!
//! The vhost crate hands the channel over as a `vhost::vhost_user::Backend`,
//! which can send shared-object and shmem messages but not a config change
//! and does not give its socket out. The socket is found again among this
//! process's file descriptors instead: it is the one unnamed unix stream
//! socket that was not open before the daemon started (the vhost-user
//! connection itself carries the listener's path), and a duplicate of it
//! sends the message.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::os::fd::{BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;

use vhost::vhost_user::Backend;

/// `VHOST_USER_BACKEND_CONFIG_CHANGE_MSG` (`VHOST_USER_SLAVE_CONFIG_CHANGE_MSG`
/// in QEMU 7.2).
const CONFIG_CHANGE_MSG: u32 = 2;

/// The vhost-user protocol version in a message's flags.
const VERSION: u32 = 1;

/// The socket inodes open in this process, by descriptor.
fn socket_fds() -> Vec<(RawFd, u64)> {
    let Ok(dir) = fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) else {
            continue;
        };
        let Ok(target) = fs::read_link(e.path()) else {
            continue;
        };
        let t = target.to_string_lossy();
        if let Some(ino) = t
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
            .and_then(|s| s.parse::<u64>().ok())
        {
            out.push((fd, ino));
        }
    }
    out
}

/// The sockets open before any connection, which the channel is not.
pub fn sockets_before() -> HashSet<u64> {
    socket_fds().into_iter().map(|(_, ino)| ino).collect()
}

/// The backend request channel of the current connection.
pub struct Channel {
    sock: UnixStream,
    /// Keeps the vhost crate's end, and so the descriptor found, open.
    _backend: Backend,
}

impl Channel {
    /// Finds the socket under `backend`: unnamed at both ends, and not in
    /// `before` nor in `seen` (the channels of earlier
    /// `SET_BACKEND_REQ_FD`s). The newest such socket if there are
    /// several.
    pub fn find(backend: Backend, before: &HashSet<u64>, seen: &mut HashSet<u64>) -> Option<Self> {
        let mut best: Option<(u64, UnixStream)> = None;
        for (fd, ino) in socket_fds() {
            if before.contains(&ino) || seen.contains(&ino) {
                continue;
            }
            // SAFETY: the descriptor is only duplicated, never closed
            // here; if it was closed since it was listed the duplicate
            // fails, and whatever a reused number now holds is checked
            // below before it is used.
            let Ok(owned) = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned() else {
                continue;
            };
            let s = UnixStream::from(owned);
            let unnamed = |a: io::Result<std::os::unix::net::SocketAddr>| {
                a.map(|a| a.is_unnamed()).unwrap_or(false)
            };
            if !unnamed(s.local_addr()) || !unnamed(s.peer_addr()) {
                continue;
            }
            if best.as_ref().is_none_or(|(b, _)| ino > *b) {
                best = Some((ino, s));
            }
        }
        let (ino, sock) = best?;
        seen.insert(ino);
        Some(Channel {
            sock,
            _backend: backend,
        })
    }

    /// Tells the frontend that the configuration space changed; it reads
    /// it again with `VHOST_USER_GET_CONFIG`. No reply is asked for
    /// (`REPLY_ACK` is not offered).
    pub fn config_changed(&mut self) -> io::Result<()> {
        let mut msg = [0u8; 12];
        msg[0..4].copy_from_slice(&CONFIG_CHANGE_MSG.to_le_bytes());
        msg[4..8].copy_from_slice(&VERSION.to_le_bytes());
        // msg[8..12]: a payload of 0 bytes.
        self.sock.write_all(&msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_change_message_is_a_bare_header() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut c = Channel {
            sock: a,
            _backend: Backend::from_stream(UnixStream::pair().unwrap().0),
        };
        c.config_changed().unwrap();
        let mut buf = [0u8; 12];
        std::io::Read::read_exact(&mut b, &mut buf).unwrap();
        assert_eq!(buf, [2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn finds_a_new_unnamed_pair() {
        let before = sockets_before();
        let (a, _b) = UnixStream::pair().unwrap();
        let mut seen = HashSet::new();
        // Both ends are new and unnamed; either one will do for the test.
        let c = Channel::find(Backend::from_stream(a), &before, &mut seen);
        assert!(c.is_some());
        assert_eq!(seen.len(), 1);
    }
}
