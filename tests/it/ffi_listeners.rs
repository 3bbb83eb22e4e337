//! The C calls a Curator or kazoo user relies on beyond locking (issue 18, item 8), against real
//! ZooKeeper servers: statuses that tell a lost hold, a closed client and a self-deadlock apart;
//! `zkl_lock_wait_lost` (the waitable "lock lost" listener); the session-state listener
//! `zkl_client_wait_session_event`; `zkl_client_connect_with` (a connect timeout of its own and
//! a holder id); `zkl_lock_participants`; `zkl_client_close`.
#![cfg(feature = "testing")]
// Every call here is to an `unsafe extern "C"` fn with valid or NULL pointers, which is exactly
// what the contract allows; one SAFETY note per file instead of per call.
#![allow(clippy::undocumented_unsafe_blocks)]

use crate::common::{hosts, unique_path};

use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use zklock::testing::ffi::zkl_session_state::*;
use zklock::testing::ffi::zkl_status::*;
use zklock::testing::ffi::*;
use zklock::testing::{Admin, TcpProxy, TestingServer};

fn last_error() -> String {
    unsafe { CStr::from_ptr(zkl_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn connect_with(hosts: &str, session_ms: u32, holder_id: Option<&str>) -> *mut zkl_client {
    let h = cstr(hosts);
    let id = holder_id.map(cstr);
    let mut c = null_mut();
    let s = unsafe {
        zkl_client_connect_with(
            h.as_ptr(),
            session_ms,
            10_000,
            id.as_ref().map_or(null(), |i| i.as_ptr()),
            &mut c,
        )
    };
    assert_eq!(s, ZKL_OK, "{}", last_error());
    c
}

fn new_lock(
    c: *mut zkl_client,
    path: &str,
    ctor: unsafe extern "C" fn(
        *mut zkl_client,
        *const std::ffi::c_char,
        *mut *mut zkl_lock,
    ) -> zkl_status,
) -> *mut zkl_lock {
    let p = cstr(path);
    let mut l = null_mut();
    assert_eq!(
        unsafe { ctor(c, p.as_ptr(), &mut l) },
        ZKL_OK,
        "{}",
        last_error()
    );
    l
}

fn hold_state(l: *mut zkl_lock) -> u32 {
    let mut s = 99;
    assert_eq!(unsafe { zkl_lock_hold_state(l, &mut s) }, ZKL_OK);
    s
}

/// A handle moved to another thread for a test (wait_lost and cancel may be called from any
/// thread while another uses the handle).
struct SendPtr<T>(*mut T);
// SAFETY: the handles are Send + Sync on the Rust side; the test frees them only after joining.
unsafe impl<T> Send for SendPtr<T> {}

#[test]
fn lock_lost_closed_and_would_deadlock_are_statuses_of_their_own() {
    let hosts = hosts();
    let c = connect_with(&hosts, 5000, None);

    // A non-reentrant handle acquiring again, a semaphore handle whose own leases fill it, and a
    // read holder taking the write half: each could only wait for itself.
    let sm = new_lock(c, &unique_path("st-semmutex"), zkl_semaphore_mutex_new);
    assert_eq!(unsafe { zkl_lock_acquire(sm, -1) }, ZKL_OK);
    assert_eq!(unsafe { zkl_lock_acquire(sm, -1) }, ZKL_WOULD_DEADLOCK);
    assert!(last_error().contains("would deadlock"), "{}", last_error());
    let sem_path = cstr(&unique_path("st-sem"));
    let mut sem = null_mut();
    assert_eq!(
        unsafe { zkl_semaphore_new(c, sem_path.as_ptr(), 1, &mut sem) },
        ZKL_OK
    );
    assert_eq!(unsafe { zkl_lock_acquire(sem, -1) }, ZKL_OK);
    assert_eq!(unsafe { zkl_lock_acquire(sem, -1) }, ZKL_WOULD_DEADLOCK);
    let rw_path = cstr(&unique_path("st-rw"));
    let (mut r, mut w) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { zkl_rwlock_new(c, rw_path.as_ptr(), &mut r, &mut w) },
        ZKL_OK
    );
    assert_eq!(unsafe { zkl_lock_acquire(r, -1) }, ZKL_OK);
    assert_eq!(unsafe { zkl_lock_acquire(w, 0) }, ZKL_WOULD_DEADLOCK);

    // Someone else deleted the node of a hold: its release says the lock was lost.
    let path = unique_path("st-lost");
    let m = new_lock(c, &path, zkl_mutex_new);
    assert_eq!(unsafe { zkl_lock_acquire(m, -1) }, ZKL_OK);
    let admin = Admin::connect(&hosts).unwrap();
    for child in admin.children(&path).unwrap() {
        admin.delete(&format!("{path}/{child}")).unwrap();
    }
    assert_eq!(
        unsafe { zkl_lock_release(m) },
        ZKL_LOCK_LOST,
        "{}",
        last_error()
    );

    // A closed client: holds are lost, acquires say closed.
    let m2 = new_lock(c, &unique_path("st-closed"), zkl_mutex_new);
    assert_eq!(unsafe { zkl_lock_acquire(m2, -1) }, ZKL_OK);
    assert_eq!(unsafe { zkl_client_close(c) }, ZKL_OK);
    assert_eq!(hold_state(m2), zkl_hold_state::ZKL_HOLD_LOST as u32);
    assert_eq!(
        unsafe { zkl_lock_acquire(m, 0) },
        ZKL_CLOSED,
        "{}",
        last_error()
    );
    assert_eq!(
        unsafe { zkl_client_close(c) },
        ZKL_OK,
        "closing twice is a no-op"
    );

    for s in [ZKL_LOCK_LOST, ZKL_CLOSED, ZKL_WOULD_DEADLOCK] {
        let name = unsafe { CStr::from_ptr(zkl_status_name(s as u32)) };
        assert_eq!(name.to_str().unwrap(), format!("{s:?}"));
    }
    for l in [sm, sem, r, w, m, m2] {
        unsafe { zkl_lock_free(l) };
    }
    unsafe { zkl_client_free(c) };
}

#[test]
fn wait_lost_tells_a_lapsed_lease_a_release_and_a_timeout_apart() {
    let server = TestingServer::start().unwrap();
    let proxy = TcpProxy::start(&server.connect_string()).unwrap();
    let c = connect_with(&proxy.connect_string(), 2000, None);
    let m = new_lock(c, &unique_path("wl"), zkl_mutex_new);

    assert_eq!(unsafe { zkl_lock_wait_lost(m, 0) }, ZKL_NOT_HELD);
    assert_eq!(unsafe { zkl_lock_acquire(m, -1) }, ZKL_OK);
    let t = Instant::now();
    assert_eq!(unsafe { zkl_lock_wait_lost(m, 300) }, ZKL_TIMEOUT);
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(unsafe { zkl_lock_wait_lost(m, 0) }, ZKL_TIMEOUT);

    // A release on another thread ends a waiter's wait with NOT_HELD.
    let waiter = {
        let m = SendPtr(m);
        std::thread::spawn(move || {
            let m = m;
            unsafe { zkl_lock_wait_lost(m.0, 30_000) }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(unsafe { zkl_lock_release(m) }, ZKL_OK);
    assert_eq!(waiter.join().unwrap(), ZKL_NOT_HELD);

    // Cut off from the server (a black hole): the waiter wakes once the lease runs out, and
    // the hold is then UNCERTAIN, never HELD.
    assert_eq!(unsafe { zkl_lock_acquire(m, -1) }, ZKL_OK);
    let waiter = {
        let m = SendPtr(m);
        std::thread::spawn(move || {
            let m = m;
            let s = unsafe { zkl_lock_wait_lost(m.0, -1) };
            (s, hold_state(m.0))
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let cut = Instant::now();
    proxy.set_blackhole(true);
    let (s, state) = waiter.join().unwrap();
    assert_eq!(s, ZKL_OK, "{}", last_error());
    assert_ne!(state, zkl_hold_state::ZKL_HOLD_HELD as u32);
    assert!(
        cut.elapsed() < Duration::from_millis(2000),
        "woken before the session timeout: {:?}",
        cut.elapsed()
    );
    proxy.set_blackhole(false);
    unsafe { zkl_lock_free(m) };
    unsafe { zkl_client_free(c) };
}

fn next_event(
    c: *mut zkl_client,
    after: u64,
    timeout_ms: i64,
) -> Result<zkl_session_event, zkl_status> {
    let mut e = zkl_session_event {
        seq: 0,
        state: 99,
        session_id: 0,
        generation: 0,
    };
    match unsafe { zkl_client_wait_session_event(c, after, timeout_ms, &mut e) } {
        ZKL_OK => Ok(e),
        s => Err(s),
    }
}

#[test]
fn the_session_listener_sees_a_disconnect_the_reconnect_and_the_close_in_order() {
    let server = TestingServer::start().unwrap();
    let proxy = TcpProxy::start(&server.connect_string()).unwrap();
    let c = connect_with(&proxy.connect_string(), 6000, None);
    let mut state = 99;
    assert_eq!(unsafe { zkl_client_session_state(c, &mut state) }, ZKL_OK);
    assert_eq!(state, ZKL_SESSION_STATE_CONNECTED as u32);
    assert_eq!(next_event(c, 0, 0).unwrap_err(), ZKL_TIMEOUT);

    // The listener runs on a thread of the host's own.
    let listener = {
        let c = SendPtr(c);
        std::thread::spawn(move || {
            let c = c;
            let mut seen = Vec::new();
            let mut after = 0;
            loop {
                match next_event(c.0, after, 20_000) {
                    Ok(e) => {
                        assert_eq!(e.seq, after + 1, "no event skipped");
                        after = e.seq;
                        seen.push(e.state);
                    }
                    Err(s) => return (seen, s),
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    proxy.cut_all();
    let t = Instant::now();
    while unsafe {
        zkl_client_session_state(c, &mut state);
        state
    } != ZKL_SESSION_STATE_CONNECTED as u32
        || t.elapsed() < Duration::from_millis(200)
    {
        assert!(t.elapsed() < Duration::from_secs(10), "reconnected");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(unsafe { zkl_client_close(c) }, ZKL_OK);
    let (seen, end) = listener.join().unwrap();
    assert_eq!(
        seen,
        vec![
            ZKL_SESSION_STATE_SUSPENDED as u32,
            ZKL_SESSION_STATE_CONNECTED as u32,
            ZKL_SESSION_STATE_CLOSED as u32
        ]
    );
    assert_eq!(end, ZKL_CLOSED);
    // A late listener still gets the kept events, then CLOSED.
    assert_eq!(next_event(c, 0, 0).unwrap().seq, 1);
    assert_eq!(next_event(c, 3, -1).unwrap_err(), ZKL_CLOSED);
    unsafe { zkl_client_free(c) };
}

#[test]
fn connect_with_has_its_own_connect_timeout_and_holder_id() {
    // Nobody listens: the connect timeout (300 ms), not the session timeout (20 s), bounds it.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("127.0.0.1:{}", free.local_addr().unwrap().port());
    drop(free);
    let h = cstr(&dead);
    let mut c = 0x1234usize as *mut zkl_client;
    let t = Instant::now();
    let s = unsafe { zkl_client_connect_with(h.as_ptr(), 20_000, 300, null(), &mut c) };
    assert_eq!(s, ZKL_CONNECTION_LOSS);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(c, 0x1234usize as *mut zkl_client, "out-param untouched");

    let hosts = hosts();
    let a = connect_with(&hosts, 5000, Some("billing-7"));
    let mut id = null();
    assert_eq!(unsafe { zkl_client_holder_id(a, &mut id) }, ZKL_OK);
    assert_eq!(unsafe { CStr::from_ptr(id) }.to_str().unwrap(), "billing-7");
    let b = connect_with(&hosts, 5000, None);
    assert_eq!(unsafe { zkl_client_holder_id(b, &mut id) }, ZKL_OK);
    let default_id = unsafe { CStr::from_ptr(id) }.to_str().unwrap().to_string();
    assert!(
        default_id.ends_with(&format!(":{}", std::process::id())),
        "{default_id}"
    );

    // Participants: the holder first, then the waiter, each with its holder id.
    let path = unique_path("parts");
    let la = new_lock(a, &path, zkl_mutex_new);
    let lb = new_lock(b, &path, zkl_mutex_new);
    assert_eq!(unsafe { zkl_lock_acquire(la, -1) }, ZKL_OK);
    let waiter = {
        let lb = SendPtr(lb);
        std::thread::spawn(move || {
            let lb = lb;
            unsafe { zkl_lock_acquire(lb.0, 20_000) }
        })
    };
    let read = |l: *mut zkl_lock| {
        let mut ps = null_mut();
        assert_eq!(
            unsafe { zkl_lock_participants(l, &mut ps) },
            ZKL_OK,
            "{}",
            last_error()
        );
        let n = unsafe { zkl_participants_count(ps) };
        let mut out = Vec::new();
        for i in 0..n {
            let mut p = std::mem::MaybeUninit::<zkl_participant>::uninit();
            assert_eq!(
                unsafe { zkl_participants_get(ps, i, p.as_mut_ptr()) },
                ZKL_OK
            );
            let p = unsafe { p.assume_init() };
            out.push((
                unsafe { CStr::from_ptr(p.holder_id) }
                    .to_str()
                    .unwrap()
                    .to_string(),
                p.is_holder,
                p.sequence,
                unsafe { CStr::from_ptr(p.node) }
                    .to_str()
                    .unwrap()
                    .to_string(),
            ));
        }
        let mut p = std::mem::MaybeUninit::<zkl_participant>::uninit();
        assert_eq!(
            unsafe { zkl_participants_get(ps, n, p.as_mut_ptr()) },
            ZKL_INVALID_ARGUMENT
        );
        // Created by the server within the last minute (its clock is this machine's).
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        for i in 0..n {
            let mut created = 0;
            assert_eq!(
                unsafe { zkl_participants_created_ms(ps, i, &mut created) },
                ZKL_OK
            );
            assert!(
                created <= now_ms + 1000 && created > now_ms - 60_000,
                "{created} vs {now_ms}"
            );
        }
        let mut created = 0;
        assert_eq!(
            unsafe { zkl_participants_created_ms(ps, n, &mut created) },
            ZKL_INVALID_ARGUMENT
        );
        unsafe { zkl_participants_free(ps) };
        out
    };
    let t = Instant::now();
    let mut ps = read(la);
    while ps.len() < 2 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        ps = read(la);
    }
    assert_eq!(ps.len(), 2, "{ps:?}");
    assert_eq!((ps[0].0.as_str(), ps[0].1), ("billing-7", 1));
    assert_eq!((ps[1].0.as_str(), ps[1].1), (default_id.as_str(), 0));
    assert!(ps[0].2 < ps[1].2, "queue order");
    assert!(ps.iter().all(|p| !p.3.is_empty()));
    assert_eq!(unsafe { zkl_lock_release(la) }, ZKL_OK);
    assert_eq!(waiter.join().unwrap(), ZKL_OK);
    assert_eq!(unsafe { zkl_lock_release(lb) }, ZKL_OK);
    for l in [la, lb] {
        unsafe { zkl_lock_free(l) };
    }
    unsafe {
        zkl_client_free(a);
        zkl_client_free(b);
    }
}

#[test]
fn every_new_call_refuses_null() {
    let sentinel = 0x1234usize;
    let h = cstr("127.0.0.1:1");
    let mut c = sentinel as *mut zkl_client;
    assert_eq!(
        unsafe { zkl_client_connect_with(null(), 1000, 100, null(), &mut c) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_client_connect_with(h.as_ptr(), 1000, 100, null(), null_mut()) },
        ZKL_INVALID_ARGUMENT
    );
    let bad = [0xffu8, 0];
    assert_eq!(
        unsafe { zkl_client_connect_with(h.as_ptr(), 1000, 100, bad.as_ptr().cast(), &mut c) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(c, sentinel as *mut zkl_client);
    let mut id = null();
    let mut state = 0;
    assert_eq!(
        unsafe { zkl_client_holder_id(null(), &mut id) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_client_session_state(null(), &mut state) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        next_event(null_mut(), 0, 0).unwrap_err(),
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_client_close(null_mut()) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_lock_wait_lost(null(), 0) },
        ZKL_INVALID_ARGUMENT
    );
    let mut ps = null_mut();
    assert_eq!(
        unsafe { zkl_lock_participants(null(), &mut ps) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(unsafe { zkl_participants_count(null()) }, 0);
    assert_eq!(
        unsafe { zkl_participants_get(null(), 0, null_mut()) },
        ZKL_INVALID_ARGUMENT
    );
    unsafe { zkl_participants_free(null_mut()) };
    assert!(last_error().contains("is NULL"), "{}", last_error());
    assert!(
        !last_error().contains("invalid argument: invalid argument"),
        "{}",
        last_error()
    );
}

#[test]
fn zkl_lock_stats_counts_a_known_sequence_with_its_times() {
    let hosts = hosts();
    let (a, b) = (
        connect_with(&hosts, 5000, None),
        connect_with(&hosts, 5000, None),
    );
    let path = unique_path("stats");
    let (la, lb) = (
        new_lock(a, &path, zkl_mutex_new),
        new_lock(b, &path, zkl_mutex_new),
    );
    let mut st = std::mem::MaybeUninit::<zkl_stats>::uninit();
    assert_eq!(
        unsafe { zkl_lock_stats(null(), st.as_mut_ptr()) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_lock_stats(la, null_mut()) },
        ZKL_INVALID_ARGUMENT
    );

    // Two holds of about 150 ms, a busy try, a timed-out wait, a cancelled wait.
    for _ in 0..2 {
        assert_eq!(unsafe { zkl_lock_acquire(la, -1) }, ZKL_OK);
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(unsafe { zkl_lock_release(la) }, ZKL_OK);
    }
    assert_eq!(unsafe { zkl_lock_acquire(lb, -1) }, ZKL_OK);
    assert_eq!(unsafe { zkl_lock_acquire(la, 0) }, ZKL_TIMEOUT);
    assert_eq!(unsafe { zkl_lock_acquire(la, 100) }, ZKL_TIMEOUT);
    let waiter = {
        let la = SendPtr(la);
        std::thread::spawn(move || {
            let la = la;
            unsafe { zkl_lock_acquire(la.0, -1) }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(unsafe { zkl_lock_cancel(la) }, ZKL_OK);
    assert_eq!(waiter.join().unwrap(), ZKL_CANCELLED);
    assert_eq!(unsafe { zkl_lock_release(lb) }, ZKL_OK);

    assert_eq!(unsafe { zkl_lock_stats(la, st.as_mut_ptr()) }, ZKL_OK);
    let s = unsafe { st.assume_init() };
    assert_eq!(
        (
            s.acquisitions,
            s.timeouts,
            s.cancels,
            s.failures,
            s.releases,
            s.losses
        ),
        (2, 2, 1, 0, 2, 0),
        "{s:?}"
    );
    assert_eq!((s.wait.count, s.hold.count), (2, 2));
    assert!(
        s.hold.p50_us >= 150_000 && s.hold.max_us < 2_000_000,
        "{s:?}"
    );
    assert!(s.wait.max_us < 1_000_000, "{s:?}");
    for l in [la, lb] {
        unsafe { zkl_lock_free(l) };
    }
    unsafe {
        zkl_client_free(a);
        zkl_client_free(b);
    }
}

#[test]
fn revocation_through_c_asks_a_revocable_holder_and_forces_nobody() {
    let hosts = hosts();
    let (a, b) = (
        connect_with(&hosts, 5000, None),
        connect_with(&hosts, 5000, None),
    );
    let path = unique_path("revoke");
    let (la, lb) = (
        new_lock(a, &path, zkl_mutex_new),
        new_lock(b, &path, zkl_mutex_new),
    );
    assert_eq!(
        unsafe { zkl_lock_wait_revoke_request(la, 0) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(unsafe { zkl_lock_make_revocable(la) }, ZKL_OK);
    assert_eq!(unsafe { zkl_lock_wait_revoke_request(la, 0) }, ZKL_NOT_HELD);
    assert_eq!(unsafe { zkl_lock_acquire(la, -1) }, ZKL_OK);
    assert_eq!(
        unsafe { zkl_lock_wait_revoke_request(la, 100) },
        ZKL_TIMEOUT
    );
    let waiter = {
        let la = SendPtr(la);
        std::thread::spawn(move || {
            let la = la;
            unsafe { zkl_lock_wait_revoke_request(la.0, 10_000) }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let mut n = 0;
    assert_eq!(
        unsafe { zkl_lock_revoke_holders(lb, &mut n) },
        ZKL_OK,
        "{}",
        last_error()
    );
    assert_eq!(n, 1);
    assert_eq!(waiter.join().unwrap(), ZKL_OK);
    assert_eq!(unsafe { zkl_lock_is_held(la) }, 1, "asked, not forced");
    assert_eq!(unsafe { zkl_lock_release(la) }, ZKL_OK);

    // The other way: a holder that did not make its lock revocable, asked by node path.
    assert_eq!(unsafe { zkl_lock_acquire(lb, -1) }, ZKL_OK);
    let mut ps = null_mut();
    assert_eq!(unsafe { zkl_lock_participants(lb, &mut ps) }, ZKL_OK);
    let mut p = std::mem::MaybeUninit::<zkl_participant>::uninit();
    assert_eq!(
        unsafe { zkl_participants_get(ps, 0, p.as_mut_ptr()) },
        ZKL_OK
    );
    let p = unsafe { p.assume_init() };
    let node = cstr(&format!(
        "{path}/{}",
        unsafe { CStr::from_ptr(p.node) }.to_str().unwrap()
    ));
    assert_eq!(
        unsafe { zkl_client_request_revoke(a, node.as_ptr()) },
        ZKL_OK
    );
    unsafe { zkl_participants_free(ps) };
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(unsafe { zkl_lock_is_held(lb) }, 1);
    assert_eq!(unsafe { zkl_lock_acquire(la, 0) }, ZKL_TIMEOUT);
    let gone = cstr(&format!("{path}/no-such-node"));
    assert_eq!(
        unsafe { zkl_client_request_revoke(a, gone.as_ptr()) },
        ZKL_NOT_HELD
    );
    assert_eq!(
        unsafe { zkl_client_request_revoke(a, null()) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_lock_revoke_holders(null(), &mut n) },
        ZKL_INVALID_ARGUMENT
    );
    assert_eq!(
        unsafe { zkl_lock_make_revocable(null_mut()) },
        ZKL_INVALID_ARGUMENT
    );
    for l in [la, lb] {
        unsafe { zkl_lock_free(l) };
    }
    unsafe {
        zkl_client_free(a);
        zkl_client_free(b);
    }
}

/// `zkl_client_connect_with_tick` says the servers' tick: a 1 s session on servers said to tick
/// every 6 s can never prove its lease renewed, so its hold is not believed after the first
/// 0.9 s; with the servers' real tick (500 ms) it is; 0 reads the tick from the servers.
#[test]
fn connect_with_tick_sets_the_tick_the_lease_reckons_with() {
    let h = cstr(&hosts());
    let path = unique_path("tick");
    for (tick, believed) in [(6000u32, false), (500, true), (0, true)] {
        let mut c = null_mut();
        let s = unsafe { zkl_client_connect_with_tick(h.as_ptr(), 1000, 0, null(), tick, &mut c) };
        assert_eq!(s, ZKL_OK, "{}", last_error());
        let l = new_lock(c, &path, zkl_mutex_new);
        assert_eq!(
            unsafe { zkl_lock_acquire(l, -1) },
            ZKL_OK,
            "{}",
            last_error()
        );
        std::thread::sleep(Duration::from_millis(1500));
        let held = zklock::testing::eventually(Duration::from_secs(3), || unsafe {
            zkl_lock_is_held(l) == 1
        });
        assert_eq!(held, believed, "tick {tick} ms");
        assert_eq!(unsafe { zkl_lock_release(l) }, ZKL_OK, "{}", last_error());
        unsafe {
            zkl_lock_free(l);
            zkl_client_free(c);
        }
    }
}
