//! Issue 26, item 2: fork() after a client exists. A forked child inherits the parent's session
//! (its socket, the ZooKeeper client's request numbering, the executor's task set); whatever
//! the child does with what it inherited, dropping a guard, a lock handle or the client
//! included, must send nothing on the parent's session and must not hang. Each test forks a
//! real child of this (multithreaded) test process; the child only drops or calls, and ends
//! with `_exit`; a watchdog (`alarm`) ends a child that hangs, and the parent gives up on it
//! (SIGKILL) past the bound, so a hang fails the test instead of hanging it.
#![cfg(feature = "testing")]
#![allow(clippy::undocumented_unsafe_blocks)]

use std::time::{Duration, Instant};

use zklock::testing::Admin;
use zklock::{Client, Error, HoldState, Lockable, Mutex, SimpleLock};

use crate::common::{admin, connect, hosts, report, unique_path};

/// How long a child may take to do its part and exit.
const CHILD_BOUND: Duration = Duration::from_secs(5);

/// What became of a forked child.
#[derive(Debug, PartialEq, Eq)]
enum Child {
    /// It exited with this code, after this long.
    Exited(i32, Duration),
    /// It was ended by this signal (SIGALRM: its watchdog), after this long.
    Signalled(i32, Duration),
    /// It was still running at the bound (and was killed).
    Hung,
}

/// How a child is made.
#[derive(Debug, Clone, Copy)]
enum Spawn {
    /// libc's `fork()`, which runs the `pthread_atfork` handlers.
    Fork,
    /// The `clone` system call itself, as some runtimes, sandboxes and spawning code make
    /// children: no `pthread_atfork` handler runs, and libc learns nothing of it.
    RawClone,
}

/// Forks; the child runs `f` and `_exit`s with its code (2 if it panicked), or is ended by its
/// own watchdog past the bound; the parent waits for it at most [`CHILD_BOUND`] plus a
/// second, then kills it.
fn in_child(f: impl FnOnce() -> i32) -> Child {
    in_child_made_by(Spawn::Fork, f)
}

