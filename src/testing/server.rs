//! A single standalone ZooKeeper server.

use std::io;
use std::path::{Path, PathBuf};

use super::{
    base_config, four_letter_at, free_port, wait_serving, ServerProcess, FOUR_LETTER_TIMEOUT,
};

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// A real standalone ZooKeeper server on a free `127.0.0.1` port with a temporary data
/// directory, for tests (like Curator's `TestingServer`).
///
/// Dropping it kills the server (SIGKILL) and removes the data directory.
///
/// ```no_run
/// let server = zklock::testing::TestingServer::start().unwrap();
/// println!("connect to {}", server.connect_string());
/// ```
pub struct TestingServer {
    port: u16,
    dir: tempfile::TempDir,
    cfg: PathBuf,
    log: PathBuf,
    process: Option<ServerProcess>,
}

impl TestingServer {
    /// One server shared by every caller in this process, started on first use (its watchdog
    /// kills it when the process ends). For tests that do not stop, pause or restart it: a JVM
    /// per test is slow on small machines.
    ///
    /// When `ZKLOCK_TEST_SERVER` names a running server (`127.0.0.1:PORT`), every process uses
    /// that one instead and never stops it: `scripts/run-tests.sh` starts one for a whole run
    /// (`examples/testing_server.rs`), so that a test in a process of its own (nextest) does
    /// not start a JVM of its own.
    ///
    /// # Panics
    /// If the server cannot start (the message names `scripts/install-deps.sh`), or if
    /// `ZKLOCK_TEST_SERVER` is not `HOST:PORT` or nothing answers `ruok` there.
    pub fn shared() -> &'static TestingServer {
        static SERVER: std::sync::OnceLock<TestingServer> = std::sync::OnceLock::new();
        SERVER.get_or_init(|| match std::env::var("ZKLOCK_TEST_SERVER") {
            Ok(addr) if !addr.is_empty() => TestingServer::attach(&addr).unwrap_or_else(|e| {
                panic!("ZKLOCK_TEST_SERVER={addr}: {e}");
            }),
            _ => TestingServer::start()
                .expect("start a real ZooKeeper server (scripts/install-deps.sh)"),
        })
    }

    /// A running server on `127.0.0.1:PORT` that this process did not start: it is never
    /// stopped, paused or restarted from here (those calls do nothing).
    fn attach(addr: &str) -> io::Result<TestingServer> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "expected 127.0.0.1:PORT");
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host != "127.0.0.1" {
            return Err(bad());
        }
        let answer = four_letter_at(addr, "ruok", FOUR_LETTER_TIMEOUT)?;
        if answer != "imok" {
            return Err(io::Error::other(format!("ruok answered {answer:?}")));
        }
        let dir = tempfile::Builder::new().prefix("zklock-zk-").tempdir()?;
        Ok(TestingServer {
            port,
            cfg: dir.path().join("zoo.cfg"),
            log: dir.path().join("zookeeper.log"),
            dir,
            process: None,
        })
    }

    /// Starts a server and waits (up to 30 s) until it serves requests.
    ///
    /// Fails with a message naming `scripts/install-deps.sh` if ZooKeeper or Java is missing.
    pub fn start() -> io::Result<TestingServer> {
        TestingServer::start_with_config(&[])
    }

    /// Starts a server whose `zoo.cfg` has `extra` lines too (`key=value`; keys the server does
    /// not know become `zookeeper.<key>` system properties, e.g. `throttled_op_wait_time=1`).
    ///
    /// ```no_run
    /// let server = zklock::testing::TestingServer::start_with_config(&["maxClientCnxns=10"]).unwrap();
    /// ```
    pub fn start_with_config(extra: &[&str]) -> io::Result<TestingServer> {
        let dir = tempfile::Builder::new().prefix("zklock-zk-").tempdir()?;
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data)?;
        let port = free_port()?;
        let cfg = dir.path().join("zoo.cfg");
        let mut text = base_config(&data, port);
        for line in extra {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&cfg, text)?;
        let log = dir.path().join("zookeeper.log");
        let mut server = TestingServer {
            port,
            dir,
            cfg,
            log,
            process: None,
        };
        server.launch()?;
        Ok(server)
    }

    fn launch(&mut self) -> io::Result<()> {
        let mut p = ServerProcess::spawn(STANDALONE_MAIN, &self.cfg, &self.log)?;
        let res = wait_serving(&mut p, &self.connect_string(), &self.log);
        self.process = Some(p);
        if res.is_err() {
            self.stop();
        }
        res.map(|_| ())
    }

    /// `"127.0.0.1:PORT"`.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|p| p.pid())
    }

    /// The server's log file (stdout and stderr of the JVM); kept until drop.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The server's temporary directory (holds `data/`, `zoo.cfg` and the log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the server (SIGKILL) and waits for it to exit; the data is kept.
    pub fn stop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    /// Starts the server again on the same port with the same data and waits until it
    /// serves. Stops it first if it runs. Sessions survive if they reconnect within their
    /// session timeout.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop();
        self.launch()
    }

    /// Freezes the server process (SIGSTOP): connections stay open but nothing is answered.
    pub fn pause(&self) {
        if let Some(p) = &self.process {
            p.pause();
        }
    }

    /// Thaws a process frozen by [`pause`](Self::pause) (SIGCONT).
    pub fn resume(&self) {
        if let Some(p) = &self.process {
            p.resume();
        }
    }

    /// Sends a four-letter word (`ruok`, `mntr`, `srvr`, `stat`, `cons`, `wchc`, `wchp`, ...)
    /// and returns the answer; fails after 3 s without one (e.g. while paused).
    pub fn four_letter(&self, cmd: &str) -> io::Result<String> {
        four_letter_at(&self.connect_string(), cmd, FOUR_LETTER_TIMEOUT)
    }
}

impl Drop for TestingServer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for TestingServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestingServer")
            .field("port", &self.port)
            .field("pid", &self.pid())
            .field("log", &self.log)
            .finish()
    }
}
