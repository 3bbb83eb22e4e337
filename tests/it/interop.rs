#![cfg(feature = "testing")]
//! zklock next to the real peers on the same lock paths: Apache Curator (Debian's jars, a small
//! Java program compiled here) with zklock in Curator mode, and Python kazoo (from PyPI) with
//! zklock in kazoo mode. Mutex, read-write lock and semaphore; both holder orders; several
//! processes of each under load, every holder appending to one shared history that must show
//! no overlap.
//!
//! Needs the peers: `scripts/install-peers.sh` installs what is missing.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::history::*;
use crate::common::*;
use zklock::{Deadline, Lockable, Revocable};
use zklock::{Protocol, ReadWriteLock};

/// Entry of the zklock worker processes (a no-op unless started as a worker).
#[test]
fn worker_entry() {
    run_worker_if_asked();
}

const PEER_START: Duration = Duration::from_secs(40);

#[derive(Clone, Copy, Debug)]
pub(crate) enum Peer {
    Curator,
    Kazoo,
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn curator_classpath() -> String {
    let mut jars = vec![
        "curator-recipes",
        "curator-framework",
        "curator-client",
        "zookeeper",
    ];
    if std::path::Path::new("/usr/share/java/slf4j-nop.jar").exists() {
        jars.push("slf4j-nop");
    }
    jars.iter()
        .map(|j| format!("/usr/share/java/{j}.jar"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Compiles tests/peers/CuratorPeer.java once per run (nextest runs each test in a process of
/// its own: once per process was a javac per test, a minute of CPU a run); returns the classes
/// directory, under the target directory, named for the source's contents.
fn curator_classes() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        for jar in [
            "curator-recipes",
            "curator-framework",
            "curator-client",
            "zookeeper",
        ] {
            assert!(
                std::path::Path::new(&format!("/usr/share/java/{jar}.jar")).exists(),
                "/usr/share/java/{jar}.jar is missing: run scripts/install-peers.sh"
            );
        }
        let source = manifest().join("tests/peers/CuratorPeer.java");
        let text = std::fs::read(&source).expect("read tests/peers/CuratorPeer.java");
        let key = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&text, curator_classpath()).hash(&mut h);
            h.finish()
        };
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let dir = tmp.join(format!("curator-peer-{key:016x}"));
        // One compile at a time: the tests that start together wait for the first.
        let lock = std::fs::File::create(tmp.join("curator-peer.lock")).unwrap();
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
        if dir.join("CuratorPeer.class").exists() {
            return dir;
        }
        // Compiled aside, then moved into place whole (a test killed midway leaves no half).
        let aside = tempfile::Builder::new()
            .prefix("curator-peer-")
            .tempdir_in(&tmp)
            .unwrap();
        let st = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(aside.path())
            .args(["-cp", &curator_classpath()])
            .arg(&source)
            .status()
            .expect("javac not found: run scripts/install-peers.sh");
        assert!(st.success(), "javac failed on tests/peers/CuratorPeer.java");
        std::fs::rename(aside.keep(), &dir).unwrap();
        dir
    })
}

fn check_kazoo() {
    static OK: OnceLock<()> = OnceLock::new();
    OK.get_or_init(|| {
        let ok = Command::new("python3")
            .args(["-c", "import kazoo"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "python3 with kazoo is missing: run scripts/install-peers.sh"
        );
    });
}

impl Peer {
    fn protocol(self) -> Protocol {
        match self {
            Peer::Curator => Protocol::Curator,
            Peer::Kazoo => Protocol::Kazoo,
        }
    }

    pub(crate) fn proto_arg(self) -> &'static str {
        match self {
            Peer::Curator => "curator",
            Peer::Kazoo => "kazoo",
        }
    }

    /// Starts one peer process (see tests/peers/ for the arguments).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        self,
        hosts: &str,
        path: &str,
        lock: &str,
        action: &str,
        ms: u64,
        hist: &History,
        who: &str,
        rf: f64,
    ) -> Proc {
        let args = [
            hosts.to_string(),
            path.to_string(),
            lock.to_string(),
            action.to_string(),
            ms.to_string(),
            hist.path().display().to_string(),
            who.to_string(),
            rf.to_string(),
        ];
        let mut cmd = match self {
            Peer::Curator => {
                let classes = curator_classes();
                let mut c = Command::new("java");
                c.args(["-Xmx128m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp"])
                    .arg(format!("{}:{}", classes.display(), curator_classpath()))
                    .arg("CuratorPeer");
                c
            }
            Peer::Kazoo => {
                check_kazoo();
                let mut c = Command::new("python3");
                c.arg(manifest().join("tests/peers/kazoo_peer.py"));
                c
            }
        };
        cmd.args(args);
        Proc::spawn(cmd, &format!("{self:?} peer {who}"))
    }
}

