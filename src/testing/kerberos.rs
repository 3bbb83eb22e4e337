//! A real MIT Kerberos KDC for tests ([`TestingKdc`]): a realm of its own in a temporary
//! directory, on a free loopback port, with principals and keytabs made on demand; the
//! ZooKeeper server that authenticates its clients with it is
//! [`TestingServer::start_kerberos`](super::TestingServer::start_kerberos).

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{free_port, log_tail, POLL, START_TIMEOUT};

/// The realm of every [`TestingKdc`] (each is a KDC of its own: two never share a key).
pub const REALM: &str = "ZKLOCK.TEST";

/// The servers' principal: the service `zookeeper` on the host `localhost` (clients reach the
/// servers of [`TestingServer::start_kerberos`](super::TestingServer::start_kerberos) as
/// `localhost:PORT`, or name the host with [`Sasl::gssapi`](crate::Sasl::gssapi)'s
/// [`host`](crate::Gssapi::host)).
pub const SERVER_PRINCIPAL: &str = "zookeeper/localhost";

const INSTALL_HINT: &str = "run `scripts/install-deps.sh` (or `apt-get install -y krb5-kdc \
                            krb5-admin-server krb5-user`)";

/// A real MIT Kerberos KDC (`krb5kdc`, Debian's `krb5-kdc`) for tests, on a free `127.0.0.1`
/// port (TCP and UDP), with its realm ([`REALM`]), database, stash, `kdc.conf`, a `krb5.conf`
/// for its clients, principals and keytabs in a temporary directory. The servers' principal
/// ([`SERVER_PRINCIPAL`]) and its keytab are made at the start; clients' principals with
/// [`add_principal`](Self::add_principal).
///
/// A Kerberos client of this KDC needs `KRB5_CONFIG` set to [`krb5_conf`](Self::krb5_conf)
/// (then `KRB5CCNAME` for a credential cache made by [`KerberosPrincipal::kinit`], or
/// `KRB5_CLIENT_KTNAME` for a keytab): [`KerberosPrincipal::keytab_env`] and
/// [`KerberosPrincipal::ccache_env`] give those variables.
///
/// Dropping it kills the KDC (SIGKILL, by its process id) and removes the directory; a
/// watchdog does both if the test process dies first.
///
/// ```no_run
/// use zklock::testing::{TestingKdc, TestingServer};
///
/// let kdc = TestingKdc::start().unwrap();
/// let server = TestingServer::start_kerberos(&kdc).unwrap();
/// let alice = kdc.add_principal("alice").unwrap();
/// assert_eq!(alice.name(), "alice@ZKLOCK.TEST");
/// // run a client with alice.keytab_env(), connecting to server.connect_string()
/// ```
pub struct TestingKdc {
    port: u16,
    dir: tempfile::TempDir,
    krb5_conf: PathBuf,
    kdc_conf: PathBuf,
    log: PathBuf,
    server: KerberosPrincipal,
    process: Option<(Child, Option<Child>)>,
}

/// A principal of a [`TestingKdc`] with its keytab.
#[derive(Clone)]
pub struct KerberosPrincipal {
    name: String,
    keytab: PathBuf,
    krb5_conf: PathBuf,
    dir: PathBuf,
}

/// Sequence number of credential caches made in this process.
static CCACHE_SERIAL: AtomicUsize = AtomicUsize::new(1);

impl KerberosPrincipal {
    /// The full name, `<name>@ZKLOCK.TEST` (ZooKeeper's SASL identity of a client that
    /// authenticates as it: `sasl:<this>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The keytab holding the principal's keys.
    pub fn keytab_path(&self) -> &Path {
        &self.keytab
    }

