//! The fair mutex against a real ZooKeeper server.
#![cfg(feature = "testing")]

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::{Deadline, Lockable};
use zklock::{Error, HoldState, Mutex, Protocol};

#[test]
fn mutual_exclusion_8_threads_counter_and_strictly_increasing_tokens() {
    let hosts = hosts();
    let path = unique_path("mx");
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let last_token = Arc::new(AtomicI64::new(0));
    let per_thread = 40;
    std::thread::scope(|s| {
        for _ in 0..8 {
            let (counter, inside, last_token, hosts, path) = (
                counter.clone(),
                inside.clone(),
                last_token.clone(),
                hosts.clone(),
                path.clone(),
            );
            s.spawn(move || {
                // Each thread its own session, like separate processes.
                let c = connect(&hosts, 5000);
                let m = Mutex::new(&c, &path).unwrap();
                for _ in 0..per_thread {
                    let g = m.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    let prev = last_token.swap(g.fencing_token(), Ordering::SeqCst);
                    assert!(
                        g.fencing_token() > prev,
                        "token {} after {prev}",
                        g.fencing_token()
                    );
                    // Non-atomic read-modify-write with a yield in between.
                    let v = counter.load(Ordering::SeqCst);
                    std::thread::yield_now();
                    counter.store(v + 1, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                    drop(g);
                }
            });
        }
    });
    assert_eq!(counter.load(Ordering::SeqCst), 8 * per_thread);
    assert!(admin(&hosts).children(&path).unwrap().is_empty());
}

#[test]
fn mutual_exclusion_across_processes() {
    let hosts = hosts();
    let path = unique_path("mp");
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    let history = dir.path().join("history");
    let demo = demo_binary();
    let kids: Vec<_> = (0..4)
        .map(|i| {
            std::process::Command::new(&demo)
                .args([
                    "worker",
                    "--hosts",
                    &hosts,
                    "--path",
                    &path,
                    "--rounds",
                    "15",
                    "--hold-ms",
                    "0",
                ])
                .args(["--name", &format!("p{i}")])
                .arg("--counter")
                .arg(&counter)
                .arg("--history")
                .arg(&history)
                .stdout(std::process::Stdio::null())
                .spawn_guarded()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let n: u64 = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(n, 60, "a lost update means two holders overlapped");
    let tokens: Vec<i64> = std::fs::read_to_string(&history)
        .unwrap()
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(tokens.len(), 60);
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens not strictly increasing: {tokens:?}"
    );
}

#[test]
fn queued_waiters_get_the_lock_in_fifo_order() {
    let hosts = hosts();
    let path = unique_path("fifo");
    let admin = admin(&hosts);
    let c0 = connect(&hosts, 5000);
    let m0 = Mutex::new(&c0, &path).unwrap();
    let g = m0.lock().unwrap();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut threads = Vec::new();
    for i in 0..5 {
        let (hosts, p, order) = (hosts.clone(), path.clone(), order.clone());
        threads.push(std::thread::spawn(move || {
            let c = connect(&hosts, 5000);
            let m = Mutex::new(&c, &p).unwrap();
            let g = m.lock().unwrap();
            order.lock().push(i);
            std::thread::sleep(Duration::from_millis(20));
            drop(g);
        }));
        // Wait until waiter i has queued its node before starting the next.
        assert!(eventually(Duration::from_secs(5), || admin
            .children(&path)
            .unwrap()
            .len()
            == i + 2));
    }
    drop(g);
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*order.lock(), vec![0, 1, 2, 3, 4]);
}

#[test]
fn try_lock_on_a_busy_lock_returns_at_once_and_leaves_no_node() {
    let hosts = hosts();
    let path = unique_path("try");
    let (a, b) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let ma = Mutex::new(&a, &path).unwrap();
    let mb = Mutex::new(&b, &path).unwrap();
    let _g = ma.lock().unwrap();
    let t = Instant::now();
    assert!(mb.try_lock().unwrap().is_none());
    assert!(t.elapsed() < AT_ONCE, "{:?}", t.elapsed());
    assert_eq!(admin(&hosts).children(&path).unwrap().len(), 1);
    assert!(!mb.is_held());
}

#[test]
fn timed_acquire_returns_within_its_deadline_and_leaves_no_node() {
    let hosts = hosts();
    let path = unique_path("timed");
    let (a, b) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let ma = Mutex::new(&a, &path).unwrap();
    let mb = Mutex::new(&b, &path).unwrap();
    let _g = ma.lock().unwrap();
    let t = Instant::now();
    assert!(mb
        .try_lock_for(Duration::from_millis(400))
        .unwrap()
        .is_none());
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1400),
        "{took:?}"
    );
    assert_eq!(admin(&hosts).children(&path).unwrap().len(), 1);
}

