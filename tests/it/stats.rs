#![cfg(feature = "testing")]
//! Per-lock statistics against a real server: a known sequence of acquires, timeouts, cancels
//! and a loss gives exactly its counts, and wait and hold times that bracket what happened.

use std::time::{Duration, Instant};

use crate::common::{connect, hosts, unique_path};
use zklock::testing::Admin;
use zklock::{Error, Lockable, MultiLock, Mutex, Semaphore};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn a_known_sequence_of_acquires_timeouts_cancels_and_a_loss_gives_its_counts_and_times() {
    let hosts = hosts();
    let path = unique_path("stats");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let m = Mutex::per_handle(&a, &path).unwrap();
    let other = Mutex::per_handle(&b, &path).unwrap();
    assert_eq!(m.stats(), zklock::LockStats::default());

    // Three holds of 100, 200 and 300 ms, each taken at once.
    for hold in [100, 200, 300] {
        let g = m.lock().unwrap();
        std::thread::sleep(ms(hold));
        drop(g);
    }
    // Busy: a try-once and a timed acquire time out; a waiting acquire is cancelled.
    // (The other handle's guard is let go of: its hold is the handle's, released below from
    // another thread.)
    std::mem::forget(other.lock().unwrap());
    assert!(m.try_lock().unwrap().is_none());
    assert!(m.try_lock_for(ms(200)).unwrap().is_none());
    std::thread::scope(|s| {
        let waiter = s.spawn(|| m.lock().map(|_| ()));
        std::thread::sleep(ms(300));
        m.cancel();
        assert_eq!(waiter.join().unwrap().unwrap_err(), Error::Cancelled);
    });
    // An acquire that waits about 400 ms for the other holder.
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(ms(400));
            other.release().unwrap();
        });
        let waited = m.lock().unwrap();
        let waited_for = started.elapsed();
        assert!(waited_for >= ms(400));
        std::mem::forget(waited);
    });
    // Its node is removed under it: the release says lost, and so do the statistics.
    let admin = Admin::connect(&hosts).unwrap();
    for c in admin.children(&path).unwrap() {
        admin.delete(&format!("{path}/{c}")).unwrap();
    }
    assert_eq!(m.release().unwrap_err(), Error::LockLost);

    let s = m.stats();
    assert_eq!(
        (
            s.acquisitions,
            s.timeouts,
            s.cancels,
            s.failures,
            s.releases,
            s.losses
        ),
        (4, 2, 1, 0, 3, 1),
        "{s:?}"
    );
    assert_eq!((s.wait.count, s.hold.count), (4, 4));
    // Waits: three at once, one of about 400 ms (the nearest-rank p50 of four is the second).
    assert!(s.wait.p50 < ms(200), "{s:?}");
    assert!(s.wait.max >= ms(400) && s.wait.max < ms(2000), "{s:?}");
    assert_eq!(s.wait.p99, s.wait.max);
    // Holds: 100, 200, 300 ms and the lost one (a few ms): nearest-rank p50 is the 100 ms one,
    // p90 the 300 ms one.
    assert!(s.hold.p50 >= ms(100) && s.hold.p50 < ms(200), "{s:?}");
    assert!(s.hold.p90 >= ms(300) && s.hold.p90 < ms(1000), "{s:?}");
    assert_eq!(s.hold.max, s.hold.p90);
}

#[test]
fn a_semaphore_and_a_multi_lock_keep_their_own_counts() {
    let hosts = hosts();
    let c = connect(&hosts, 6000);
    let sem = Semaphore::new(&c, &unique_path("stats-sem"), 1).unwrap();
    let lease = sem.lock().unwrap();
    // Its own lease fills it: refused at once, a failure of that acquire.
    assert!(matches!(sem.try_lock(), Err(Error::WouldDeadlock(_))));
    std::thread::sleep(ms(50));
    drop(lease);
    let other = connect(&hosts, 6000);
    let sem2 = Semaphore::new(&other, sem.path(), 1).unwrap();
    let held = sem2.lock().unwrap();
    assert!(sem.try_lock().unwrap().is_none());
    drop(held);
    let s = sem.stats();
    assert_eq!(
        (s.acquisitions, s.timeouts, s.failures, s.releases, s.losses),
        (1, 1, 1, 1, 0),
        "{s:?}"
    );
    assert!(s.hold.max >= ms(50));

    let (m1, m2) = (
        Mutex::per_handle(&c, &unique_path("stats-m1")).unwrap(),
        Mutex::per_handle(&c, &unique_path("stats-m2")).unwrap(),
    );
    let multi = MultiLock::new(vec![&m1, &m2]);
    drop(multi.lock().unwrap());
    drop(multi.lock().unwrap());
    let s = multi.stats();
    assert_eq!((s.acquisitions, s.releases), (2, 2), "{s:?}");
    // Each lock counts what was taken through it too.
    assert_eq!(m1.stats().acquisitions, 2);
}
