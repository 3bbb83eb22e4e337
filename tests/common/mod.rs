//! Shared helpers of the integration tests: real ZooKeeper servers only.
#![allow(dead_code)]

use std::time::Duration;

use zklock::testing::TestingServer;
use zklock::{Client, Lockable, Options};

pub fn server() -> TestingServer {
    TestingServer::start()
        .expect("start a real ZooKeeper server (scripts/install-deps.sh installs it)")
}

pub fn opts(session_ms: u64) -> Options {
    Options::default()
        .session_timeout(Duration::from_millis(session_ms))
        .connect_timeout(Duration::from_secs(10))
}

pub fn connect(hosts: &str, session_ms: u64) -> Client {
    Client::connect(hosts, opts(session_ms)).expect("connect")
}

#[allow(unused_imports)]
pub use zklock::testing::eventually;

/// A fresh lock path per call: `/t/<name>-<pid>-<n>`.
pub fn unique_path(name: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "/t/{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The children of `path` as seen by a fresh observer session (names only).
pub fn children(hosts: &str, path: &str) -> Vec<String> {
    let c = connect(hosts, 4000);
    let m = zklock::Mutex::new(&c, path).unwrap();
    m.participants()
        .unwrap()
        .into_iter()
        .map(|p| p.node)
        .collect()
}
