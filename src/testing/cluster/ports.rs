//! Loopback ports for the members.

use std::io;
use std::net::TcpListener;

use crate::testing::free_port;

/// The kernel's range of ports for outgoing connections (`ip_local_port_range`).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().filter_map(|v| v.parse().ok());
            Some((it.next()?, it.next()?))
        })
        .unwrap_or((32768, 60999))
}

/// A free loopback port for a member to listen on, outside the range the kernel takes ports of
/// outgoing connections from: a member that is killed and restarted binds its ports again, and
/// meanwhile one of the many connections a test makes could otherwise have taken one (the
/// restart then fails with "address in use"). Never handed out twice in this process.
pub(super) fn member_port() -> io::Result<u16> {
    let (lo, hi) = ephemeral_range();
    let below = 10_000u16..lo.max(10_000);
    let above = hi.saturating_add(1).max(10_000)..u16::MAX;
    let range = if below.len() >= above.len() {
        below
    } else {
        above
    };
    if range.len() < 100 {
        return free_port();
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0) as usize
        ^ (std::process::id() as usize).wrapping_mul(2_654_435_761);
    for k in 0..range.len() {
        let port = range.start + ((seed + k * 7919) % range.len()) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        let mut used = crate::testing::USED_PORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if used.insert(port) {
            return Ok(port);
        }
    }
    free_port()
}

/// A listener on a free loopback port, and the port.
pub(super) fn bind_free() -> io::Result<(TcpListener, u16)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    let port = l.local_addr()?.port();
    Ok((l, port))
}
