#![cfg(feature = "testing")]
//! The read-write lock against a real ZooKeeper server: readers overlap while writers exclude
//! (threads and processes), FIFO (a late reader waits behind a queued writer), reentrancy,
//! write -> read downgrade, read -> write upgrade refused at once, and timeouts/cancel that leave
//! no node behind.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::common::history::*;
use crate::common::*;
use zklock::{Deadline, Lockable};
use zklock::{Error, HoldState, Protocol, ReadWriteLock};

/// Entry of the worker processes (a no-op unless this binary was started as a worker).
#[test]
fn worker_entry() {
    run_worker_if_asked();
}

fn rw(hosts: &str, path: &str, p: Protocol) -> (zklock::Client, ReadWriteLock) {
    let c = connect(hosts, p);
    let l = ReadWriteLock::new(&c, path).unwrap();
    (c, l)
}

/// `n` contenders (readers and writers) in the queue of `path`.
fn queue_len(l: &ReadWriteLock) -> usize {
    l.participants().unwrap().len()
}

/// Mixed load from `threads` threads of this process (own session each), appending to `hist`.
fn thread_load(
    hosts: &str,
    path: &str,
    threads: usize,
    run: Duration,
    read_fraction: f64,
    hist: &History,
) {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (hosts, path, start) = (hosts.to_string(), path.to_string(), start.clone());
            let hist_path = hist.path().to_path_buf();
            std::thread::spawn(move || {
                let (_c, l) = rw(&hosts, &path, Protocol::Curator);
                let mut w = HistoryWriter::open(&hist_path);
                let who = format!("thread{i}");
                let mut rng = Rng::new(i as u64 + 1);
                start.wait();
                // First a read held long enough for every thread's read to overlap.
                {
                    let g = l.read().lock().unwrap();
                    w.enter('R', &who);
                    std::thread::sleep(Duration::from_millis(400));
                    w.exit('R', &who);
                    drop(g);
                }
                let end = Instant::now() + run;
                while Instant::now() < end {
                    if rng.next_f64() < read_fraction {
                        let g = l.read().lock().unwrap();
                        w.enter('R', &who);
                        std::thread::sleep(Duration::from_millis(20));
                        w.exit('R', &who);
                        drop(g);
                    } else {
                        let g = l.write().lock().unwrap();
                        assert!(g.is_held());
                        w.enter('W', &who);
                        std::thread::sleep(Duration::from_millis(3));
                        w.exit('W', &who);
                        drop(g);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn readers_overlap_and_writers_exclude_across_threads() {
    let hosts = hosts();
    let path = unique_path("rw-threads");
    let hist = History::new();
    thread_load(&hosts, &path, 8, Duration::from_secs(4), 0.75, &hist);
    let st = hist.check();
    eprintln!("history: {st:?}");
    assert!(
        st.peak_readers >= 5,
        "readers never overlapped enough: {st:?}"
    );
    assert!(st.writes >= 8, "too few writes to prove exclusion: {st:?}");
    let admin = admin(&hosts);
    assert!(
        admin.children(&path).unwrap().is_empty(),
        "nodes left behind"
    );
}

#[test]
fn readers_overlap_and_writers_exclude_across_processes() {
    let hosts = hosts();
    let path = unique_path("rw-procs");
    let hist = History::new();
    let procs: Vec<_> = (0..3)
        .map(|i| {
            spawn_worker(
                "rwlock::worker_entry",
                &hosts,
                &path,
                "curator",
                "rw",
                "load",
                5000,
                hist.path(),
                &format!("proc{i}"),
                0.8,
            )
        })
        .collect();
    // Threads of this process join the same lock meanwhile.
    thread_load(&hosts, &path, 4, Duration::from_secs(4), 0.8, &hist);
    for p in procs {
        p.wait_ok(Duration::from_secs(40));
    }
    let st = hist.check();
    eprintln!("history: {st:?}");
    for i in 0..3 {
        assert!(
            st.holds_of(&format!("proc{i}")) > 0,
            "process {i} never held the lock: {st:?}"
        );
    }
    assert!(
        st.peak_readers >= 5,
        "readers never overlapped enough: {st:?}"
    );
    assert!(st.writes >= 5, "too few writes: {st:?}");
}

#[test]
fn a_late_reader_waits_behind_a_queued_writer() {
    let hosts = hosts();
    let path = unique_path("rw-fifo");
    let (_c1, first) = rw(&hosts, &path, Protocol::Curator);
    let (_c2, writer) = rw(&hosts, &path, Protocol::Curator);
    let (_c3, late) = rw(&hosts, &path, Protocol::Curator);

    let r1 = first.read().lock().unwrap();
    let writer = Arc::new(writer);
    let w2 = writer.clone();
    let wt = std::thread::spawn(move || {
        let g = w2.write().lock().unwrap();
        let t = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        drop(g);
        t
    });
    assert!(
        eventually(Duration::from_secs(5), || queue_len(&first) == 2),
        "writer never queued"
    );

    // Only a reader holds, yet the late reader must wait: a writer is queued before it.
    let t0 = Instant::now();
    assert!(late
        .read()
        .try_lock_for(Duration::from_millis(500))
        .unwrap()
        .is_none());
    assert!(t0.elapsed() >= Duration::from_millis(450));
    assert!(late.read().try_lock().unwrap().is_none());
    assert_eq!(
        queue_len(&first),
        2,
        "the timed-out reader left a node behind"
    );

    // It gets in after the writer.
    let waiter = std::thread::spawn(move || {
        let g = late.read().lock().unwrap();
        let t = Instant::now();
        drop(g);
        t
    });
    std::thread::sleep(Duration::from_millis(200));
    drop(r1);
    let writer_got = wt.join().unwrap();
    let reader_got = waiter.join().unwrap();
    assert!(
        reader_got > writer_got + Duration::from_millis(250),
        "the late reader overtook the writer"
    );
}

#[test]
fn write_lock_downgrades_to_read_lock_curator() {
    downgrade(Protocol::Curator, "__WRIT__", "__READ__");
}

#[test]
fn write_lock_downgrades_to_read_lock_kazoo() {
    downgrade(Protocol::Kazoo, "__lock__", "__rlock__");
}

fn downgrade(p: Protocol, wmark: &str, rmark: &str) {
    let hosts = hosts();
    let path = unique_path("rw-downgrade");
    let (_c1, lock) = rw(&hosts, &path, p);
    let (_c2, other) = rw(&hosts, &path, p);
    let admin = admin(&hosts);

    let w = lock.write().lock().unwrap();
    let wnode = admin.children(&path).unwrap().pop().unwrap();
    assert!(wnode.contains(wmark), "{wnode}");
    // A second writer queues behind us.
    let other = Arc::new(other);
    let o2 = other.clone();
    let second = std::thread::spawn(move || {
        let g = o2.write().lock().unwrap();
        let t = Instant::now();
        drop(g);
        t
    });
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .len()
        == 2));

    // Downgrade: the read lock is granted at once, with the writer's sequence number.
    let t0 = Instant::now();
    let r = lock
        .read()
        .try_lock()
        .unwrap()
        .expect("write -> read downgrade");
    assert!(t0.elapsed() < AT_ONCE, "{:?}", t0.elapsed());
    let kids = admin.children(&path).unwrap();
    assert_eq!(kids.len(), 3, "{kids:?}");
    let rnode = kids
        .iter()
        .find(|k| k.contains(rmark))
        .expect("a read node");
    let seq = &wnode[wnode.len() - 10..];
    assert!(
        rnode.ends_with(seq),
        "downgrade node {rnode} does not carry the writer's number {seq}"
    );
    if p == Protocol::Curator {
        assert!(
            rnode.starts_with("_c_") && rnode.len() == 3 + 36 + 1 + 8 + 10,
            "{rnode}"
        );
    } else {
        assert_eq!(rnode.len(), 32 + 9 + 10, "{rnode}");
    }
    assert_eq!(r.hold_state(), HoldState::Held);
    // The read hold keeps the write hold's token: writers queued behind get larger ones.
    assert_eq!(r.fencing_token(), w.fencing_token());

    // Release the write lock: still reading, and the queued writer must keep waiting.
    drop(w);
    assert!(lock.read().is_held());
    assert!(!lock.write().is_held());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !second.is_finished(),
        "a writer got in while the downgraded reader still reads"
    );
    // Another reader arriving now queues behind that writer (FIFO), so it must wait too.
    let (_c3, third) = rw(&hosts, &path, p);
    assert!(third
        .read()
        .try_lock_for(Duration::from_millis(300))
        .unwrap()
        .is_none());

    let released_at = Instant::now();
    drop(r);
    let got = second.join().unwrap();
    assert!(got >= released_at);
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .is_empty()));
}

