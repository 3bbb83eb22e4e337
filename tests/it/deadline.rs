//! What a timed acquire promises: its timeout bounds the wait for another holder; its first
//! look gets a short grace beyond it. A lock found free in the acquire's one round trip is
//! held, however short the timeout (as kazoo's `acquire(timeout=)` and Curator's
//! `acquire(time, unit)` do); a busy lock is a timeout, never an error (issue 28, item 1).
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use crate::common::*;
use zklock::{Deadline, Lockable, Mutex, Protocol, ReadWriteLock, SemaphoreMutex, SimpleLock};

/// How long past its deadline a timed acquire's first round trip may run (the library's
/// `FIRST_ROUND_GRACE`).
const GRACE: Duration = Duration::from_millis(250);

fn tiny() -> [(&'static str, Deadline); 3] {
    [
        ("1 µs", Deadline::after(Duration::from_micros(1))),
        ("1 ms", Deadline::after(Duration::from_millis(1))),
        ("now", Deadline::At(Instant::now())),
    ]
}

/// On a free lock, every tiny deadline holds it; on a held one, every one is `Ok(None)`.
fn free_is_held_busy_is_a_timeout(what: &str, lock: &dyn Lockable, holder: &dyn Lockable) {
    for round in 0..3 {
        for (name, d) in tiny() {
            let t = Instant::now();
            match lock.acquire(d) {
                Ok(Some(_)) => lock.release().unwrap(),
                // Only a first round trip slower than its grace (a machine under heavy load)
                // may leave a timed acquire of a free lock unheld.
                Ok(None) if t.elapsed() >= GRACE => {}
                other => panic!(
                    "{what}, round {round}: {name} on a free lock gave {other:?} after {:?}, \
                     not a hold",
                    t.elapsed()
                ),
            }
        }
    }
    holder.acquire(Deadline::Forever).unwrap().unwrap();
    for (name, d) in tiny() {
        assert_eq!(lock.acquire(d), Ok(None), "{what}: {name} on a held lock");
    }
    holder.release().unwrap();
}

#[test]
fn a_timed_acquire_that_finds_the_lock_free_in_its_round_trip_holds_it() {
    let hosts = hosts();
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    for protocol in [Protocol::Curator, Protocol::Kazoo] {
        let p = unique_path(&format!("first-round-{protocol:?}"));
        let (m, hm) = (
            Mutex::with_protocol(&a, &format!("{p}/m"), protocol).unwrap(),
            Mutex::with_protocol(&b, &format!("{p}/m"), protocol).unwrap(),
        );
        free_is_held_busy_is_a_timeout("mutex", &m, &hm);
        let (s, hs) = (
            SemaphoreMutex::with_protocol(&a, &format!("{p}/s"), protocol).unwrap(),
            SemaphoreMutex::with_protocol(&b, &format!("{p}/s"), protocol).unwrap(),
        );
        free_is_held_busy_is_a_timeout("semaphore mutex", &s, &hs);
        let (rw, hrw) = (
            ReadWriteLock::with_protocol(&a, &format!("{p}/rw"), protocol).unwrap(),
            ReadWriteLock::with_protocol(&b, &format!("{p}/rw"), protocol).unwrap(),
        );
        let (w, hw, r) = (rw.write_lock(), hrw.write_lock(), rw.read_lock());
        free_is_held_busy_is_a_timeout("write lock", &w, &hw);
        free_is_held_busy_is_a_timeout("read lock", &r, &hw);
    }
    let p = unique_path("first-round-simple");
    let (l, hl) = (
        SimpleLock::new(&a, &p).unwrap(),
        SimpleLock::new(&b, &p).unwrap(),
    );
    free_is_held_busy_is_a_timeout("simple lock", &l, &hl);
}
