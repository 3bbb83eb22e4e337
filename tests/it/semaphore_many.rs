#![cfg(feature = "testing")]
//! `Semaphore::acquire_many` against a real ZooKeeper server, in both layouts: n leases or
//! none, under one deadline; a timed-out, cancelled or refused acquire leaves no node; two
//! acquirers of all the leases take turns instead of each holding some and waiting for the
//! rest (Curator's one-at-a-time `acquire(qty)` would wait to their timeouts).

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use zklock::testing::Admin;
use zklock::{Error, Lockable, Protocol, Semaphore};

/// Lease nodes only (Curator: under P/leases; kazoo: P's children).
fn leases(admin: &Admin, path: &str, p: Protocol) -> Vec<String> {
    match p {
        Protocol::Curator => admin
            .children(&format!("{path}/leases"))
            .unwrap_or_default(),
        _ => admin.children(path).unwrap_or_default(),
    }
}

/// The guarding mutex's nodes.
fn guard_nodes(admin: &Admin, path: &str, p: Protocol) -> Vec<String> {
    match p {
        Protocol::Curator => admin.children(&format!("{path}/locks")).unwrap_or_default(),
        _ => admin
            .children(&format!("{path}-__lock__"))
            .unwrap_or_default(),
    }
}

fn all_or_none(p: Protocol) {
    let hosts = hosts();
    let admin = admin(&hosts);
    let path = unique_path("sem-many");
    let (c1, c2) = (connect(&hosts, p), connect(&hosts, p));
    let a = Semaphore::new(&c1, &path, 3).unwrap();
    let b = Semaphore::new(&c2, &path, 3).unwrap();

    let two = a.acquire_many(2).unwrap();
    assert_eq!(two.len(), 2);
    assert!(two.is_held());
    let tokens = two.tokens();
    assert!(tokens[0] != tokens[1], "each lease has its own token");
    assert_eq!(a.hold_count(), 2);
    assert_eq!(leases(&admin, &path, p).len(), 2);

    // 2 more of 3: none, and nothing left behind.
    assert!(b.try_acquire_many(2).unwrap().is_none());
    assert!(b
        .try_acquire_many_for(2, Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert_eq!(
        leases(&admin, &path, p).len(),
        2,
        "a refused acquire left a lease"
    );
    assert!(guard_nodes(&admin, &path, p).is_empty());
    assert_eq!(b.hold_count(), 0);

    // The one free lease is still there for a single acquire.
    let one = b.try_lock().unwrap().expect("one lease free");
    assert_eq!(leases(&admin, &path, p).len(), 3);
    drop(one);

    two.unlock().unwrap();
    assert_eq!(a.hold_count(), 0);
    assert!(leases(&admin, &path, p).is_empty());
    let all = b.try_acquire_many(3).unwrap().expect("all three free");
    assert!(all.tokens().iter().all(|t| *t > tokens[1]));
    drop(all);
    assert!(leases(&admin, &path, p).is_empty());
}

#[test]
fn n_leases_or_none_curator() {
    all_or_none(Protocol::Curator);
}

#[test]
fn n_leases_or_none_kazoo() {
    all_or_none(Protocol::Kazoo);
}

/// A waiting acquire of n takes all n when enough are returned, and gives back what it made
/// when cancelled or timed out.
fn waits_then_takes_all(p: Protocol) {
    let hosts = hosts();
    let admin = admin(&hosts);
    let path = unique_path("sem-many-wait");
    let (c1, c2) = (connect(&hosts, p), connect(&hosts, p));
    let a = Semaphore::new(&c1, &path, 2).unwrap();
    let b = Arc::new(Semaphore::new(&c2, &path, 2).unwrap());
    let held = a.lock().unwrap();

    // Cancelled while it waits (its nodes made, or the guard held): nothing left.
    let b2 = b.clone();
    let t = std::thread::spawn(move || b2.acquire_many(2).map(|l| l.len()));
    assert!(eventually(Duration::from_secs(10), || !guard_nodes(
        &admin, &path, p
    )
    .is_empty()));
    b.cancel();
    assert_eq!(t.join().unwrap().unwrap_err(), Error::Cancelled);
    assert!(eventually(Duration::from_secs(10), || leases(
        &admin, &path, p
    )
    .len()
        == 1
        && guard_nodes(&admin, &path, p).is_empty()));

    // Waiting again: the two arrive together once the holder returns its lease.
    let b2 = b.clone();
    let t = std::thread::spawn(move || {
        // The handle keeps the leases (the set is forgotten): released below through it.
        b2.try_acquire_many_for(2, Duration::from_secs(30))
            .map(|l| l.map(|l| std::mem::ManuallyDrop::new(l).tokens()))
    });
    assert!(eventually(Duration::from_secs(10), || !guard_nodes(
        &admin, &path, p
    )
    .is_empty()));
    assert!(!b.is_held());
    drop(held);
    let tokens = t.join().unwrap().unwrap().expect("both leases");
    assert_eq!(tokens.len(), 2);
    assert_eq!(b.hold_count(), 2);
    assert_eq!(leases(&admin, &path, p).len(), 2);
    // Full: the other handle waits.
    assert!(a.try_lock().unwrap().is_none());
    assert!(b.release().is_ok() && b.release().is_ok());
    assert!(leases(&admin, &path, p).is_empty());
}

#[test]
fn waits_then_takes_all_curator() {
    waits_then_takes_all(Protocol::Curator);
}

#[test]
fn waits_then_takes_all_kazoo() {
    waits_then_takes_all(Protocol::Kazoo);
}

#[test]
fn bad_counts_and_own_leases_are_refused_at_once() {
    let hosts = hosts();
    let path = unique_path("sem-many-args");
    let c = connect(&hosts, Protocol::Curator);
    let sem = Semaphore::new(&c, &path, 3).unwrap();
    assert!(matches!(
        sem.acquire_many(0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        sem.try_acquire_many(4),
        Err(Error::InvalidArgument(_))
    ));
    let two = sem.acquire_many(2).unwrap();
    // One left: this handle could only wait for itself.
    assert!(matches!(
        sem.try_acquire_many_for(2, Duration::from_secs(5)),
        Err(Error::WouldDeadlock(_))
    ));
    assert_eq!(sem.hold_count(), 2);
    let one = sem.acquire_many(1).unwrap();
    assert_eq!(sem.hold_count(), 3);
    drop((two, one));
    assert_eq!(sem.hold_count(), 0);
    // (A mutex has no acquire_many: a compile error in Rust; the C door's refusal is
    // tests/it/ffi_semaphore_many.rs's.)
}

/// Two handles that each want every lease, while a third holds one: each gets all of them in
/// turn (each waits holding the guarding mutex, never some of the leases).
fn all_leases_twice(p: Protocol) {
    let hosts = hosts();
    let admin = admin(&hosts);
    let path = unique_path("sem-many-turns");
    let c0 = connect(&hosts, p);
    let holder = Semaphore::new(&c0, &path, 2).unwrap();
    let lease = holder.lock().unwrap();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (hosts, path) = (hosts.clone(), path.clone());
            std::thread::spawn(move || {
                let c = connect(&hosts, p);
                let sem = Semaphore::new(&c, &path, 2).unwrap();
                let all = sem
                    .try_acquire_many_for(2, Duration::from_secs(40))
                    .unwrap()
                    .expect("all leases in turn");
                assert!(all.is_held());
                all.tokens()
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(10), || !guard_nodes(
        &admin, &path, p
    )
    .is_empty()));
    drop(lease);
    let mut tokens: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 4);
    assert!(leases(&admin, &path, p).is_empty());
}

#[test]
fn two_acquirers_of_every_lease_take_turns_curator() {
    all_leases_twice(Protocol::Curator);
}

#[test]
fn two_acquirers_of_every_lease_take_turns_kazoo() {
    all_leases_twice(Protocol::Kazoo);
}
