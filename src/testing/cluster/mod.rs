//! A ZooKeeper ensemble (quorum) on loopback.//!
//! The ensemble (start, members, kill and restart) is here; its partitions are `partition`'s,
//! the members' ports `ports`'.

mod partition;
mod ports;

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use self::partition::Link;
use self::ports::{bind_free, member_port};
use super::link::{LinkMode, LinkProxy};
use super::{
    base_config, four_letter_via, parse_cons_sessions, wait_serving, ClientAuth, ServerProcess,
    TestingCerts, TlsProbe, FOUR_LETTER_TIMEOUT,
};

const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

struct Member {
    client_port: u16,
    cfg: PathBuf,
    log: PathBuf,
    process: Option<ServerProcess>,
}

/// A ZooKeeper ensemble of real servers on `127.0.0.1` (usually three members), for tests of
/// fail-over (like Curator's `TestingCluster`). Members are numbered `0..len()`; member `i`
/// has ZooKeeper server id `i + 1`.
///
/// [`TestingCluster::start_tls`] starts one whose client ports are TLS-only (the members'
/// quorum and election links stay plaintext).
///
/// Dropping it kills every member.
///
/// ```no_run
/// let mut cluster = zklock::testing::TestingCluster::start(3).unwrap();
/// println!("connect to {}", cluster.connect_string());
/// cluster.kill(0);
/// cluster.restart(0).unwrap();
/// ```
pub struct TestingCluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
    /// Empty unless started by [`TestingCluster::start_partitionable`].
    links: Vec<Link>,
    /// The members isolated now, and how ([`LinkMode::Hold`] or [`LinkMode::Drop`]).
    isolated: Mutex<BTreeMap<usize, LinkMode>>,
    /// The certificates of TLS client ports, and the harness's TLS client for them.
    tls: Option<(TestingCerts, ClientAuth, TlsProbe)>,
}

impl TestingCluster {
    /// Starts `members` servers in parallel and waits (up to 30 s) until a leader is elected
    /// and every member serves (`srvr` answers `Mode: leader` or `Mode: follower`).
    pub fn start(members: usize) -> io::Result<TestingCluster> {
        Self::start_with(members, false, None, &[])
    }

    /// As [`TestingCluster::start`], but every member's only client port is TLS
    /// (`secureClientPort`, Netty server), with new certificates ([`TestingCerts::generate`],
    /// one server certificate for all members: `127.0.0.1`/`localhost`) and `client_auth` as in
    /// [`TestingServer::start_tls`](super::TestingServer::start_tls). The quorum and election
    /// links between members stay plaintext. [`connect_string`](Self::connect_string) is
    /// `tcp+tls://127.0.0.1:p1,tcp+tls://127.0.0.1:p2,...`; four-letter words, [`leader`](Self::leader)
    /// and [`mode`](Self::mode) go over TLS.
    ///
    /// ```no_run
    /// use zklock::testing::{ClientAuth, TestingCluster};
    /// let cluster = TestingCluster::start_tls(3, ClientAuth::Need).unwrap();
    /// assert!(cluster.leader().is_some());
    /// let alice = cluster.certs().unwrap().client("alice").unwrap();
    /// // connect to cluster.connect_string() with cluster.certs().unwrap().ca_path() and alice
    /// ```
    pub fn start_tls(members: usize, client_auth: ClientAuth) -> io::Result<TestingCluster> {
        let certs = TestingCerts::generate()?;
        Self::start_with(members, false, Some((&certs, client_auth)), &[])
    }

    /// As [`TestingCluster::start_tls`] with the given certificates and `extra` lines in every
    /// member's `zoo.cfg`, and, when `partitionable`, quorum and election links through proxies
    /// as [`TestingCluster::start_partitionable`] does (so [`isolate`](Self::isolate) works).
    ///
    /// ```no_run
    /// use zklock::testing::{ClientAuth, TestingCerts, TestingCluster};
    /// let certs = TestingCerts::generate().unwrap();
    /// let cluster =
    ///     TestingCluster::start_tls_with(3, &certs, ClientAuth::None, true, &[]).unwrap();
    /// cluster.isolate(0);
    /// ```
    pub fn start_tls_with(
        members: usize,
        certs: &TestingCerts,
        client_auth: ClientAuth,
        partitionable: bool,
        extra: &[&str],
    ) -> io::Result<TestingCluster> {
        Self::start_with(members, partitionable, Some((certs, client_auth)), extra)
    }

