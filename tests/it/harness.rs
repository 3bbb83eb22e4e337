#![cfg(feature = "testing")]
//! Tests of the test harness itself (`zklock::testing`) against real ZooKeeper servers.
//!
//! They speak just enough of the ZooKeeper wire protocol by hand (connect, create, exists)
//! to check what a user of the harness relies on, without going through the crate's client.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use zklock::testing::{TcpProxy, TestingCluster, TestingServer};

// ---------------------------------------------------------------------------------------
// A minimal raw ZooKeeper client.

struct RawSession {
    stream: TcpStream,
    session_id: i64,
    passwd: Vec<u8>,
    xid: i32,
}

fn put_str(b: &mut Vec<u8>, s: &[u8]) {
    b.extend_from_slice(&(s.len() as i32).to_be_bytes());
    b.extend_from_slice(s);
}

fn send_frame(s: &mut TcpStream, body: &[u8]) -> std::io::Result<()> {
    let mut f = (body.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    s.write_all(&f)
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

impl RawSession {
    /// Opens a new session (or resumes `resume = (id, passwd)`) with a 10 s timeout.
    fn connect(addr: &str, resume: Option<(i64, &[u8])>) -> std::io::Result<RawSession> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let (sid, pw) = resume.unwrap_or((0, &[0u8; 16]));
        let mut b = Vec::new();
        b.extend_from_slice(&0i32.to_be_bytes()); // protocol version
        b.extend_from_slice(&0i64.to_be_bytes()); // last zxid seen
        b.extend_from_slice(&10_000i32.to_be_bytes()); // session timeout
        b.extend_from_slice(&sid.to_be_bytes());
        put_str(&mut b, pw);
        b.push(0); // read-only: false
        send_frame(&mut stream, &b)?;
        let r = read_frame(&mut stream)?;
        let session_id = i64_at(&r, 8);
        let plen = i32_at(&r, 16) as usize;
        let passwd = r[20..20 + plen].to_vec();
        if session_id == 0 {
            return Err(std::io::Error::other("session refused (expired)"));
        }
        Ok(RawSession {
            stream,
            session_id,
            passwd,
            xid: 0,
        })
    }

    /// Sends a request and returns the reply's error code (0 = ok).
    fn call(&mut self, op: i32, payload: &[u8]) -> std::io::Result<i32> {
        self.xid += 1;
        let mut b = Vec::new();
        b.extend_from_slice(&self.xid.to_be_bytes());
        b.extend_from_slice(&op.to_be_bytes());
        b.extend_from_slice(payload);
        send_frame(&mut self.stream, &b)?;
        loop {
            let r = read_frame(&mut self.stream)?;
            if i32_at(&r, 0) == self.xid {
                return Ok(i32_at(&r, 12));
            }
        }
    }

    fn create(&mut self, path: &str, data: &[u8]) -> std::io::Result<i32> {
        let mut b = Vec::new();
        put_str(&mut b, path.as_bytes());
        put_str(&mut b, data);
        b.extend_from_slice(&1i32.to_be_bytes()); // one ACL
        b.extend_from_slice(&31i32.to_be_bytes()); // perms: all
        put_str(&mut b, b"world");
        put_str(&mut b, b"anyone");
        b.extend_from_slice(&0i32.to_be_bytes()); // persistent
        self.call(1, &b)
    }

    fn exists(&mut self, path: &str) -> std::io::Result<bool> {
        let mut b = Vec::new();
        put_str(&mut b, path.as_bytes());
        b.push(0);
        match self.call(3, &b)? {
            0 => Ok(true),
            -101 => Ok(false),
            e => Err(std::io::Error::other(format!("exists failed: {e}"))),
        }
    }
}

/// Whether the peer closed `s` (EOF or reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn modes(cluster: &TestingCluster, members: &[usize]) -> Vec<String> {
    let mut m: Vec<String> = members
        .iter()
        .map(|&i| {
            cluster
                .four_letter(i, "srvr")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Mode:"))
                        .map(|m| m.trim().to_string())
                })
                .unwrap_or_else(|| "down".into())
        })
        .collect();
    m.sort();
    m
}

// ---------------------------------------------------------------------------------------

