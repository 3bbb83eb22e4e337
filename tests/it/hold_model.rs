//! The hold model (`docs/hold-model.md`) against real ZooKeeper servers: one section per
//! promise it makes where an earlier design broke it (issue 9), then the C participant
//! rule. Only the calls the rewrite keeps are used (lock / try_lock / try_lock_for / release
//! / is_held / fencing_token / participants, guards, MultiLock, the C ABI).
#![cfg(feature = "testing")]
#![allow(clippy::undocumented_unsafe_blocks)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use zklock::testing::{eventually, TcpProxy, TestingServer};
use zklock::{
    Client, Lockable, MultiLock, Mutex, Protocol, ReadWriteLock, SemaphoreMutex, SessionState,
    SimpleLock,
};

use crate::common::{connect, hosts, nodes, opts, report, unique_path};

// ---- One holder per lock, also between two handles of one client ------------------------

#[test]
fn two_simple_lock_handles_on_one_client_never_both_hold() {
    let hosts = hosts();
    let path = unique_path("simple-two-handles");
    let c = connect(&hosts, 6000);
    let third = connect(&hosts, 6000);
    let a = SimpleLock::new(&c, &path).unwrap();
    let b = SimpleLock::new(&c, &path).unwrap();
    let l3 = SimpleLock::new(&third, &path).unwrap();
    let mut failures = Vec::new();
    let ga = a.try_lock().unwrap().expect("a takes the free lock");
    match b.try_lock() {
        Ok(None) => {}
        Ok(Some(gb)) => {
            failures.push(format!(
                "b.try_lock() acquired while a holds (a held: {}, b held: {})",
                a.is_held(),
                b.is_held()
            ));
            drop(gb);
        }
        Err(e) => failures.push(format!("b.try_lock() failed with {e:?}, want Ok(None)")),
    }
    if !a.is_held() || !ga.is_held() {
        failures.push("after b's attempt, a no longer holds".into());
    }
    if let Some(g3) = l3.try_lock().unwrap() {
        failures.push(format!(
            "a third client took the lock while a believes it holds (a.is_held() = {})",
            a.is_held()
        ));
        drop(g3);
    }
    drop(ga);
    report(failures);
}

// ---- A downgraded read half still excludes the mutex queued behind the writer -----------

/// `Err` with a message if the mutex was let in while the downgraded read half held.
fn mutex_behind_downgrade(protocol: Protocol) -> Result<(), String> {
    let hosts = hosts();
    let path = unique_path("downgrade-vs-mutex");
    let c1 = connect(&hosts, 6000);
    let c2 = connect(&hosts, 6000);
    let rw = ReadWriteLock::with_protocol(&c1, &path, protocol).unwrap();
    let m = Mutex::with_protocol(&c2, &path, protocol).unwrap();
    let granted = AtomicBool::new(false);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (m, granted) = (&m, &granted);
    std::thread::scope(|s| {
        let w = rw.write().lock().unwrap();
        s.spawn(move || {
            let g = m.lock().unwrap();
            granted.store(true, Ordering::SeqCst);
            let _ = release_rx.recv_timeout(Duration::from_secs(15));
            drop(g);
        });
        let r = (|| {
            if !eventually(Duration::from_secs(5), || {
                rw.participants().map_or(0, |p| p.len()) == 2
            }) {
                return Err("the mutex never queued behind the writer".to_string());
            }
            let r = rw.read().lock().unwrap(); // downgrade on the writing thread
            drop(w);
            std::thread::sleep(Duration::from_millis(1000));
            let early = granted.load(Ordering::SeqCst);
            drop(r);
            if early {
                return Err(format!(
                    "{protocol:?}: the mutex was granted while the downgraded read half still held"
                ));
            }
            if !eventually(Duration::from_secs(5), || granted.load(Ordering::SeqCst)) {
                return Err(format!(
                    "{protocol:?}: the mutex was not granted after the read half was released"
                ));
            }
            Ok(())
        })();
        let _ = release_tx.send(());
        r
    })
}

#[test]
fn mutex_queued_behind_a_downgrading_writer_waits_for_the_read_half() {
    report(
        [Protocol::Curator, Protocol::Kazoo]
            .into_iter()
            .filter_map(|p| mutex_behind_downgrade(p).err())
            .collect(),
    );
}