    /// As [`TestingCluster::start`], with `extra` lines in every member's `zoo.cfg`
    /// (`key=value`, after the defaults, so they override them: e.g. `tickTime=6000`).
    ///
    /// ```no_run
    /// let cluster =
    ///     zklock::testing::TestingCluster::start_with_config(3, &["tickTime=6000"]).unwrap();
    /// ```
    pub fn start_with_config(members: usize, extra: &[&str]) -> io::Result<TestingCluster> {
        Self::start_with(members, false, None, extra)
    }

    /// Starts `members` servers whose quorum and election links to each other go through
    /// proxies (each member's zoo.cfg lists the *other* members at proxy ports, itself at its
    /// real ports), so that [`TestingCluster::isolate`] can partition one member from the
    /// others. Otherwise as [`TestingCluster::start`]; clients connect to the members directly.
    ///
    /// Leader election retries every second at most (`fastleader.maxNotificationInterval`,
    /// 60 s by default), so a healed member rejoins within seconds.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::testing::{eventually, TestingCluster};
    /// let cluster = TestingCluster::start_partitionable(3).unwrap();
    /// let leader = cluster.leader().unwrap();
    /// let follower = (leader + 1) % 3;
    /// cluster.isolate(follower);
    /// // after syncLimit x tickTime (2.5 s) the follower stops serving; the leader stays
    /// assert!(eventually(Duration::from_secs(10), || !cluster.serving(follower)));
    /// cluster.heal(follower);
    /// assert!(eventually(Duration::from_secs(30), || cluster.serving(follower)));
    /// ```
    pub fn start_partitionable(members: usize) -> io::Result<TestingCluster> {
        Self::start_with(members, true, None, &[])
    }

    /// As [`TestingCluster::start_partitionable`], with `extra` lines in every member's
    /// `zoo.cfg` (as [`TestingCluster::start_with_config`]).
    ///
    /// ```no_run
    /// let cluster = zklock::testing::TestingCluster::start_partitionable_with_config(
    ///     3,
    ///     &["syncLimit=30"],
    /// )
    /// .unwrap();
    /// ```
    pub fn start_partitionable_with_config(
        members: usize,
        extra: &[&str],
    ) -> io::Result<TestingCluster> {
        Self::start_with(members, true, None, extra)
    }