#[test]
fn one_total_deadline_not_per_predecessor() {
    let hosts = hosts();
    let path = unique_path("total");
    let admin = admin(&hosts);
    let holder = connect(&hosts, 5000);
    let hm = Mutex::new(&holder, &path).unwrap();
    let _g = hm.lock().unwrap();
    // A waiter that gives up after 500 ms: the waiter behind it then watches another node.
    let (h2, p2) = (hosts.clone(), path.clone());
    let quitter = std::thread::spawn(move || {
        let c = connect(&h2, 5000);
        let m = Mutex::new(&c, &p2).unwrap();
        let gave_up = m
            .try_lock_for(Duration::from_millis(500))
            .unwrap()
            .is_none();
        drop(m);
        gave_up
    });
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .len()
        == 2));
    let c = connect(&hosts, 5000);
    let m = Mutex::new(&c, &path).unwrap();
    let t = Instant::now();
    assert!(m
        .try_lock_for(Duration::from_millis(900))
        .unwrap()
        .is_none());
    let took = t.elapsed();
    // A timeout restarted when the predecessor changed would end near 500 + 900 ms.
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(1300),
        "{took:?}"
    );
    assert!(quitter.join().unwrap());
    assert_eq!(admin.children(&path).unwrap().len(), 1);
}

#[test]
fn release_that_meets_connection_loss_retries_and_leaves_no_node() {
    use zklock::testing::TcpProxy;
    let zk = server();
    let hosts = zk.connect_string();
    let path = unique_path("rel");
    let proxy = TcpProxy::start(&hosts).unwrap();
    let c = connect(&proxy.connect_string(), 8000);
    let m = Mutex::new(&c, &path).unwrap();
    assert!(m.acquire(Deadline::Forever).unwrap().is_some());
    // Cut the connection and refuse reconnects for a while: the release must wait it out and
    // delete the node, not drop its state and leave the node behind.
    proxy.refuse_new(true);
    proxy.cut_all();
    let p2 = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        proxy.refuse_new(false);
        proxy
    });
    let t = Instant::now();
    m.release().unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    let _proxy = p2.join().unwrap();
    assert!(!m.is_held());
    assert!(admin(&hosts).children(&path).unwrap().is_empty());
}

#[test]
fn cancel_returns_promptly_and_leaves_no_node() {
    let hosts = hosts();
    let path = unique_path("cancel");
    let (a, b) = (connect(&hosts, 5000), connect(&hosts, 5000));
    let ma = Mutex::new(&a, &path).unwrap();
    let mb = Arc::new(Mutex::new(&b, &path).unwrap());
    let _g = ma.lock().unwrap();
    let admin = admin(&hosts);
    let mb2 = mb.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(mb2.lock().map(|_| ()));
    });
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .len()
        == 2));
    mb.cancel_token().cancel();
    // The holder keeps the lock: only the cancel can end this acquire.
    let r = rx
        .recv_timeout(AT_ONCE)
        .expect("the cancelled acquire still waited");
    t.join().unwrap();
    assert_eq!(r, Err(Error::Cancelled));
    assert_eq!(admin.children(&path).unwrap().len(), 1);
}

