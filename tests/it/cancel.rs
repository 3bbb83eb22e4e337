#![cfg(feature = "testing")]
//! The cancel rule, against a real ZooKeeper server: a cancel ends the acquires under way on
//! the handle; with none under way it is remembered, and the handle's next acquire ends at
//! once with `Cancelled` (and forgets it). One cancel never ends more than that one acquire.

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::{
    Client, Deadline, Error, Lockable, MultiLock, Mutex, Semaphore, SemaphoreMutex, SimpleLock,
};

/// A mutex at a fresh path held (by this thread) through another client, so that an acquire
/// there waits; the two clients, the holder's handle and a handle of our own on it.
fn busy_mutex(hosts: &str) -> ([Client; 2], Mutex, Arc<Mutex>) {
    let path = unique_path("cancel");
    let (a, b) = (connect(hosts, 5000), connect(hosts, 5000));
    let holder = Mutex::new(&a, &path).unwrap();
    assert!(holder.acquire(Deadline::TryOnce).unwrap().is_some());
    let ours = Arc::new(Mutex::new(&b, &path).unwrap());
    ([a, b], holder, ours)
}

/// Cancels on one thread, then (after a barrier) acquires with `acquire` on another: the
/// acquire must end with `Cancelled` within [`AT_ONCE`]. An acquire that does not end is
/// cancelled again (a cancel during the wait has always worked) before the test fails, so no
/// thread is left behind.
fn cancel_then<T: Send + 'static>(
    lock: Arc<Mutex>,
    cancel: impl FnOnce() + Send + 'static,
    acquire: impl FnOnce(&Mutex) -> zklock::Result<T> + Send + 'static,
) -> (zklock::Result<T>, Duration) {
    let barrier = Arc::new(Barrier::new(2));
    let b2 = barrier.clone();
    let canceller = std::thread::spawn(move || {
        cancel();
        b2.wait();
    });
    let (tx, rx) = mpsc::channel();
    let l2 = lock.clone();
    let acquirer = std::thread::spawn(move || {
        barrier.wait();
        let at = Instant::now();
        let r = acquire(&l2);
        let _ = tx.send(at.elapsed());
        r
    });
    canceller.join().unwrap();
    let took = match rx.recv_timeout(AT_ONCE) {
        Ok(took) => took,
        Err(_) => {
            lock.cancel();
            let _ = acquirer.join();
            panic!("a cancel made before the acquire began was lost: the acquire still waited after {AT_ONCE:?}");
        }
    };
    (acquirer.join().unwrap(), took)
}

#[test]
fn a_cancel_before_lock_begins_ends_it_at_once() {
    let (_a, _holder, ours) = busy_mutex(&hosts());
    let o = ours.clone();
    let (r, took) = cancel_then(ours.clone(), move || o.cancel(), |m| m.lock().map(|_| ()));
    assert_eq!(r, Err(Error::Cancelled));
    assert!(took < AT_ONCE, "took {took:?}");
}

#[test]
fn a_cancel_before_try_lock_for_begins_ends_it_at_once() {
    let (_a, _holder, ours) = busy_mutex(&hosts());
    let o = ours.clone();
    let (r, took) = cancel_then(
        ours.clone(),
        move || o.cancel(),
        |m| m.try_lock_for(Duration::from_secs(60)).map(|g| g.is_some()),
    );
    assert_eq!(r, Err(Error::Cancelled));
    assert!(took < AT_ONCE, "took {took:?}");
}

#[test]
fn a_cancel_token_cancelled_before_the_acquire_begins_ends_it_at_once() {
    let (_a, _holder, ours) = busy_mutex(&hosts());
    let token = ours.cancel_token();
    let (r, took) = cancel_then(
        ours.clone(),
        move || token.cancel(),
        |m| m.lock().map(|_| ()),
    );
    assert_eq!(r, Err(Error::Cancelled));
    assert!(took < AT_ONCE, "took {took:?}");
}

#[test]
fn a_cancel_during_the_wait_ends_it_and_is_not_remembered() {
    let hosts = hosts();
    let (_a, holder, ours) = busy_mutex(&hosts);
    let o = ours.clone();
    let t = std::thread::spawn(move || o.lock().map(|_| ()));
    let path = ours.path().to_string();
    assert!(eventually(Duration::from_secs(10), || children(
        &hosts, &path
    )
    .len()
        == 2));
    // Twice, as a supervisor that cancels until the acquire returns: both reach that acquire.
    ours.cancel();
    ours.cancel();
    assert_eq!(t.join().unwrap(), Err(Error::Cancelled));
    // Not remembered: the next acquire waits, and gets the lock once it is free.
    holder.release().unwrap();
    let g = ours.try_lock_for(Duration::from_secs(10)).unwrap();
    assert!(g.is_some(), "the cancel outlived the acquire it ended");
}