/// Several peer processes and several zklock processes hammer one path at once.
fn mixed_load(peer: Peer, lock: &str) -> Stats {
    let hosts = hosts();
    let path = unique_path(&format!("interop-{}-load", peer.proto_arg()));
    let hist = History::new();
    let mut procs = Vec::new();
    for i in 0..2 {
        procs.push(peer.spawn(
            &hosts,
            &path,
            lock,
            "load",
            4000,
            &hist,
            &format!("peer{i}"),
            0.7,
        ));
        procs.push(spawn_worker(
            "interop::worker_entry",
            &hosts,
            &path,
            peer.proto_arg(),
            lock,
            "load",
            4000,
            hist.path(),
            &format!("zk{i}"),
            0.7,
        ));
    }
    for p in procs {
        p.wait_ok(Duration::from_secs(60));
    }
    let st = hist.check();
    eprintln!("history: {st:?}");
    for who in ["peer0", "peer1", "zk0", "zk1"] {
        assert!(
            st.holds_of(who) > 0,
            "{who} never held the {lock} lock: {st:?}"
        );
    }
    st
}

#[test]
fn curator_mutex_and_zklock_exclude_each_other_under_load() {
    mixed_load(Peer::Curator, "mutex");
}

#[test]
fn kazoo_lock_and_zklock_exclude_each_other_under_load() {
    mixed_load(Peer::Kazoo, "mutex");
}

#[test]
fn curator_rwlock_and_zklock_under_load() {
    let st = mixed_load(Peer::Curator, "rw");
    assert!(st.writes > 0 && st.reads > 0, "{st:?}");
}

#[test]
fn kazoo_rwlock_and_zklock_under_load() {
    let st = mixed_load(Peer::Kazoo, "rw");
    assert!(st.writes > 0 && st.reads > 0, "{st:?}");
}

#[test]
fn curator_semaphore_and_zklock_share_three_leases() {
    let st = mixed_load(Peer::Curator, "semaphore:3");
    assert!((2..=3).contains(&st.peak_leases), "{st:?}");
}

#[test]
fn kazoo_semaphore_and_zklock_share_three_leases() {
    let st = mixed_load(Peer::Kazoo, "semaphore:3");
    assert!((2..=3).contains(&st.peak_leases), "{st:?}");
}

