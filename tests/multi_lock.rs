#![cfg(feature = "testing")]
//! The multi-lock against a real ZooKeeper server: all or nothing over a mix of lock kinds,
//! partial failure releases everything and names the failing lock, opposite build orders do not
//! deadlock, one total deadline, cancel.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
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
