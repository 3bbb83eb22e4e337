//! The integration tests' one support module: real ZooKeeper servers only (one per test
//! process, [`hosts`], where the test does not fault its server; a private one, [`server`],
//! where it does), one [`connect`], fresh lock paths. `history` proves exclusion across
//! processes; `ffi` builds the C library for the C tests.
#![allow(dead_code)]

pub mod ffi;
pub mod history;

use std::time::Duration;

use zklock::testing::{Admin, TestingServer};
use zklock::{Client, Lockable, Options, Protocol};

#[allow(unused_imports)]
pub use zklock::testing::eventually;

/// The test process's shared server (started on first use; killed when the process ends).
pub fn hosts() -> String {
    TestingServer::shared().connect_string()
}

/// A server of the test's own, for a test that kills, pauses or restarts it.
pub fn server() -> TestingServer {
    TestingServer::start()
        .expect("start a real ZooKeeper server (scripts/install-deps.sh installs it)")
}

/// The tests' options: this session timeout, a connect timeout a loaded machine never misses.
pub fn opts(session_ms: u64) -> Options {
    Options::default()
        .session_timeout(Duration::from_millis(session_ms))
        .connect_timeout(Duration::from_secs(15))
}

/// How a test connects: a session timeout in ms, a protocol (6 s sessions), or whole options.
pub trait Connect {
    fn options(self) -> Options;
}

impl Connect for u64 {
    fn options(self) -> Options {
        opts(self)
    }
}

impl Connect for Protocol {
    fn options(self) -> Options {
        opts(6000).protocol(self)
    }
}

impl Connect for Options {
    fn options(self) -> Options {
        self
    }
}

/// The one connect of the tests.
pub fn connect(hosts: &str, how: impl Connect) -> Client {
    Client::connect(hosts, how.options()).expect("connect")
}

/// A raw session to inspect or change nodes behind the locks' backs.
pub fn admin(hosts: &str) -> Admin {
    Admin::connect(hosts).expect("admin session")
}

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