/// Exclusive lock (`mutex`) or write lock (`write`): the peer holds first, then zklock does.
fn holder_orders(peer: Peer, lock: &str) {
    let hosts = hosts();
    let path = unique_path(&format!("interop-{}-order", peer.proto_arg()));
    let hist = History::new();
    let c = connect(&hosts, peer.protocol());
    let mutex = zklock::Mutex::new(&c, &path).unwrap();
    let rw = ReadWriteLock::new(&c, &path).unwrap();
    let mut h = hist.writer();
    let zk_try = |wait: Duration| -> bool {
        match lock {
            "mutex" => mutex
                .acquire(Deadline::from_timeout(Some(wait)))
                .unwrap()
                .is_some(),
            _ => rw
                .write()
                .acquire(Deadline::from_timeout(Some(wait)))
                .unwrap()
                .is_some(),
        }
    };
    let zk_release = || {
        if lock == "mutex" {
            mutex.release().unwrap()
        } else {
            rw.write().release().unwrap()
        }
    };

    // 1. The peer holds: zklock must not get in, then gets in after the peer's release.
    let mut p = peer.spawn(&hosts, &path, lock, "hold", 1500, &hist, "peer", 0.0);
    p.expect_line("HELD", PEER_START);
    assert!(
        !zk_try(Duration::ZERO),
        "zklock took a lock the {peer:?} peer holds"
    );
    assert!(
        zk_try(Duration::from_secs(20)),
        "zklock never got the lock after the peer"
    );
    h.enter('W', "zk");
    p.wait_ok(Duration::from_secs(20));
    // 2. zklock holds: the peer must not get in, then gets in after zklock's release.
    let out = peer
        .spawn(&hosts, &path, lock, "try", 700, &hist, "peer", 0.0)
        .wait_ok(PEER_START);
    assert!(
        out.contains(&"NOT_ACQUIRED".to_string()),
        "the {peer:?} peer took a lock zklock holds: {out:?}"
    );
    let p = peer.spawn(&hosts, &path, lock, "try", 30_000, &hist, "peer", 0.0);
    std::thread::sleep(Duration::from_millis(1500));
    h.exit('W', "zk");
    zk_release();
    let out = p.wait_ok(PEER_START);
    assert!(out.contains(&"ACQUIRED".to_string()), "{out:?}");
    let st = hist.check();
    eprintln!("history: {st:?}");
    assert_eq!(st.holds_of("zk"), 1);
    assert_eq!(st.holds_of("peer"), 2);
}

#[test]
fn curator_mutex_holder_orders() {
    holder_orders(Peer::Curator, "mutex");
}

#[test]
fn kazoo_lock_holder_orders() {
    holder_orders(Peer::Kazoo, "mutex");
}

#[test]
fn curator_write_lock_holder_orders() {
    holder_orders(Peer::Curator, "write");
}

#[test]
fn kazoo_write_lock_holder_orders() {
    holder_orders(Peer::Kazoo, "write");
}

/// Readers of both implementations share; each one's writer excludes the other's readers.
fn readers_share_across(peer: Peer) {
    let hosts = hosts();
    let path = unique_path(&format!("interop-{}-share", peer.proto_arg()));
    let hist = History::new();
    let c = connect(&hosts, peer.protocol());
    let rw = ReadWriteLock::new(&c, &path).unwrap();
    let mut h = hist.writer();

    // The peer reads: zklock reads alongside, but cannot write.
    let mut p = peer.spawn(&hosts, &path, "read", "hold", 2500, &hist, "peer", 0.0);
    p.expect_line("HELD", PEER_START);
    let r = rw
        .read()
        .try_lock()
        .unwrap()
        .expect("zklock reader blocked by a peer reader");
    h.enter('R', "zk");
    h.exit('R', "zk");
    drop(r);
    assert!(
        rw.write().try_lock().unwrap().is_none(),
        "zklock wrote while a peer reads"
    );
    p.wait_ok(Duration::from_secs(20));

    // zklock reads: the peer reads alongside, but cannot write.
    let r = rw.read().lock().unwrap();
    h.enter('R', "zk");
    let out = peer
        .spawn(&hosts, &path, "write", "try", 700, &hist, "peer", 0.0)
        .wait_ok(PEER_START);
    assert!(
        out.contains(&"NOT_ACQUIRED".to_string()),
        "the peer wrote while zklock reads: {out:?}"
    );
    let mut p = peer.spawn(&hosts, &path, "read", "hold", 200, &hist, "peer", 0.0);
    p.expect_line("HELD", PEER_START);
    p.wait_ok(Duration::from_secs(20));
    h.exit('R', "zk");
    drop(r);

    // zklock writes: the peer cannot read.
    let w = rw.write().lock().unwrap();
    h.enter('W', "zk");
    let out = peer
        .spawn(&hosts, &path, "read", "try", 700, &hist, "peer", 0.0)
        .wait_ok(PEER_START);
    assert!(
        out.contains(&"NOT_ACQUIRED".to_string()),
        "the peer read while zklock writes: {out:?}"
    );
    h.exit('W', "zk");
    drop(w);

    let st = hist.check();
    eprintln!("history: {st:?}");
    assert_eq!(
        st.peak_readers, 2,
        "readers of both sides never overlapped: {st:?}"
    );
}

