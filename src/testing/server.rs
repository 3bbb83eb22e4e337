//! A single standalone ZooKeeper server.

use std::io;
use std::path::{Path, PathBuf};

use super::{
    base_config, four_letter_at, four_letter_via, free_port, wait_serving, ClientAuth,
    ServerProcess, TestingCerts, TestingKdc, TlsProbe, FOUR_LETTER_TIMEOUT,
};

const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// A real standalone ZooKeeper server on a free `127.0.0.1` port with a temporary data
/// directory, for tests (like Curator's `TestingServer`).
///
/// Secured variants: [`TestingServer::start_tls`] (a TLS-only client port, mutual or
/// server-authenticated), [`TestingServer::start_sasl`] (SASL DIGEST-MD5 required) and
/// [`TestingServer::start_kerberos`] (SASL GSSAPI required, against a [`TestingKdc`]).
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
    jvm_opts: Vec<String>,
    tls: Option<Tls>,
    /// Kerberos clients name the server `localhost` (its principal's host).
    kerberos: bool,
    process: Option<ServerProcess>,
}

/// The TLS side of a server with a secure client port.
struct Tls {
    certs: TestingCerts,
    client_auth: ClientAuth,
    probe: TlsProbe,
}

impl TestingServer {
    /// One server shared by every caller in this process, started on first use (its watchdog
    /// kills it when the process ends). For tests that do not stop, pause or restart it: a JVM
    /// per test is slow on small machines.
    ///
    /// When `ZKLOCK_TEST_SERVER` names a running server (`127.0.0.1:PORT`), every process uses
    /// that one instead and never stops it: `scripts/run-tests.sh` starts one for a whole run
    /// (`tools/testing_server.rs`), so that a test in a process of its own (nextest) does
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

    /// A running server on `127.0.0.1:PORT` that this process did not start (one that answers
    /// `ruok`): it is never stopped, paused or restarted from here (those calls do nothing).
    /// For a server that outlives the tests' processes, such as the one the crate's own tests
    /// share per target directory.
    ///
    /// ```no_run
    /// let server = zklock::testing::TestingServer::attach("127.0.0.1:2181")?;
    /// println!("{}", server.connect_string());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn attach(addr: &str) -> io::Result<TestingServer> {
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
            jvm_opts: Vec::new(),
            tls: None,
            kerberos: false,
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
    /// A line `-Dname=value` is a JVM system property instead, for the server's settings that
    /// are read only from those (e.g. `-Dznode.container.checkIntervalMs=50`).
    ///
    /// ```no_run
    /// let server = zklock::testing::TestingServer::start_with_config(&["maxClientCnxns=10"]).unwrap();
    /// ```
    pub fn start_with_config(extra: &[&str]) -> io::Result<TestingServer> {
        TestingServer::start_secured(None, None, extra)
    }

    /// Starts a server whose only client port is TLS (`secureClientPort`, Netty server, no
    /// plain `clientPort`), with new certificates ([`TestingCerts::generate`]: the server is
    /// `127.0.0.1`/`localhost`), and waits until it serves.
    ///
    /// With [`ClientAuth::Need`] a client must present a certificate signed by the CA
    /// ([`TestingCerts::client`]); with [`ClientAuth::None`] it needs only the CA
    /// ([`TestingCerts::ca_path`]). Clients connect to [`connect_string`](Self::connect_string)
    /// (`tcp+tls://127.0.0.1:PORT`); a plaintext client there never gets a session.
    /// Four-letter words ([`four_letter`](Self::four_letter)) go over TLS.
    ///
    /// ```no_run
    /// use zklock::testing::{ClientAuth, TestingServer};
    /// let server = TestingServer::start_tls(ClientAuth::Need).unwrap();
    /// assert!(server.connect_string().starts_with("tcp+tls://127.0.0.1:"));
    /// assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    /// let alice = server.certs().unwrap().client("alice").unwrap();
    /// ```
    pub fn start_tls(client_auth: ClientAuth) -> io::Result<TestingServer> {
        TestingServer::start_tls_with(&TestingCerts::generate()?, client_auth, &[])
    }

