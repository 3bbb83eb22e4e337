//! The session core against real ZooKeeper servers: connect, chroot, auth, restart, expiry,
//! failover, SIGSTOP, unreachable hosts, bad paths, TCP_NODELAY.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::testing::TestingCluster;
use zklock::{Client, Error, Lockable, Mutex, Options, SessionState};

#[test]
fn connect_and_close() {
    let c = connect(&hosts(), 4000);
    assert_eq!(c.state(), SessionState::Connected);
    assert_ne!(c.session_id(), 0);
    assert!(c.holder_id().contains(&std::process::id().to_string()));
    c.close();
    assert_eq!(c.state(), SessionState::Closed);
    let m = Mutex::new(&c, &unique_path("x")).unwrap();
    assert_eq!(m.try_lock().err(), Some(Error::Closed));
}

#[test]
fn chroot_in_host_string_roots_every_path() {
    let hosts = hosts();
    let (app, path) = (unique_path("app"), unique_path("locks-a"));
    let rooted = connect(&format!("{hosts}{app}"), 4000);
    let m = Mutex::new(&rooted, &path).unwrap();
    let _g = m.lock().unwrap();
    // Seen from the root, the lock node lives under the chroot.
    let plain = connect(&hosts, 4000);
    let seen = Mutex::new(&plain, &format!("{app}{path}"))
        .unwrap()
        .participants()
        .unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(Mutex::new(&plain, &path)
        .unwrap()
        .participants()
        .unwrap()
        .is_empty());
}

#[test]
fn unreachable_host_fails_clearly_within_connect_timeout() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = Instant::now();
    let e = Client::connect(
        &format!("127.0.0.1:{port}"),
        opts(2000).connect_timeout(Duration::from_millis(1500)),
    )
    .unwrap_err();
    assert!(e.is_connection_loss(), "{e}");
    assert!(e.to_string().contains(&port.to_string()), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(1500 + 1000),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn malformed_host_lists_are_invalid_arguments() {
    for h in [
        "",
        "/chroot",
        "127.0.0.1:notaport",
        "127.0.0.1:2181/bad//chroot",
        ":2181",
    ] {
        let e = Client::connect(h, opts(2000)).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{h:?}: {e}");
    }
}

#[test]
fn every_bad_path_is_rejected_with_its_reason() {
    let c = connect(&hosts(), 4000);
    for (p, why) in [
        ("", "empty"),
        ("relative/x", "absolute"),
        ("/a/", "ends with"),
        ("/a//b", "empty segment"),
        ("/a/./b", "relative segment"),
        ("/a/../b", "relative segment"),
        ("/a\0b", "forbidden"),
        ("/zookeeper/x", "reserved"),
    ] {
        let e = Mutex::new(&c, p).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains(why)),
            "{p:?}: {e}"
        );
        let e = zklock::SimpleLock::new(&c, p).unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(_)), "{p:?}: {e}");
    }
}

#[test]
fn digest_auth_is_kept_across_a_reconnect() {
    let mut zk = server();
    let c = Client::connect(
        &zk.connect_string(),
        opts(6000).auth("digest", "alice:secret"),
    )
    .unwrap();
    // A lock taken under auth, then the server restarts within the session timeout.
    let m = Mutex::new(&c, &unique_path("auth")).unwrap();
    m.lock().map(std::mem::forget).unwrap();
    zk.stop();
    assert_eq!(
        c.wait_for_state(Duration::from_secs(5), |s| s == SessionState::Suspended),
        SessionState::Suspended
    );
    zk.restart().unwrap();
    assert_eq!(
        c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Connected),
        SessionState::Connected
    );
    // Still authenticated: adding the same identity again works, and the lock is still held
    // (believed again once a renewal after the reconnect is answered: on a loaded machine
    // that can take a moment past Connected).
    c.add_auth("digest", b"alice:secret").unwrap();
    assert!(eventually(Duration::from_secs(5), || m.is_held()));
    m.release().unwrap();
}

