//! The integration tests' one support module: real ZooKeeper servers only (one per test
//! process, [`hosts`], where the test does not fault its server; a private one, [`server`],
//! where it does), one [`connect`], fresh lock paths, child processes that die with the test
//! ([`ChildGuard`]). `history` proves exclusion across processes; `ffi` builds the C library
//! for the C tests.
#![allow(dead_code)]

pub mod ffi;
pub mod history;

use std::ops::{Deref, DerefMut};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::Duration;

use zklock::testing::{Admin, TestingServer};
use zklock::{Client, Lockable, Options, Protocol};

#[allow(unused_imports)]
pub use zklock::testing::eventually;

/// The shared server's address, for tests that fault nothing.
pub fn hosts() -> String {
    shared().connect_string()
}

/// The server the tests that fault nothing share: the one named by `ZKLOCK_TEST_SERVER`
/// (scripts/run-tests.sh starts one for its run), else the one of this target directory,
/// started by the first test that needs it (tools/testing_server.rs `--while-used`: it ends a
/// minute after its last use), so that `cargo nextest run` starts one JVM, not one per test.
pub fn shared() -> &'static TestingServer {
    static SERVER: std::sync::OnceLock<TestingServer> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| {
        let named = std::env::var("ZKLOCK_TEST_SERVER").ok();
        let addr = match named.filter(|a| !a.is_empty()) {
            Some(addr) => addr,
            None => target_dir_server(),
        };
        TestingServer::attach(&addr).unwrap_or_else(|e| panic!("the shared server {addr}: {e}"))
    })
}

/// The address of this target directory's shared server, started if none runs.
fn target_dir_server() -> String {
    // This process uses the server until it ends (the kernel lets go of the lock then).
    static USER: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    let dir = ffi::profile_dir().join("zklock-test-server");
    let (address, user) = server_while_used(&dir, Duration::from_secs(60));
    let _ = USER.set(user);
    address
}

/// The address of the `--while-used` server of `dir`, started if none runs (ending `idle`
/// after its last user's start once no process uses it), and this process's use of it: the
/// server does not end while any process holds such a file (a shared lock on `dir/users`).
pub fn server_while_used(dir: &std::path::Path, idle: Duration) -> (String, std::fs::File) {
    use std::time::Instant;
    std::fs::create_dir_all(dir).unwrap();
    let lock = std::fs::File::create(dir.join("lock")).unwrap();
    // Held to the end of this function: one starter at a time, and the server ends only
    // under it (never between our read of its address and our use of it).
    lock.lock().unwrap();
    std::fs::write(dir.join("used"), b"").unwrap();
    let user = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("users"))
        .unwrap();
    user.lock_shared().unwrap();
    let address = dir.join("address");
    if let Ok(addr) = std::fs::read_to_string(&address) {
        if TestingServer::attach(addr.trim()).is_ok() {
            return (addr.trim().to_string(), user);
        }
    }
    let bin = ffi::profile_dir().join("examples").join("testing_server");
    assert!(
        bin.exists(),
        "{} is built by `cargo nextest run` (or `cargo test`) with --features testing",
        bin.display()
    );
    let out = dir.join("server.out");
    // Never waited for: it outlives this test process, which is why it was started.
    #[allow(clippy::zombie_processes)]
    Command::new(&bin)
        .arg("--while-used")
        .arg(dir)
        .arg("--idle")
        .arg(idle.as_secs().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
        // Its own process group: a test's end (or Ctrl-C in the terminal) does not end it.
        .process_group(0)
        .spawn()
        .expect("start tools/testing_server.rs");
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if let Some((addr, _)) = text.split_once('\n') {
            std::fs::write(&address, addr).unwrap();
            return (addr.to_string(), user);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the shared server did not start: {}",
            std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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

/// "At once", for a call that must not wait for a holder (a try-once acquire, a cancelled
/// one): one session timeout of the tests' sessions. Such a call takes a few round trips,
/// which on a loaded machine can take seconds (a cancel whose node delete took 2.5 s failed a
/// bound of 500 ms); a call that waits for the holder never ends while the test holds.
pub const AT_ONCE: Duration = Duration::from_secs(5);

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

/// A fresh lock path right under the root, `/<name>-<pid>-<n>`: for a lock made under a
/// creator-only ACL, whose missing parents are made creator-only too (under `/t` they would
/// lock every other identity out of every other test's paths on a shared server).
pub fn unique_root(name: &str) -> String {
    unique_path(name).replacen("/t/", "/", 1)
}

/// The children of `path` as seen by a fresh observer session (names only).
pub fn children(hosts: &str, path: &str) -> Vec<String> {
    nodes(&connect(hosts, 4000), path)
}

/// The node names under `path`, as the session `observer` sees them.
pub fn nodes(observer: &Client, path: &str) -> Vec<String> {
    let queue = zklock::Mutex::new(observer, path)
        .unwrap()
        .participants()
        .unwrap();
    queue.into_iter().map(|p| p.node).collect()
}

/// Panics with every message if any check failed (so one run reports all of them).
pub fn report(failures: Vec<String>) {
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The `demo` example (`examples/demo.rs`) of this build: a worker process that takes a lock.
pub fn demo_binary() -> PathBuf {
    // target/<profile>/deps/<test> -> target/<profile>/examples/demo
    let p = ffi::profile_dir().join("examples").join("demo");
    assert!(p.exists(), "build the demo example first: {}", p.display());
    p
}

/// A child process of a test that dies with the test: when the guard is dropped (also when
/// the test panics) a child still running is killed (SIGKILL) and reaped, so that a failing
/// test leaves no process behind (nor anything the child holds open). Derefs to the
/// [`Child`].
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    /// Waits for the child's end and collects its output, as [`Child::wait_with_output`].
    pub fn wait_with_output(mut self) -> std::io::Result<Output> {
        self.0.take().expect("the child").wait_with_output()
    }
}

impl Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("the child")
    }
}