// ---- An attempt that times out while its create is stalled leaves no node ---------------

#[test]
fn simple_lock_attempt_timed_out_during_a_stalled_create_leaves_no_orphan() {
    let zk = TestingServer::start().expect("start a ZooKeeper server");
    let path = unique_path("simple-stalled-create");
    let c = connect(&zk.connect_string(), 8000);
    let other = connect(&zk.connect_string(), 8000);
    let l = SimpleLock::new(&c, &path).unwrap();
    let l2 = SimpleLock::new(&other, &path).unwrap();
    drop(l.try_lock().unwrap().expect("free")); // parents exist: the next create is the only call
    zk.pause();
    let t = Instant::now();
    let r = l
        .try_lock_for(Duration::from_millis(400))
        .map(|g| g.is_some());
    let took = t.elapsed();
    zk.resume();
    assert!(r != Ok(true), "acquired while the server was stopped");
    assert!(
        took < Duration::from_secs(2),
        "try_lock_for(400ms) took {took:?}"
    );
    let freed = eventually(Duration::from_secs(5), || {
        matches!(l2.try_lock(), Ok(Some(_)))
    });
    let mut failures = Vec::new();
    if l.is_held() {
        failures.push("the timed-out handle believes it holds".to_string());
    }
    if !freed {
        failures.push(format!(
            "5 s after the server resumed, another client still cannot take the lock: the \
             timed-out attempt ({r:?}) left a node held by nobody (first session {:?})",
            c.state()
        ));
    }
    report(failures);
}

// ---- A release that meets connection trouble still removes every node -------------------

#[test]
fn multi_lock_release_meeting_connection_trouble_still_removes_every_node() {
    let zk = hosts();
    let proxy = TcpProxy::start(&zk).unwrap();
    let session_ms = 3000;
    let c = connect(&proxy.connect_string(), session_ms);
    let other = connect(&zk, 6000);
    let (p1, p2) = (unique_path("multi-a"), unique_path("multi-b"));
    let (a, b) = (Mutex::new(&c, &p1).unwrap(), Mutex::new(&c, &p2).unwrap());
    let multi = MultiLock::new(vec![&a as &(dyn Lockable + Send + Sync), &b]);
    let id = c.session_id();
    let keepalive_on = AtomicBool::new(true);
    let idle = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Traffic on the session, so that one swallowed request is all the trouble there is
        // (the connection stays up and the session alive).
        s.spawn(|| {
            let probe = Mutex::new(&c, "/hold-model/keepalive").unwrap();
            while !stop.load(Ordering::SeqCst) {
                if keepalive_on.load(Ordering::SeqCst) {
                    idle.store(false, Ordering::SeqCst);
                    let _ = probe.participants();
                } else {
                    idle.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let g = multi.lock().unwrap();
        keepalive_on.store(false, Ordering::SeqCst);
        assert!(eventually(Duration::from_secs(2), || idle.load(Ordering::SeqCst)));
        // The first delete of the release is swallowed by the network; then it is back.
        proxy.set_blackhole(true);
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            proxy.set_blackhole(false);
            keepalive_on.store(true, Ordering::SeqCst);
        });
        let t = Instant::now();
        drop(g);
        let took = t.elapsed();
        let freed = eventually(Duration::from_millis(2 * session_ms), || {
            let (x, y) = (
                Mutex::new(&other, &p1).unwrap(),
                Mutex::new(&other, &p2).unwrap(),
            );
            let all = MultiLock::new(vec![&x as &(dyn Lockable + Send + Sync), &y]);
            let got = matches!(all.try_lock(), Ok(Some(_)));
            got
        });
        let left = [nodes(&other, &p1), nodes(&other, &p2)].concat();
        let alive = c.state() == SessionState::Connected && c.session_id() == id;
        let (a_held, b_held) = (a.is_held(), b.is_held());
        stop.store(true, Ordering::SeqCst);
        assert!(
            alive,
            "precondition: the session survives ({:?})",
            c.state()
        );
        let mut failures = Vec::new();
        if !freed {
            failures.push(format!(
                "{} ms after the guard drop (which took {took:?}) another client still cannot \
                 take both locks; nodes left: {left:?}",
                2 * session_ms
            ));
        }
        if a_held || b_held {
            failures.push(format!(
                "after the guard drop the components still say held (a: {a_held}, b: {b_held})"
            ));
        }
        report(failures);
    });
}