#[test]
fn reentrant_per_thread_and_other_threads_queue_behind() {
    let hosts = hosts();
    let path = unique_path("re");
    let c = connect(&hosts, 5000);
    let m = Arc::new(Mutex::new(&c, &path).unwrap());
    let g1 = m.lock().unwrap();
    let g2 = m.lock().unwrap();
    assert_eq!(m.hold_count(), 2);
    assert_eq!(g1.fencing_token(), g2.fencing_token());
    assert_eq!(admin(&hosts).children(&path).unwrap().len(), 1);
    // Another thread with the same Mutex is another participant: it waits.
    let m2 = m.clone();
    let other = std::thread::spawn(move || {
        m2.try_lock_for(Duration::from_millis(300))
            .unwrap()
            .is_some()
    });
    assert!(!other.join().unwrap());
    drop(g2);
    assert!(m.is_held(), "one release of two keeps it held");
    let m3 = m.clone();
    let other = std::thread::spawn(move || m3.try_lock().unwrap().is_some());
    assert!(!other.join().unwrap());
    drop(g1);
    assert!(!m.is_held());
    let m4 = m.clone();
    assert!(std::thread::spawn(move || m4.try_lock().unwrap().is_some())
        .join()
        .unwrap());
}

#[test]
fn release_when_not_held_is_an_error() {
    let c = connect(&hosts(), 5000);
    let m = Mutex::new(&c, &unique_path("nh")).unwrap();
    assert_eq!(m.release(), Err(Error::NotHeld));
    assert!(m.acquire(Deadline::Forever).unwrap().is_some());
    m.release().unwrap();
    assert_eq!(m.release(), Err(Error::NotHeld));
}

