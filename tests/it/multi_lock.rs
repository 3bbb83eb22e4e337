#![cfg(feature = "testing")]
//! The multi-lock against a real ZooKeeper server: all or nothing over a mix of lock kinds,
//! partial failure releases everything and names the failing lock, opposite build orders do not
//! deadlock, one total deadline, cancel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::{
    Client, Error, Lockable, MultiLock, Mutex, Protocol, ReadWriteLock, Semaphore, SemaphoreMutex,
    SimpleLock,
};

/// Every ephemeral node under `paths` (recursively, and `paths` themselves) owned by `session`.
fn owned_by(admin: &zklock::testing::Admin, paths: &[String], session: i64) -> Vec<String> {
    fn walk(admin: &zklock::testing::Admin, path: &str, session: i64, out: &mut Vec<String>) {
        if let Some(n) = admin.node(path).unwrap() {
            if n.ephemeral_owner == session {
                out.push(path.to_string());
            }
        }
        for c in admin.children(path).unwrap() {
            walk(admin, &format!("{path}/{c}"), session, out);
        }
    }
    let mut out = Vec::new();
    for p in paths {
        walk(admin, p, session, &mut out);
    }
    out
}

struct Set {
    mutex: Mutex,
    rw: ReadWriteLock,
    sem: Semaphore,
    smutex: SemaphoreMutex,
    simple: SimpleLock,
}

impl Set {
    fn new(c: &Client, base: &str) -> Set {
        Set {
            mutex: Mutex::new(c, &format!("{base}/a-mutex")).unwrap(),
            rw: ReadWriteLock::new(c, &format!("{base}/b-rw")).unwrap(),
            sem: Semaphore::new(c, &format!("{base}/c-sem"), 1).unwrap(),
            smutex: SemaphoreMutex::new(c, &format!("{base}/d-smutex")).unwrap(),
            simple: SimpleLock::new(c, &format!("{base}/e-simple")).unwrap(),
        }
    }
    fn paths(&self) -> Vec<String> {
        vec![
            self.mutex.path().to_string(),
            self.rw.path().to_string(),
            self.sem.path().to_string(),
            self.smutex.path().to_string(),
            self.simple.path().to_string(),
        ]
    }
    /// Built in a scrambled order on purpose.
    fn multi(&self) -> MultiLock<'_> {
        let v: Vec<&(dyn Lockable + Send + Sync)> = vec![
            &self.simple,
            &self.sem,
            self.rw.write(),
            &self.mutex,
            &self.smutex,
        ];
        MultiLock::new(v)
    }
}

#[test]
fn holds_all_of_a_mix_then_releases_all() {
    let hosts = hosts();
    let base = unique_path("multi-all");
    let c = connect(&hosts, Protocol::Curator);
    let admin = admin(&hosts);
    let set = Set::new(&c, &base);
    let multi = set.multi();
    let sorted = multi.paths();
    let mut want = set.paths();
    want.sort();
    assert_eq!(
        sorted,
        want.iter().map(String::as_str).collect::<Vec<_>>(),
        "not in canonical order"
    );
    let g = multi
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .expect("all free");
    assert!(set.mutex.is_held() && set.rw.write().is_held() && set.sem.is_held());
    assert!(set.smutex.is_held() && set.simple.is_held());
    assert_eq!(owned_by(&admin, &set.paths(), c.session_id()).len(), 5);
    // Others see them taken.
    let c2 = connect(&hosts, Protocol::Curator);
    let other = Set::new(&c2, &base);
    assert!(other.mutex.try_lock().unwrap().is_none());
    assert!(other.simple.try_lock().unwrap().is_none());
    g.unlock().unwrap();
    assert!(owned_by(&admin, &set.paths(), c.session_id()).is_empty());
    assert!(!set.mutex.is_held() && !set.sem.is_held() && !set.simple.is_held());
    assert!(multi.last_failure().is_none());
}