#[test]
fn a_cancel_with_no_acquire_under_way_ends_the_next_one_only() {
    let hosts = hosts();
    let c = connect(&hosts, 5000);
    let path = unique_path("idle");
    let m = Mutex::new(&c, &path).unwrap();
    // Several cancels with no acquire between them are one.
    m.cancel();
    m.cancel_token().cancel();
    // The lock is free, yet the next acquire ends at once, and leaves nothing behind.
    assert_eq!(m.try_lock().map(|g| g.is_some()), Err(Error::Cancelled));
    assert!(children(&hosts, &path).is_empty());
    // Consumed: the acquire after it gets the lock.
    let g = m.try_lock_for(Duration::from_secs(10)).unwrap();
    assert!(g.is_some());
    drop(g);
    assert_eq!(m.stats().cancels, 1);
    // A cancel after a successful acquire ended is remembered for the next one, once.
    let g = m.lock().unwrap();
    m.cancel();
    drop(g);
    assert_eq!(m.lock().map(|_| ()), Err(Error::Cancelled));
    assert!(m.lock().is_ok());
}

#[test]
fn every_lock_kind_remembers_a_cancel_for_its_next_acquire() {
    let hosts = hosts();
    let c = connect(&hosts, 5000);
    let locks: Vec<Box<dyn Lockable>> = vec![
        Box::new(Mutex::new(&c, &unique_path("kind-m")).unwrap()),
        Box::new(SemaphoreMutex::new(&c, &unique_path("kind-sm")).unwrap()),
        Box::new(SimpleLock::new(&c, &unique_path("kind-s")).unwrap()),
        Box::new(Semaphore::new(&c, &unique_path("kind-sem"), 2).unwrap()),
        Box::new(
            zklock::ReadWriteLock::new(&c, &unique_path("kind-rw"))
                .unwrap()
                .write_lock(),
        ),
    ];
    for l in &locks {
        l.cancel();
        let at = Instant::now();
        assert_eq!(
            l.acquire(Deadline::Forever),
            Err(Error::Cancelled),
            "{}",
            l.path()
        );
        assert!(at.elapsed() < AT_ONCE);
        assert!(
            l.acquire(Deadline::Forever).unwrap().is_some(),
            "{}",
            l.path()
        );
        l.release().unwrap();
    }
}

#[test]
fn a_multi_lock_remembers_a_cancel_and_leaves_none_on_its_locks() {
    let hosts = hosts();
    let c = connect(&hosts, 5000);
    let (p1, p2) = (unique_path("multi-a"), unique_path("multi-b"));
    let (m1, m2) = (
        Mutex::new(&c, &p1).unwrap(),
        SimpleLock::new(&c, &p2).unwrap(),
    );
    let multi = MultiLock::new(vec![&m1, &m2]);
    multi.cancel();
    let at = Instant::now();
    assert_eq!(multi.acquire(Deadline::Forever), Err(Error::Cancelled));
    assert!(at.elapsed() < AT_ONCE);
    assert!(children(&hosts, &p1).is_empty());
    // Consumed, and nothing remembered by its locks.
    assert!(multi.acquire(Deadline::TryOnce).unwrap().is_some());
    multi.release().unwrap();
    assert!(m1.try_lock().unwrap().is_some());
    assert!(m2.try_lock().unwrap().is_some());
}

#[test]
fn a_multi_lock_cancelled_while_it_waits_leaves_no_cancel_on_its_locks() {
    let hosts = hosts();
    let (a, c) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let (p1, p2) = (unique_path("mw-a"), unique_path("mw-b"));
    let other = Mutex::new(&a, &p2).unwrap();
    let g = other.lock().unwrap();
    let (m1, m2) = (Mutex::new(&c, &p1).unwrap(), Mutex::new(&c, &p2).unwrap());
    let multi = MultiLock::new(vec![&m1, &m2]);
    std::thread::scope(|s| {
        let t = s.spawn(|| multi.acquire(Deadline::Forever));
        assert!(eventually(Duration::from_secs(10), || children(
            &hosts, &p2
        )
        .len()
            == 2));
        multi.cancel();
        multi.cancel();
        assert_eq!(t.join().unwrap(), Err(Error::Cancelled));
    });
    drop(g);
    assert!(m1.try_lock().unwrap().is_some());
    assert!(m2.try_lock_for(Duration::from_secs(10)).unwrap().is_some());
    assert!(multi
        .acquire(Deadline::after(Duration::from_secs(10)))
        .unwrap()
        .is_some());
    multi.release().unwrap();
}

#[test]
fn reset_cancel_forgets_a_remembered_cancel() {
    let c = connect(&hosts(), 5000);
    let m = Mutex::new(&c, &unique_path("reset")).unwrap();
    assert!(!m.reset_cancel());
    m.cancel();
    assert!(m.cancel_token().is_pending());
    assert!(m.reset_cancel());
    assert!(!m.cancel_token().reset());
    assert!(m.try_lock().unwrap().is_some());
    // The two halves of a read-write lock: its cancel is each half's.
    let rw = zklock::ReadWriteLock::new(&c, &unique_path("reset-rw")).unwrap();
    rw.cancel();
    assert_eq!(
        rw.read_lock().try_lock().map(|g| g.is_some()),
        Err(Error::Cancelled)
    );
    assert!(rw.reset_cancel());
    assert!(rw.write_lock().try_lock().unwrap().is_some());
}