/// [`in_child`], the child made as `spawn` says.
fn in_child_made_by(spawn: Spawn, f: impl FnOnce() -> i32) -> Child {
    let started = Instant::now();
    let pid = match spawn {
        Spawn::Fork => unsafe { libc::fork() },
        // flags SIGCHLD alone, no new stack: a fork in all but libc's bookkeeping.
        Spawn::RawClone => unsafe {
            libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) as libc::pid_t
        },
    };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // The child: only what the test asks, then out without running any exit handler.
        unsafe { libc::alarm(CHILD_BOUND.as_secs() as libc::c_uint) };
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(2);
        unsafe { libc::_exit(code) };
    }
    let give_up = started + CHILD_BOUND + Duration::from_secs(1);
    loop {
        let mut status = 0;
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(r >= 0, "waitpid: {}", std::io::Error::last_os_error());
        if r == pid {
            let took = started.elapsed();
            if libc::WIFEXITED(status) {
                return Child::Exited(libc::WEXITSTATUS(status), took);
            }
            return Child::Signalled(libc::WTERMSIG(status), took);
        }
        if Instant::now() >= give_up {
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Child::Hung;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the child exited with code 0 within the bound (else says what it did).
fn exited_promptly(what: &str, child: Child, failures: &mut Vec<String>) {
    match child {
        Child::Exited(0, took) if took < CHILD_BOUND => {}
        other => failures.push(format!(
            "{what}: the child did not exit promptly with 0: {other:?}"
        )),
    }
}

/// What the child lets go of: the guard (its drop releases), or the lock handle with the guard
/// still out (the handle's drop releases what it holds), then the client either way.
#[derive(Debug, Clone, Copy)]
enum Leave {
    DropGuard,
    DropHandle,
}

/// The child's copy of `v`, to drop in the child: the parent's stays untouched (the child
/// `_exit`s, so its copy of the original is never dropped again).
fn childs_copy<T>(v: &T) -> T {
    unsafe { std::ptr::read(v) }
}

/// After the child is gone, the parent's hold is intact: its node is there, it says it holds,
/// and another client cannot take the lock.
fn parent_still_holds(
    what: &str,
    admin: &Admin,
    node: &str,
    held: bool,
    other_took: bool,
    failures: &mut Vec<String>,
) {
    if admin.node(node).unwrap().is_none() {
        failures.push(format!(
            "{what}: the parent's node {node} was deleted by its forked child"
        ));
    }
    if !held {
        failures.push(format!("{what}: the parent no longer says it holds"));
    }
    if other_took {
        failures.push(format!(
            "{what}: another client took the lock the parent holds (the parent says held: {held})"
        ));
    }
}

#[test]
fn a_forked_child_letting_go_of_an_inherited_mutex_releases_nothing_of_the_parents() {
    report(child_lets_go_of_a_mutex(Spawn::Fork));
}

/// A child made without libc's `fork()` runs no `pthread_atfork` handler: it is still a child,
/// and what it inherited is still the parent's.
#[test]
fn a_child_made_by_a_raw_clone_releases_nothing_of_the_parents() {
    report(child_lets_go_of_a_mutex(Spawn::RawClone));
}

/// A child made as `spawn` says lets go of an inherited mutex's guard (or its handle), then of
/// the client; the parent's hold must be intact after it. Returns what went wrong.
fn child_lets_go_of_a_mutex(spawn: Spawn) -> Vec<String> {
    let hosts = hosts();
    let admin = admin(&hosts);
    let other = connect(&hosts, 6000);
    let mut failures = Vec::new();
    for leave in [Leave::DropGuard, Leave::DropHandle] {
        let what = format!("mutex, {spawn:?}, {leave:?}");
        let path = unique_path("fork-mutex");
        let c = connect(&hosts, 6000);
        let m = Mutex::new(&c, &path).unwrap();
        let g = m.lock().unwrap();
        let participants = m.participants().unwrap();
        assert_eq!(participants.len(), 1);
        let node = format!("{path}/{}", participants[0].node);
        let child = in_child_made_by(spawn, || {
            match leave {
                Leave::DropGuard => drop(childs_copy(&g)),
                Leave::DropHandle => std::mem::forget(childs_copy(&g)),
            }
            drop(childs_copy(&m));
            drop(childs_copy(&c));
            0
        });
        exited_promptly(&what, child, &mut failures);
        let om = Mutex::new(&other, &path).unwrap();
        let other_took = om.try_lock().unwrap().is_some();
        parent_still_holds(&what, &admin, &node, g.is_held(), other_took, &mut failures);
        // The parent's session still answers: its release works.
        if let Err(e) = g.unlock() {
            failures.push(format!("{what}: the parent's release after the fork: {e}"));
        }
    }
    failures
}

#[test]
fn a_forked_child_letting_go_of_an_inherited_simple_lock_releases_nothing_of_the_parents() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let other = connect(&hosts, 6000);
    let mut failures = Vec::new();
    for leave in [Leave::DropGuard, Leave::DropHandle] {
        let what = format!("simple lock, {leave:?}");
        let path = unique_path("fork-simple");
        let c = connect(&hosts, 6000);
        let l = SimpleLock::new(&c, &path).unwrap();
        let g = l.lock().unwrap();
        let child = in_child(|| {
            match leave {
                Leave::DropGuard => drop(childs_copy(&g)),
                Leave::DropHandle => std::mem::forget(childs_copy(&g)),
            }
            drop(childs_copy(&l));
            drop(childs_copy(&c));
            0
        });
        exited_promptly(&what, child, &mut failures);
        let ol = SimpleLock::new(&other, &path).unwrap();
        let other_took = ol.try_lock().unwrap().is_some();
        parent_still_holds(&what, &admin, &path, g.is_held(), other_took, &mut failures);
        if let Err(e) = g.unlock() {
            failures.push(format!("{what}: the parent's release after the fork: {e}"));
        }
    }
    report(failures);
}

/// In the child every call on an inherited handle fails at once with `Forked`, sending
/// nothing; the child holds nothing; and it cannot make a client of its own (the executor is
/// the parent's).
#[test]
fn calls_on_inherited_handles_in_a_forked_child_fail_at_once_with_forked() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let path = unique_path("fork-calls");
    let c = connect(&hosts, 6000);
    let m = Mutex::new(&c, &path).unwrap();
    let g = m.lock().unwrap();
    let simple = SimpleLock::new(&c, &unique_path("fork-calls-simple")).unwrap();
    let sg = simple.lock().unwrap();
    let other_path = unique_path("fork-calls-other");
    let child = in_child(|| {
        let started = Instant::now();
        let forked =
            |r: Result<(), Error>| matches!(r, Err(Error::Forked(m)) if m.contains("fork"));
        // Each failure is its own exit code, for the parent's message.
        if g.is_held() {
            return 10;
        }
        if !forked(m.try_lock().map(|_| ())) {
            return 11;
        }
        if !forked(m.participants().map(|_| ())) {
            return 12;
        }
        // The child holds nothing: no state, no token of the parent's hold.
        if m.hold_state() != HoldState::NotHeld || g.hold_state() != HoldState::NotHeld {
            return 20;
        }
        if !forked(m.fencing_token().map(|_| ())) {
            return 21;
        }
        // Not WouldDeadlock: the hold is the parent's, not this handle's here.
        if sg.is_held() || !forked(simple.try_lock().map(|_| ())) {
            return 19;
        }
        if !forked(Mutex::new(&c, &other_path).and_then(|o| o.try_lock().map(|_| ()))) {
            return 13;
        }
        if !forked(c.lock_kind(&path).map(|_| ())) {
            return 14;
        }
        if c.state() != zklock::SessionState::Closed {
            return 15;
        }
        if !forked(Client::connect(&hosts, crate::common::opts(6000)).map(|_| ())) {
            return 16;
        }
        if !forked(childs_copy(&g).unlock()) {
            return 17;
        }
        c.close();
        if started.elapsed() > Duration::from_secs(2) {
            return 18;
        }
        0
    });
    let mut failures = Vec::new();
    exited_promptly("calls in the child", child, &mut failures);
    if !g.is_held() {
        failures.push("the parent no longer says it holds".into());
    }
    if admin.node(&other_path).unwrap().is_some() {
        failures.push("the child created a node through the parent's session".into());
    }
    if c.state() != zklock::SessionState::Connected {
        failures.push(format!("the parent's session is {:?}", c.state()));
    }
    if let Err(e) = g.unlock() {
        failures.push(format!("the parent's release after the fork: {e}"));
    }
    if let Err(e) = sg.unlock() {
        failures.push(format!(
            "the parent's simple-lock release after the fork: {e}"
        ));
    }
    report(failures);
}