#[test]
fn partial_failure_releases_everything_and_names_the_lock() {
    let hosts = hosts();
    let base = unique_path("multi-partial");
    let c = connect(&hosts, Protocol::Curator);
    let c2 = connect(&hosts, Protocol::Curator);
    let admin = admin(&hosts);
    let set = Set::new(&c, &base);
    let other = Set::new(&c2, &base);
    // The semaphore (third in canonical order) is taken by someone else.
    let lease = other.sem.lock().unwrap();
    let multi = set.multi();

    let t0 = Instant::now();
    assert!(multi
        .try_lock_for(Duration::from_millis(500))
        .unwrap()
        .is_none());
    assert!(t0.elapsed() < Duration::from_secs(2));
    let f = multi.last_failure().expect("a failure report");
    assert_eq!(f.path, set.sem.path());
    assert_eq!(f.position, 2);
    assert_eq!(f.error, None);
    assert!(f.to_string().contains(set.sem.path()), "{f}");
    // Nothing of ours is left: neither the two locks taken before, nor a waiting node.
    assert!(
        owned_by(&admin, &set.paths(), c.session_id()).is_empty(),
        "multi-lock left nodes"
    );
    assert!(!set.mutex.is_held() && !set.rw.write().is_held());
    assert!(
        other.mutex.try_lock().unwrap().is_some(),
        "the mutex was not released"
    );
    assert!(
        other.rw.write().try_lock().unwrap().is_some(),
        "the write lock was not released"
    );

    // try_lock: the same, without waiting.
    assert!(multi.try_lock().unwrap().is_none());
    assert!(owned_by(&admin, &set.paths(), c.session_id()).is_empty());
    drop(lease);

    // A failing lock that errors: the read lock of the rw lock is held by this thread, so its
    // write lock (second in order) refuses to upgrade; the mutex taken first is released.
    let r = set.rw.read().lock().unwrap();
    let e = multi
        .try_lock_for(Duration::from_secs(5))
        .map(|_| ())
        .unwrap_err();
    match &e {
        Error::WouldDeadlock(m) => assert!(m.contains(set.rw.path()), "{m}"),
        other => panic!("expected WouldDeadlock, got {other:?}"),
    }
    let f = multi.last_failure().unwrap();
    assert_eq!((f.path.as_str(), f.position), (set.rw.path(), 1));
    assert!(matches!(f.error, Some(Error::WouldDeadlock(_))));
    assert!(!set.mutex.is_held());
    drop(r);
    assert!(owned_by(&admin, &set.paths(), c.session_id()).is_empty());
}

#[test]
fn opposite_build_orders_both_finish() {
    let hosts = hosts();
    let base = unique_path("multi-order");
    let paths: Vec<String> = ["p1", "p2", "p3"]
        .iter()
        .map(|p| format!("{base}/{p}"))
        .collect();
    let run = |reverse: bool| {
        let (hosts, paths) = (hosts.clone(), paths.clone());
        std::thread::spawn(move || {
            let c = connect(&hosts, Protocol::Curator);
            let locks: Vec<Mutex> = paths.iter().map(|p| Mutex::new(&c, p).unwrap()).collect();
            let mut v: Vec<&(dyn Lockable + Send + Sync)> = locks.iter().map(|m| m as _).collect();
            if reverse {
                v.reverse();
            }
            let multi = MultiLock::new(v);
            for _ in 0..15 {
                let g = multi
                    .try_lock_for(Duration::from_secs(10))
                    .unwrap()
                    .expect("deadlock: not acquired in 10 s");
                std::thread::sleep(Duration::from_millis(5));
                drop(g);
            }
        })
    };
    let a = run(false);
    let b = run(true);
    a.join().unwrap();
    b.join().unwrap();
}

#[test]
fn one_total_deadline_over_all_locks() {
    let hosts = hosts();
    let base = unique_path("multi-deadline");
    let c1 = connect(&hosts, Protocol::Curator);
    let c2 = connect(&hosts, Protocol::Curator);
    let first = Arc::new(Mutex::new(&c2, &format!("{base}/1")).unwrap());
    let second = Mutex::new(&c2, &format!("{base}/2")).unwrap();
    let _g2 = second.lock().unwrap();
    // The first lock frees up after 400 ms; the second never does.
    let f2 = first.clone();
    let holder = std::thread::spawn(move || {
        let g = f2.lock().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        drop(g);
    });
    std::thread::sleep(Duration::from_millis(100));
    let a = Mutex::new(&c1, &format!("{base}/1")).unwrap();
    let b = Mutex::new(&c1, &format!("{base}/2")).unwrap();
    let multi = MultiLock::new(vec![&a, &b]);
    let t0 = Instant::now();
    assert!(multi
        .try_lock_for(Duration::from_millis(800))
        .unwrap()
        .is_none());
    let el = t0.elapsed();
    assert!(
        el >= Duration::from_millis(780) && el < Duration::from_millis(1100),
        "waited {el:?} for an 800 ms deadline"
    );
    assert_eq!(multi.last_failure().unwrap().path, format!("{base}/2"));
    assert!(!a.is_held());
    holder.join().unwrap();
}

