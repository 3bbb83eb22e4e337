//! The one OS-facing module: host name, TCP_NODELAY on the session's socket, waiting on
//! async-io's poller (see `runtime`), and the process
//! rules of the `zklock` command (its command dies with it; signals go on to it).
//!
//! One module in rooms by job: [`process`] (this process's id, and the command's process
//! rules), `net` (sockets), `poll` (eventfd, ppoll, epoll) and `time` (boot time). Every
//! `unsafe` block in them carries its `// SAFETY:` line.

mod net;
mod poll;
#[allow(dead_code)]
pub(crate) mod process;
mod time;

#[cfg(test)]
pub(crate) use net::peer_of;
#[cfg(feature = "testing")]
pub(crate) use net::reset_on_close;
pub(crate) use net::{hostname, nodelay_to, set_nodelay, set_nodelay_to};
pub(crate) use poll::{epoll_watching, server_sockets_in, wait_readable, EventFd};
pub(crate) use process::process_id;
pub(crate) use time::boot_time;

/// This process's descriptors whose /proc/self/fd link starts with `prefix` ("socket:",
/// "anon_inode:[eventpoll]").
fn fds_linked_to(prefix: &str) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with(prefix))
        })
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// TLS options that accept a server certificate whatever name it was issued for
/// ([`Tls::danger_accept_any_server_name`](crate::Tls::danger_accept_any_server_name)).
#[cfg(feature = "tls")]
pub(crate) fn tls_without_server_name_check(
    o: zookeeper_client::TlsOptions,
) -> zookeeper_client::TlsOptions {
    // SAFETY: no memory-safety condition: zookeeper-client marks the call `unsafe` to flag the
    // man-in-the-middle risk, which `Tls::danger_accept_any_server_name` documents and logs.
    unsafe { o.with_no_hostname_verification() }
}