#[test]
fn holder_process_killed_waiter_gets_it_within_session_timeout() {
    let hosts = hosts();
    let path = unique_path("kill");
    let demo = demo_binary();
    let mut holder = std::process::Command::new(&demo)
        .args([
            "worker",
            "--hosts",
            &hosts,
            "--path",
            &path,
            "--rounds",
            "1",
            "--hold-ms",
            "60000",
            "--session-ms",
            "2000",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn_guarded();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("HOLD"), "{line}");
    let c = connect(&hosts, 5000);
    let m = Mutex::new(&c, &path).unwrap();
    assert!(m.try_lock().unwrap().is_none());
    holder.kill().unwrap();
    let t = Instant::now();
    let g = m
        .try_lock_for(Duration::from_secs(8))
        .unwrap()
        .expect("acquired after the holder died");
    assert!(
        t.elapsed() < Duration::from_millis(2000 * 2 + 1000),
        "{:?}",
        t.elapsed()
    );
    assert!(g.is_held());
    let _ = holder.wait();
}

#[test]
fn partitioned_holder_past_expiry_loses_the_lock_and_knows_it() {
    use zklock::testing::TcpProxy;
    let zk = server();
    let hosts = zk.connect_string();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let path = unique_path("part");
    let holder = connect(&proxy.connect_string(), 2000);
    let hm = Mutex::new(&holder, &path).unwrap();
    let g = hm.lock().unwrap();
    let lost_called = Arc::new(AtomicBool::new(false));
    let lc = lost_called.clone();
    g.on_lost(move || lc.store(true, Ordering::SeqCst));
    let waiter = connect(&hosts, 5000);
    let wm = Mutex::new(&waiter, &path).unwrap();
    proxy.set_blackhole(true);
    let t = Instant::now();
    let wg = wm
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("the waiter gets it after expiry");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // The holder stops believing at lease end (Uncertain), and learns the loss at expiry.
    assert!(
        g.wait_lost(Some(Duration::from_secs(6))),
        "holder still believes it holds"
    );
    assert!(!g.is_held());
    assert_ne!(g.hold_state(), HoldState::Held);
    assert!(eventually(Duration::from_secs(4), || g.hold_state() == HoldState::Lost));
    assert!(eventually(Duration::from_secs(2), || lost_called
        .load(Ordering::SeqCst)));
    proxy.set_blackhole(false);
    assert_eq!(g.unlock(), Err(Error::LockLost));
    assert!(wg.is_held());
}

#[test]
fn closed_holder_client_lets_the_waiter_in_at_once() {
    let hosts = hosts();
    let path = unique_path("close");
    let waiter = connect(&hosts, 5000);
    let wm = Arc::new(Mutex::new(&waiter, &path).unwrap());
    let holder = connect(&hosts, 30000);
    let hm = Mutex::new(&holder, &path).unwrap();
    std::mem::forget(hm.lock().unwrap());
    let wm2 = wm.clone();
    let t = std::thread::spawn(move || {
        let g = wm2.lock().unwrap();
        let at = Instant::now();
        drop(g);
        at
    });
    std::thread::sleep(Duration::from_millis(300));
    let closed_at = Instant::now();
    drop(hm);
    holder.close();
    drop(holder);
    let got_at = t.join().unwrap();
    // Far below the 30 s session timeout: closing deleted the node at once.
    assert!(got_at.duration_since(closed_at) < Duration::from_secs(2));
}

#[test]
fn connection_cut_after_create_adopts_the_single_node() {
    use zklock::testing::TcpProxy;
    let zk = server();
    let hosts = zk.connect_string();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let path = unique_path("cut");
    let c = connect(&proxy.connect_string(), 6000);
    let m = Mutex::new(&c, &path).unwrap();
    // Parents exist first so that the cut hits the lock node's create.
    m.lock().unwrap().unlock().unwrap();
    let before = proxy.creates_seen();
    proxy.cut_after_next_create();
    let g = m.lock().unwrap();
    assert!(proxy.creates_seen() > before);
    let admin = admin(&hosts);
    let kids = admin.children(&path).unwrap();
    assert_eq!(kids.len(), 1, "exactly one node, no orphan: {kids:?}");
    let info = admin.node(&format!("{path}/{}", kids[0])).unwrap().unwrap();
    assert_eq!(info.ephemeral_owner, c.session_id());
    assert_eq!(info.czxid, g.fencing_token());
    drop(g);
    assert!(eventually(Duration::from_secs(3), || admin
        .children(&path)
        .unwrap()
        .is_empty()));
}

/// A waiter's request to watch its predecessor meets a reset connection, as when a server dies
/// under it (the client crate then fails the request with the socket's error, not with
/// "connection loss"): the waiter's session survives, the blocking `lock()` goes on waiting,
/// takes the lock once the holder lets go, and never while the holder holds it.
#[test]
fn a_waiter_whose_watch_request_meets_a_connection_reset_still_gets_the_lock() {
    use zklock::testing::TcpProxy;
    let zk = server();
    let hosts = zk.connect_string();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let holder_c = connect(&hosts, 10000);
    let waiter_c = connect(&proxy.connect_string(), 10000);
    let path = unique_path("reset");
    let hm = Mutex::new(&holder_c, &path).unwrap();
    let wm = Mutex::new(&waiter_c, &path).unwrap();
    let g = hm.lock().unwrap();
    let session = waiter_c.session_id();
    let holding = AtomicBool::new(true);
    // 3 = exists: the waiter's watch on its predecessor.
    proxy.reset_at_next_op(3);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let r = wm.lock();
            let overlapped = holding.load(Ordering::SeqCst);
            (r.map(|g| g.fencing_token()), overlapped)
        });
        assert!(
            eventually(Duration::from_secs(5), || !proxy.reset_pending()),
            "precondition: the waiter's exists request met the reset"
        );
        // Time to notice the reset and reconnect; the waiter must still be waiting.
        std::thread::sleep(Duration::from_millis(1500));
        if waiter.is_finished() {
            let (r, _) = waiter.join().unwrap();
            panic!("the waiter's lock() returned while the lock was held: {r:?}");
        }
        holding.store(false, Ordering::SeqCst);
        let released_token = g.fencing_token();
        drop(g);
        let (r, overlapped) = waiter.join().unwrap();
        let token = r.expect("the blocking lock() survives a reset connection");
        assert!(
            !overlapped,
            "the waiter got the lock while the holder held it"
        );
        assert!(token > released_token, "fencing token grows");
    });
    assert_eq!(waiter_c.session_id(), session, "the session survived");
}