#[test]
fn cancel_stops_a_waiting_multi_lock() {
    let hosts = hosts();
    let base = unique_path("multi-cancel");
    let c1 = connect(&hosts, Protocol::Curator);
    let c2 = connect(&hosts, Protocol::Curator);
    let admin = admin(&hosts);
    let blocker = Mutex::new(&c2, &format!("{base}/2")).unwrap();
    let g = blocker.lock().unwrap();
    let a = Mutex::new(&c1, &format!("{base}/1")).unwrap();
    let b = Mutex::new(&c1, &format!("{base}/2")).unwrap();
    let multi = MultiLock::new(vec![&a, &b]);
    std::thread::scope(|s| {
        let t = s.spawn(|| multi.lock().map(|_| ()));
        std::thread::sleep(Duration::from_millis(400));
        multi.cancel();
        assert_eq!(t.join().unwrap().unwrap_err(), Error::Cancelled);
    });
    let f = multi.last_failure().unwrap();
    assert_eq!(f.error, Some(Error::Cancelled));
    let paths = vec![format!("{base}/1"), format!("{base}/2")];
    assert!(
        owned_by(&admin, &paths, c1.session_id()).is_empty(),
        "cancelled multi-lock left nodes"
    );
    drop(g);
}

#[test]
fn write_then_read_of_one_rw_lock_is_a_downgrade() {
    let hosts = hosts();
    let path = unique_path("multi-rw");
    let c = connect(&hosts, Protocol::Curator);
    let rw = ReadWriteLock::new(&c, &path).unwrap();
    // Listed read first: the canonical order still takes the write lock first.
    let multi = MultiLock::new(vec![rw.read(), rw.write()]);
    let g = multi
        .try_lock()
        .unwrap()
        .expect("write then read (downgrade)");
    assert!(rw.read().is_held() && rw.write().is_held());
    drop(g);
    assert!(!rw.read().is_held() && !rw.write().is_held());
    assert!(rw.participants().unwrap().is_empty());
}

/// The czxid of the mutex holder's node under `path` (the lowest sequence number).
fn czxid_under(admin: &zklock::testing::Admin, path: &str) -> i64 {
    let kids = admin.children(path).unwrap();
    let first = kids
        .iter()
        .min_by_key(|k| k.rsplit('-').next().unwrap().to_string())
        .expect("a holder's node");
    admin
        .node(&format!("{path}/{first}"))
        .unwrap()
        .unwrap()
        .czxid
}

/// A store that fences one lock: it refuses a write whose token is below the largest seen.
#[derive(Default)]
struct Fenced {
    seen: std::sync::Mutex<Vec<i64>>,
}

impl Fenced {
    fn write(&self, token: i64) -> bool {
        let mut seen = self.seen.lock().unwrap();
        if seen.last().is_some_and(|&last| token < last) {
            return false;
        }
        seen.push(token);
        true
    }
}