#[test]
fn restart_within_session_timeout_suspends_then_reconnects_same_session() {
    let mut zk = server();
    let c = connect(&zk.connect_string(), 8000);
    let id = c.session_id();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let c2 = c.clone();
    // A listener may call the client: it runs on a thread of its own, never inside a poll of
    // the session's task.
    c.add_listener(move |ev| {
        s2.lock().push(ev.state);
        let _ = c2.state();
        let _ = c2.holder_id();
    });
    zk.stop();
    assert_eq!(
        c.wait_for_state(Duration::from_secs(5), |s| s == SessionState::Suspended),
        SessionState::Suspended
    );
    std::thread::sleep(Duration::from_millis(500));
    zk.restart().unwrap();
    assert_eq!(
        c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Connected),
        SessionState::Connected
    );
    assert_eq!(c.session_id(), id, "the session survives a short restart");
    assert!(
        eventually(Duration::from_secs(2), || seen
            .lock()
            .ends_with(&[SessionState::Suspended, SessionState::Connected])),
        "{:?}",
        seen.lock()
    );
    // TCP_NODELAY is set again on the new socket.
    assert!(eventually(Duration::from_secs(2), || c
        .socket_nodelay()
        .iter()
        .any(|&b| b)));
}

#[test]
fn down_past_session_timeout_expires_and_a_fresh_session_works() {
    let mut zk = server();
    let c = Client::connect(&zk.connect_string(), opts(2000).reconnect_on_expiry(false)).unwrap();
    let old = c.session_id();
    let m = Mutex::new(&c, &unique_path("exp")).unwrap();
    let g = m.lock().unwrap();
    zk.stop();
    let t = Instant::now();
    assert_eq!(
        c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Expired),
        SessionState::Expired
    );
    assert!(
        t.elapsed() < Duration::from_secs(6),
        "expired after {:?}",
        t.elapsed()
    );
    assert!(!g.is_held(), "a lock of an expired session is not held");
    assert!(g.wait_lost(Some(Duration::ZERO)));
    zk.restart().unwrap();
    // Calls fail fast while expired (no reconnect policy).
    let t = Instant::now();
    let m2 = Mutex::new(&c, &unique_path("exp-other")).unwrap();
    assert_eq!(m2.try_lock().err(), Some(Error::SessionExpired));
    assert!(t.elapsed() < Duration::from_millis(200));
    assert_eq!(g.unlock().err(), Some(Error::LockLost));
    // A fresh session, explicitly.
    c.reconnect().unwrap();
    assert_eq!(c.state(), SessionState::Connected);
    assert_ne!(c.session_id(), old);
    assert_eq!(c.generation(), 1);
    assert!(m2.try_lock().unwrap().is_some());
}

#[test]
fn expiry_with_reconnect_policy_opens_a_new_session_on_next_use() {
    let mut zk = server();
    let c = connect(&zk.connect_string(), 2000);
    let old = c.session_id();
    zk.stop();
    assert_eq!(
        c.wait_for_state(Duration::from_secs(10), |s| s == SessionState::Expired),
        SessionState::Expired
    );
    zk.restart().unwrap();
    let m = Mutex::new(&c, &unique_path("policy")).unwrap();
    let g = m.lock().unwrap();
    assert!(g.is_held());
    assert_ne!(c.session_id(), old);
}

#[test]
fn sigstopped_server_calls_return_within_their_deadline() {
    let zk = server();
    let c = connect(&zk.connect_string(), 3000);
    let holder = connect(&zk.connect_string(), 3000);
    let path = unique_path("stop");
    let hm = Mutex::new(&holder, &path).unwrap();
    let _g = hm.lock().unwrap();
    let m = Mutex::new(&c, &path).unwrap();
    zk.pause();
    let t = Instant::now();
    let r = m.try_lock_for(Duration::from_millis(500));
    let took = t.elapsed();
    zk.resume();
    assert!(
        r.is_err() || r.as_ref().unwrap().is_none(),
        "cannot acquire a held lock"
    );
    // Bound: its timeout plus the session timeout.
    assert!(
        took < Duration::from_millis(500 + 3000 + 500),
        "took {took:?}"
    );
}