#[test]
fn server_restart_while_waiters_wait_keeps_their_order() {
    let mut zk = server();
    let hosts = zk.connect_string();
    let path = unique_path("rs");
    let admin = admin(&hosts);
    let c0 = connect(&hosts, 10000);
    let m0 = Mutex::new(&c0, &path).unwrap();
    let g = m0.lock().unwrap();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut ts = Vec::new();
    for i in 0..3 {
        let (hosts, p, order) = (hosts.clone(), path.clone(), order.clone());
        ts.push(std::thread::spawn(move || {
            let c = connect(&hosts, 10000);
            let m = Mutex::new(&c, &p).unwrap();
            let g = m.lock().unwrap();
            order.lock().push(i);
            drop(g);
        }));
        assert!(eventually(Duration::from_secs(5), || admin
            .children(&path)
            .unwrap()
            .len()
            == i + 2));
    }
    drop(admin);
    zk.stop();
    std::thread::sleep(Duration::from_millis(1000));
    zk.restart().unwrap();
    assert!(eventually(Duration::from_secs(10), || c0.state()
        == zklock::SessionState::Connected));
    drop(g);
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(*order.lock(), vec![0, 1, 2]);
}

#[test]
fn ensemble_member_under_the_holder_killed_still_held() {
    let mut cluster = zklock::testing::TestingCluster::start(3).unwrap();
    let hosts = cluster.connect_string();
    let path = unique_path("ensm");
    let holder = connect(&hosts, 8000);
    let hm = Mutex::new(&holder, &path).unwrap();
    let g = hm.lock().unwrap();
    let member = cluster.member_of_session(holder.session_id()).unwrap();
    cluster.kill(member);
    let other = connect(&hosts, 8000);
    let om = Mutex::new(&other, &path).unwrap();
    assert!(
        om.try_lock_for(Duration::from_secs(3)).unwrap().is_none(),
        "nobody else acquires"
    );
    assert!(eventually(Duration::from_secs(10), || holder.state()
        == zklock::SessionState::Connected));
    assert!(g.is_held());
    drop(g);
    assert!(om.try_lock_for(Duration::from_secs(5)).unwrap().is_some());
}

#[test]
fn predecessor_deleted_by_hand_waiter_watches_the_next_one() {
    let hosts = hosts();
    let path = unique_path("hand");
    let admin = admin(&hosts);
    let ca = connect(&hosts, 5000);
    let ma = Mutex::new(&ca, &path).unwrap();
    let ga = ma.lock().unwrap();
    let spawn_waiter = |name: &'static str| {
        let (hosts, path) = (hosts.clone(), path.clone());
        std::thread::spawn(move || {
            let c = connect(&hosts, 5000);
            let m = Mutex::new(&c, &path).unwrap();
            let g = m.try_lock_for(Duration::from_secs(10)).unwrap();
            let got = Instant::now();
            drop(g);
            (name, got)
        })
    };
    let b = spawn_waiter("b");
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .len()
        == 2));
    let c = spawn_waiter("c");
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .len()
        == 3));
    // Delete b's node (the second in sequence) by hand: c must not take the lock while a holds.
    let mut kids = admin.children(&path).unwrap();
    kids.sort_by_key(|k| k[k.len() - 10..].to_string());
    admin
        .delete_recursive(&format!("{path}/{}", kids[1]))
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(ma.is_held());
    let released = Instant::now();
    drop(ga);
    let (_, c_got) = c.join().unwrap();
    assert!(c_got >= released, "c acquired while a still held the lock");
    let _ = b.join();
}

#[test]
fn parent_deleted_between_acquisitions_is_recreated() {
    let hosts = hosts();
    let deep = unique_path("deep");
    let path = format!("{deep}/parent/lock");
    let admin = admin(&hosts);
    let c = connect(&hosts, 5000);
    let m = Mutex::new(&c, &path).unwrap();
    m.lock().unwrap().unlock().unwrap();
    admin.delete_recursive(&deep).unwrap();
    let g = m.lock().unwrap();
    assert!(g.is_held());
    assert_eq!(admin.children(&path).unwrap().len(), 1);
}