// ---- Acquire and release racing on one handle never leave a node held by nobody ---------

#[test]
fn semaphore_mutex_racing_acquire_and_release_never_orphans_a_node() {
    let hosts = hosts();
    let path = unique_path("semmutex-race");
    let c = connect(&hosts, 6000);
    let observer = connect(&hosts, 6000);
    let m = SemaphoreMutex::new(&c, &path).unwrap();
    let stop = AtomicBool::new(false);
    let acquired = AtomicUsize::new(0);
    let run = Duration::from_secs(5);
    std::thread::scope(|s| {
        for i in 0..2 {
            let (m, stop, acquired) = (&m, &stop, &acquired);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    match m.try_lock() {
                        // Leave the hold to the handle (any thread may release it), or drop.
                        Ok(Some(g)) => {
                            acquired.fetch_add(1, Ordering::Relaxed);
                            n += 1;
                            if (n + i).is_multiple_of(2) {
                                std::mem::forget(g);
                            } else {
                                std::thread::yield_now();
                                drop(g);
                            }
                        }
                        _ => std::thread::yield_now(),
                    }
                }
            });
        }
        for _ in 0..3 {
            let (m, stop) = (&m, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let _ = m.release();
                    std::thread::yield_now();
                }
            });
        }
        // Stop early once the handle is stuck: not held, and a node of ours still blocks.
        let end = Instant::now() + run;
        let mut last = 0;
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(500));
            let now = acquired.load(Ordering::Relaxed);
            if now == last && now > 0 {
                break;
            }
            last = now;
        }
        stop.store(true, Ordering::SeqCst);
    });
    let _ = m.release();
    let clean = eventually(Duration::from_secs(3), || {
        nodes(&observer, &path).is_empty()
    });
    let left = nodes(&observer, &path);
    assert!(
        acquired.load(Ordering::Relaxed) > 0,
        "the race never acquired at all"
    );
    assert!(
        clean,
        "after {} acquires the handle holds nothing (is_held = {}, state {:?}) but node(s) {left:?} \
         remain under {path}: a racing release wiped a hold and orphaned its node",
        acquired.load(Ordering::Relaxed),
        m.is_held(),
        m.hold_state()
    );
}

// ---- A guard's wait_lost blocks no other thread of its handle ---------------------------

#[test]
fn wait_lost_on_a_guard_does_not_block_other_threads_on_the_handle() {
    let hosts = hosts();
    let c = connect(&hosts, 6000);
    let mutex = Mutex::new(&c, &unique_path("waitlost-mutex")).unwrap();
    let rw_w = ReadWriteLock::new(&c, &unique_path("waitlost-write")).unwrap();
    let rw_r = ReadWriteLock::new(&c, &unique_path("waitlost-read")).unwrap();
    let wait = Duration::from_secs(3);
    let failures = std::sync::Mutex::new(Vec::new());
    let (mutex, rw_w, rw_r) = (&mutex, &rw_w, &rw_r);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<()>();
        // Three holders, each waiting in its guard's wait_lost.
        let (tx1, tx2) = (tx.clone(), tx.clone());
        s.spawn(move || {
            let g = mutex.lock().unwrap();
            tx1.send(()).unwrap();
            assert!(!g.wait_lost(Some(wait)));
        });
        s.spawn(move || {
            let g = rw_w.write().lock().unwrap();
            tx2.send(()).unwrap();
            assert!(!g.wait_lost(Some(wait)));
        });
        s.spawn(move || {
            let g = rw_r.read().lock().unwrap();
            tx.send(()).unwrap();
            assert!(!g.wait_lost(Some(wait)));
        });
        for _ in 0..3 {
            rx.recv().unwrap();
        }
        // Every holder is inside wait_lost now. Each call runs on a thread of its own, all at
        // once, so that one blocked call does not hide another.
        std::thread::sleep(Duration::from_millis(200));
        type Call<'a> = Box<dyn Fn() -> bool + Send + 'a>;
        let calls: Vec<(&str, Call)> = vec![
            ("Mutex::try_lock", Box::new(|| mutex.try_lock().is_ok())),
            ("Mutex::is_held", Box::new(|| mutex.is_held())),
            (
                "WriteLock::try_lock",
                Box::new(|| rw_w.write().try_lock().is_ok()),
            ),
            ("WriteLock::is_held", Box::new(|| rw_w.write().is_held())),
            ("ReadLock::is_held", Box::new(|| rw_r.read().is_held())),
        ];
        for (what, f) in calls {
            let failures = &failures;
            s.spawn(move || {
                let t = Instant::now();
                let _ = f();
                let took = t.elapsed();
                if took >= Duration::from_millis(1000) {
                    failures.lock().unwrap().push(format!(
                        "{what} on another thread took {took:?} while the holder waits in wait_lost"
                    ));
                }
            });
        }
    });
    report(failures.into_inner().unwrap());
}