impl DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// How a test starts a child process: [`Command::spawn`], the child held in a [`ChildGuard`].
pub trait SpawnGuarded {
    /// Spawns the command (panics naming the program if it cannot start).
    fn spawn_guarded(&mut self) -> ChildGuard;
}

impl SpawnGuarded for Command {
    fn spawn_guarded(&mut self) -> ChildGuard {
        match self.spawn() {
            Ok(child) => ChildGuard(Some(child)),
            Err(e) => panic!("spawn {:?}: {e}", self.get_program()),
        }
    }
}

/// The ephemeral nodes at and under `path` (full paths), as `admin` sees them: what lock
/// attempts leave behind.
pub fn ephemerals_under(admin: &Admin, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    if admin
        .node(path)
        .unwrap()
        .is_some_and(|n| n.ephemeral_owner != 0)
    {
        out.push(path.to_string());
    }
    for c in admin.children(path).unwrap() {
        out.extend(ephemerals_under(admin, &format!("{path}/{c}")));
    }
    out
}

/// A deadline that runs out inside a request, on a healthy server, is a timeout (issue 28):
/// `lock` is tried with tiny deadlines (1 µs, 1 ms, now), on a free lock and on one `holder`
/// (another client's participant) holds, and every try is `Ok(None)` or, if its one round trip
/// found the lock free, `Ok(Some)` — never an error, never held while `holder` holds. Nothing
/// of the tries is left under `root` once they are done (an attempt abandoned with its create
/// in flight is forgotten in the background: waited for).
pub fn tiny_deadlines_are_timeouts_never_errors(
    hosts: &str,
    root: &str,
    lock: &dyn Lockable,
    holder: &dyn Lockable,
) {
    use std::time::Instant;
    use zklock::Deadline;
    type Tiny = fn() -> Deadline;
    let deadlines: [(&str, Tiny); 3] = [
        ("1 µs", || Deadline::after(Duration::from_micros(1))),
        ("1 ms", || Deadline::after(Duration::from_millis(1))),
        ("now", || Deadline::At(Instant::now())),
    ];
    let mut held = 0;
    for busy in [false, true] {
        if busy {
            holder.acquire(Deadline::Forever).unwrap().unwrap();
        }
        for _ in 0..5 {
            for (name, d) in &deadlines {
                match lock.acquire(d()) {
                    Ok(Some(_)) => {
                        assert!(!busy, "{root}: held with {name} while another holds it");
                        held += 1;
                        lock.release().unwrap();
                    }
                    Ok(None) => {}
                    Err(e) => panic!(
                        "{root}: a deadline of {name} on a {} lock: Err({e:?}), not a timeout",
                        if busy { "held" } else { "free" }
                    ),
                }
            }
        }
        if busy {
            holder.release().unwrap();
        }
    }
    eprintln!("{root}: {held} of 15 tries on the free lock held it");
    let admin = admin(hosts);
    assert!(
        eventually(Duration::from_secs(30), || ephemerals_under(&admin, root)
            .is_empty()),
        "left under {root}: {:?}",
        ephemerals_under(&admin, root)
    );
}

/// Runs each task a raw zookeeper-client session spawns (its I/O) on a thread of its own: for
/// tests that open a plain session of the crate, beside zklock's.
pub struct ThreadSpawner;

impl spawns_core::Spawn for ThreadSpawner {
    fn spawn(&self, task: spawns_core::Task) {
        std::thread::spawn(move || {
            let _scope = spawns_core::enter(&ThreadSpawner);
            futures::executor::block_on(Box::into_pin(task.future));
        });
    }
}

/// Two believers, watched: runs `acquire` (another client's acquire of a lock a first client
/// held when its fault began) on a thread of its own, and looks at `held` (the first client's
/// `is_held`) every millisecond meanwhile and for 2 s after `acquire` returned. Returns what
/// `acquire` returned, when, and the last instant `held` said true (taken before the look).
pub fn watch_believer<T: Send>(
    acquire: impl FnOnce() -> T + Send,
    held: impl Fn() -> bool,
) -> (T, std::time::Instant, Option<std::time::Instant>) {
    use std::time::Instant;
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            let r = acquire();
            (r, Instant::now())
        });
        let mut last_held = None;
        let mut look = || {
            let t = Instant::now();
            if held() {
                last_held = Some(t);
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        while !other.is_finished() {
            look();
        }
        let (r, at) = other.join().unwrap();
        while Instant::now() < at + Duration::from_secs(2) {
            look();
        }
        (r, at, last_held)
    })
}

/// Fails unless the first client's last belief (`last_held`) came before the other client
/// acquired (`at`); says both, in ms after `since` (the fault), either way.
pub fn stopped_believing_in_time(
    what: &str,
    since: std::time::Instant,
    last_held: Option<std::time::Instant>,
    at: std::time::Instant,
) {
    let ms = |i: std::time::Instant| i.saturating_duration_since(since).as_millis();
    eprintln!(
        "{what}: A last said Held at {:?} ms, B acquired at {} ms",
        last_held.map(ms),
        ms(at)
    );
    if let Some(h) = last_held {
        assert!(
            h < at,
            "{what}: A still said Held {} ms after B acquired",
            h.duration_since(at).as_millis()
        );
    }
}