/// Issue 26 item 3: each lock's own token, as a fencing store of that lock needs it. A
/// multi-lock over A (a mutex) and B (a simple lock, which queues without a node) takes A, waits
/// for B while a holder of A alone queues (its node made now), then gets B (its node made
/// later). The tokens the multi-lock gives are each lock's node czxid, and a store fencing A
/// never sees A's tokens go backwards; the largest (the multi-lock's single token) would: it is
/// B's, above the next holder of A's.
#[test]
fn each_lock_has_its_own_token_and_a_locks_tokens_never_go_backwards() {
    let hosts = hosts();
    let base = unique_path("multi-tokens");
    let (pa, pb) = (format!("{base}/a"), format!("{base}/b"));
    let (c1, c2, c3) = (
        connect(&hosts, Protocol::Curator),
        connect(&hosts, Protocol::Curator),
        connect(&hosts, Protocol::Curator),
    );
    let admin = admin(&hosts);
    let blocker = SimpleLock::new(&c3, &pb).unwrap();
    let blocking = blocker.lock().unwrap();
    let a = Mutex::per_handle(&c1, &pa).unwrap();
    let b = SimpleLock::new(&c1, &pb).unwrap();
    // Given B first: tokens() answers in the order given.
    let multi = MultiLock::new(vec![&b, &a]);
    let store = Fenced::default();
    let a_alone = Mutex::per_handle(&c2, &pa).unwrap();
    std::thread::scope(|s| {
        let holder = s.spawn(|| {
            let g = multi.lock().unwrap();
            let tokens = g.tokens();
            let (ta, tb) = (g.token_of(&pa).unwrap(), g.token_of(&pb).unwrap());
            assert_eq!(tokens, vec![tb, ta], "in the order given (B, A)");
            assert_eq!(multi.tokens().unwrap(), tokens);
            assert_eq!(multi.token_of(&pa).unwrap(), ta);
            assert_eq!(
                ta,
                czxid_under(&admin, &pa),
                "A's token is its node's czxid"
            );
            assert_eq!(tb, admin.node(&pb).unwrap().unwrap().czxid, "B's likewise");
            assert_eq!(g.fencing_token(), ta.max(tb));
            assert!(store.write(ta), "the multi-lock's write to A");
            (ta, tb)
        });
        // The multi-lock holds A and waits for B.
        assert!(eventually(Duration::from_secs(10), || a.is_held()));
        // A holder of A alone queues now: its node is older than the multi-lock's B.
        let waiter = s.spawn(|| {
            let g = a_alone.lock().unwrap();
            let t = g.fencing_token();
            (t, store.write(t))
        });
        assert!(eventually(Duration::from_secs(10), || {
            admin.children(&pa).unwrap().len() == 2
        }));
        drop(blocking);
        let (ta, tb) = holder.join().unwrap();
        let (next, accepted) = waiter.join().unwrap();
        assert!(
            next > ta,
            "A's tokens went backwards: {ta} (multi-lock) then {next}"
        );
        assert!(
            accepted,
            "the store fencing A refused A's rightful next holder ({next} after {ta})"
        );
        assert!(
            tb > next,
            "the case this test is about: B's token {tb} is above {next}"
        );
    });
    // Not held: no tokens.
    assert_eq!(multi.tokens(), Err(Error::NotHeld));
    assert!(matches!(
        multi.token_of("/elsewhere"),
        Err(Error::InvalidArgument(_))
    ));
}

/// Issue 26 item 7: a multi-lock over a semaphore handle shared with another thread gives back
/// its own lease, not the handle's most recent one.
#[test]
fn a_multi_lock_over_a_shared_semaphore_releases_its_own_lease() {
    let hosts = hosts();
    let base = unique_path("multi-shared-sem");
    let c = connect(&hosts, Protocol::Curator);
    let admin = admin(&hosts);
    let sem = Semaphore::new(&c, &format!("{base}/sem"), 3).unwrap();
    let m = Mutex::per_handle(&c, &format!("{base}/m")).unwrap();
    let leases_dir = format!("{base}/sem/leases");
    let multi = MultiLock::new(vec![&sem, &m]);
    let g = multi.lock().unwrap();
    let multi_lease = admin.children(&leases_dir).unwrap();
    assert_eq!(multi_lease.len(), 1);
    std::thread::scope(|s| {
        // Another thread takes a lease of the same handle: the handle's most recent now.
        let (node, done) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let (node_tx, node_rx) = node;
        let (done_tx, done_rx) = done;
        let sem = &sem;
        let t = s.spawn(move || {
            let lease = sem.lock().unwrap();
            node_tx.send(lease.node()).unwrap();
            done_rx.recv().unwrap();
            let held = lease.is_held();
            let r = lease.unlock();
            (held, r)
        });
        let thread_lease = node_rx.recv().unwrap();
        g.unlock().unwrap();
        let left = admin.children(&leases_dir).unwrap();
        let thread_name = thread_lease.rsplit('/').next().unwrap().to_string();
        assert_eq!(
            left,
            vec![thread_name],
            "the multi-lock's release must delete its own lease ({multi_lease:?}) only"
        );
        done_tx.send(()).unwrap();
        let (held, r) = t.join().unwrap();
        assert!(held, "the other thread's lease was released under it");
        r.unwrap();
    });
    assert!(admin.children(&leases_dir).unwrap().is_empty());
}

