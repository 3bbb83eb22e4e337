#![cfg(feature = "testing")]
//! Cooperative revocation against a real server (Curator's model): a holder that made its lock
//! revocable is asked and lets go, so the next contender gets it; a holder that did not is never
//! forced. (Interoperation with Curator's `Revoker` and `makeRevocable`: tests/it/interop.rs.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{connect, hosts, unique_path};
use zklock::testing::Admin;
use zklock::{Error, HoldState, Lockable, Mutex, Revocable, SemaphoreMutex, SimpleLock};

#[test]
fn a_revocable_holder_is_asked_lets_go_and_the_waiter_gets_the_lock() {
    let hosts = hosts();
    let path = unique_path("revoke");
    let (a, b, c) = (
        connect(&hosts, 6000),
        connect(&hosts, 6000),
        connect(&hosts, 6000),
    );
    let holder = Arc::new(SemaphoreMutex::new(&a, &path).unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    {
        let (h, asked) = (holder.clone(), asked.clone());
        holder
            .make_revocable(Box::new(move || {
                asked.fetch_add(1, Ordering::SeqCst);
                h.release().unwrap();
            }))
            .unwrap();
    }
    std::mem::forget(holder.lock().unwrap());
    let waiter = std::thread::spawn({
        let (b, path) = (b.clone(), path.clone());
        move || {
            let m = SemaphoreMutex::new(&b, &path).unwrap();
            let got = m.try_lock_for(Duration::from_secs(20)).unwrap();
            got.map(|g| g.fencing_token())
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(holder.is_held(), "nobody asked yet");
    let asker = SemaphoreMutex::new(&c, &path).unwrap();
    let t = Instant::now();
    let nodes = asker.revoke_holders().unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert!(waiter.join().unwrap().is_some(), "the waiter got the lock");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(!holder.is_held());
}

#[test]
fn a_holder_that_did_not_make_its_lock_revocable_is_never_forced() {
    let hosts = hosts();
    let path = unique_path("revoke-not");
    let (a, c) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let m = Mutex::per_handle(&a, &path).unwrap();
    let g = m.lock().unwrap();
    assert!(matches!(
        m.wait_revoke_request(Some(Duration::ZERO)),
        Err(Error::InvalidArgument(_))
    ));
    let asker = Mutex::per_handle(&c, &path).unwrap();
    // The request is written (as Curator's Revoker writes it) ...
    let nodes = asker.revoke_holders().unwrap();
    assert_eq!(nodes.len(), 1);
    let data = Admin::connect(&hosts).unwrap().node(&nodes[0]).unwrap();
    assert!(data.is_some());
    // ... and nothing happens to the holder: it holds, and nobody else gets in.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(g.hold_state(), HoldState::Held);
    assert!(asker
        .try_lock_for(Duration::from_millis(500))
        .unwrap()
        .is_none());
    drop(g);
    assert!(asker.try_lock().unwrap().is_some());
}

#[test]
fn wait_revoke_request_returns_when_asked_times_out_otherwise_and_ends_on_release() {
    let hosts = hosts();
    let path = unique_path("revoke-wait");
    let (a, c) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let lock = SimpleLock::new(&a, &path).unwrap();
    // Made revocable while holding: the current hold is watched too.
    std::mem::forget(lock.lock().unwrap());
    lock.make_revocable(Box::new(|| {})).unwrap();
    assert!(!lock
        .wait_revoke_request(Some(Duration::from_millis(200)))
        .unwrap());
    let asker = SimpleLock::new(&c, &path).unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| lock.wait_revoke_request(Some(Duration::from_secs(10))));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(asker.revoke_holders().unwrap().len(), 1);
        assert!(w.join().unwrap().unwrap(), "asked");
    });
    assert!(lock.is_held(), "asking never releases by itself");
    lock.release().unwrap();
    assert_eq!(lock.wait_revoke_request(None).unwrap_err(), Error::NotHeld);
    // A fresh hold starts unasked.
    std::mem::forget(lock.lock().unwrap());
    assert!(!lock
        .wait_revoke_request(Some(Duration::from_millis(200)))
        .unwrap());
    lock.release().unwrap();
}