#[test]
fn ensemble_member_killed_keeps_session_and_waiters() {
    let mut cluster = TestingCluster::start(3).unwrap();
    let hosts = cluster.connect_string();
    let holder = connect(&hosts, 8000);
    let waiter = connect(&hosts, 8000);
    let path = unique_path("ens");
    let hm = Mutex::new(&holder, &path).unwrap();
    let g = hm.lock().unwrap();
    let wm = Arc::new(Mutex::new(&waiter, &path).unwrap());
    let got = Arc::new(AtomicUsize::new(0));
    let (wm2, got2) = (wm.clone(), got.clone());
    let t = std::thread::spawn(move || {
        let g = wm2.lock().unwrap();
        got2.store(1, Ordering::SeqCst);
        drop(g);
    });
    std::thread::sleep(Duration::from_millis(300));
    // Kill the member the waiter is connected to: its watch must survive the failover.
    let id = waiter.session_id();
    let member = cluster.member_of_session(id).expect("the waiter's member");
    let sid = waiter.session_id();
    cluster.kill(member);
    assert!(eventually(Duration::from_secs(15), || waiter.state()
        == SessionState::Connected
        && cluster.member_of_session(sid).is_some_and(|m| m != member)));
    assert_eq!(waiter.session_id(), sid);
    assert_eq!(
        got.load(Ordering::SeqCst),
        0,
        "nobody else acquires while held"
    );
    // The holder may have been on the killed member too: it is held again once reconnected.
    assert!(eventually(Duration::from_secs(15), || holder.state()
        == SessionState::Connected));
    assert!(g.is_held());
    drop(g);
    t.join().unwrap();
    assert_eq!(got.load(Ordering::SeqCst), 1);
}

#[test]
fn tcp_nodelay_is_set_on_the_session_socket() {
    let c = connect(&hosts(), 4000);
    let v = c.socket_nodelay();
    assert!(!v.is_empty() && v.iter().all(|&b| b), "{v:?}");
}

#[test]
fn close_wakes_waiting_acquires_which_leave_no_node() {
    let hosts = hosts();
    let path = unique_path("closewait");
    let holder = connect(&hosts, 5000);
    let hm = Mutex::new(&holder, &path).unwrap();
    let _g = hm.lock().unwrap();
    let c = connect(&hosts, 5000);
    let m = Arc::new(Mutex::new(&c, &path).unwrap());
    let m2 = m.clone();
    let t = std::thread::spawn(move || m2.lock().map(|_| ()));
    let admin = admin(&hosts);
    assert!(eventually(Duration::from_secs(5), || admin
        .children(&path)
        .unwrap()
        .len()
        == 2));
    let at = Instant::now();
    c.close();
    assert_eq!(t.join().unwrap(), Err(Error::Closed));
    assert!(at.elapsed() < Duration::from_secs(1));
    assert!(eventually(Duration::from_secs(3), || admin
        .children(&path)
        .unwrap()
        .len()
        == 1));
}