#[test]
fn thirty_waiters_one_watch_each_and_one_wakeup_per_release() {
    let zk = crate::common::shared();
    let hosts = zk.connect_string();
    let path = unique_path("herd");
    let admin = admin(&hosts);
    let n = 30;
    let holder = connect(&hosts, 10000);
    let hm = Mutex::new(&holder, &path).unwrap();
    let g = hm.lock().unwrap();
    let clients: Vec<_> = (0..n).map(|_| connect(&hosts, 10000)).collect();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for (i, c) in clients.iter().enumerate() {
        let (c, p, done_tx) = (c.clone(), path.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let m = Mutex::new(&c, &p).unwrap();
            let g = m.lock().unwrap();
            drop(g);
            done_tx.send(()).unwrap();
        });
        // Queue them one by one so they form a chain.
        assert!(eventually(Duration::from_secs(10), || admin
            .children(&path)
            .unwrap()
            .len()
            == i + 2));
    }
    // Every waiter watches exactly one node, and no lock node is watched twice.
    let lock_nodes = format!("{path}/");
    let watched = || -> Vec<String> {
        let wchc = zk.four_letter("wchc").unwrap();
        wchc.lines()
            .map(str::trim)
            .filter(|l| l.starts_with(&lock_nodes))
            .map(String::from)
            .collect()
    };
    assert!(
        eventually(Duration::from_secs(10), || watched().len() == n),
        "{:?}",
        watched()
    );
    let w = watched();
    assert_eq!(w.iter().collect::<HashSet<_>>().len(), n, "{w:?}");
    let before: u64 = clients.iter().map(|c| c.watch_events()).sum();
    drop(g);
    for _ in 0..n {
        done_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("every waiter gets the lock");
    }
    let after: u64 = clients.iter().map(|c| c.watch_events()).sum();
    // n releases (the holder's and n-1 waiters') each woke exactly one waiter.
    assert_eq!(after - before, n as u64);
}

#[test]
fn kazoo_protocol_names_and_holder_participants() {
    let c = zklock::Client::connect(&hosts(), opts(5000).holder_id("me-1")).unwrap();
    let m = Mutex::with_protocol(&c, &unique_path("names-k"), Protocol::Kazoo).unwrap();
    let _g = m.lock().unwrap();
    let p = m.participants().unwrap();
    assert_eq!(p.len(), 1);
    assert!(
        p[0].node.contains("__lock__") && p[0].node.len() == 32 + 8 + 10,
        "{}",
        p[0].node
    );
    assert_eq!(p[0].holder_id, "me-1");
    assert!(p[0].is_holder);
    assert_eq!(m.holder().unwrap().as_deref(), Some("me-1"));
    let m2 = Mutex::new(&c, &unique_path("names-c")).unwrap();
    let _g2 = m2.lock().unwrap();
    let p = m2.participants().unwrap();
    assert!(
        p[0].node.starts_with("_c_") && p[0].node.contains("-lock-"),
        "{}",
        p[0].node
    );
}

#[test]
fn lost_callbacks_fire_only_for_holds_still_held_when_the_session_ends() {
    let c = connect(&hosts(), 5000);
    let m = Mutex::new(&c, &unique_path("lostcb")).unwrap();
    let fired = Arc::new(AtomicU64::new(0));
    for _ in 0..3 {
        let g = m.lock().unwrap();
        let f = fired.clone();
        g.on_lost(move || {
            f.fetch_add(1, Ordering::SeqCst);
        });
        drop(g); // released: its callback lapses
    }
    let g = m.lock().unwrap();
    let f = fired.clone();
    g.on_lost(move || {
        f.fetch_add(100, Ordering::SeqCst);
    });
    c.close();
    assert!(eventually(Duration::from_secs(3), || fired
        .load(Ordering::SeqCst)
        == 100));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        fired.load(Ordering::SeqCst),
        100,
        "released holds must not hear of the loss"
    );
    drop(g);
}