    /// `kinit -k -t <keytab> [-l <lifetime>]`: a new credential cache file with a ticket of
    /// this principal (valid for `lifetime`, else for the realm's maximum, one hour), in the
    /// KDC's directory. Returns its path (`KRB5CCNAME=FILE:<path>`).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let kdc = zklock::testing::TestingKdc::start().unwrap();
    /// let alice = kdc.add_principal("alice").unwrap();
    /// let cache = alice.kinit(Some(Duration::from_secs(5))).unwrap();
    /// ```
    pub fn kinit(&self, lifetime: Option<Duration>) -> io::Result<PathBuf> {
        let n = CCACHE_SERIAL.fetch_add(1, Ordering::Relaxed);
        let cache = self.dir.join(format!("ccache-{n}"));
        let mut cmd = Command::new(tool("kinit")?);
        cmd.env("KRB5_CONFIG", &self.krb5_conf)
            .env("KRB5CCNAME", format!("FILE:{}", cache.display()))
            .args(["-k", "-t"])
            .arg(&self.keytab);
        if let Some(l) = lifetime {
            cmd.args(["-l", &format!("{}s", l.as_secs().max(1))]);
        }
        run(cmd.arg(&self.name), "kinit")?;
        Ok(cache)
    }

    /// The environment of a client that authenticates with this principal's keytab:
    /// `KRB5_CONFIG`, `KRB5_CLIENT_KTNAME` (MIT Kerberos gets the ticket itself) and
    /// `KRB5CCNAME` (a cache of the process's own, in memory).
    pub fn keytab_env(&self) -> Vec<(String, OsString)> {
        vec![
            ("KRB5_CONFIG".into(), self.krb5_conf.clone().into()),
            ("KRB5_CLIENT_KTNAME".into(), self.keytab.clone().into()),
            ("KRB5CCNAME".into(), "MEMORY:zklock".into()),
        ]
    }

    /// The environment of a client that authenticates with the ticket in `cache` (made by
    /// [`kinit`](Self::kinit)): `KRB5_CONFIG`, `KRB5CCNAME`, and `KRB5_CLIENT_KTNAME` naming a
    /// keytab that does not exist (so the ticket is the only credential).
    pub fn ccache_env(&self, cache: &Path) -> Vec<(String, OsString)> {
        vec![
            ("KRB5_CONFIG".into(), self.krb5_conf.clone().into()),
            (
                "KRB5CCNAME".into(),
                format!("FILE:{}", cache.display()).into(),
            ),
            (
                "KRB5_CLIENT_KTNAME".into(),
                self.dir.join("no-client.keytab").into(),
            ),
        ]
    }
}

impl fmt::Debug for KerberosPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KerberosPrincipal")
            .field("name", &self.name)
            .field("keytab", &self.keytab)
            .finish()
    }
}

/// A Kerberos tool, on the `PATH` or in `/usr/sbin` (`kdb5_util`, `kadmin.local` and
/// `krb5kdc` are there on Debian, outside a user's `PATH`).
fn tool(name: &str) -> io::Result<PathBuf> {
    let dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    dirs.into_iter()
        .chain(["/usr/sbin", "/usr/bin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("Kerberos test KDC unavailable ({name} not found): {INSTALL_HINT}"),
            )
        })
}

/// Runs a command to its end; its output is the error's words when it fails.
fn run(cmd: &mut Command, what: &str) -> io::Result<()> {
    let out = cmd.stdin(Stdio::null()).output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim(),
        String::from_utf8_lossy(&out.stdout).trim()
    )))
}

