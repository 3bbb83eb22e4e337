//! The simple lock and the semaphore mutex against a real ZooKeeper server.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::testing::TcpProxy;
use zklock::{Deadline, Lockable};
use zklock::{Error, SemaphoreMutex, SimpleLock};

#[test]
fn simple_lock_excludes_and_try_lock_never_waits() {
    let hosts = hosts();
    let path = unique_path("simple-job");
    let (a, b) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let la = SimpleLock::new(&a, &path).unwrap();
    let lb = SimpleLock::new(&b, &path).unwrap();
    let g = la.try_lock().unwrap().expect("free lock");
    let t = Instant::now();
    assert!(lb.try_lock().unwrap().is_none());
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(lb.holder().unwrap().as_deref(), Some(a.holder_id()));
    let node = admin(&hosts).node(&path).unwrap().unwrap();
    assert_eq!(node.ephemeral_owner, a.session_id());
    assert_eq!(node.czxid, g.fencing_token());
    drop(g);
    assert!(lb.try_lock().unwrap().is_some());
}

#[test]
fn simple_lock_blocking_waiter_takes_it_on_release_with_a_larger_token() {
    let hosts = hosts();
    let path = unique_path("simple-wait");
    let (a, b) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let la = SimpleLock::new(&a, &path).unwrap();
    let g = la.lock().unwrap();
    let first = g.fencing_token();
    let t = std::thread::spawn(move || {
        let lb = SimpleLock::new(&b, &path).unwrap();
        let g = lb
            .try_lock_for(Duration::from_secs(10))
            .unwrap()
            .expect("acquired after release");
        g.fencing_token()
    });
    std::thread::sleep(Duration::from_millis(300));
    drop(g);
    assert!(t.join().unwrap() > first);
}

#[test]
fn simple_lock_mutual_exclusion_under_contention() {
    let hosts = hosts();
    let path = unique_path("simple-many");
    let inside = Arc::new(AtomicBool::new(false));
    let counter = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for _ in 0..4 {
            let (hosts, path) = (hosts.clone(), path.clone());
            let (inside, counter) = (inside.clone(), counter.clone());
            s.spawn(move || {
                let c = connect(&hosts, 5000);
                let l = SimpleLock::new(&c, &path).unwrap();
                for _ in 0..15 {
                    let g = l.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst));
                    let v = counter.load(Ordering::SeqCst);
                    std::thread::yield_now();
                    counter.store(v + 1, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                    drop(g);
                }
            });
        }
    });
    assert_eq!(counter.load(Ordering::SeqCst), 60);
}

