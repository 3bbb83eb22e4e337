//! Test support: a real ZooKeeper server, a three-member ensemble and a fault-injecting TCP
//! proxy, in the spirit of Curator's `curator-test`; secured variants too: a TLS-only server
//! ([`TestingServer::start_tls`], mutual or server-authenticated, with certificates made at
//! test time by [`TestingCerts`]), a server that requires SASL DIGEST-MD5
//! ([`TestingServer::start_sasl`]), one that requires Kerberos
//! ([`TestingServer::start_kerberos`], against a real MIT KDC: [`TestingKdc`]) and an
//! ensemble with TLS client ports ([`TestingCluster::start_tls`]).
//!
//! Compiled only with the cargo feature `testing`. The servers are real Apache ZooKeeper
//! processes (Java); on Debian/Ubuntu run `scripts/install-deps.sh` (or
//! `apt-get install -y zookeeper default-jre-headless`) first. The server classpath is taken
//! from the environment variable `ZOOKEEPER_CLASSPATH` if set, else from Debian's
//! `/usr/share/java/zookeeper.jar` (plus the Netty jars its manifest omits, for the TLS
//! port); the `java` binary from `ZOOKEEPER_JAVA`, else
//! `$JAVA_HOME/bin/java`, else `java` on the `PATH`.
//!
//! ```no_run
//! use zklock::testing::{TcpProxy, TestingServer};
//!
//! let server = TestingServer::start().unwrap();
//! assert_eq!(server.four_letter("ruok").unwrap(), "imok");
//! let proxy = TcpProxy::start(&server.connect_string()).unwrap();
//! // connect a client to proxy.connect_string(), then e.g. proxy.cut_all();
//! ```
//!
//! Every server process is killed (SIGKILL) when its owner is dropped, also when a test
//! panics. A small watchdog (`sh`) also kills the server if the test process itself dies.
//!
//! Servers start from a class-data archive of ZooKeeper's classes (Java's AppCDS): the first
//! start on a machine makes it, once per Java and classpath, as
//! `zklock-zookeeper-<hash>.jsa` in the system's temporary directory (6.5 MB; it may be
//! deleted at any time). Each later start then takes about 40 % less CPU.

pub mod admin;
mod cluster;
mod kerberos;
mod link;
mod proxy;
mod secure;
mod server;

pub use admin::{Admin, NodeInfo};
pub use cluster::TestingCluster;
pub use kerberos::{KerberosPrincipal, TestingKdc, REALM, SERVER_PRINCIPAL};
pub use proxy::TcpProxy;
pub use secure::{ClientAuth, ClientCert, TestingCerts};
pub use server::TestingServer;

use secure::TlsProbe;

/// The C entry points (`include/zklock.h`), for tests and benchmarks that call them as a C
/// program does. Not part of the Rust API.
#[doc(hidden)]
pub mod ffi {
    pub use crate::ffi::*;
}

/// Process helpers of the project's own tests, soak and benchmarks: signals, a child that
/// dies with its parent, forks (through libc and the raw `clone` call) that run a closure, a
/// pseudo-terminal, this process's CPU time. Not part of the Rust API: a user's tests need
/// servers, clusters and proxies.
#[doc(hidden)]
pub mod process {
    pub use crate::sys::process::{
        clone_child, controlling_terminal_on_stdin, die_with_parent, fork_child, open_pty,
        process_cpu_time, send_signal, wait_child,
    };
}

/// Polls `f` every 20 ms until it is true or `timeout` passes; returns whether it became true.
///
/// ```
/// use std::time::Duration;
/// let start = std::time::Instant::now();
/// assert!(zklock::testing::eventually(Duration::from_secs(1), || start.elapsed() > Duration::from_millis(50)));
/// ```
pub fn eventually(timeout: std::time::Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() >= end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a server (or ensemble member) may take to start serving.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Poll interval while waiting for a server.
const POLL: Duration = Duration::from_millis(50);
/// Timeout of a four-letter-word exchange made on behalf of a user.
pub(crate) const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(3);
/// Timeout of one four-letter-word probe while waiting for a server to come up.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

const DEBIAN_JAR: &str = "/usr/share/java/zookeeper.jar";
/// Netty jars the Debian ZooKeeper jar's manifest does not list.
const NETTY_JARS: [&str; 3] = [
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
];
const INSTALL_HINT: &str =
    "run `scripts/install-deps.sh` (or `apt-get install -y zookeeper default-jre-headless`)";

fn not_installed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("ZooKeeper test server unavailable ({what}): {INSTALL_HINT}"),
    )
}