/// Issue 26 item 8: two locks on one path would wait for each other inside one multi-lock:
/// refused at once (InvalidArgument, naming the path), nothing left on the server; the write
/// and read halves of one read-write lock (a downgrade) are still taken.
#[test]
fn two_locks_on_one_path_are_refused_not_waited_for() {
    let hosts = hosts();
    let path = unique_path("multi-same-path");
    let c = connect(&hosts, Protocol::Curator);
    let admin = admin(&hosts);
    let m1 = Mutex::per_handle(&c, &path).unwrap();
    let m2 = Mutex::per_handle(&c, &path).unwrap();
    let rw1 = ReadWriteLock::per_handle(&c, &path).unwrap();
    let rw2 = ReadWriteLock::per_handle(&c, &path).unwrap();
    let cases: Vec<(&str, Vec<&(dyn Lockable + Send + Sync)>)> = vec![
        ("two mutexes", vec![&m1, &m2]),
        ("one mutex twice", vec![&m1, &m1]),
        (
            "write of one rw lock, read of another",
            vec![rw1.write(), rw2.read()],
        ),
        (
            "write, read and a mutex",
            vec![rw1.write(), rw1.read(), &m1],
        ),
    ];
    for (name, locks) in cases {
        let multi = MultiLock::new(locks);
        let start = Instant::now();
        let r = multi
            .try_lock_for(Duration::from_secs(2))
            .map(|g| g.is_some());
        match &r {
            Err(Error::InvalidArgument(m)) => assert!(m.contains(&path), "{name}: {m}"),
            other => panic!(
                "{name}: expected InvalidArgument, got {other:?} after {:?}",
                start.elapsed()
            ),
        }
        assert_eq!(
            multi.last_failure().map(|f| f.path),
            Some(path.clone()),
            "{name}"
        );
        assert!(
            admin.children(&path).unwrap_or_default().is_empty(),
            "{name}: nodes left"
        );
    }
    let ok = MultiLock::new(vec![rw1.read(), rw1.write()]);
    assert!(ok.try_lock().unwrap().is_some(), "a downgrade is allowed");
}

/// Issue 26 item 8: a watcher polling a held multi-lock (the C and Python `wait_lost` wait in
/// 200 ms slices) adds nothing per poll: it grew by one lost callback per lock per call
/// (+6.3 MB and 5x slower after 40,000 polls). The wait still ends when a lock is lost.
#[test]
fn polling_wait_lost_of_a_held_multi_lock_keeps_nothing() {
    let hosts = hosts();
    let base = unique_path("multi-poll");
    let c = connect(&hosts, Protocol::Curator);
    let a = Mutex::per_handle(&c, &format!("{base}/a")).unwrap();
    let b = SemaphoreMutex::new(&c, &format!("{base}/b")).unwrap();
    let multi = MultiLock::new(vec![&a, &b]);
    let g = multi.lock().unwrap();
    let before = c.lost_callbacks();
    for _ in 0..5000 {
        assert!(!multi.wait_lost(Some(Duration::ZERO)));
        assert!(!g.wait_lost(Some(Duration::ZERO)));
    }
    let after = c.lost_callbacks();
    assert!(
        after <= before + 2,
        "10,000 polls of wait_lost left {after} lost callbacks (before: {before})"
    );
    // Still a wait: it ends when the locks are lost.
    std::thread::scope(|s| {
        let w = s.spawn(|| multi.wait_lost(Some(Duration::from_secs(20))));
        std::thread::sleep(Duration::from_millis(100));
        c.close();
        assert!(w.join().unwrap(), "wait_lost did not see the loss");
    });
    assert!(g.wait_lost(Some(Duration::ZERO)));
    drop(g);
}

/// Issue 28: a tiny deadline on a multi-lock whose locks are free, or one of them held, was
/// `Err(ConnectionLoss)` (from whichever lock's request the deadline ran out in).
#[test]
fn a_deadline_that_runs_out_inside_a_request_is_a_timeout_not_a_connection_loss() {
    let hosts = hosts();
    let root = unique_path("tiny-deadline-multi");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let m1 = SemaphoreMutex::new(&a, &format!("{root}/one")).unwrap();
    let m2 = Mutex::new(&a, &format!("{root}/two")).unwrap();
    let multi = MultiLock::new(vec![&m1, &m2]);
    let holder = Mutex::new(&b, &format!("{root}/two")).unwrap();
    tiny_deadlines_are_timeouts_never_errors(&hosts, &root, &multi, &holder);
}
