//! Issue 16: no two believers under any fault. Cancels that must not be lost, try-once bounds,
//! and a holder cut off with its follower from the leader, each against real ZooKeeper servers.
#![cfg(feature = "testing")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{opts, unique_path};
use zklock::testing::{Admin, TcpProxy, TestingServer};
use zklock::{
    Client, Deadline, Error, Lockable, MultiLock, Mutex, ReadWriteLock, Semaphore, SemaphoreMutex,
    SessionState, SimpleLock,
};

type Maker = fn(&Client, &str) -> Box<dyn Lockable>;

/// Every recipe whose acquire is one attempt at one path, by name.
fn recipes() -> Vec<(&'static str, Maker)> {
    vec![
        ("mutex", |c, p| Box::new(Mutex::per_handle(c, p).unwrap())),
        ("semaphore mutex", |c, p| {
            Box::new(SemaphoreMutex::new(c, p).unwrap())
        }),
        ("read lock", |c, p| {
            Box::new(ReadWriteLock::per_handle(c, p).unwrap().read_lock())
        }),
        ("write lock", |c, p| {
            Box::new(ReadWriteLock::per_handle(c, p).unwrap().write_lock())
        }),
        ("simple lock", |c, p| {
            Box::new(SimpleLock::new(c, p).unwrap())
        }),
        ("semaphore(2)", |c, p| {
            Box::new(Semaphore::new(c, p, 2).unwrap())
        }),
        ("multi-lock", |c, p| {
            Box::new(MultiLock::from_boxed(vec![
                Box::new(Mutex::per_handle(c, &format!("{p}/a")).unwrap()),
                Box::new(SimpleLock::new(c, &format!("{p}/b")).unwrap()),
            ]))
        }),
    ]
}

/// Every node under `path`, however deep (lock nodes, semaphore leases and their mutex).
fn nodes_under(admin: &Admin, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![path.to_string()];
    while let Some(p) = todo.pop() {
        for c in admin.children(&p).unwrap_or_default() {
            let child = format!("{p}/{c}");
            if admin
                .node(&child)
                .ok()
                .flatten()
                .is_some_and(|n| n.ephemeral_owner != 0)
            {
                out.push(child.clone());
            }
            todo.push(child);
        }
    }
    out
}