    /// As [`start_tls`](Self::start_tls), with the given certificates (e.g. ones from
    /// [`TestingCerts::generate_for_names`] for a name mismatch, or shared by several servers)
    /// and `extra` lines in `zoo.cfg` (after the TLS lines, so they override them: e.g.
    /// `ssl.protocol=TLSv1.2`). The server keeps a clone of `certs`.
    ///
    /// ```no_run
    /// use zklock::testing::{ClientAuth, TestingCerts, TestingServer};
    /// let wrong = TestingCerts::generate_for_names(&["wrong.example"]).unwrap();
    /// let server = TestingServer::start_tls_with(&wrong, ClientAuth::None, &[]).unwrap();
    /// // a client reaching it at 127.0.0.1 must refuse its certificate
    /// ```
    pub fn start_tls_with(
        certs: &TestingCerts,
        client_auth: ClientAuth,
        extra: &[&str],
    ) -> io::Result<TestingServer> {
        TestingServer::start_secured(Some((certs, client_auth)), None, extra)
    }

    /// Starts a server on a plain client port that requires SASL DIGEST-MD5 authentication of
    /// every session (`SASLAuthenticationProvider`, `enforce.auth.enabled=true`,
    /// `enforce.auth.schemes=sasl`) from one of `users` (`(name, password)` pairs, a JAAS
    /// `Server` section with `DigestLoginModule`), and waits until it serves. A session without
    /// credentials, or with a wrong password, is refused. Four-letter words still work.
    ///
    /// A quirk of ZooKeeper 3.8.0 seen here: a user name the server does not know, given with
    /// the password of the user who authenticated last, is accepted (as `sasl:<that name>`);
    /// the server's DIGEST-MD5 callback keeps the last known name. Test unknown users with a
    /// password no user has.
    ///
    /// ```no_run
    /// let server = zklock::testing::TestingServer::start_sasl(&[("bob", "bobpw")]).unwrap();
    /// assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    /// ```
    pub fn start_sasl(users: &[(&str, &str)]) -> io::Result<TestingServer> {
        TestingServer::start_sasl_with_config(users, &[])
    }

