//! The async acquire (`Lock::acquire_async`, `lock_async`, `OwnedGuard`) under tokio, against
//! a real ZooKeeper server: a dropped acquire (timeout, select!, abort) leaves nothing held
//! nor queued, and the runtime's threads never block.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use zklock::{Client, Deadline, Error, Lockable, Mutex, OwnedGuard, SemaphoreMutex, SimpleLock};

/// How long a test waits for a state the server reaches in a round trip or two.
const SETTLE: Duration = Duration::from_secs(20);

/// The holder ids of the queue at `path`, in order, as `l` sees them.
fn queue(l: &impl Lockable) -> Vec<String> {
    l.participants()
        .unwrap()
        .into_iter()
        .map(|p| p.holder_id)
        .collect()
}

fn ids(clients: &[&Client]) -> Vec<String> {
    clients.iter().map(|c| c.holder_id().to_string()).collect()
}

#[test]
fn the_owned_guard_and_the_future_are_send_and_static() {
    fn send_static<T: Send + Sync + 'static>() {}
    fn send_future<T: Send + 'static>() {}
    send_static::<OwnedGuard<Mutex>>();
    send_static::<OwnedGuard<SemaphoreMutex>>();
    send_static::<OwnedGuard<zklock::Semaphore>>();
    send_static::<OwnedGuard<zklock::WriteLock>>();
    send_future::<zklock::AcquireFuture<SimpleLock>>();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_that_gives_up_leaves_nothing_held_and_a_third_client_gets_the_lock() {
    let hosts = hosts();
    let path = unique_path("async-timeout");
    let (a, b, c) = (
        connect(&hosts, 6000),
        connect(&hosts, 6000),
        connect(&hosts, 6000),
    );
    let la = SemaphoreMutex::new(&a, &path).unwrap();
    let lb = SemaphoreMutex::new(&b, &path).unwrap();
    let lc = SemaphoreMutex::new(&c, &path).unwrap();
    let held = la.lock_async().await.unwrap();

    let r = tokio::time::timeout(Duration::from_millis(500), lb.lock_async()).await;
    assert!(r.is_err(), "b got the lock while a held it");
    // b's attempt is cancelled and its node goes: only a is queued.
    assert!(
        eventually(SETTLE, || queue(&lc) == ids(&[&a])),
        "b's node stayed after its timeout: {:?}",
        queue(&lc)
    );

    held.unlock_async().await.unwrap();
    let g = lc
        .acquire_async(Deadline::after(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("a third client gets the lock once a releases (b holds nothing)");
    assert!(!lb.is_held());
    assert_eq!(queue(&lc), ids(&[&c]));
    assert_eq!(lb.stats().cancels, 1, "{:?}", lb.stats());
    drop(g);
    assert!(eventually(SETTLE, || queue(&lc).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_between_two_acquires_keeps_the_winner_and_gives_back_the_loser() {
    let hosts = hosts();
    let c = connect(&hosts, 6000);
    let (p1, p2) = (unique_path("async-select-1"), unique_path("async-select-2"));
    let (l1, l2) = (Mutex::new(&c, &p1).unwrap(), Mutex::new(&c, &p2).unwrap());
    // Both free: both acquires may well complete; the one select! drops gives its hold back.
    let (winner, other) = tokio::select! {
        g = l1.lock_async() => (g.unwrap(), &l2),
        g = l2.lock_async() => (g.unwrap(), &l1),
    };
    assert!(winner.is_held());
    assert!(
        eventually(SETTLE, || queue(other).is_empty()),
        "the dropped acquire kept a node: {:?}",
        queue(other)
    );
    assert_eq!(queue(winner.lock()), ids(&[&c]));
    // Nothing of the loser is left on the handle either: it acquires at once.
    let again = other.acquire_async(Deadline::TryOnce).await.unwrap();
    assert!(again.is_some());
    drop((winner, again));
    assert!(eventually(SETTLE, || queue(&l1).is_empty() && queue(&l2).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_between_an_acquire_and_a_sleep_leaves_no_node_when_the_sleep_wins() {
    let hosts = hosts();
    let path = unique_path("async-select-sleep");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let lb = Mutex::new(&b, &path).unwrap();
    let observer = Mutex::new(&b, &path).unwrap();
    // A mutex contender behind a mutex holder: the sleep wins, the waiting node must go.
    let lh = Mutex::new(&a, &path).unwrap();
    let held = lh.lock_async().await.unwrap();
    let slept = tokio::select! {
        _ = lb.lock_async() => false,
        _ = tokio::time::sleep(Duration::from_millis(300)) => true,
    };
    assert!(slept, "b got the lock while a held it");
    assert!(
        eventually(SETTLE, || queue(&observer) == ids(&[&a])),
        "b's waiting node stayed: {:?}",
        queue(&observer)
    );
    drop(held);
    assert!(eventually(SETTLE, || queue(&observer).is_empty()));
    assert!(lb.try_lock().unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_acquire_leaves_the_queue_and_the_handle_acquires_again_at_once() {
    let hosts = hosts();
    let path = unique_path("async-abort");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let la = SemaphoreMutex::new(&a, &path).unwrap();
    let lb = SemaphoreMutex::new(&b, &path).unwrap();
    let held = la.lock_async().await.unwrap();

    let waiter = {
        let lb = lb.clone();
        tokio::spawn(async move { lb.lock_async().await })
    };
    assert!(
        eventually(SETTLE, || queue(&la) == ids(&[&a, &b])),
        "b never queued: {:?}",
        queue(&la)
    );
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    // At once: the handle's cancelled acquire may still be deleting its node; a new acquire
    // waits for that instead of being refused (WouldDeadlock).
    let r = lb.acquire_async(Deadline::TryOnce).await;
    assert!(matches!(r, Ok(None)), "{r:?}");
    assert!(
        eventually(SETTLE, || queue(&la) == ids(&[&a])),
        "the aborted acquire's node stayed: {:?}",
        queue(&la)
    );
    drop(held);
    let g = lb
        .acquire_async(Deadline::after(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("b acquires once a released");
    assert_eq!(queue(&la), ids(&[&b]));
    drop(g);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_one_acquire_cancels_only_that_one_not_the_handles_others() {
    let hosts = hosts();
    let path = unique_path("async-drop-one");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let la = Mutex::new(&a, &path).unwrap();
    // One per-thread mutex handle: each async acquire is a participant of its own.
    let lb = Mutex::new(&b, &path).unwrap();
    let held = la.lock_async().await.unwrap();
    let first = tokio::spawn({
        let lb = lb.clone();
        async move { lb.lock_async().await }
    });
    let second = tokio::spawn({
        let lb = lb.clone();
        async move { lb.lock_async().await.map(|g| g.fencing_token()) }
    });
    assert!(
        eventually(SETTLE, || queue(&la) == ids(&[&a, &b, &b])),
        "{:?}",
        queue(&la)
    );
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    assert!(eventually(SETTLE, || queue(&la) == ids(&[&a, &b])));
    drop(held);
    let token = tokio::time::timeout(SETTLE, second)
        .await
        .expect("the other acquire of the handle goes on and gets the lock")
        .unwrap()
        .unwrap();
    assert!(token > 0);
    assert!(eventually(SETTLE, || queue(&la).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handles_cancel_ends_an_async_acquire_with_cancelled() {
    let hosts = hosts();
    let path = unique_path("async-cancel");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let la = SemaphoreMutex::new(&a, &path).unwrap();
    let lb = SemaphoreMutex::new(&b, &path).unwrap();
    let _held = la.lock_async().await.unwrap();
    let waiting = tokio::spawn({
        let lb = lb.clone();
        async move { lb.lock_async().await.map(|_| ()) }
    });
    assert!(eventually(SETTLE, || queue(&la).len() == 2));
    lb.cancel();
    let r = tokio::time::timeout(SETTLE, waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r, Err(Error::Cancelled));
    assert!(eventually(SETTLE, || queue(&la) == ids(&[&a])));
}

#[tokio::test(flavor = "current_thread")]
async fn many_async_acquires_on_a_current_thread_runtime_all_get_the_lock_in_turn() {
    let hosts = hosts();
    let path = unique_path("async-many");
    let c = connect(&hosts, 6000);
    // One per-thread mutex handle shared by every task, and per-handle ones: 24 contenders.
    let shared = Mutex::new(&c, &path).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..24 {
        let (inside, done) = (inside.clone(), done.clone());
        let shared = shared.clone();
        let own = SemaphoreMutex::new(&c, &path).unwrap();
        tasks.push(tokio::spawn(async move {
            for _ in 0..2 {
                let g: Box<dyn std::any::Any + Send> = if i % 2 == 0 {
                    Box::new(shared.lock_async().await.unwrap())
                } else {
                    Box::new(own.lock_async().await.unwrap())
                };
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                // Hold across an await: the runtime's one thread runs the others meanwhile.
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                drop(g);
            }
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    // The runtime's thread must stay free: this ticker runs while 23 acquires wait.
    let ticks = Arc::new(AtomicUsize::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticks.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    let all = async {
        for t in tasks {
            t.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("every async acquire got the lock in turn");
    assert_eq!(done.load(Ordering::SeqCst), 24);
    assert!(ticks.load(Ordering::SeqCst) > 0);
    ticker.abort();
    let observer = Mutex::new(&c, &path).unwrap();
    assert!(eventually(SETTLE, || queue(&observer).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_guard_crosses_tasks_and_its_drop_releases_without_blocking() {
    let hosts = hosts();
    let path = unique_path("async-owned");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let la = Mutex::new(&a, &path).unwrap();
    let lb = SemaphoreMutex::new(&b, &path).unwrap();
    let g = la.lock_async().await.unwrap();
    let token = g.fencing_token();
    assert!(g.node().starts_with(&path));
    assert!(g.lease_remaining().is_some());
    // Moved to another task (another thread) and dropped there: released all the same.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(g.is_held());
        drop(g);
    })
    .await
    .unwrap();
    let gb = lb
        .acquire_async(Deadline::after(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("a's guard was released where it was dropped");
    assert!(gb.fencing_token() > token);
    // A per-handle lock's guard is out of the handle's table at once: no WouldDeadlock.
    drop(gb);
    let again = lb
        .acquire_async(Deadline::after(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(again.is_some());
    again.unwrap().unlock_async().await.unwrap();
    assert!(eventually(SETTLE, || queue(&la).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_dropped_right_after_their_first_poll_leave_nothing_behind() {
    let hosts = hosts();
    let path = unique_path("async-first-poll");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    let la = SemaphoreMutex::new(&a, &path).unwrap();
    let lb = SemaphoreMutex::new(&b, &path).unwrap();
    // On a free lock: each dropped acquire may get the lock after its drop (then gives it
    // back) or be cancelled before it even starts; the handle's next acquire is never refused.
    for _ in 0..20 {
        tokio::select! {
            biased;
            _ = lb.lock_async() => {}
            _ = std::future::ready(()) => {}
        }
        let g = lb
            .acquire_async(Deadline::after(Duration::from_secs(10)))
            .await
            .unwrap()
            .expect("the handle acquires after its dropped acquire gave back what it got");
        g.unlock_async().await.unwrap();
    }
    // And a contender never finds the lock kept by a dropped acquire.
    for _ in 0..10 {
        tokio::select! {
            biased;
            _ = lb.lock_async() => {}
            _ = std::future::ready(()) => {}
        }
    }
    let g = la
        .acquire_async(Deadline::after(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("nothing kept the lock");
    assert!(eventually(SETTLE, || queue(&la) == ids(&[&a])));
    drop(g);
    assert!(eventually(SETTLE, || queue(&la).is_empty()));
}