// ---- Fencing tokens never go backwards, across a downgrade too --------------------------

#[test]
fn fencing_tokens_never_go_backwards_across_a_downgrade() {
    let hosts = hosts();
    let path = unique_path("tokens-downgrade");
    let c1 = connect(&hosts, 6000);
    let c2 = connect(&hosts, 6000);
    let rw1 = ReadWriteLock::new(&c1, &path).unwrap();
    let rw2 = ReadWriteLock::new(&c2, &path).unwrap();
    let (w1, r1, w2) = std::thread::scope(|s| {
        let w = rw1.write().lock().unwrap();
        let w1 = w.fencing_token();
        let queued = s.spawn(|| {
            let g = rw2.write().lock().unwrap();
            g.fencing_token()
        });
        assert!(eventually(Duration::from_secs(5), || {
            rw1.participants().map_or(0, |p| p.len()) == 2
        }));
        let r = rw1.read().lock().unwrap(); // downgrade
        let r1 = r.fencing_token();
        assert_eq!(rw1.read().fencing_token(), Ok(r1));
        drop(w);
        std::thread::sleep(Duration::from_millis(300));
        drop(r);
        (w1, r1, queued.join().unwrap())
    });
    let mut failures = Vec::new();
    if r1 < w1 {
        failures.push(format!(
            "the downgraded read hold's token {r1} is below the write hold's {w1}"
        ));
    }
    if w2 <= r1 {
        failures.push(format!(
            "the next writer's token {w2} is not above the downgraded read hold's {r1} \
             (write hold {w1}): tokens went backwards"
        ));
    }
    if w2 <= w1 {
        failures.push(format!("the next writer's token {w2} is not above {w1}"));
    }
    report(failures);
}

// ---- After expiry, a call returns within its own timeout, not the session's -------------

#[test]
fn try_lock_after_session_expiry_returns_within_its_own_timeout() {
    let zk = hosts();
    let proxy = TcpProxy::start(&zk).unwrap();
    let session = Duration::from_secs(2);
    let options = opts(2000).connect_timeout(Duration::from_secs(10));
    let c = Client::connect(&proxy.connect_string(), options).unwrap();
    let m = Mutex::new(&c, &unique_path("try-after-expiry")).unwrap();
    drop(m.try_lock().unwrap().expect("free"));
    proxy.set_blackhole(true); // unreachable from here on
    assert_eq!(
        c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Expired),
        SessionState::Expired
    );
    let t = Instant::now();
    let r1 = m
        .try_lock_for(Duration::from_millis(300))
        .map(|g| g.is_some());
    let timed = t.elapsed();
    let t = Instant::now();
    let r2 = m.try_lock().map(|g| g.is_some());
    let once = t.elapsed();
    let mut failures = Vec::new();
    if timed >= Duration::from_millis(1500) {
        failures.push(format!(
            "try_lock_for(300ms) after expiry took {timed:?} ({r1:?})"
        ));
    }
    if once >= session + Duration::from_millis(1000) {
        failures.push(format!(
            "try_lock() after expiry took {once:?} ({r2:?}), more than the session timeout"
        ));
    }
    report(failures);
}

// ---- The C participant rule -------------------------------------------------------------

mod c_abi {
    use super::*;
    use std::ffi::{c_char, CString};
    use zklock::testing::ffi::*;

    /// A handle moved between the test's threads (one call at a time, as the contract says).
    #[derive(Clone, Copy)]
    pub struct Ptr(pub *mut zkl_lock);
    unsafe impl Send for Ptr {}

    /// An OS thread that runs the calls given to it, one at a time.
    pub struct Worker(mpsc::Sender<Box<dyn FnOnce() + Send>>);