    fn start_with(
        members: usize,
        partitionable: bool,
        tls: Option<(&TestingCerts, ClientAuth)>,
        extra: &[&str],
    ) -> io::Result<TestingCluster> {
        if members == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cluster needs at least one member",
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("zklock-zkcluster-")
            .tempdir()?;
        let mut ports = Vec::with_capacity(members);
        for _ in 0..members {
            ports.push((member_port()?, member_port()?, member_port()?));
        }
        // links[(from, to)]: listeners of the proxies from `from` to `to`'s quorum and election
        // ports, bound now so that every zoo.cfg can name them.
        let mut listeners = Vec::new();
        if partitionable && members > 1 {
            for from in 0..members {
                for to in 0..members {
                    if from != to {
                        listeners.push((from, to, bind_free()?, bind_free()?));
                    }
                }
            }
        }
        let proxy_ports = |from: usize, to: usize| {
            listeners
                .iter()
                .find(|(f, t, _, _)| *f == from && *t == to)
                .map(|(_, _, q, e)| (q.1, e.1))
        };
        // The server list as member `me` sees it.
        let servers = |me: usize| -> String {
            ports
                .iter()
                .enumerate()
                .map(|(i, (_, peer, election))| {
                    let (peer, election) = proxy_ports(me, i).unwrap_or((*peer, *election));
                    format!("server.{}=127.0.0.1:{peer}:{election}\n", i + 1)
                })
                .collect()
        };
        let mut list = Vec::with_capacity(members);
        for (i, (client, _, _)) in ports.iter().enumerate() {
            let mdir = dir.path().join(format!("member{i}"));
            let data = mdir.join("data");
            std::fs::create_dir_all(&data)?;
            std::fs::write(data.join("myid"), format!("{}\n", i + 1))?;
            let mut cfg_text = base_config(&data, *client, tls.is_some());
            if let Some((certs, client_auth)) = tls {
                for line in certs.zoo_cfg_lines(client_auth) {
                    cfg_text.push_str(&line);
                    cfg_text.push('\n');
                }
            }
            for line in extra {
                cfg_text.push_str(line);
                cfg_text.push('\n');
            }
            if members > 1 {
                cfg_text.push_str("standaloneEnabled=false\nreconfigEnabled=false\n");
                if partitionable {
                    // Unknown keys become system properties `zookeeper.<key>`.
                    cfg_text.push_str("fastleader.maxNotificationInterval=1000\n");
                }
                cfg_text.push_str(&servers(i));
            }
            let cfg = mdir.join("zoo.cfg");
            std::fs::write(&cfg, cfg_text)?;
            list.push(Member {
                client_port: *client,
                cfg,
                log: mdir.join("zookeeper.log"),
                process: None,
            });
        }
        let mut links = Vec::new();
        let election_callbacks: Vec<(usize, usize, u16)> =
            listeners.iter().map(|(f, t, _, e)| (*f, *t, e.1)).collect();
        for (from, to, (ql, _), (el, _)) in listeners {
            let (_, peer, election) = ports[to];
            // What `to` dials to reach `from`: its election proxy towards `from`.
            let back = election_callbacks
                .iter()
                .find(|(f, t, _)| *f == to && *t == from)
                .map(|(_, _, p)| format!("127.0.0.1:{p}"));
            links.push(Link {
                from,
                to,
                quorum: LinkProxy::start(ql, SocketAddr::from(([127, 0, 0, 1], peer)), None)?,
                election: LinkProxy::start(el, SocketAddr::from(([127, 0, 0, 1], election)), back)?,
            });
        }
        let mut cluster = TestingCluster {
            dir,
            members: list,
            links,
            isolated: Mutex::new(BTreeMap::new()),
            tls: match tls {
                Some((certs, client_auth)) => Some((certs.clone(), client_auth, certs.probe()?)),
                None => None,
            },
        };
        for i in 0..members {
            cluster.spawn(i)?;
        }
        for i in 0..members {
            cluster.wait(i)?;
        }
        Ok(cluster)
    }

    /// Whether member `i` runs and serves requests (`srvr` answers with a `Mode:`; a member
    /// without a quorum answers "This ZooKeeper instance is not currently serving requests").
    pub fn serving(&self, i: usize) -> bool {
        self.mode(i).is_some()
    }

    /// The `Mode:` of member `i` (`leader`, `follower`, ...), or `None` if it does not serve
    /// (or does not run).
    pub fn mode(&self, i: usize) -> Option<String> {
        self.members[i].process.as_ref()?;
        self.ask(i, "srvr", Duration::from_secs(1))
            .ok()
            .and_then(|s| super::parse_mode(&s))
    }

    /// A four-letter word to member `i`, over TLS if its client port is.
    fn ask(&self, i: usize, cmd: &str, timeout: Duration) -> io::Result<String> {
        four_letter_via(&self.member_address(i), self.probe(), cmd, timeout)
    }

    fn probe(&self) -> Option<&TlsProbe> {
        self.tls.as_ref().map(|(_, _, p)| p)
    }

