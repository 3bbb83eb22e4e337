//! Sockets: this host's name, a socket's peer, TCP_NODELAY on the session's socket, and the
//! test proxy's connection reset.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use super::fds_linked_to;

/// This host's name (for the default holder id).
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is a valid writable buffer of the given length; gethostname writes at most
    // that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_string();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

pub(crate) fn peer_of(fd: i32) -> Option<SocketAddr> {
    // SAFETY: sockaddr_storage is plain data; zeroed is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: ss is a valid, writable sockaddr_storage and len holds its size.
    let rc = unsafe {
        libc::getpeername(
            fd,
            (&mut ss as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin: &libc::sockaddr_in =
                unsafe { &*(&ss as *const libc::sockaddr_storage).cast() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6: &libc::sockaddr_in6 =
                unsafe { &*(&ss as *const libc::sockaddr_storage).cast() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(sin6.sin6_port))))
        }
        _ => None,
    }
}

/// Sets TCP_NODELAY on every TCP socket of this process whose peer is one of `servers`.
///
/// Why: zookeeper-client does not set it, so a request written right behind another one (an
/// acquire's create and children listing) waits for the first reply (Nagle + delayed ACK) and
/// costs two round trips instead of one. The crate gives us no handle on its socket, so we find
/// it by its peer address. Setting the option on another client's socket to the same server is
/// harmless. Returns how many sockets were set.
pub(crate) fn set_nodelay_to(servers: &[SocketAddr]) -> usize {
    fds_linked_to("socket:")
        .into_iter()
        .filter(|&fd| peer_of(fd).is_some_and(|p| servers.contains(&p)))
        .filter(|&fd| set_nodelay(fd))
        .count()
}

/// Sets the socket option `level`/`name` of `fd` to `value` (a plain C value: `c_int`,
/// `linger`); false if it could not be set.
fn set_option<T: Copy>(fd: i32, level: libc::c_int, name: libc::c_int, value: T) -> bool {
    // SAFETY: setsockopt(2) on any descriptor number is memory-safe (a wrong one fails with
    // EBADF or ENOTSOCK); the option value points to a live `T` of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    rc == 0
}

/// Sets TCP_NODELAY on the socket `fd`; false if it could not be set.
pub(crate) fn set_nodelay(fd: i32) -> bool {
    set_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1 as libc::c_int)
}

/// Makes closing the socket `fd` reset the connection (SO_LINGER on, 0 s: the peer reads
/// ECONNRESET, not an orderly end). For the test proxy's connection-reset fault.
#[cfg(feature = "testing")]
pub(crate) fn reset_on_close(fd: i32) -> bool {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    set_option(fd, libc::SOL_SOCKET, libc::SO_LINGER, linger)
}

/// Whether TCP_NODELAY is set on the process's sockets to `server` (for tests and benches).
pub fn nodelay_to(server: SocketAddr) -> Vec<bool> {
    let mut out = Vec::new();
    for fd in fds_linked_to("socket:") {
        if peer_of(fd) != Some(server) {
            continue;
        }
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: fd is an open socket; v and len are valid for writing.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc == 0 {
            out.push(v != 0);
        }
    }
    out
}