/// The C API in a forked child (what a pre-fork C daemon, or Python through ctypes, does):
/// a call on an inherited lock is ZKL_CLOSED with a message naming fork(); freeing the lock
/// and the client releases nothing of the parent's and returns at once.
#[test]
fn c_handles_freed_in_a_forked_child_release_nothing_of_the_parents() {
    use std::ffi::{CStr, CString};
    use std::ptr::null_mut;
    use zklock::testing::ffi::zkl_status::*;
    use zklock::testing::ffi::*;

    let hosts = hosts();
    let admin = admin(&hosts);
    let other = connect(&hosts, 6000);
    let path = unique_path("fork-c");
    let (chosts, cpath) = (
        CString::new(hosts.clone()).unwrap(),
        CString::new(path.clone()).unwrap(),
    );
    let mut c = null_mut();
    let mut l = null_mut();
    unsafe {
        assert_eq!(zkl_client_connect(chosts.as_ptr(), 6000, &mut c), ZKL_OK);
        assert_eq!(zkl_mutex_new(c, cpath.as_ptr(), &mut l), ZKL_OK);
        assert_eq!(zkl_lock_acquire(l, -1), ZKL_OK);
    }
    let m = Mutex::new(&other, &path).unwrap();
    let node = format!("{path}/{}", m.participants().unwrap()[0].node);
    let (cs, ls) = (c as usize, l as usize);
    let child = in_child(move || unsafe {
        let (c, l) = (cs as *mut zkl_client, ls as *mut zkl_lock);
        if zkl_lock_is_held(l) != 0 {
            return 10;
        }
        if zkl_lock_acquire(l, 0) != ZKL_CLOSED {
            return 11;
        }
        let msg = CStr::from_ptr(zkl_last_error_message()).to_string_lossy();
        if !msg.contains("fork") {
            return 12;
        }
        // The child holds nothing, and the token is the parent's: no answer from it here.
        let mut state = 99u32;
        if zkl_lock_hold_state(l, &mut state) != ZKL_OK
            || state != zkl_hold_state::ZKL_HOLD_NONE as u32
        {
            return 13;
        }
        let mut token = 0i64;
        if zkl_lock_fencing_token(l, &mut token) != ZKL_CLOSED || token != 0 {
            return 14;
        }
        let msg = CStr::from_ptr(zkl_last_error_message()).to_string_lossy();
        if !msg.contains("fork") {
            return 15;
        }
        zkl_lock_free(l);
        zkl_client_free(c);
        0
    });
    let mut failures = Vec::new();
    exited_promptly("C handles freed in the child", child, &mut failures);
    let other_took = m.try_lock().unwrap().is_some();
    let held = unsafe { zkl_lock_is_held(l) } == 1;
    parent_still_holds("C handles", &admin, &node, held, other_took, &mut failures);
    unsafe {
        if zkl_lock_release(l) != ZKL_OK {
            failures.push("the parent's release after the fork failed".into());
        }
        zkl_lock_free(l);
        zkl_client_free(c);
    }
    report(failures);
}