impl TestingKdc {
    /// Makes the realm (`kdb5_util create -s`), the servers' principal and keytab
    /// (`kadmin.local`), starts `krb5kdc` and waits (up to 30 s) until it accepts connections.
    ///
    /// Fails with a message naming `scripts/install-deps.sh` if the KDC is not installed.
    pub fn start() -> io::Result<TestingKdc> {
        let dir = tempfile::Builder::new().prefix("zklock-kdc-").tempdir()?;
        let port = free_port()?;
        let d = dir.path();
        let krb5_conf = d.join("krb5.conf");
        let kdc_conf = d.join("kdc.conf");
        let log = d.join("kdc.log");
        // TCP only (udp_preference_limit = 1), no reverse lookups, no DNS: the KDC at our port.
        std::fs::write(
            &krb5_conf,
            format!(
                "[libdefaults]\n\
                 \x20 default_realm = {REALM}\n\
                 \x20 dns_lookup_realm = false\n\
                 \x20 dns_lookup_kdc = false\n\
                 \x20 dns_canonicalize_hostname = false\n\
                 \x20 rdns = false\n\
                 \x20 udp_preference_limit = 1\n\
                 \x20 forwardable = false\n\
                 \x20 clockskew = 1\n\
                 [realms]\n\
                 \x20 {REALM} = {{\n\
                 \x20   kdc = 127.0.0.1:{port}\n\
                 \x20 }}\n\
                 [domain_realm]\n\
                 \x20 localhost = {REALM}\n"
            ),
        )?;
        std::fs::write(
            &kdc_conf,
            format!(
                "[kdcdefaults]\n\
                 \x20 kdc_listen = 127.0.0.1:{port}\n\
                 \x20 kdc_tcp_listen = 127.0.0.1:{port}\n\
                 [realms]\n\
                 \x20 {REALM} = {{\n\
                 \x20   database_name = {db}\n\
                 \x20   key_stash_file = {stash}\n\
                 \x20   acl_file = {acl}\n\
                 \x20   max_life = 1h\n\
                 \x20   max_renewable_life = 0\n\
                 \x20   supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n\
                 \x20 }}\n\
                 [logging]\n\
                 \x20 kdc = FILE:{log}\n",
                db = d.join("principal").display(),
                stash = d.join("stash").display(),
                acl = d.join("kadm5.acl").display(),
                log = log.display(),
            ),
        )?;
        let server_keytab = d.join("zookeeper.keytab");
        let mut kdc = TestingKdc {
            port,
            server: KerberosPrincipal {
                name: format!("{SERVER_PRINCIPAL}@{REALM}"),
                keytab: server_keytab,
                krb5_conf: krb5_conf.clone(),
                dir: d.to_path_buf(),
            },
            krb5_conf,
            kdc_conf,
            log,
            dir,
            process: None,
        };
        // A random master key: the stash file is the only copy.
        let master = uuid::Uuid::new_v4().simple().to_string();
        run(
            kdc.admin_command("kdb5_util")?
                .args(["create", "-s", "-W", "-r", REALM, "-P", &master]),
            "kdb5_util create",
        )?;
        kdc.make_principal(SERVER_PRINCIPAL, None)?;
        kdc.launch()?;
        Ok(kdc)
    }

    /// A command of the KDC's administration, reading its configuration.
    fn admin_command(&self, name: &str) -> io::Result<Command> {
        let mut cmd = Command::new(tool(name)?);
        cmd.env("KRB5_CONFIG", &self.krb5_conf)
            .env("KRB5_KDC_PROFILE", &self.kdc_conf);
        Ok(cmd)
    }

    fn kadmin(&self, query: &str) -> io::Result<()> {
        run(
            self.admin_command("kadmin.local")?
                .args(["-r", REALM, "-q", query]),
            &format!("kadmin.local {query:?}"),
        )
    }

    fn make_principal(&self, name: &str, max_life: Option<Duration>) -> io::Result<()> {
        let life = max_life
            .map(|l| format!("-maxlife \"{} seconds\" ", l.as_secs().max(1)))
            .unwrap_or_default();
        let full = format!("{name}@{REALM}");
        let keytab = self.keytab_of(name);
        self.kadmin(&format!("addprinc -randkey {life}{full}"))?;
        self.kadmin(&format!("ktadd -k {} {full}", keytab.display()))
    }

    fn keytab_of(&self, name: &str) -> PathBuf {
        if name == SERVER_PRINCIPAL {
            return self.server.keytab.clone();
        }
        self.dir
            .path()
            .join(format!("{}.keytab", name.replace('/', "_")))
    }