#[test]
fn curator_and_zklock_readers_share() {
    readers_share_across(Peer::Curator);
}

#[test]
fn kazoo_and_zklock_readers_share() {
    readers_share_across(Peer::Kazoo);
}

/// zklock downgrades write -> read while a peer writer is queued: the peer writer must keep
/// waiting until the downgraded read lock is released too (the read node carries the writer's
/// number, which the peers' writers count).
fn downgrade_holds_off_peer_writer(peer: Peer) {
    let hosts = hosts();
    let path = unique_path(&format!("interop-{}-downgrade", peer.proto_arg()));
    let hist = History::new();
    let c = connect(&hosts, peer.protocol());
    let rw = ReadWriteLock::new(&c, &path).unwrap();
    let mut h = hist.writer();

    let w = rw.write().lock().unwrap();
    h.enter('W', "zk");
    let p = peer.spawn(&hosts, &path, "write", "try", 30_000, &hist, "peer", 0.0);
    assert!(
        eventually(PEER_START, || rw.participants().unwrap().len() == 2),
        "the peer writer never queued"
    );
    let r = rw.read().try_lock().unwrap().expect("downgrade");
    // Held throughout; recorded as one hold handing over to the other (the checker allows no
    // reader inside a writer, even the same holder's).
    h.exit('W', "zk");
    h.enter('R', "zk");
    drop(w);
    // Only the downgraded read node is ahead of the peer writer now; it must wait for it.
    std::thread::sleep(Duration::from_millis(1500));
    h.exit('R', "zk");
    drop(r);
    let out = p.wait_ok(PEER_START);
    assert!(out.contains(&"ACQUIRED".to_string()), "{out:?}");
    let st = hist.check();
    eprintln!("history: {st:?}");
    assert_eq!((st.holds_of("zk"), st.holds_of("peer")), (2, 1), "{st:?}");
}

#[test]
fn curator_writer_waits_for_a_zklock_downgrade() {
    downgrade_holds_off_peer_writer(Peer::Curator);
}

#[test]
fn kazoo_writer_waits_for_a_zklock_downgrade() {
    downgrade_holds_off_peer_writer(Peer::Kazoo);
}

/// Curator's revocation, both ways, on one path (Curator's `Revoker` writes `__REVOKE__` into
/// the holder's node; a holder that called `makeRevocable` is told and lets go).
#[test]
fn zklock_asks_a_revocable_curator_holder_to_let_go_and_gets_the_lock() {
    let hosts = hosts();
    let path = unique_path("interop-revoke-curator");
    let hist = History::new();
    let mut p = Peer::Curator.spawn(
        &hosts,
        &path,
        "mutex",
        "revocable",
        30_000,
        &hist,
        "peer",
        0.0,
    );
    p.expect_line("HELD", PEER_START);
    let c = connect(&hosts, Protocol::Curator);
    let m = zklock::Mutex::per_handle(&c, &path).unwrap();
    assert!(m.try_lock().unwrap().is_none(), "the Curator holder holds");
    let asked = m.revoke_holders().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    p.expect_line("REVOKE_REQUESTED", Duration::from_secs(10));
    p.expect_line("RELEASED", Duration::from_secs(10));
    assert!(
        m.try_lock_for(Duration::from_secs(10)).unwrap().is_some(),
        "the lock after the revoked holder let go"
    );
    p.wait_ok(Duration::from_secs(20));
}