#[test]
fn read_to_write_upgrade_fails_at_once() {
    let hosts = hosts();
    let path = unique_path("rw-upgrade");
    let (_c, lock) = rw(&hosts, &path, Protocol::Curator);
    let r = lock.read().lock().unwrap();
    for attempt in 0..3 {
        let t0 = Instant::now();
        let e = match attempt {
            0 => lock.write().lock().map(|_| ()).unwrap_err(),
            1 => lock
                .write()
                .try_lock_for(Duration::from_secs(5))
                .map(|_| ())
                .unwrap_err(),
            _ => lock
                .write()
                .acquire(Deadline::Forever)
                .map(|_| ())
                .unwrap_err(),
        };
        assert!(
            t0.elapsed() < Duration::from_millis(200),
            "upgrade did not fail at once"
        );
        match &e {
            Error::WouldDeadlock(m) => assert!(m.contains("upgrade") && m.contains(&path), "{m}"),
            other => panic!("expected WouldDeadlock, got {other:?}"),
        }
        assert!(e.to_string().contains("release the read lock first"), "{e}");
    }
    assert_eq!(queue_len(&lock), 1, "the refused upgrade left a node");
    assert!(lock.read().is_held());
    drop(r);
    // Once the read lock is released the write lock is fine.
    let w = lock
        .write()
        .try_lock()
        .unwrap()
        .expect("write after read released");
    drop(w);
}