    fn launch(&mut self) -> io::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("krb5kdc.out"))?;
        let child = self
            .admin_command("krb5kdc")?
            // In the foreground: the child's pid is the KDC's.
            .args(["-n", "-r", REALM])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        // Kills the KDC and removes its directory if this process dies (a static's KDC is
        // never dropped).
        let watchdog = Command::new("sh")
            .args([
                "-c",
                "while kill -0 \"$0\" 2>/dev/null && kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
                 if ! kill -0 \"$0\" 2>/dev/null; then kill -9 \"$1\" 2>/dev/null; rm -rf \"$2\"; fi",
            ])
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        self.process = Some((child, watchdog));
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let end = Instant::now() + START_TIMEOUT;
        loop {
            let exited = match &mut self.process {
                Some((child, _)) => !matches!(child.try_wait(), Ok(None)),
                None => true,
            };
            if exited {
                self.stop();
                return Err(io::Error::other(format!(
                    "the test KDC exited during startup; {}:\n{}\n{}",
                    self.log.display(),
                    log_tail(&self.dir.path().join("krb5kdc.out"), 20),
                    log_tail(&self.log, 20)
                )));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= end {
                self.stop();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the test KDC did not listen within {START_TIMEOUT:?}"),
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// A new principal `<name>@ZKLOCK.TEST` with a random key, and its keytab.
    ///
    /// ```no_run
    /// let kdc = zklock::testing::TestingKdc::start().unwrap();
    /// let alice = kdc.add_principal("alice").unwrap();
    /// assert!(alice.keytab_path().exists());
    /// ```
    pub fn add_principal(&self, name: &str) -> io::Result<KerberosPrincipal> {
        self.add_principal_with(name, None)
    }

    /// As [`add_principal`](Self::add_principal), with tickets that live at most `max_life`
    /// (the principal's `maxlife`): a ticket that expires during a test.
    pub fn add_principal_with(
        &self,
        name: &str,
        max_life: Option<Duration>,
    ) -> io::Result<KerberosPrincipal> {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c));
        if !plain {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("principal {name:?}: names are [A-Za-z0-9._-/], without the realm"),
            ));
        }
        self.make_principal(name, max_life)?;
        Ok(KerberosPrincipal {
            name: format!("{name}@{REALM}"),
            keytab: self.keytab_of(name),
            krb5_conf: self.krb5_conf.clone(),
            dir: self.dir.path().to_path_buf(),
        })
    }

    /// Removes a principal from the realm (`delprinc`): its keytab stays, and is refused.
    pub fn delete_principal(&self, principal: &KerberosPrincipal) -> io::Result<()> {
        self.kadmin(&format!("delprinc -force {}", principal.name))
    }

    /// The servers' principal ([`SERVER_PRINCIPAL`]) and its keytab.
    pub fn server_principal(&self) -> &KerberosPrincipal {
        &self.server
    }

    /// The realm, [`REALM`].
    pub fn realm(&self) -> &str {
        REALM
    }

    /// The `krb5.conf` of the KDC's clients (`KRB5_CONFIG`; Java's
    /// `-Djava.security.krb5.conf`).
    pub fn krb5_conf(&self) -> &Path {
        &self.krb5_conf
    }

    /// The KDC's port on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The KDC's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(|(c, _)| c.id())
    }

    /// The KDC's log (each request it answered, and why it refused one).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The temporary directory (configuration, database, keytabs, credential caches).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the KDC (SIGKILL) and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some((mut child, watchdog)) = self.process.take() {
            if let Some(mut w) = watchdog {
                let _ = w.kill();
                let _ = w.wait();
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestingKdc {
    fn drop(&mut self) {
        self.stop();
    }
}

impl fmt::Debug for TestingKdc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestingKdc")
            .field("realm", &REALM)
            .field("port", &self.port)
            .field("pid", &self.pid())
            .field("dir", &self.dir.path())
            .finish()
    }
}
