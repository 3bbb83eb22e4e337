//! Waiting: an eventfd, ppoll on a socket and it, and finding async-io's epoll instance and
//! the server sockets it watches (see `runtime`).

use std::net::SocketAddr;

use super::fds_linked_to;
use super::net::peer_of;

/// An eventfd: a counter that another thread bumps to wake a [`wait_readable`].
pub(crate) struct EventFd(std::os::fd::OwnedFd);

impl EventFd {
    /// None when the process is out of descriptors (callers then wait another way).
    pub(crate) fn new() -> Option<EventFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: eventfd(2) has no memory-safety preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        Some(EventFd(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }))
    }

    /// Wakes the thread waiting on this eventfd (or its next wait).
    pub(crate) fn signal(&self) {
        use std::os::fd::AsRawFd;
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one` to an eventfd we own. A full counter (EAGAIN)
        // already means "signalled".
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn drain(&self) {
        use std::os::fd::AsRawFd;
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into `v`; the eventfd is non-blocking.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// Blocks until `fd` is readable, `ev` is signalled, or `timeout` passes (None: no limit).
/// Returns (fd readable, ev signalled); `ev` is reset. `fd` may have been closed meanwhile:
/// poll(2) then reports it invalid (counted as readable: the caller looks and moves on).
pub(crate) fn wait_readable(
    fd: Option<i32>,
    ev: &EventFd,
    timeout: Option<std::time::Duration>,
) -> (bool, bool) {
    use std::os::fd::AsRawFd;
    let mut fds = [
        libc::pollfd {
            fd: ev.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: fd.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let n = if fd.is_some() { 2 } else { 1 };
    // SAFETY: fds holds `n` valid pollfd entries; the timespec (if any) lives across the call;
    // no signal mask is passed.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            n,
            ts.as_ref()
                .map_or(std::ptr::null(), |t| t as *const libc::timespec),
            std::ptr::null(),
        )
    };
    if rc <= 0 {
        return (false, false);
    }
    let signalled = fds[0].revents != 0;
    if signalled {
        ev.drain();
    }
    (n == 2 && fds[1].revents != 0, signalled)
}

/// The descriptors that the epoll instance `epfd` watches (its /proc/self/fdinfo lines
/// `tfd: N ...`).
fn epoll_targets(epfd: i32) -> Option<Vec<i32>> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{epfd}")).ok()?;
    Some(
        info.lines()
            .filter_map(|l| l.strip_prefix("tfd:"))
            .filter_map(|r| r.split_whitespace().next()?.parse().ok())
            .collect(),
    )
}

/// A duplicate of the (first) epoll descriptor of this process that watches `fd`. Used to
/// find async-io's poller, which a probe source of ours was just registered with.
pub(crate) fn epoll_watching(fd: std::os::fd::RawFd) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let n = fds_linked_to("anon_inode:[eventpoll]")
        .into_iter()
        .find(|&ep| epoll_targets(ep).is_some_and(|t| t.contains(&fd)))?;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a descriptor just listed as open.
    let dup = unsafe { libc::fcntl(n, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return None;
    }
    // SAFETY: dup is a new descriptor that nothing else owns.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(dup) })
}

/// The sockets connected to one of `servers` among the descriptors that the epoll instance
/// `epfd` watches (from /proc/self/fdinfo); None if that cannot be read or it watches more
/// than `limit` descriptors.
pub(crate) fn server_sockets_in(
    epfd: std::os::fd::BorrowedFd<'_>,
    servers: &[SocketAddr],
    limit: usize,
) -> Option<Vec<i32>> {
    use std::os::fd::AsRawFd;
    let targets = epoll_targets(epfd.as_raw_fd())?;
    if targets.len() > limit {
        return None;
    }
    Some(
        targets
            .into_iter()
            .filter(|&fd| peer_of(fd).is_some_and(|p| servers.contains(&p)))
            .collect(),
    )
}