/// A cancel that arrives while the acquire's first round trip is in flight (the server is
/// frozen) is a cancel: when the lock turns out to be free, the acquire still returns
/// `Cancelled` and gives back what it took, for every recipe.
#[test]
fn a_cancel_during_the_first_round_trip_wins_even_when_the_lock_is_free() {
    let server = TestingServer::start().unwrap();
    let hosts = server.connect_string();
    let admin = Admin::connect(&hosts).unwrap();
    let mut failures = Vec::new();
    for (name, make) in recipes() {
        let c = Client::connect(&hosts, opts(6000)).unwrap();
        let path = unique_path("cancel-first-trip");
        // Parents exist, so the first round trip is the create and listing.
        let l: Arc<dyn Lockable> = Arc::from(make(&c, &path));
        assert!(
            l.acquire(Deadline::TryOnce).unwrap().is_some(),
            "{name}: free"
        );
        l.release().unwrap();
        server.pause();
        let l2 = l.clone();
        let acquirer = std::thread::spawn(move || l2.acquire(Deadline::Forever));
        std::thread::sleep(Duration::from_millis(300));
        l.cancel();
        std::thread::sleep(Duration::from_millis(100));
        server.resume();
        let r = acquirer.join().unwrap();
        if r != Err(Error::Cancelled) {
            failures.push(format!("{name}: a cancelled acquire returned {r:?}"));
        }
        if l.is_held() {
            failures.push(format!(
                "{name}: the handle believes it holds after the cancel"
            ));
            let _ = l.release();
        }
        let left = nodes_under(&admin, &path);
        if !left.is_empty() {
            failures.push(format!("{name}: nodes left behind: {left:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A cancel sent while an acquire opens a fresh session (the old one expired) reaches it: the
/// acquire returns `Cancelled` at once, not after the connect timeout or a second cancel.
#[test]
fn a_cancel_while_an_acquire_opens_a_fresh_session_is_not_lost() {
    let server = TestingServer::start().unwrap();
    let proxy = TcpProxy::start(&server.connect_string()).unwrap();
    let mut failures = Vec::new();
    for (name, make) in recipes() {
        proxy.set_blackhole(false);
        let c = Client::connect(&proxy.connect_string(), opts(1000)).unwrap();
        let l: Arc<dyn Lockable> = Arc::from(make(&c, &unique_path("cancel-fresh-session")));
        proxy.set_blackhole(true);
        proxy.cut_all();
        assert_eq!(
            c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Expired),
            SessionState::Expired,
            "{name}"
        );
        // The server stays unreachable: the fresh session's connect waits.
        let l2 = l.clone();
        let acquirer = std::thread::spawn(move || {
            let t = Instant::now();
            (l2.acquire(Deadline::Forever), t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        l.cancel();
        let (r, took) = acquirer.join().unwrap();
        if r != Err(Error::Cancelled) || took > Duration::from_millis(1500) {
            failures.push(format!(
                "{name}: cancelled 300 ms into the fresh session's connect, the acquire returned {r:?} after {took:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Try-once means one instant for every step: on a frozen server, `try_lock()` returns within
/// one session timeout of its call, not a session timeout per step of its recovery.
#[test]
fn try_lock_on_a_frozen_server_returns_within_one_session_timeout() {
    let server = TestingServer::start().unwrap();
    let hosts = server.connect_string();
    let t = Duration::from_secs(2);
    let mut failures = Vec::new();
    for (name, make) in recipes() {
        let c = Client::connect(&hosts, opts(t.as_millis() as u64)).unwrap();
        let l = make(&c, &unique_path("try-frozen"));
        assert!(l.acquire(Deadline::TryOnce).unwrap().is_some(), "{name}");
        l.release().unwrap();
        server.pause();
        let start = Instant::now();
        let r = l.acquire(Deadline::TryOnce);
        let took = start.elapsed();
        server.resume();
        if took > t + Duration::from_millis(250) {
            failures.push(format!(
                "{name}: try-once on a frozen server took {took:?} (session timeout {t:?}), returned {r:?}"
            ));
        }
        // Let the session settle before the next recipe.
        c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Connected);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Try-once means one instant for every step, whichever step the network goes silent at: right
/// after the attempt's first create reached the server, or right after its reply came back (the
/// listing pipelined behind it is lost), `try_lock()` returns within one session timeout of
/// its call (plus slack for a loaded machine), not a session timeout more for the removal of
/// the node it made. The fault is armed in the proxy, so it lands at the same step every run.
#[test]
fn try_lock_returns_within_one_session_timeout_when_the_network_goes_silent_after_its_create() {
    let server = TestingServer::start().unwrap();
    let proxy = TcpProxy::start(&server.connect_string()).unwrap();
    let t = Duration::from_secs(2);
    let slack = Duration::from_millis(500);
    let other = Client::connect(&server.connect_string(), opts(t.as_millis() as u64)).unwrap();
    let mut failures = Vec::new();
    for (name, make) in recipes() {
        for reply in [false, true] {
            let fault = if reply {
                "after its create's reply"
            } else {
                "once its create was sent"
            };
            let c = Client::connect(&proxy.connect_string(), opts(t.as_millis() as u64)).unwrap();
            let path = unique_path("try-silent");
            let l = make(&c, &path);
            // Lays the lock out, so the next try's first create is its own node's.
            assert!(l.acquire(Deadline::TryOnce).unwrap().is_some(), "{name}");
            l.release().unwrap();
            if reply {
                proxy.blackhole_after_reply_to_creates(1);
            } else {
                proxy.blackhole_after_creates(1);
            }
            let start = Instant::now();
            let r = l.acquire(Deadline::TryOnce);
            let took = start.elapsed();
            proxy.blackhole_after_creates(0);
            proxy.blackhole_after_reply_to_creates(0);
            proxy.set_blackhole(false);
            eprintln!("{name}, silent {fault}: {took:?}, {r:?}");
            if took > t + slack {
                failures.push(format!(
                    "{name}: try-once with the network silent {fault} took {took:?} \
                     (session timeout {t:?}), returned {r:?}"
                ));
            }
            let held = r.is_ok_and(|h| h.is_some());
            if held {
                let _ = l.release();
            }
            c.wait_for_state(Duration::from_secs(15), |s| s != SessionState::Suspended);
            // Nothing of the try is left once the network is back (its node's removal went on
            // in the background past the try's instant): another client gets the lock while
            // this client is still open.
            let rival = make(&other, &path);
            let free = crate::common::eventually(Duration::from_secs(10), || {
                rival
                    .acquire(Deadline::TryOnce)
                    .is_ok_and(|h| h.is_some() && rival.release().is_ok())
            });
            if !free {
                failures.push(format!(
                    "{name}, silent {fault}: another client could not take the lock after the                      try ({}): its node was left",
                    if held { "held, released" } else { "not held" }
                ));
            }
            c.close();
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The heart of issue 16. A holds through a follower; that follower is cut off from the leader
/// (and the other member) while A's connection to it stays up, so it keeps answering A for
/// syncLimit × tickTime. Only the leader expires sessions: it does so a session timeout after it
/// last heard of A, and B, waiting through the other members, gets the lock. A must stop
/// believing (leave `Held`) before B can acquire, in every run; the margin is printed.
#[test]
fn a_holder_cut_off_with_its_follower_stops_believing_before_another_acquires() {
    let cluster = zklock::testing::TestingCluster::start_partitionable(3).unwrap();
    holder_cut_off_with_its_follower(&cluster, opts, 3);
}

/// As [`a_holder_cut_off_with_its_follower_stops_believing_before_another_acquires`], on an
/// ensemble whose client ports are TLS-only (the partition holds the quorum's bytes; the
/// clients' TLS connections to the cut-off follower stay open).
#[test]
fn a_holder_cut_off_with_its_follower_stops_believing_before_another_acquires_over_tls() {
    use zklock::testing::{ClientAuth, TestingCerts, TestingCluster};
    let certs = TestingCerts::generate().unwrap();
    let cluster = TestingCluster::start_tls_with(3, &certs, ClientAuth::None, true, &[]).unwrap();
    let tls = zklock::Tls::new().ca_file(certs.ca_path());
    holder_cut_off_with_its_follower(&cluster, |ms| opts(ms).tls(tls.clone()), 1);
}

fn holder_cut_off_with_its_follower(
    cluster: &zklock::testing::TestingCluster,
    opts: impl Fn(u64) -> zklock::Options,
    runs: usize,
) {
    let mut failures = Vec::new();
    for run in 0..runs {
        let leader = (0..3)
            .find(|&i| cluster.mode(i).as_deref() == Some("leader"))
            .expect("a leader");
        let f = (0..3).find(|&i| i != leader).unwrap();
        let others: Vec<String> = (0..3)
            .filter(|&i| i != f)
            .map(|i| cluster.member_connect_string(i))
            .collect();
        let a = Client::connect(&cluster.member_connect_string(f), opts(1000)).unwrap();
        let b = Client::connect(&others.join(","), opts(4000)).unwrap();
        let path = unique_path("cut-off-follower");
        let la = Arc::new(Mutex::per_handle(&a, &path).unwrap());
        let lb = Arc::new(Mutex::per_handle(&b, &path).unwrap());
        la.acquire(Deadline::Forever).unwrap().expect("A holds");
        // A's hold is believed while nothing is wrong (its lease is renewed through the leader).
        std::thread::sleep(Duration::from_millis(1000));
        assert!(
            zklock::testing::eventually(Duration::from_secs(5), || la.is_held()),
            "run {run}: A's hold is not believed before any fault"
        );
        let lb2 = lb.clone();
        let waiter = std::thread::spawn(move || {
            lb2.acquire(Deadline::after(Duration::from_secs(30)))
                .map(|t| (t, Instant::now()))
        });
        std::thread::sleep(Duration::from_millis(200));
        let la2 = la.clone();
        let watcher = std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(30);
            while la2.is_held() && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(1));
            }
            Instant::now()
        });
        let cut = Instant::now();
        cluster.isolate(f);
        let (token, b_at) = match waiter.join().unwrap() {
            Ok((Some(t), at)) => (t, at),
            other => panic!("run {run}: B did not acquire: {other:?}"),
        };
        let a_left = watcher.join().unwrap();
        let ms = |i: Instant| i.saturating_duration_since(cut).as_millis();
        eprintln!(
            "run {run}: follower {f} cut off; A stopped believing at {} ms, B acquired at {} ms (token {token}): margin {} ms",
            ms(a_left),
            ms(b_at),
            b_at.saturating_duration_since(a_left).as_millis()
        );
        if a_left >= b_at {
            failures.push(format!(
                "run {run}: A still believed it held {} ms after B acquired",
                a_left.duration_since(b_at).as_millis()
            ));
        }
        lb.release().unwrap();
        cluster.heal(f);
        assert!(
            zklock::testing::eventually(Duration::from_secs(30), || cluster.serving(f)),
            "member {f} rejoins"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 37, item 2: a leader cut off from its quorum answers its own clients' `sync`s until its
/// own `syncLimit` runs out, whatever the other members' is (a rolling change leaves them
/// different). Here the leader has syncLimit 30 (15 s at a 500 ms tick) and its followers 2
/// (1 s): cut off, it is left by the followers after 1 s, they elect a new leader, which
/// expires A's session a session timeout later and B acquires, while the old leader would
/// answer A for 15 s. A's lease is renewed only by what a quorum committed, so A stops
/// believing before B acquires (before: A said Held for seconds after B acquired).
#[test]
fn a_holder_on_a_leader_cut_off_from_its_quorum_stops_believing_before_another_acquires() {
    let mut cluster =
        zklock::testing::TestingCluster::start_partitionable_with_config(3, &["syncLimit=30"])
            .unwrap();
    let leader = cluster.leader().expect("a leader");
    for f in (0..3).filter(|&i| i != leader) {
        cluster.restart_with_config(f, &["syncLimit=2"]).unwrap();
    }
    assert_eq!(cluster.leader(), Some(leader), "the leader kept its quorum");
    let others: Vec<String> = (0..3)
        .filter(|&i| i != leader)
        .map(|i| cluster.member_connect_string(i))
        .collect();
    let a = Client::connect(&cluster.member_connect_string(leader), opts(4000)).unwrap();
    // B outlives the election (a few seconds with no leader).
    let b = Client::connect(&others.join(","), opts(20000)).unwrap();
    let path = unique_path("cut-off-leader");
    let la = Arc::new(Mutex::per_handle(&a, &path).unwrap());
    let lb = Mutex::per_handle(&b, &path).unwrap();
    la.acquire(Deadline::Forever).unwrap().expect("A holds");
    assert!(
        zklock::testing::eventually(Duration::from_secs(5), || la.is_held()),
        "A's hold is not believed before any fault"
    );
    let cut = Instant::now();
    cluster.isolate(leader);
    let (got, b_at, last_held) = crate::common::watch_believer(
        || lb.acquire(Deadline::after(Duration::from_secs(40))),
        || la.is_held(),
    );
    got.unwrap()
        .expect("B acquires once the new leader expired A's session");
    crate::common::stopped_believing_in_time(
        &format!("leader {leader} cut off"),
        cut,
        last_held,
        b_at,
    );
    lb.release().unwrap();
    cluster.heal(leader);
}

/// A guard answers for its own hold. A handle whose participant is the handle may be released
/// through the handle (from any thread) and take the lock again; the first hold's guard,
/// dropped later, must not release the second hold, or another process gets in while the
/// second hold's owner believes it holds.
#[test]
fn a_stale_guard_never_releases_the_next_hold_of_its_handle() {
    let server = crate::common::shared();
    let hosts = server.connect_string();
    let (a, b) = (
        Client::connect(&hosts, opts(4000)).unwrap(),
        Client::connect(&hosts, opts(4000)).unwrap(),
    );
    let path = unique_path("exclusion-stale-guard");
    let m = SemaphoreMutex::new(&a, &path).unwrap();
    let first = m.lock().unwrap();
    // Released through the handle (any thread may), then taken again by the same handle.
    m.release().unwrap();
    let second = m.lock().unwrap();
    assert!(second.fencing_token() > first.fencing_token());
    drop(first);
    let other = SemaphoreMutex::new(&b, &path).unwrap();
    assert!(
        other.try_lock().unwrap().is_none(),
        "dropping the first hold's guard released the second hold: two holders"
    );
    assert!(second.is_held());
    drop(second);
    assert!(other.try_lock().unwrap().is_some());
}
