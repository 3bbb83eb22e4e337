//! A ZooKeeper ensemble (quorum) on loopback.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    base_config, four_letter_at, free_port, parse_cons_sessions, wait_serving, ServerProcess,
    FOUR_LETTER_TIMEOUT,
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
}

impl TestingCluster {
    /// Starts `members` servers in parallel and waits (up to 30 s) until a leader is elected
    /// and every member serves (`srvr` answers `Mode: leader` or `Mode: follower`).
    pub fn start(members: usize) -> io::Result<TestingCluster> {
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
            ports.push((free_port()?, free_port()?, free_port()?));
        }
        let servers: String = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer, election))| {
                format!("server.{}=127.0.0.1:{peer}:{election}\n", i + 1)
            })
            .collect();
        let mut list = Vec::with_capacity(members);
        for (i, (client, _, _)) in ports.iter().enumerate() {
            let mdir = dir.path().join(format!("member{i}"));
            let data = mdir.join("data");
            std::fs::create_dir_all(&data)?;
            std::fs::write(data.join("myid"), format!("{}\n", i + 1))?;
            let mut cfg_text = base_config(&data, *client);
            if members > 1 {
                cfg_text.push_str("standaloneEnabled=false\nreconfigEnabled=false\n");
                cfg_text.push_str(&servers);
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
        let mut cluster = TestingCluster { dir, members: list };
        for i in 0..members {
            cluster.spawn(i)?;
        }
        for i in 0..members {
            cluster.wait(i)?;
        }
        Ok(cluster)
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
        m.process = Some(ServerProcess::spawn(main, &m.cfg, &m.log)?);
        Ok(())
    }

    fn wait(&mut self, i: usize) -> io::Result<()> {
        let addr = self.member_connect_string(i);
        let m = &mut self.members[i];
        let Some(p) = m.process.as_mut() else {
            return Err(io::Error::other(format!("member {i} is not running")));
        };
        let res = wait_serving(p, &addr, &m.log);
        if res.is_err() {
            self.kill(i);
        }
        res.map(|_| ())
    }

    /// All members: `"127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"`.
    pub fn connect_string(&self) -> String {
        (0..self.members.len())
            .map(|i| self.member_connect_string(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Member `i` only: `"127.0.0.1:PORT"`.
    pub fn member_connect_string(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client_port)
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
    pub fn restart(&mut self, i: usize) -> io::Result<()> {
        self.kill(i);
        self.spawn(i)?;
        self.wait(i)
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
                && four_letter_at(
                    &self.member_connect_string(i),
                    "cons",
                    Duration::from_secs(1),
                )
                .map(|c| parse_cons_sessions(&c).contains(&session_id))
                .unwrap_or(false)
        })
    }

    /// Index of the current leader among live members, if any answers `Mode: leader`.
    pub fn leader(&self) -> Option<usize> {
        (0..self.members.len()).find(|&i| {
            self.members[i].process.is_some()
                && four_letter_at(
                    &self.member_connect_string(i),
                    "srvr",
                    Duration::from_secs(1),
                )
                .ok()
                .and_then(|s| super::parse_mode(&s))
                .is_some_and(|m| m == "leader" || m == "standalone")
        })
    }

    /// Sends a four-letter word to member `i` and returns the answer; fails after 3 s.
    pub fn four_letter(&self, i: usize, cmd: &str) -> io::Result<String> {
        four_letter_at(&self.member_connect_string(i), cmd, FOUR_LETTER_TIMEOUT)
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