#[test]
fn both_halves_are_reentrant_per_thread() {
    let hosts = hosts();
    let path = unique_path("rw-reentrant");
    let (_c, lock) = rw(&hosts, &path, Protocol::Curator);
    let lock = Arc::new(lock);

    let w1 = lock.write().lock().unwrap();
    let w2 = lock.write().try_lock().unwrap().expect("reentrant write");
    assert_eq!(w1.fencing_token(), w2.fencing_token());
    assert_eq!(lock.write().hold_count(), 2);
    assert_eq!(queue_len(&lock), 1);
    // Another thread using the same handle is another contender.
    let l2 = lock.clone();
    let other = std::thread::spawn(move || {
        l2.write()
            .try_lock_for(Duration::from_millis(200))
            .unwrap()
            .is_some()
    });
    assert!(
        !other.join().unwrap(),
        "another thread entered a held write lock"
    );
    drop(w2);
    assert!(lock.write().is_held());
    drop(w1);
    assert!(!lock.write().is_held());

    let r1 = lock.read().lock().unwrap();
    assert!(lock
        .read()
        .acquire(Deadline::from_timeout(Some(Duration::ZERO)))
        .unwrap()
        .is_some());
    assert_eq!(lock.read().hold_count(), 2);
    lock.read().release().unwrap();
    assert!(lock.read().is_held());
    drop(r1);
    assert!(!lock.read().is_held());
    assert_eq!(lock.read().release().unwrap_err(), Error::NotHeld);
    assert_eq!(queue_len(&lock), 0);
}

#[test]
fn timeouts_and_cancel_leave_no_node() {
    let hosts = hosts();
    let path = unique_path("rw-cancel");
    let (_c1, holder) = rw(&hosts, &path, Protocol::Curator);
    let (_c2, waiter) = rw(&hosts, &path, Protocol::Curator);
    let w = holder.write().lock().unwrap();

    // Timeouts: one total deadline, nothing left behind.
    let t0 = Instant::now();
    assert!(waiter
        .read()
        .try_lock_for(Duration::from_millis(400))
        .unwrap()
        .is_none());
    assert!(waiter
        .write()
        .try_lock_for(Duration::from_millis(400))
        .unwrap()
        .is_none());
    let el = t0.elapsed();
    assert!(
        el >= Duration::from_millis(780) && el < Duration::from_secs(3),
        "{el:?}"
    );
    assert!(waiter.read().acquire(Deadline::TryOnce).unwrap().is_none());
    assert_eq!(queue_len(&holder), 1);

    // Cancel a waiting reader and a waiting writer.
    let waiter = Arc::new(waiter);
    for write in [false, true] {
        let w2 = waiter.clone();
        let t = std::thread::spawn(move || {
            if write {
                w2.write().lock().map(|_| ())
            } else {
                w2.read().lock().map(|_| ())
            }
        });
        assert!(eventually(Duration::from_secs(5), || queue_len(&holder) == 2));
        std::thread::sleep(Duration::from_millis(100));
        waiter.cancel();
        assert_eq!(t.join().unwrap().unwrap_err(), Error::Cancelled);
        assert_eq!(queue_len(&holder), 1, "a cancelled acquire left its node");
    }
    drop(w);
    assert!(waiter.write().try_lock().unwrap().is_some());
}