    /// As [`start_sasl`](Self::start_sasl), with `extra` lines in `zoo.cfg`.
    ///
    /// ```no_run
    /// let server = zklock::testing::TestingServer::start_sasl_with_config(
    ///     &[("bob", "bobpw")],
    ///     &["maxClientCnxns=10"],
    /// )
    /// .unwrap();
    /// ```
    pub fn start_sasl_with_config(
        users: &[(&str, &str)],
        extra: &[&str],
    ) -> io::Result<TestingServer> {
        if users.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a SASL server needs at least one user",
            ));
        }
        TestingServer::start_secured(None, Some(users), extra)
    }

    /// Starts a server on a plain client port that requires SASL GSSAPI (Kerberos)
    /// authentication of every session against `kdc`: the server logs in as
    /// [`SERVER_PRINCIPAL`](super::SERVER_PRINCIPAL) (`zookeeper/localhost`) with its keytab
    /// (a JAAS `Server` section with `Krb5LoginModule`, `-Djava.security.krb5.conf` the KDC's),
    /// `SASLAuthenticationProvider`, `enforce.auth.enabled=true`, `enforce.auth.schemes=sasl`.
    /// A client is known by its whole principal: `sasl:alice@ZKLOCK.TEST`.
    ///
    /// [`connect_string`](Self::connect_string) is `localhost:PORT`: a Kerberos client asks for
    /// a ticket to `zookeeper/<the host it connects to>`. The KDC must outlive the server's start
    /// (the server reads its key then).
    ///
    /// ```no_run
    /// use zklock::testing::{TestingKdc, TestingServer};
    /// let kdc = TestingKdc::start().unwrap();
    /// let server = TestingServer::start_kerberos(&kdc).unwrap();
    /// assert!(server.connect_string().starts_with("localhost:"));
    /// ```
    pub fn start_kerberos(kdc: &TestingKdc) -> io::Result<TestingServer> {
        TestingServer::start_kerberos_with_config(kdc, &[])
    }

    /// As [`start_kerberos`](Self::start_kerberos), with `extra` lines in `zoo.cfg` (or `-D`
    /// JVM options), e.g. `kerberos.removeRealmFromPrincipal=true`.
    pub fn start_kerberos_with_config(
        kdc: &TestingKdc,
        extra: &[&str],
    ) -> io::Result<TestingServer> {
        let principal = kdc.server_principal();
        let jaas = kdc.dir().join(format!("jaas-server-{}.conf", free_port()?));
        std::fs::write(
            &jaas,
            format!(
                "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  \
                 useKeyTab=true\n  keyTab=\"{}\"\n  storeKey=true\n  useTicketCache=false\n  \
                 principal=\"{}\";\n}};\n",
                principal.keytab_path().display(),
                principal.name()
            ),
        )?;
        let mut lines = vec![
            format!("-Djava.security.krb5.conf={}", kdc.krb5_conf().display()),
            format!("-Djava.security.auth.login.config={}", jaas.display()),
            "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider".into(),
            "enforce.auth.enabled=true".into(),
            "enforce.auth.schemes=sasl".into(),
        ];
        lines.extend(extra.iter().map(|l| l.to_string()));
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut server = TestingServer::start_secured(None, None, &lines)?;
        server.kerberos = true;
        Ok(server)
    }

    fn start_secured(
        tls: Option<(&TestingCerts, ClientAuth)>,
        sasl: Option<&[(&str, &str)]>,
        extra: &[&str],
    ) -> io::Result<TestingServer> {
        let dir = tempfile::Builder::new().prefix("zklock-zk-").tempdir()?;
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data)?;
        let port = free_port()?;
        let cfg = dir.path().join("zoo.cfg");
        let mut text = base_config(&data, port, tls.is_some());
        let mut lines: Vec<String> = Vec::new();
        let mut jvm_opts = Vec::new();
        let tls = match tls {
            Some((certs, client_auth)) => {
                lines.extend(certs.zoo_cfg_lines(client_auth));
                Some(Tls {
                    certs: certs.clone(),
                    client_auth,
                    probe: certs.probe()?,
                })
            }
            None => None,
        };
        if let Some(users) = sasl {
            let jaas = dir.path().join("jaas.conf");
            std::fs::write(&jaas, jaas_server_section(users)?)?;
            jvm_opts.push(format!(
                "-Djava.security.auth.login.config={}",
                jaas.display()
            ));
            lines.extend(
                [
                    "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                    "enforce.auth.enabled=true",
                    "enforce.auth.schemes=sasl",
                ]
                .map(String::from),
            );
        }
        for l in extra {
            if l.starts_with("-D") {
                jvm_opts.push(l.to_string());
            } else {
                lines.push(l.to_string());
            }
        }
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        std::fs::write(&cfg, text)?;
        let log = dir.path().join("zookeeper.log");
        let mut server = TestingServer {
            port,
            dir,
            cfg,
            log,
            jvm_opts,
            tls,
            kerberos: false,
            process: None,
        };
        // The port was free when chosen, but free_port lets go of it, and another process
        // (a client's connection, another test's server) may take it before the server binds
        // it: the server then exits at its bind ("Address already in use"), or another server
        // answers there. Either way, another port, a few times.
        let mut attempt = 1;
        loop {
            let taken = match server.launch() {
                Ok(()) if server.serves_here() => return Ok(server),
                Ok(()) => io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("another server answers on port {}", server.port),
                ),
                Err(e) if e.to_string().contains("Address already in use") => e,
                Err(e) => return Err(e),
            };
            if attempt == 5 {
                return Err(taken);
            }
            attempt += 1;
            server.stop();
            let old = server.port;
            server.port = free_port()?;
            let text = std::fs::read_to_string(&server.cfg)?
                .replace(&format!("Port={old}\n"), &format!("Port={}\n", server.port));
            std::fs::write(&server.cfg, text)?;
        }
    }

    /// Whether the server answering on this server's port is this one (its `conf` names this
    /// server's data directory); true if it does not say (`conf` not allowed, no answer).
    fn serves_here(&self) -> bool {
        self.four_letter("conf").map_or(true, |c| {
            !c.contains("dataDir=") || c.contains(&*self.dir.path().to_string_lossy())
        })
    }

    fn launch(&mut self) -> io::Result<()> {
        let mut p = ServerProcess::spawn(STANDALONE_MAIN, &self.cfg, &self.log, &self.jvm_opts)?;
        let probe = self.tls.as_ref().map(|t| &t.probe);
        let res = wait_serving(&mut p, &self.address(), probe, &self.log);
        self.process = Some(p);
        if res.is_err() {
            self.stop();
        }
        res.map(|_| ())
    }

    /// `"127.0.0.1:PORT"`; `"tcp+tls://127.0.0.1:PORT"` for a TLS server
    /// ([`start_tls`](Self::start_tls)); `"localhost:PORT"` for a Kerberos one
    /// ([`start_kerberos`](Self::start_kerberos): the host its principal names).
    pub fn connect_string(&self) -> String {
        match (&self.tls, self.kerberos) {
            (Some(_), _) => format!("tcp+tls://{}", self.address()),
            (None, true) => format!("localhost:{}", self.port),
            (None, false) => self.address(),
        }
    }

    /// `"127.0.0.1:PORT"`, without a scheme also for a TLS server (e.g. for a
    /// [`TcpProxy`](super::TcpProxy) in front of it).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The certificates of a TLS server ([`start_tls`](Self::start_tls)); `None` for a
    /// plaintext one.
    pub fn certs(&self) -> Option<&TestingCerts> {
        self.tls.as_ref().map(|t| &t.certs)
    }

    /// Whether a TLS server requires client certificates; `None` for a plaintext one.
    pub fn client_auth(&self) -> Option<ClientAuth> {
        self.tls.as_ref().map(|t| t.client_auth)
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

    /// [`restart`](Self::restart) with `extra` lines added to its `zoo.cfg` from now on (a key
    /// given again overrides it: ZooKeeper reads the last value), as a configuration change
    /// rolled out by a restart does. Sessions survive if they reconnect within their timeout.
    ///
    /// ```no_run
    /// let mut server = zklock::testing::TestingServer::start().unwrap();
    /// // From now on the server grants no session longer than 2 s, reconnects included.
    /// server.restart_with_config(&["maxSessionTimeout=2000"]).unwrap();
    /// ```
    pub fn restart_with_config(&mut self, extra: &[&str]) -> io::Result<()> {
        let mut text = std::fs::read_to_string(&self.cfg)?;
        for line in extra {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&self.cfg, text)?;
        self.restart()
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
    /// and returns the answer; fails after 3 s without one (e.g. while paused). Over TLS on a
    /// TLS server (the harness presents a certificate of its own CA).
    pub fn four_letter(&self, cmd: &str) -> io::Result<String> {
        let probe = self.tls.as_ref().map(|t| &t.probe);
        four_letter_via(&self.address(), probe, cmd, FOUR_LETTER_TIMEOUT)
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
            .field("connect_string", &self.connect_string())
            .field("pid", &self.pid())
            .field("log", &self.log)
            .finish()
    }
}

/// The JAAS file of a SASL server: a `Server` section with one `user_<name>="<password>"`
/// option per user.
fn jaas_server_section(users: &[(&str, &str)]) -> io::Result<String> {
    let mut out =
        String::from("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required");
    for (user, password) in users {
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c))
        };
        if !plain(user) || password.contains(['"', '\\', '\n']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SASL user {user:?}: names are [A-Za-z0-9._-@], passwords without quotes, backslashes or newlines"),
            ));
        }
        out.push_str(&format!("\n  user_{user}=\"{password}\""));
    }
    out.push_str(";\n};\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::jaas_server_section;

    #[test]
    fn jaas_section_lists_users_and_refuses_what_it_cannot_quote() {
        let text = jaas_server_section(&[("bob", "bobpw"), ("carol.x", "p w")]).unwrap();
        assert_eq!(
            text,
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             user_bob=\"bobpw\"\n  user_carol.x=\"p w\";\n};\n"
        );
        assert!(jaas_server_section(&[("bob", "a\"b")]).is_err());
        assert!(jaas_server_section(&[("bo b", "x")]).is_err());
        assert!(jaas_server_section(&[("", "x")]).is_err());
    }
}