/// The Java classpath of the ZooKeeper server.
fn server_classpath() -> io::Result<String> {
    if let Ok(cp) = std::env::var("ZOOKEEPER_CLASSPATH") {
        if !cp.trim().is_empty() {
            return Ok(cp);
        }
    }
    if !Path::new(DEBIAN_JAR).exists() {
        return Err(not_installed(&format!("{DEBIAN_JAR} not found")));
    }
    // zookeeper.jar's manifest Class-Path pulls slf4j-api and the other jars; add a simple
    // slf4j binding so the server logs (to its log file) instead of printing NOP warnings.
    let mut cp = DEBIAN_JAR.to_string();
    for binding in ["/usr/share/java/slf4j-simple.jar"] {
        if Path::new(binding).exists() {
            cp.push(':');
            cp.push_str(binding);
            break;
        }
    }
    // The manifest lacks parts of Netty that the Netty server (the TLS client port) needs:
    // without them every TLS handshake dies with `NoClassDefFoundError:
    // io/netty/handler/codec/ByteToMessageDecoder` (Debian package libnetty-java, a
    // dependency of zookeeper).
    for jar in NETTY_JARS {
        if Path::new(jar).exists() {
            cp.push(':');
            cp.push_str(jar);
        }
    }
    Ok(cp)
}

fn java_binary() -> PathBuf {
    if let Ok(j) = std::env::var("ZOOKEEPER_JAVA") {
        if !j.is_empty() {
            return PathBuf::from(j);
        }
    }
    if let Ok(home) = std::env::var("JAVA_HOME") {
        let p = Path::new(&home).join("bin").join("java");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("java")
}

/// Ports handed out by [`free_port`] in this process, never handed out twice.
static USED_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A currently free loopback TCP port (bound to port 0, then released).
pub(crate) fn free_port() -> io::Result<u16> {
    for _ in 0..100 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let port = l.local_addr()?.port();
        drop(l);
        let mut used = USED_PORTS.lock().unwrap_or_else(|e| e.into_inner());
        if used.insert(port) {
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no free loopback port found",
    ))
}

fn resolve(addr: &str) -> io::Result<SocketAddr> {
    addr.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot resolve {addr}"),
        )
    })
}