    /// `"127.0.0.1:PORT"` of member `i`.
    fn member_address(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client_port)
    }

    /// The certificates of a cluster started by [`TestingCluster::start_tls`]; `None` for a
    /// plaintext one.
    pub fn certs(&self) -> Option<&TestingCerts> {
        self.tls.as_ref().map(|(c, _, _)| c)
    }

    /// Whether the TLS client ports require client certificates; `None` for a plaintext
    /// cluster.
    pub fn client_auth(&self) -> Option<ClientAuth> {
        self.tls.as_ref().map(|(_, a, _)| *a)
    }

    fn main_class(&self) -> &'static str {
        if self.members.len() > 1 {
            QUORUM_MAIN
        } else {
            STANDALONE_MAIN
        }
    }

    fn spawn(&mut self, i: usize) -> io::Result<()> {
        let main = self.main_class();
        let m = &mut self.members[i];
        m.process = Some(ServerProcess::spawn(main, &m.cfg, &m.log, &[])?);
        Ok(())
    }

    fn wait(&mut self, i: usize) -> io::Result<()> {
        let addr = self.member_address(i);
        let probe = self.tls.as_ref().map(|(_, _, p)| p);
        let m = &mut self.members[i];
        let Some(p) = m.process.as_mut() else {
            return Err(io::Error::other(format!("member {i} is not running")));
        };
        let res = wait_serving(p, &addr, probe, &m.log);
        if res.is_err() {
            self.kill(i);
        }
        res.map(|_| ())
    }

    /// All members: `"127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"` (each with `tcp+tls://` before
    /// it on a TLS cluster).
    pub fn connect_string(&self) -> String {
        (0..self.members.len())
            .map(|i| self.member_connect_string(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i` only: `"127.0.0.1:PORT"` (`"tcp+tls://127.0.0.1:PORT"` on a TLS cluster).
    pub fn member_connect_string(&self, i: usize) -> String {
        match self.tls {
            Some(_) => format!("tcp+tls://{}", self.member_address(i)),
            None => self.member_address(i),
        }
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Always `false`: a cluster has at least one member.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Process id of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].process.as_ref().map(|p| p.pid())
    }

    /// Log file of member `i`.
    pub fn log_path(&self, i: usize) -> &Path {
        &self.members[i].log
    }

    /// The cluster's temporary directory (one `member<i>/` per member).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills member `i` (SIGKILL) and waits for it to exit; its data is kept.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.members[i].process.take() {
            p.kill();
        }
    }

    /// Starts member `i` again (killing it first if it runs) on the same ports with the same
    /// data, and waits until it serves (has joined a quorum).
    ///
    /// A member that exits while starting (e.g. one of its ports was taken meanwhile) is
    /// started again, up to three times in all.
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        let mut tries = 1;
        loop {
            self.kill(i);
            self.spawn(i)?;
            match self.wait(i) {
                Err(e) if tries < 3 && e.kind() != io::ErrorKind::TimedOut => {
                    tries += 1;
                    std::thread::sleep(Duration::from_secs(1));
                }
                r => return r,
            }
        }
    }

    /// Restarts member `i` (as [`TestingCluster::restart`]) with `extra` lines added to its
    /// `zoo.cfg` from now on, after the others (a key given again overrides it: the last value
    /// of a key is the one ZooKeeper reads), as a rolling configuration change does. The other
    /// members keep theirs.
    ///
    /// ```no_run
    /// let mut cluster = zklock::testing::TestingCluster::start(3).unwrap();
    /// // Member 0 now grants no session longer than 2 s; members 1 and 2 still grant 60 s.
    /// cluster.restart_with_config(0, &["maxSessionTimeout=2000"]).unwrap();
    /// ```
    pub fn restart_with_config(&mut self, i: usize, extra: &[&str]) -> io::Result<()> {
        let cfg = &self.members[i].cfg;
        let mut text = std::fs::read_to_string(cfg)?;
        for line in extra {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(cfg, text)?;
        self.restart(i)
    }

    /// Freezes member `i` (SIGSTOP).
    pub fn pause(&self, i: usize) {
        if let Some(p) = &self.members[i].process {
            p.pause();
        }
    }

    /// Thaws member `i` (SIGCONT).
    pub fn resume(&self, i: usize) {
        if let Some(p) = &self.members[i].process {
            p.resume();
        }
    }

    /// Index of the member that currently serves the session `session_id`, found in the
    /// `cons` output of each live member; `None` if no live member lists it.
    pub fn member_of_session(&self, session_id: i64) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            self.members[i].process.is_some()
                && self
                    .ask(i, "cons", Duration::from_secs(1))
                    .map(|c| parse_cons_sessions(&c).contains(&session_id))
                    .unwrap_or(false)
        })
    }

    /// Index of the current leader among live members, if any answers `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            self.members[i].process.is_some()
                && self
                    .ask(i, "srvr", Duration::from_secs(1))
                    .ok()
                    .and_then(|s| super::parse_mode(&s))
                    .is_some_and(|m| m == "leader" || m == "standalone")
        })
    }

    /// Sends a four-letter word to member `i` (over TLS on a TLS cluster) and returns the
    /// answer; fails after 3 s.
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        self.ask(i, cmd, FOUR_LETTER_TIMEOUT)
    }
}

impl Drop for TestingCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}

impl std::fmt::Debug for TestingCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestingCluster")
            .field("connect_string", &self.connect_string())
            .field("dir", &self.dir.path())
            .finish()
    }
}