    impl Worker {
        pub fn new() -> Worker {
            let (tx, rx) = mpsc::channel::<Box<dyn FnOnce() + Send>>();
            std::thread::spawn(move || rx.into_iter().for_each(|f| f()));
            Worker(tx)
        }
        /// Runs `op` on `l` on this worker's thread; the result as text.
        pub fn call(&self, op: Op, l: Ptr) -> String {
            let (tx, rx) = mpsc::channel();
            let f = move || drop(tx.send(op.run(l)));
            self.0.send(Box::new(f)).unwrap();
            rx.recv_timeout(Duration::from_secs(15)).expect("C call")
        }
    }

    #[derive(Clone, Copy, Debug)]
    pub enum Op {
        Acquire,
        Release,
        IsHeld,
        Token,
        Free,
    }

    impl Op {
        fn run(self, l: Ptr) -> String {
            let l = l.0;
            unsafe {
                match self {
                    Op::Acquire => format!("{:?}", zkl_lock_acquire(l, 0)),
                    Op::Release => format!("{:?}", zkl_lock_release(l)),
                    Op::IsHeld => zkl_lock_is_held(l).to_string(),
                    Op::Token => {
                        let mut t = 0i64;
                        let st = zkl_lock_fencing_token(l, &mut t);
                        format!("{st:?}{}", if t > 0 { " >0" } else { "" })
                    }
                    Op::Free => {
                        zkl_lock_free(l);
                        String::new()
                    }
                }
            }
        }
    }

    pub type Ctor =
        unsafe extern "C" fn(*mut zkl_client, *const c_char, *mut *mut zkl_lock) -> zkl_status;

    pub fn client(hosts: &str) -> *mut zkl_client {
        let h = CString::new(hosts).unwrap();
        let mut c = std::ptr::null_mut();
        let st = unsafe { zkl_client_connect(h.as_ptr(), 6000, &mut c) };
        assert_eq!(st, zkl_status::ZKL_OK);
        c
    }

    pub fn new_lock(ctor: Ctor, c: *mut zkl_client, path: &str) -> Ptr {
        let p = CString::new(path).unwrap();
        let mut l = std::ptr::null_mut();
        assert_eq!(unsafe { ctor(c, p.as_ptr(), &mut l) }, zkl_status::ZKL_OK);
        Ptr(l)
    }
}

#[test]
fn c_lock_handle_is_one_participant_across_threads() {
    use c_abi::{Op::*, *};
    use zklock::testing::ffi::*;
    let c = client(&hosts());
    let (a, b) = (Worker::new(), Worker::new());
    // (thread, call, expected result), in order, on one fresh handle per scenario.
    let scenarios: [&[(&Worker, Op, &str)]; 2] = [
        // Acquired on A; is_held, fencing token and release on B.
        &[
            (&a, Acquire, "ZKL_OK"),
            (&b, IsHeld, "1"),
            (&b, Token, "ZKL_OK >0"),
            (&b, Release, "ZKL_OK"),
            (&a, IsHeld, "0"),
        ],
        // Reentrancy counts on the handle: acquire on A and on B, release twice, third fails.
        &[
            (&a, Acquire, "ZKL_OK"),
            (&b, Acquire, "ZKL_OK"),
            (&b, Release, "ZKL_OK"),
            (&b, Release, "ZKL_OK"),
            (&a, Release, "ZKL_NOT_HELD"),
        ],
    ];
    let mut failures = Vec::new();
    for (name, ctor) in [
        ("zkl_mutex_new", zkl_mutex_new as Ctor),
        ("zkl_read_lock_new", zkl_read_lock_new as Ctor),
        ("zkl_write_lock_new", zkl_write_lock_new as Ctor),
    ] {
        for (n, steps) in scenarios.iter().enumerate() {
            let l = new_lock(ctor, c, &unique_path("c-participant"));
            for (i, (w, op, want)) in steps.iter().enumerate() {
                let thread = if std::ptr::eq(*w, &a) { "A" } else { "B" };
                let got = w.call(*op, l);
                if got != *want {
                    failures.push(format!(
                        "{name}, scenario {}, step {}: {op:?} on thread {thread}: got {got}, want {want}",
                        n + 1,
                        i + 1
                    ));
                }
            }
            a.call(Free, l);
        }
    }
    unsafe { zkl_client_free(c) };
    report(failures);
}