#[test]
fn black_holed_connection_calls_and_connects_return_within_their_bounds() {
    use zklock::testing::TcpProxy;
    let zk = server();
    let proxy = TcpProxy::start(&zk.connect_string()).unwrap();
    let c = connect(&proxy.connect_string(), 2000);
    let m = Mutex::new(&c, &unique_path("bh")).unwrap();
    proxy.set_blackhole(true);
    // A timed acquire: its timeout plus the session timeout at most.
    let t = Instant::now();
    let r = m.try_lock_for(Duration::from_millis(300));
    assert!(r.is_err() || r.as_ref().unwrap().is_none());
    assert!(
        t.elapsed() < Duration::from_millis(300 + 2000 + 500),
        "{:?}",
        t.elapsed()
    );
    // A blocking acquire cannot wait forever on a dead network: the session ends.
    let t = Instant::now();
    let r = m.lock().map(|_| ());
    assert!(
        matches!(
            r,
            Err(Error::SessionExpired) | Err(Error::ConnectionLoss(_))
        ),
        "{r:?}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(2000 * 2 + 1000),
        "{:?}",
        t.elapsed()
    );
    // Connecting through a black hole fails within the connect timeout.
    let t = Instant::now();
    let e = Client::connect(
        &proxy.connect_string(),
        opts(2000).connect_timeout(Duration::from_millis(800)),
    )
    .unwrap_err();
    assert!(e.is_connection_loss(), "{e}");
    assert!(
        t.elapsed() < Duration::from_millis(800 + 500),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn options_debug_never_prints_credentials() {
    let secret = "alice:s3cret";
    let o = zklock::Options::default().auth("digest", secret);
    let text = format!("{o:?}");
    assert!(text.contains("digest"), "{text}");
    assert!(!text.contains(secret), "{text}");
    let bytes = format!("{:?}", secret.as_bytes());
    assert!(!text.contains(&bytes[1..bytes.len() - 1]), "{text}");
}

/// "Wait as long as it takes" is a timeout too long for the clock: it must wait (here: return
/// at once, the state is already the one asked for), never panic.
#[test]
fn wait_for_state_with_the_longest_timeout_waits_instead_of_panicking() {
    let c = connect(&hosts(), 4000);
    let t = Instant::now();
    assert_eq!(
        c.wait_for_state(Duration::MAX, |s| s == SessionState::Connected),
        SessionState::Connected
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    // And a state reached later ends the wait.
    let c2 = c.clone();
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        c2.close();
    });
    assert_eq!(
        c.wait_for_state(Duration::MAX, |s| s == SessionState::Closed),
        SessionState::Closed
    );
    closer.join().unwrap();
}

/// Issue 26 item 5: `close` while an acquire's create is in flight must fail the acquire with
/// `Closed` and take the node away, for the mutex and the simple lock: the acquire must not
/// return a token of a hold already lost, and the node must not stay (here the client and the
/// lock handle are kept) and block everyone. In flight two ways: the server frozen with the
/// create in its socket (it applies it and answers after the close), and the create applied
/// with its reply dropped (the acquire finds its node again after the close).
#[test]
fn close_while_an_acquires_create_is_in_flight_fails_it_and_leaves_no_node() {
    use zklock::testing::{TcpProxy, TestingServer};
    use zklock::{Deadline, SimpleLock};
    let zk = server();
    let other = connect(&zk.connect_string(), 4000);
    fn check<L: Lockable + Sync>(
        kind: &str,
        frozen: bool,
        zk: &TestingServer,
        other: &Client,
        make: impl Fn(&Client, &str) -> L,
    ) {
        let kind = format!(
            "{kind} ({})",
            if frozen {
                "server frozen"
            } else {
                "reply dropped"
            }
        );
        let path = unique_path("close-in-flight");
        let proxy = TcpProxy::start(&zk.connect_string()).unwrap();
        let c = connect(&proxy.connect_string(), 3000);
        let lock = make(&c, &path);
        // The parents first, so that the fault meets the lock node's own create.
        lock.acquire(Deadline::Forever).unwrap().expect("acquired");
        lock.release().unwrap();
        let creates = proxy.creates_seen();
        if frozen {
            zk.pause();
        } else {
            // The lock node's create: a create2 (op 15), or the simple lock's multi (op 14)
            // of its node and witness.
            proxy.drop_reply_of_next_op(if kind.starts_with("simple") { 14 } else { 15 });
        }
        let r = std::thread::scope(|s| {
            let t = s.spawn(|| lock.acquire(Deadline::Forever));
            assert!(
                eventually(Duration::from_secs(5), || if frozen {
                    proxy.creates_seen() > creates
                } else {
                    proxy.replies_dropped() == 1
                }),
                "{kind}: the create is in flight"
            );
            c.close();
            zk.resume();
            t.join().unwrap()
        });
        assert!(
            matches!(r, Err(Error::Closed)),
            "{kind}: the acquire returned {r:?}"
        );
        // The client and the lock handle live on: the node must be gone all the same.
        let ol = make(other, &path);
        let got = ol.acquire(Deadline::after(Duration::from_secs(3)));
        assert!(
            matches!(got, Ok(Some(_))),
            "{kind}: another client could not acquire within the session timeout: {got:?}"
        );
        ol.release().unwrap();
        drop((lock, c));
    }
    for frozen in [true, false] {
        check("simple lock", frozen, &zk, &other, |c, p| {
            SimpleLock::new(c, p).unwrap()
        });
        check("mutex", frozen, &zk, &other, |c, p| {
            Mutex::per_handle(c, p).unwrap()
        });
    }
}

/// Issue 28: `Options::connect_timeout(Duration::MAX)` panicked ("overflow when adding
/// duration to instant"), and `reconnect()` has the same addition. The longest timeouts
/// saturate: a connect with the longest connect timeout connects, as does a reconnect; the
/// longest session timeout is refused as an invalid argument (servers grant at most their
/// maxSessionTimeout).
#[test]
fn the_longest_timeouts_connect_or_are_refused_never_panic() {
    let h = hosts();
    let c = connect(&h, opts(6000).connect_timeout(Duration::MAX));
    c.reconnect().unwrap();
    assert_eq!(c.state(), SessionState::Connected);
    let e = Client::connect(&h, opts(6000).session_timeout(Duration::MAX)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let both = Options::default()
        .session_timeout(Duration::MAX)
        .connect_timeout(Duration::MAX);
    let e = Client::connect(&h, both).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
}

/// Issue 28: `connect_timeout(0)` waited for nothing and blamed the server ("accepts
/// connections but opened no ZooKeeper session"). A connect that may take no time is refused
/// as an invalid argument, at once.
#[test]
fn a_zero_connect_timeout_is_an_invalid_argument_not_the_servers_fault() {
    let h = hosts();
    let t = Instant::now();
    let e = Client::connect(&h, opts(6000).connect_timeout(Duration::ZERO)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains("connect timeout")),
        "{e:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

/// Issue 28: a connect to a port nobody listens on waited the whole connect timeout to say
/// "connection refused". Every server refused: said at once, well under the connect timeout.
#[test]
fn a_refused_port_fails_fast_not_at_the_connect_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for timeout in [Duration::from_secs(20), Duration::MAX] {
        let t = Instant::now();
        let e = Client::connect(
            &format!("127.0.0.1:{port}"),
            opts(6000).connect_timeout(timeout),
        )
        .unwrap_err();
        assert!(e.is_connection_loss(), "{e}");
        assert!(e.to_string().contains("connection refused by"), "{e}");
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{:?} with a connect timeout of {timeout:?}",
            t.elapsed()
        );
    }
}

/// Issue 28: `add_auth("sasl", ..)` ended the session ("SESSION_EXPIRED: every lock it held is
/// lost"): SASL is a handshake when the session opens, not an addauth. It is refused up front,
/// pointing at the SASL options, and the session and its hold live on. A scheme the servers
/// do not know is refused by them: the error says so, not that the session expired.
#[test]
fn add_auth_with_sasl_is_refused_up_front_and_the_session_lives_on() {
    let h = hosts();
    let c = connect(&h, 6000);
    let m = Mutex::new(&c, &unique_path("add-auth-sasl")).unwrap();
    let g = m.lock().unwrap();
    let e = c.add_auth("sasl", b"bob:secret").unwrap_err();
    // The setting to give as a value (each door names it its own way: tests/it/ffi_messages.rs),
    // named in the Rust API's words here.
    assert!(
        matches!(&e, Error::InvalidArgument(msg) if msg.ends_with("(Options::sasl)")),
        "{e:?}"
    );
    assert_eq!(e.hint(), Some(zklock::Hint::Sasl));
    assert_eq!(c.state(), SessionState::Connected);
    assert!(g.is_held());
    drop(g);
    // A scheme no server knows.
    let c = connect(&h, 6000);
    let e = c.add_auth("no-such-scheme", b"x").unwrap_err();
    assert!(
        matches!(e, Error::AuthFailed(_)),
        "an unknown scheme: {e:?}"
    );
    assert!(e.to_string().contains("no-such-scheme"), "{e}");
}

/// Issue 37, item 7: a call that takes no timeout of its caller's (a look at a lock's
/// participants, a revocation request, a lock's kind; C `zkl_lock_participants`,
/// `zkl_client_request_revoke`, ...) answers within one session timeout, its timeout being
/// none, as the contract says. On a frozen server each used to retry until the session's end
/// (about 2 T).
#[test]
fn calls_without_a_timeout_end_within_one_session_timeout_on_a_frozen_server() {
    let zk = server();
    let t = Duration::from_secs(4);
    let c = connect(&zk.connect_string(), opts(t.as_millis() as u64));
    let mutex = Mutex::per_handle(&c, &unique_path("frozen-calls")).unwrap();
    let simple = zklock::SimpleLock::new(&c, &unique_path("frozen-calls-simple")).unwrap();
    let sem = zklock::Semaphore::new(&c, &unique_path("frozen-calls-sem"), 2).unwrap();
    let guard = mutex.lock().unwrap();
    let node = format!(
        "{}/{}",
        mutex.queue_path(),
        mutex.participants().unwrap()[0].node
    );
    zk.pause();
    let mut failures = Vec::new();
    let mut time = |what: &str, call: &dyn Fn() -> String| {
        let started = Instant::now();
        let outcome = call();
        let took = started.elapsed();
        eprintln!("{what}: {outcome} after {took:?}");
        // One session timeout, and a little for a loaded machine's scheduling.
        if took > t + Duration::from_millis(1500) {
            failures.push(format!("{what} took {took:?} (T = {t:?}): {outcome}"));
        }
    };
    time("mutex participants", &|| {
        format!("{:?}", mutex.participants().map(|p| p.len()))
    });
    time("simple lock participants", &|| {
        format!("{:?}", simple.participants().map(|p| p.len()))
    });
    time("semaphore participants", &|| {
        format!("{:?}", sem.participants().map(|p| p.len()))
    });
    time("request_revoke", &|| {
        format!("{:?}", c.request_revoke(&node))
    });
    time("lock_kind", &|| format!("{:?}", c.lock_kind(mutex.path())));
    zk.resume();
    drop(guard);
    report(failures);
}

/// The reading of each connect's grant (src/grants.rs) takes the thread's tracing dispatcher
/// while a session's task is polled: a program's own subscriber must still see every event of
/// zookeeper-client it wants (here: each reply's, and each connect's answer), as it did before.
#[test]
fn a_programs_own_tracing_subscriber_still_sees_zookeeper_clients_events() {
    use std::sync::atomic::AtomicUsize;
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata};
    static EVENTS: AtomicUsize = AtomicUsize::new(0);
    static ANSWERS: AtomicUsize = AtomicUsize::new(0);
    struct Counting;
    impl tracing::Subscriber for Counting {
        fn enabled(&self, meta: &Metadata<'_>) -> bool {
            meta.module_path()
                .is_some_and(|m| m.starts_with("zookeeper_client"))
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            struct Text(String);
            impl tracing::field::Visit for Text {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    if f.name() == "message" {
                        self.0 = format!("{v:?}");
                    }
                }
            }
            let mut t = Text(String::new());
            event.record(&mut t);
            EVENTS.fetch_add(1, Ordering::SeqCst);
            if t.0.starts_with("received connect response") {
                ANSWERS.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
    tracing::subscriber::set_global_default(Counting).expect("the test process's subscriber");
    let zk = server();
    // A session that outlives a slow restart (its reconnect is answered, not refused).
    let c = connect(&zk.connect_string(), 20000);
    let m = Mutex::new(&c, &unique_path("traced")).unwrap();
    drop(m.lock().unwrap());
    let before = EVENTS.load(Ordering::SeqCst);
    assert!(
        before > 0,
        "no event of zookeeper-client reached the program's subscriber"
    );
    // A reconnect: its answer is read in the session's task, under the grants' reading.
    let answers = ANSWERS.load(Ordering::SeqCst);
    let mut zk = zk;
    zk.restart().unwrap();
    assert!(
        eventually(Duration::from_secs(30), || ANSWERS.load(Ordering::SeqCst)
            > answers),
        "the reconnect's answer did not reach the program's subscriber"
    );
    drop(m.lock().unwrap());
    assert!(EVENTS.load(Ordering::SeqCst) > before);
}