#[test]
fn server_starts_and_answers_four_letter_words() {
    let t = Instant::now();
    let server = TestingServer::start().expect("start ZooKeeper");
    eprintln!("single server started in {:?}", t.elapsed());
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    assert_eq!(
        server.connect_string(),
        format!("127.0.0.1:{}", server.port())
    );
    assert!(server.pid().is_some());
    assert!(server.log_path().exists());
    let mntr = server.four_letter("mntr").unwrap();
    assert!(mntr.contains("zk_server_state\tstandalone"), "{mntr}");
    let srvr = server.four_letter("srvr").unwrap();
    assert!(srvr.contains("Mode: standalone"), "{srvr}");
}

#[test]
fn server_stop_restart_keeps_data_and_sessions() {
    let mut server = TestingServer::start().expect("start ZooKeeper");
    let port = server.port();
    let mut s = RawSession::connect(&server.connect_string(), None).unwrap();
    assert_eq!(s.create("/survives", b"x").unwrap(), 0);
    let (sid, pw) = (s.session_id, s.passwd.clone());

    server.stop();
    assert!(server.pid().is_none());
    assert!(
        server.four_letter("ruok").is_err(),
        "stopped server still answers"
    );
    assert!(closed_within(&mut s.stream, Duration::from_secs(2)));

    let t = Instant::now();
    server.restart().unwrap();
    eprintln!("single server restarted in {:?}", t.elapsed());
    assert_eq!(server.port(), port);
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    // Same data, and the session (10 s timeout) is still alive.
    let mut again = RawSession::connect(&server.connect_string(), Some((sid, &pw))).unwrap();
    assert_eq!(again.session_id, sid);
    assert!(again.exists("/survives").unwrap());
}

#[test]
fn paused_server_does_not_answer_until_resumed() {
    let server = TestingServer::start().expect("start ZooKeeper");
    server.pause();
    assert!(
        server.four_letter("ruok").is_err(),
        "paused server answered"
    );
    server.resume();
    assert_eq!(server.four_letter("ruok").unwrap(), "imok");
    // Dropping a paused server must not hang either.
    server.pause();
}