#[test]
fn simple_lock_timed_out_and_cancelled_acquires_return_in_time() {
    let hosts = hosts();
    let path = unique_path("simple-t");
    let (a, b) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let la = SimpleLock::new(&a, &path).unwrap();
    let _g = la.lock().unwrap();
    let lb = Arc::new(SimpleLock::new(&b, &path).unwrap());
    let t = Instant::now();
    assert!(lb
        .try_lock_for(Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert!(t.elapsed() < Duration::from_millis(1300));
    let lb2 = lb.clone();
    let h = std::thread::spawn(move || lb2.lock().map(|_| ()));
    std::thread::sleep(Duration::from_millis(300));
    lb.cancel();
    assert_eq!(h.join().unwrap(), Err(Error::Cancelled));
}

#[test]
fn simple_lock_create_whose_reply_is_lost_is_recognised_as_ours() {
    let zk = server();
    let hosts = zk.connect_string();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let c = connect(&proxy.connect_string(), 6000);
    let admin = admin(&hosts);
    let parent = unique_path("simple2");
    let path = format!("{parent}/cut");
    admin.create("/t", b"").ok();
    admin.create(&parent, b"").unwrap();
    let l = SimpleLock::new(&c, &path).unwrap();
    proxy.cut_after_next_create();
    // The create reached the server but its reply was lost: the retry meets NodeExists and must
    // see from the node's owner that it is ours, not report the lock busy.
    let g = l.try_lock().unwrap().expect("our own node, adopted");
    assert!(g.is_held());
    assert_eq!(
        admin.node(&path).unwrap().unwrap().ephemeral_owner,
        c.session_id()
    );
}

#[test]
fn semaphore_mutex_is_not_reentrant_and_any_thread_may_release() {
    let hosts = hosts();
    let path = unique_path("sm");
    let c = connect(&hosts, 5000);
    let m = Arc::new(SemaphoreMutex::new(&c, &path).unwrap());
    assert!(m.acquire(Deadline::Forever).unwrap().is_some());
    assert!(matches!(
        m.acquire(Deadline::from_timeout(Some(Duration::ZERO)))
            .map(|t| t.is_some()),
        Err(Error::WouldDeadlock(_))
    ));
    let m2 = m.clone();
    std::thread::spawn(move || m2.release())
        .join()
        .unwrap()
        .unwrap();
    assert!(!m.is_held());
    assert_eq!(m.release(), Err(Error::NotHeld));
    assert!(admin(&hosts).children(&path).unwrap().is_empty());
    // And it excludes another session.
    let other = connect(&hosts, 5000);
    let o = SemaphoreMutex::new(&other, &path).unwrap();
    let g = m.lock().unwrap();
    assert!(o.try_lock().unwrap().is_none());
    drop(g);
    assert!(o.try_lock().unwrap().is_some());
}

/// A's release reaches the server but its reply is lost: the retried delete must prove the node
/// is still A's (its witness exists) when the server applies it, or it deletes B's node, the
/// next holder's, and a third client gets the lock while B holds it.
#[test]
fn simple_lock_release_whose_reply_is_lost_never_deletes_the_next_holders_node() {
    let zk = server();
    let hosts = zk.connect_string();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let a = connect(&proxy.connect_string(), 4000);
    let (b, c) = (connect(&hosts, 4000), connect(&hosts, 4000));
    let path = &unique_path("simple-lost-delete-reply");
    let la = Arc::new(SimpleLock::new(&a, path).unwrap());
    let lb = Arc::new(SimpleLock::new(&b, path).unwrap());
    let lc = SimpleLock::new(&c, path).unwrap();
    let token_a = la.acquire(Deadline::Forever).unwrap().expect("free lock");
    let (tx, rx) = std::sync::mpsc::channel();
    let lb2 = lb.clone();
    let waiter = std::thread::spawn(move || {
        let t = lb2.acquire(Deadline::Forever).unwrap().expect("acquired");
        tx.send(t).unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    // The release's delete (a multi, op 14, with the hold's witness): forwarded and applied,
    // its reply dropped.
    proxy.drop_reply_of_next_op(14);
    let la2 = la.clone();
    let releaser = std::thread::spawn(move || la2.release());
    let token_b = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("B gets the lock once A's node is gone");
    assert!(token_b > token_a);
    let released = releaser.join().unwrap();
    waiter.join().unwrap();
    assert_eq!(proxy.replies_dropped(), 1, "the fault was injected");
    // B still holds: its node is there, and nobody else can take the lock.
    let node = admin(&hosts)
        .node(path)
        .unwrap()
        .expect("B's node is still there");
    assert_eq!(node.czxid, token_b, "the node at the path is B's");
    assert!(lb.is_held());
    assert!(
        lc.try_lock().unwrap().is_none(),
        "C got the lock while B held it"
    );
    assert_eq!(
        released,
        Ok(()),
        "A's delete was applied: its release succeeded"
    );
    assert!(!la.is_held());
    lb.release().unwrap();
}

/// A's create is applied but its reply is lost; before A reconnects and learns the outcome, a
/// revocation request overwrites the node's data. The node is still A's: A must learn that (its
/// witness says so, not the data the request overwrote) instead of waiting on its own node,
/// with everyone locked out for its session's life.
#[test]
fn a_revocation_request_between_a_lost_create_and_its_check_does_not_orphan_the_node() {
    let zk = server();
    let hosts = zk.connect_string();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let a = connect(&proxy.connect_string(), 10_000);
    let other = connect(&hosts, 10_000);
    let admin = admin(&hosts);
    let path = &unique_path("simple-revoke-between-create-and-check");
    let la = Arc::new(SimpleLock::new(&a, path).unwrap());
    // Parents first, so that the next create request is the lock's.
    admin.create("/t", b"").ok();
    proxy.refuse_new(true);
    proxy.cut_after_next_create();
    let la2 = la.clone();
    let acquirer = std::thread::spawn(move || {
        la2.acquire(Deadline::from_timeout(Some(Duration::from_secs(6))))
    });
    // The create was applied (A cannot learn it yet: its connection is cut, new ones refused).
    assert!(eventually(Duration::from_secs(10), || admin
        .node(path)
        .unwrap()
        .is_some()));
    assert!(
        other.request_revoke(path).unwrap(),
        "the request was written"
    );
    proxy.refuse_new(false);
    let token = acquirer
        .join()
        .unwrap()
        .unwrap()
        .expect("A's own node: A holds the lock");
    let node = admin.node(path).unwrap().expect("A's node");
    assert_eq!(node.czxid, token);
    assert_eq!(node.ephemeral_owner, a.session_id());
    assert!(la.is_held());
    la.release().unwrap();
    // Nothing left behind: another client takes the lock at once.
    let lo = SimpleLock::new(&other, path).unwrap();
    assert!(lo.try_lock().unwrap().is_some());
}

/// Issue 28: a tiny deadline on a free simple lock, or a held one, was `Err(ConnectionLoss)`.
#[test]
fn a_deadline_that_runs_out_inside_a_request_is_a_timeout_not_a_connection_loss() {
    let hosts = hosts();
    let root = unique_path("tiny-deadline-simple");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let path = format!("{root}/lock");
    let l = SimpleLock::new(&a, &path).unwrap();
    let holder = SimpleLock::new(&b, &path).unwrap();
    tiny_deadlines_are_timeouts_never_errors(&hosts, &root, &l, &holder);
}

/// Issue 37, item 8: each simple-lock create whose outcome could not be learned is looked for
/// until the session ends (applied late, its node must go), but that costs one task and one
/// watch per lock path, not one per create. Here creates are sent into a silent link (never
/// applied: each stays looked for); once the link is back, the session keeps one watch for the
/// lock's path (before: one per lost create, 12 here).
#[test]
fn lost_simple_lock_creates_leave_one_watch_per_lock_path() {
    let zk = server();
    let proxy = TcpProxy::start(&zk.connect_string()).unwrap();
    // A session that outlives the silence and the reconnect after it.
    let c = connect(&proxy.connect_string(), 20000);
    let path = unique_path("lost-creates");
    let l = SimpleLock::new(&c, &path).unwrap();
    // The lock's parent exists: each attempt's first request is its create.
    drop(l.lock().unwrap());
    proxy.set_blackhole(true);
    for _ in 0..12 {
        let r = l.acquire(Deadline::after(Duration::from_millis(100)));
        if let Ok(Some(_)) = r {
            panic!("acquired through a silent link");
        }
    }
    proxy.set_blackhole(false);
    let sid = format!("0x{:x}", c.session_id() as u64);
    // The session's watched paths, from the server (`wchc`: each session, then its paths).
    let watches = || -> Vec<String> {
        let text = zk.four_letter("wchc").unwrap_or_default();
        let mut mine = false;
        let mut out = Vec::new();
        for line in text.lines() {
            if !line.starts_with(char::is_whitespace) {
                mine = line.trim() == sid;
            } else if mine {
                out.push(line.trim().to_string());
            }
        }
        out
    };
    assert!(
        eventually(Duration::from_secs(60), || !watches().is_empty()),
        "the lost creates are not looked for once the link is back: {:?} (session {sid})",
        zk.four_letter("wchc")
    );
    // Looked at for a while: no more watches come.
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(3) {
        let w = watches();
        assert!(
            w.len() <= 2,
            "{} watches for lost creates at one lock path: {w:?}",
            w.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The lock still works, and its node goes with the release.
    drop(l.lock().unwrap());
}