/// A thousand threads queued on one client (one session) while the lock changes hands: each
/// gets it once, never two at a time, and the session stays alive throughout. (A caller that
/// slept on the session's socket while waiting for a watch made every reply wake every waiting
/// thread: with 1,000 waiters the load reached 700 and the session expired.)
#[test]
fn a_thousand_waiters_on_one_session_take_turns_and_keep_it_alive() {
    let hosts = hosts();
    let path = unique_path("many-on-one");
    let c = connect(&hosts, 4000);
    let m = Mutex::new(&c, &path).unwrap();
    let first = m.lock().unwrap();
    let inside = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let n = 1000;
    std::thread::scope(|s| {
        for _ in 0..n {
            let (m, inside, done) = (&m, &inside, &done);
            std::thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn_scoped(s, move || {
                    let g = m.lock().unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    inside.store(false, Ordering::SeqCst);
                    drop(g);
                    done.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
        }
        // Let them all queue, then hand the lock on.
        assert!(zklock::testing::eventually(Duration::from_secs(60), || {
            m.participants().map(|p| p.len()).unwrap_or(0) == n + 1
        }));
        drop(first);
    });
    assert_eq!(done.load(Ordering::SeqCst), n as u64);
    assert_eq!(c.state(), zklock::SessionState::Connected);
    assert!(children(&hosts, &path).is_empty());
}

/// Issue 28: `try_lock_for(1ms)` on a free lock and a healthy server was
/// `Err(ConnectionLoss("could not look for our node before the deadline"))`.
#[test]
fn a_deadline_that_runs_out_inside_a_request_is_a_timeout_not_a_connection_loss() {
    let hosts = hosts();
    let root = unique_path("tiny-deadline-mutex");
    let (a, b) = (connect(&hosts, 6000), connect(&hosts, 6000));
    for protocol in [Protocol::Curator, Protocol::Kazoo] {
        let path = format!("{root}/{protocol:?}");
        let m = Mutex::with_protocol(&a, &path, protocol).unwrap();
        let holder = Mutex::with_protocol(&b, &path, protocol).unwrap();
        tiny_deadlines_are_timeouts_never_errors(&hosts, &root, &m, &holder);
        let sm = zklock::SemaphoreMutex::with_protocol(&a, &path, protocol).unwrap();
        tiny_deadlines_are_timeouts_never_errors(&hosts, &root, &sm, &holder);
    }
    // The guard's forms, on a free lock: a timeout or a guard, never an error.
    let m = Mutex::new(&a, &format!("{root}/guard")).unwrap();
    for _ in 0..5 {
        drop(m.try_lock_for(Duration::from_millis(1)).unwrap());
        drop(m.try_lock_until(Instant::now()).unwrap());
    }
}

/// `{:?}` of every lock front names the lock's type, its path and its state (it printed
/// `Reentrant> { .. }` for a `Mutex`, the type parameter of its protocol).
#[test]
fn debug_of_a_lock_names_its_type_and_path() {
    let c = connect(&hosts(), 5000);
    let p = unique_path("debug");
    let rw = zklock::ReadWriteLock::new(&c, &p).unwrap();
    let cases: [(String, &str); 6] = [
        (format!("{:?}", Mutex::new(&c, &p).unwrap()), "Mutex"),
        (
            format!("{:?}", zklock::SemaphoreMutex::new(&c, &p).unwrap()),
            "SemaphoreMutex",
        ),
        (format!("{:?}", rw.read_lock()), "ReadLock"),
        (format!("{:?}", rw.write_lock()), "WriteLock"),
        (
            format!("{:?}", zklock::SimpleLock::new(&c, &p).unwrap()),
            "SimpleLock",
        ),
        (
            format!("{:?}", zklock::Semaphore::new(&c, &p, 2).unwrap()),
            "Semaphore",
        ),
    ];
    for (text, name) in cases {
        assert!(
            text.starts_with(&format!("{name} {{"))
                && text.contains(&p)
                && text.contains("NotHeld"),
            "{text}"
        );
    }
}