/// Sends a four-letter word to `addr` and returns the whole answer.
pub(crate) fn four_letter_at(addr: &str, cmd: &str, timeout: Duration) -> io::Result<String> {
    let sa = resolve(addr)?;
    let mut s = TcpStream::connect_timeout(&sa, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(cmd.as_bytes())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Sends a four-letter word to `addr`, over TLS when `tls` is given (a secure client port).
pub(crate) fn four_letter_via(
    addr: &str,
    tls: Option<&TlsProbe>,
    cmd: &str,
    timeout: Duration,
) -> io::Result<String> {
    match tls {
        None => four_letter_at(addr, cmd, timeout),
        Some(probe) => probe.four_letter(&resolve(addr)?, cmd, timeout),
    }
}

/// Sends a signal with the `kill` command (no `unsafe` needed).
pub(crate) fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The last `n` lines of a log file, for error messages.
pub(crate) fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One running ZooKeeper JVM plus the watchdog that kills it if the test process dies.
pub(crate) struct ServerProcess {
    child: Child,
    watchdog: Option<Child>,
    paused: AtomicBool,
}

impl ServerProcess {
    /// Launches `java <jvm_opts> ... <main> <cfg>` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(
        main_class: &str,
        cfg: &Path,
        log: &Path,
        jvm_opts: &[String],
    ) -> io::Result<ServerProcess> {
        let cp = server_classpath()?;
        let log_file: File = OpenOptions::new().create(true).append(true).open(log)?;
        let log_err = log_file.try_clone()?;
        let java = java_binary();
        let making_archive = jvm_opts
            .iter()
            .any(|o| o.starts_with("-XX:ArchiveClassesAtExit="));
        let archive = (!making_archive)
            .then(|| class_archive(&java, &cp))
            .flatten()
            .map(|a| format!("-XX:SharedArchiveFile={}", a.display()));
        let child = Command::new(&java)
            .args(archive)
            .args([
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xshare:auto",
                "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.admin.enableServer=false",
                "-Dzookeeper.4lw.commands.whitelist=*",
                "-Dzookeeper.jmx.log4j.disable=true",
                "-Dzookeeper.cnxTimeout=2000",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            ])
            .args(jvm_opts)
            .args(["-cp", &cp, main_class])
            .arg(cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(log_err))
            .spawn()
            .map_err(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    not_installed(&format!("cannot run {}", java.display()))
                } else {
                    e
                }
            })?;
        let watchdog = Command::new("sh")
            .args([
                "-c",
                "while kill -0 \"$0\" 2>/dev/null && kill -0 \"$1\" 2>/dev/null; do sleep 1; done; kill -9 \"$1\" 2>/dev/null",
            ])
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Ok(ServerProcess {
            child,
            watchdog,
            paused: AtomicBool::new(false),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (and was reaped).
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    pub(crate) fn pause(&self) {
        signal(self.pid(), "STOP");
        self.paused.store(true, Ordering::SeqCst);
        // kill(2) returns before every thread has stopped: wait until all of them have, so that
        // nothing the caller does next can still be answered.
        let tasks = format!("/proc/{}/task", self.pid());
        let all_stopped = || {
            std::fs::read_dir(&tasks).map_or(true, |dir| {
                dir.flatten().all(|t| {
                    std::fs::read_to_string(t.path().join("stat")).map_or(true, |st| {
                        // The state follows the parenthesised command name.
                        let state = st
                            .rsplit(')')
                            .next()
                            .and_then(|r| r.split_whitespace().next());
                        matches!(state, Some("T") | Some("t"))
                    })
                })
            })
        };
        let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !all_stopped() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    pub(crate) fn resume(&self) {
        signal(self.pid(), "CONT");
        self.paused.store(false, Ordering::SeqCst);
    }

    /// SIGKILL (SIGCONT first if paused) and wait.
    pub(crate) fn kill(&mut self) {
        if self.paused.swap(false, Ordering::SeqCst) {
            signal(self.pid(), "CONT");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A class-data archive of the server's own classes (Java's AppCDS), made once per Java and
/// classpath and kept in the system's temporary directory: a server then takes about 40 % less
/// CPU to start (0.30 instead of 0.52 s of CPU to serving, measured), which a test run that
/// starts 170 of them on two cores feels. None where it cannot be made: servers then start
/// without it (a JVM that cannot use an archive starts without it, too).
fn class_archive(java: &Path, cp: &str) -> Option<PathBuf> {
    static ARCHIVE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    ARCHIVE
        .get_or_init(|| {
            use std::hash::{Hash, Hasher};
            // The Java it was made by (a Java refuses another's archive) and the classpath.
            let resolved = std::env::var_os("PATH")
                .into_iter()
                .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .map(|d| d.join(java))
                .find(|p| p.is_file())
                .unwrap_or_else(|| java.to_path_buf());
            let real = std::fs::canonicalize(&resolved).unwrap_or(resolved);
            let stamp = std::fs::metadata(&real)
                .ok()
                .map(|m| (m.len(), m.modified().ok()));
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&real, stamp, cp).hash(&mut h);
            let path =
                std::env::temp_dir().join(format!("zklock-zookeeper-{:016x}.jsa", h.finish()));
            if !path.exists() {
                if let Err(e) = make_class_archive(&path) {
                    log::debug!("no class-data archive for the test servers: {e}");
                }
            }
            path.exists().then_some(path)
        })
        .clone()
}

/// Starts a standalone server that writes the archive as it exits, waits until it serves (its
/// classes are loaded), and ends it with SIGTERM (a JVM writes the archive on a normal exit).
fn make_class_archive(path: &Path) -> io::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    std::fs::create_dir(&data)?;
    let port = free_port()?;
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(&cfg, base_config(&data, port, false))?;
    let log = dir.path().join("server.log");
    // Written aside, then moved into place whole: another process never reads half of it.
    let part = path.with_extension(format!("jsa.{}", std::process::id()));
    let mut server = ServerProcess::spawn(
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        &cfg,
        &log,
        &[format!("-XX:ArchiveClassesAtExit={}", part.display())],
    )?;
    let served = wait_serving(&mut server, &format!("127.0.0.1:{port}"), None, &log);
    signal(server.pid(), "TERM");
    let exited = eventually(START_TIMEOUT, || server.exited());
    drop(server);
    let made = served.is_ok() && exited && part.exists();
    if made {
        std::fs::rename(&part, path)?;
        return Ok(());
    }
    let _ = std::fs::remove_file(&part);
    Err(io::Error::other(format!(
        "the archive's server did not {}",
        if served.is_err() { "serve" } else { "write it" }
    )))
}

/// Waits until the server at `addr` answers `srvr` with a `Mode:` line (it serves requests),
/// asking over TLS when `tls` is given. Fails early if the process exits.
pub(crate) fn wait_serving(
    proc_: &mut ServerProcess,
    addr: &str,
    tls: Option<&TlsProbe>,
    log: &Path,
) -> io::Result<String> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if proc_.exited() {
            let tail = log_tail(log, 30);
            let hint = if tail.contains("ClassNotFoundException")
                || tail.contains("NoClassDefFoundError")
            {
                format!(" (classpath lacks ZooKeeper: {INSTALL_HINT})")
            } else {
                String::new()
            };
            return Err(io::Error::other(format!(
                "ZooKeeper at {addr} exited during startup{hint}; log {}:\n{tail}",
                log.display(),
            )));
        }
        if let Ok(out) = four_letter_via(addr, tls, "srvr", PROBE_TIMEOUT) {
            if let Some(mode) = parse_mode(&out) {
                return Ok(mode);
            }
        }
        if Instant::now() >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "ZooKeeper at {addr} did not serve within {:?}; log {}:\n{}",
                    START_TIMEOUT,
                    log.display(),
                    log_tail(log, 30)
                ),
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// The `Mode:` of a `srvr`/`stat` answer (`standalone`, `leader`, `follower`, ...).
pub(crate) fn parse_mode(srvr: &str) -> Option<String> {
    srvr.lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_string())
}

/// Session ids (`sid=0x...`) in a `cons` answer.
pub(crate) fn parse_cons_sessions(cons: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut rest = cons;
    while let Some(i) = rest.find("sid=0x") {
        rest = &rest[i + 6..];
        let end = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        if let Ok(v) = u64::from_str_radix(&rest[..end], 16) {
            out.push(v as i64);
        }
        rest = &rest[end..];
    }
    out
}

/// Common zoo.cfg lines; the client port is a TLS-only `secureClientPort` when `secure`.
pub(crate) fn base_config(data_dir: &Path, client_port: u16, secure: bool) -> String {
    let port_key = if secure {
        "secureClientPort"
    } else {
        "clientPort"
    };
    let address_key = if secure {
        "secureClientPortAddress"
    } else {
        "clientPortAddress"
    };
    format!(
        "tickTime=500\n\
         initLimit=10\n\
         syncLimit=5\n\
         minSessionTimeout=1000\n\
         maxSessionTimeout=60000\n\
         dataDir={}\n\
         {port_key}={client_port}\n\
         {address_key}=127.0.0.1\n\
         4lw.commands.whitelist=*\n\
         admin.enableServer=false\n\
         forceSync=no\n\
         maxClientCnxns=0\n\
         autopurge.purgeInterval=0\n",
        data_dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cons() {
        let cons = " /127.0.0.1:40000[1](queued=0,recved=3,sent=3,sid=0x1000b2c5e1a0001,lop=PING,est=1)\n \
                    /127.0.0.1:40002[0](queued=0,recved=1,sent=0)\n";
        assert_eq!(parse_cons_sessions(cons), vec![0x1000b2c5e1a0001]);
    }

    #[test]
    fn parses_mode() {
        assert_eq!(
            parse_mode("Zookeeper version: 3.8.0\nMode: follower\nNode count: 5\n").as_deref(),
            Some("follower")
        );
        assert_eq!(
            parse_mode("This ZooKeeper instance is not currently serving requests\n"),
            None
        );
    }
}