#[test]
fn cluster_elects_a_leader_and_survives_losing_a_member() {
    let t = Instant::now();
    let mut cluster = TestingCluster::start(3).expect("start ensemble");
    eprintln!("3-member cluster started in {:?}", t.elapsed());
    assert_eq!(cluster.len(), 3);
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    assert_eq!(
        modes(&cluster, &[0, 1, 2]),
        ["follower", "follower", "leader"]
    );

    // A session opened on member 1 is found there.
    let s = RawSession::connect(&cluster.member_connect_string(1), None).unwrap();
    assert_eq!(cluster.member_of_session(s.session_id), Some(1));
    drop(s);

    // Kill the leader: the other two elect a new one and keep serving.
    let leader = cluster.leader().expect("a leader");
    cluster.kill(leader);
    let rest: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while modes(&cluster, &rest) != ["follower", "leader"] {
        assert!(
            Instant::now() < deadline,
            "no new leader: {:?}",
            modes(&cluster, &rest)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut s = RawSession::connect(&cluster.member_connect_string(rest[0]), None).unwrap();
    assert_eq!(s.create("/after-failover", b"").unwrap(), 0);

    // The killed member comes back as a follower with the new data.
    let t = Instant::now();
    cluster.restart(leader).unwrap();
    eprintln!("cluster member restarted in {:?}", t.elapsed());
    assert_eq!(
        modes(&cluster, &[0, 1, 2]),
        ["follower", "follower", "leader"]
    );
    let mut back = RawSession::connect(&cluster.member_connect_string(leader), None).unwrap();
    assert!(back.exists("/after-failover").unwrap());
}

#[test]
fn proxy_forwards_cuts_refuses_and_blackholes() {
    let server = TestingServer::start().expect("start ZooKeeper");
    let proxy = TcpProxy::start(&server.connect_string()).unwrap();
    let four = |cmd: &str| -> std::io::Result<String> {
        let mut s = TcpStream::connect(proxy.connect_string())?;
        s.set_read_timeout(Some(Duration::from_secs(1)))?;
        s.write_all(cmd.as_bytes())?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    };
    assert_eq!(four("ruok").unwrap(), "imok");

    // A real session through the proxy works, and cut_all closes it.
    let mut s = RawSession::connect(&proxy.connect_string(), None).unwrap();
    assert_eq!(s.create("/via-proxy", b"").unwrap(), 0);
    assert_eq!(proxy.creates_seen(), 1);
    proxy.cut_all();
    assert!(
        closed_within(&mut s.stream, Duration::from_secs(2)),
        "cut_all left the connection open"
    );

    // refuse_new: accepted then closed at once.
    proxy.refuse_new(true);
    let mut c = TcpStream::connect(proxy.connect_string()).unwrap();
    assert!(closed_within(&mut c, Duration::from_secs(2)));
    proxy.refuse_new(false);

    // Blackhole: nothing comes back, on old or new connections, until it is lifted.
    let mut s = RawSession::connect(&proxy.connect_string(), None).unwrap();
    proxy.set_blackhole(true);
    assert!(four("ruok").is_err(), "black-holed proxy answered");
    s.stream
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    assert!(
        s.exists("/via-proxy").is_err(),
        "black-holed request answered"
    );
    proxy.set_blackhole(false);
    assert_eq!(four("ruok").unwrap(), "imok");
    drop(s);
}

#[test]
fn proxy_cut_after_create_applies_the_create_but_loses_the_reply() {
    let server = TestingServer::start().expect("start ZooKeeper");
    let proxy = TcpProxy::start(&server.connect_string()).unwrap();
    let mut s = RawSession::connect(&proxy.connect_string(), None).unwrap();
    assert!(!s.exists("/lost-reply").unwrap());
    proxy.cut_after_next_create();
    assert!(
        s.create("/lost-reply", b"").is_err(),
        "the create's reply reached the client"
    );
    assert_eq!(proxy.creates_seen(), 1);
    // The server applied it.
    let mut direct = RawSession::connect(&server.connect_string(), None).unwrap();
    assert!(direct.exists("/lost-reply").unwrap());
    // One-shot: the next create through the proxy goes through normally.
    let mut s = RawSession::connect(&proxy.connect_string(), None).unwrap();
    assert_eq!(s.create("/normal", b"").unwrap(), 0);
    assert_eq!(proxy.creates_seen(), 2);
}

/// The shared server is the run's own when `ZKLOCK_TEST_SERVER` names one (scripts/run-tests.sh
/// starts it: this process did not, so it has no process to stop), else one this process
/// started; either way it serves.
#[test]
fn the_shared_server_is_the_one_the_run_names() {
    let shared = TestingServer::shared();
    match std::env::var("ZKLOCK_TEST_SERVER") {
        Ok(addr) if !addr.is_empty() => {
            assert_eq!(shared.connect_string(), addr);
            assert_eq!(
                shared.pid(),
                None,
                "a server of the run, not of this process"
            );
        }
        _ => assert!(shared.pid().is_some(), "started by this process"),
    }
    assert_eq!(shared.four_letter("ruok").unwrap(), "imok");
}

/// The shared server of a target directory serves a test process for as long as the process
/// lives, even when it opens no connection for longer than the server's idle time (a long test
/// between its steps: the 200-trial hand-over lost its server at its 18th trial, a minute in),
/// and ends once no process uses it.
#[test]
fn the_shared_server_outlives_its_idle_time_while_a_process_uses_it_and_ends_after() {
    let dir = tempfile::tempdir().unwrap();
    let idle = Duration::from_secs(1);
    let (address, user) = crate::common::server_while_used(dir.path(), idle);
    // Unused for three idle times: a lower bound, nothing to wait for.
    std::thread::sleep(idle * 3);
    let server = TestingServer::attach(&address)
        .unwrap_or_else(|e| panic!("the server ended while this process used it: {e}"));
    assert!(server.four_letter("ruok").is_ok_and(|r| r == "imok"));
    drop(user);
    assert!(
        crate::common::eventually(Duration::from_secs(30), || {
            !dir.path().join("address").exists() && TestingServer::attach(&address).is_err()
        }),
        "the server still runs with no process using it"
    );
}