#[test]
fn kazoo_mode_names_and_participants() {
    let hosts = hosts();
    let path = unique_path("rw-kazoo");
    let (_c1, a) = rw(&hosts, &path, Protocol::Kazoo);
    let (_c2, b) = rw(&hosts, &path, Protocol::Kazoo);
    let (_c3, c) = rw(&hosts, &path, Protocol::Kazoo);
    let ra = a.read().lock().unwrap();
    let rb = b.read().lock().unwrap();
    let c = Arc::new(c);
    let c2 = c.clone();
    let t = std::thread::spawn(move || c2.write().lock().map(|_| ()));
    assert!(eventually(Duration::from_secs(5), || queue_len(&a) == 3));
    let parts = a.participants().unwrap();
    assert!(parts[0]
        .node
        .ends_with(&parts[0].node[parts[0].node.len() - 10..]));
    assert!(parts[0].is_reader && parts[0].is_holder && parts[0].node.contains("__rlock__"));
    assert!(parts[1].is_reader && parts[1].is_holder);
    assert!(!parts[2].is_reader && !parts[2].is_holder && parts[2].node.contains("__lock__"));
    assert_eq!(parts[2].node.find("__lock__"), Some(32));
    drop(ra);
    drop(rb);
    t.join().unwrap().unwrap();
}

#[test]
fn a_closed_session_loses_both_halves_and_says_so() {
    let hosts = hosts();
    let path = unique_path("rw-lost");
    let (c, lock) = rw(&hosts, &path, Protocol::Curator);
    let (_c2, other) = rw(&hosts, &path, Protocol::Curator);
    let w = lock.write().lock().unwrap();
    let r = lock.read().lock().unwrap(); // downgrade node too
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f2 = fired.clone();
    r.on_lost(move || f2.store(true, std::sync::atomic::Ordering::SeqCst));
    assert!(!w.wait_lost(Some(Duration::from_millis(100))));
    c.close();
    assert!(w.wait_lost(Some(Duration::from_secs(5))));
    assert!(r.wait_lost(Some(Duration::from_secs(5))));
    assert_eq!(w.hold_state(), HoldState::Lost);
    assert_eq!(lock.read().hold_state(), HoldState::Lost);
    assert!(lock.write().fencing_token().is_err());
    assert!(eventually(Duration::from_secs(5), || fired
        .load(std::sync::atomic::Ordering::SeqCst)));
    assert_eq!(w.unlock().unwrap_err(), Error::LockLost);
    assert_eq!(r.unlock().unwrap_err(), Error::LockLost);
    assert_eq!(lock.write().hold_state(), HoldState::NotHeld);
    // Once nothing of the closed client holds its session any more, the server removes both
    // nodes (Client::close ends the session when its last lock lets go of it).
    drop(lock);
    assert!(other
        .write()
        .try_lock_for(Duration::from_secs(5))
        .unwrap()
        .is_some());
}

/// Issue 28: a tiny deadline on either half (free, or held by the other client's writer) was
/// `Err(ConnectionLoss)`.
#[test]
fn a_deadline_that_runs_out_inside_a_request_is_a_timeout_not_a_connection_loss() {
    let hosts = hosts();
    let root = unique_path("tiny-deadline-rwlock");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    for protocol in [Protocol::Curator, Protocol::Kazoo] {
        let path = format!("{root}/{protocol:?}");
        let rw = ReadWriteLock::with_protocol(&a, &path, protocol).unwrap();
        let other = ReadWriteLock::with_protocol(&b, &path, protocol).unwrap();
        tiny_deadlines_are_timeouts_never_errors(&hosts, &root, rw.read(), other.write());
        tiny_deadlines_are_timeouts_never_errors(&hosts, &root, rw.write(), other.read());
    }
}