#[test]
fn curators_revoker_asks_a_revocable_zklock_holder_and_never_forces_one_that_is_not() {
    let hosts = hosts();
    let path = unique_path("interop-revoked-zklock");
    let hist = History::new();
    let c = connect(&hosts, Protocol::Curator);
    let m = zklock::Mutex::per_handle(&c, &path).unwrap();
    m.make_revocable(Box::new(|| {})).unwrap();
    assert!(m.acquire(Deadline::Forever).unwrap().is_some());
    let node = |m: &zklock::Mutex| {
        let p = m.participants().unwrap();
        format!("{path}/{}", p.iter().find(|p| p.is_holder).unwrap().node)
    };
    let mut p = Peer::Curator.spawn(&hosts, &node(&m), "mutex", "revoke", 0, &hist, "peer", 0.0);
    p.expect_line("REVOKED", PEER_START);
    assert!(
        m.wait_revoke_request(Some(Duration::from_secs(10)))
            .unwrap(),
        "zklock heard Curator's Revoker"
    );
    assert!(m.is_held(), "asked, not forced");
    m.release().unwrap();
    p.wait_ok(Duration::from_secs(20));

    // Not revocable: Curator's request changes nothing.
    let other = zklock::Mutex::per_handle(&c, &path).unwrap();
    assert!(other.acquire(Deadline::Forever).unwrap().is_some());
    let mut p = Peer::Curator.spawn(
        &hosts,
        &node(&other),
        "mutex",
        "revoke",
        0,
        &hist,
        "peer2",
        0.0,
    );
    p.expect_line("REVOKED", PEER_START);
    p.wait_ok(Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    assert!(other.is_held());
    other.release().unwrap();
}

/// zklock's leader election and Curator's `LeaderLatch` on one path: a Curator leader keeps
/// zklock waiting, and zklock leads after it; a zklock leader keeps Curator waiting, Curator's
/// own `getLeader()` names it, and Curator leads after zklock relinquishes.
#[test]
fn curator_leader_latch_and_zklock_election_share_one_leader() {
    election_shared_with(Peer::Curator, "latch");
}

/// kazoo's `Election` joins a zklock election made under the kazoo protocol (both are kazoo
/// locks): each leads only while the other does not, and hands over on leaving.
#[test]
fn kazoo_election_and_zklock_election_share_one_leader() {
    election_shared_with(Peer::Kazoo, "election");
}

/// The peer's election (`lock`: its peer program's name for it) and zklock's take turns on one
/// path, both ways; Curator also names zklock's leader through its own API.
fn election_shared_with(peer: Peer, lock: &str) {
    let hosts = hosts();
    let path = unique_path(&format!("interop-{}-election", peer.proto_arg()));
    let hist = History::new();
    let c = connect(&hosts, peer.protocol());
    let election = zklock::LeaderElection::new(&c, &path).unwrap();
    // 1. The peer leads: zklock does not, then does after the peer left.
    let mut p = peer.spawn(&hosts, &path, lock, "hold", 1500, &hist, "peer", 0.0);
    p.expect_line("HELD", PEER_START);
    assert!(
        election
            .await_leadership(Deadline::TryOnce)
            .unwrap()
            .is_none(),
        "zklock led while the {peer:?} peer leads"
    );
    let term = election
        .await_leadership(Deadline::after(Duration::from_secs(30)))
        .unwrap()
        .expect("zklock leads after the peer left");
    p.wait_ok(Duration::from_secs(20));
    assert!(election.is_leader() && term > 0);
    // 2. zklock leads: the peer does not (and Curator names zklock the leader).
    let out = peer
        .spawn(&hosts, &path, lock, "try", 700, &hist, "peer", 0.0)
        .wait_ok(PEER_START);
    assert!(out.contains(&"NOT_ACQUIRED".to_string()), "{out:?}");
    if let Peer::Curator = peer {
        let out = peer
            .spawn(&hosts, &path, lock, "leader", 0, &hist, "observer", 0.0)
            .wait_ok(PEER_START);
        assert!(
            out.contains(&format!("LEADER {}", c.holder_id())),
            "Curator's getLeader() does not name zklock ({}): {out:?}",
            c.holder_id()
        );
    }
    // 3. zklock relinquishes: the waiting peer leads.
    let p = peer.spawn(&hosts, &path, lock, "try", 30_000, &hist, "peer", 0.0);
    assert!(
        eventually(Duration::from_secs(30), || election
            .participants()
            .is_ok_and(|q| q.len() == 2)),
        "the {peer:?} peer joined"
    );
    election.relinquish().unwrap();
    let out = p.wait_ok(PEER_START);
    assert!(out.contains(&"ACQUIRED".to_string()), "{out:?}");
}
