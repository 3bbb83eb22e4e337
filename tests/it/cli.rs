//! The `zklock` command against a real ZooKeeper server: exit status passthrough, the
//! not-acquired status with a busy lock, `holders`, every lock kind, a session lost while the
//! command runs, and secured servers (mutual TLS and SASL from flags, files and the
//! environment, never a secret on the command line; creator-only ACLs; exit 77).
#![cfg(feature = "testing")]

use crate::common::{
    connect, eventually, hosts, opts, unique_path, unique_root, ChildGuard, SpawnGuarded,
};

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use zklock::testing::{ClientAuth, ClientCert, TestingCerts, TestingServer};
use zklock::{
    Client, LeaderElection, Lockable, Mutex, ReadWriteLock, Revocable, Semaphore, SimpleLock,
};

const ZKLOCK: &str = env!("CARGO_BIN_EXE_zklock");

/// A session of 5 s with the holder id `id`.
fn client(hosts: &str, id: &str) -> Client {
    connect(hosts, opts(5000).holder_id(id))
}

/// A fresh lock path for the test `name`.
fn path(name: &str) -> String {
    unique_path(&format!("cli-{name}"))
}

fn zklock(hosts: &str, args: &[&str]) -> Command {
    let mut c = Command::new(ZKLOCK);
    c.arg("--hosts").arg(hosts).args(args).stdin(Stdio::null());
    c
}

fn run(mut c: Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("run zklock");
    let code = status.code().expect("zklock exits, it is not killed");
    (
        code,
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

#[test]
fn runs_the_command_and_passes_its_exit_status() {
    let h = hosts();
    let p = path("status");
    let (code, out, err) = run(zklock(&h, &[&p, "--", "sh", "-c", "echo hello; exit 7"]));
    assert_eq!((code, out.as_str()), (7, "hello\n"), "{err}");
    let (code, _, err) = run(zklock(&h, &[&p, "true"]));
    assert_eq!(code, 0, "{err}");
    // Killed by a signal: 128 + N, as shells report it.
    let (code, _, _) = run(zklock(&h, &[&p, "sh", "-c", "kill -9 $$"]));
    assert_eq!(code, 128 + 9);
    // The command sees the lock path and its fencing token.
    let (code, out, err) = run(zklock(
        &h,
        &[
            "-v",
            &p,
            "sh",
            "-c",
            "echo \"$ZKLOCK_PATH $ZKLOCK_FENCING_TOKEN\"",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    let (seen_path, token) = out.trim().split_once(' ').unwrap();
    assert_eq!(seen_path, p);
    assert!(token.parse::<i64>().unwrap() > 0);
    assert!(
        err.contains("acquired") && err.contains("released"),
        "{err}"
    );
    // Nothing is left behind.
    assert!(Mutex::new(&client(&h, "t"), &p)
        .unwrap()
        .participants()
        .unwrap()
        .is_empty());
}

#[test]
fn busy_lock_gives_the_not_acquired_status() {
    let h = hosts();
    let p = path("busy");
    let c = client(&h, "holder-a");
    let m = Mutex::new(&c, &p).unwrap();
    let g = m.lock().unwrap();
    let (code, out, err) = run(zklock(&h, &["-n", &p, "echo", "ran"]));
    assert_eq!(code, 75, "{err}");
    assert!(out.is_empty(), "the command must not run: {out}");
    assert!(err.contains("busy"), "{err}");
    let t = Instant::now();
    let (code, _, err) = run(zklock(&h, &["--timeout", "0.4", &p, "true"]));
    assert_eq!(code, 75, "{err}");
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    // The status is configurable, like flock -E.
    let (code, _, _) = run(zklock(&h, &["-E", "3", "-n", &p, "true"]));
    assert_eq!(code, 3);
    // A waiting zklock runs once the holder lets go.
    let waiter = zklock(&h, &["--timeout", "20", &p, "true"]).spawn_guarded();
    std::thread::sleep(Duration::from_millis(300));
    drop(g);
    let out = waiter.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    // No node of the failed attempts is left.
    assert!(m.participants().unwrap().is_empty());
}

#[test]
fn concurrent_commands_are_mutually_exclusive() {
    let h = hosts();
    let p = path("exclusive");
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n");
    std::fs::write(&counter, "0\n").unwrap();
    let script = format!(
        "v=$(cat {0}); sleep 0.05; echo $((v + 1)) > {0}",
        counter.display()
    );
    let kids: Vec<_> = (0..6)
        .map(|_| zklock(&h, &["--timeout", "60", &p, "sh", "-c", &script]).spawn_guarded())
        .collect();
    for k in kids {
        assert_eq!(k.wait_with_output().unwrap().status.code(), Some(0));
    }
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().trim(),
        "6",
        "two commands overlapped"
    );
}

#[test]
fn holders_lists_the_queue_with_holder_ids() {
    let h = hosts();
    let p = path("holders");
    let (ca, cb) = (client(&h, "worker-a"), client(&h, "worker-b"));
    let (ma, mb) = (Mutex::new(&ca, &p).unwrap(), Mutex::new(&cb, &p).unwrap());
    let (code, out, _) = run(zklock(&h, &["holders", &p]));
    assert_eq!((code, out.as_str()), (0, ""));
    let g = ma.lock().unwrap();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| mb.lock().map(drop));
        let t = Instant::now();
        while mb.participants().unwrap().len() < 2 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (code, out, err) = run(zklock(&h, &["holders", &p]));
        assert_eq!(code, 0, "{err}");
        let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!((lines[0][0], lines[0][2]), ("holder", "worker-a"), "{out}");
        assert_eq!((lines[1][0], lines[1][2]), ("waiting", "worker-b"), "{out}");
        assert!(lines[0][1].parse::<i64>().unwrap() < lines[1][1].parse::<i64>().unwrap());
        drop(g);
        waiter.join().unwrap().unwrap();
    });
}

/// `--elect`: COMMAND runs while leading, with the term as its fencing token; a Rust leader
/// keeps it out, and after the Rust leader relinquishes the command leads with a later term.
#[test]
fn elect_runs_the_command_while_leading_with_the_term() {
    let h = hosts();
    let c = client(&h, "rust-leader");
    let p = path("elect");
    let e = LeaderElection::new(&c, &p).unwrap();
    let first = e
        .await_leadership(zklock::Deadline::Forever)
        .unwrap()
        .unwrap();
    assert_eq!(run(zklock(&h, &["--elect", "-n", &p, "true"])).0, 75);
    let (code, out, _) = run(zklock(&h, &["holders", &p]));
    assert!(code == 0 && out.contains("rust-leader"), "{code} {out}");
    e.relinquish().unwrap();
    let (code, out, err) = run(zklock(
        &h,
        &[
            "--elect",
            "-n",
            &p,
            "sh",
            "-c",
            "echo $ZKLOCK_FENCING_TOKEN",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    let term: i64 = out.trim().parse().unwrap();
    assert!(term > first, "term {term} after {first}");
}

#[test]
fn read_write_semaphore_and_simple_kinds() {
    let h = hosts();
    let c = client(&h, "rust-side");
    // Read-write: a reader in Rust lets zklock read but not write.
    let p = path("rw");
    let rw = ReadWriteLock::new(&c, &p).unwrap();
    let r = rw.read().lock().unwrap();
    assert_eq!(run(zklock(&h, &["--read", "-n", &p, "true"])).0, 0);
    assert_eq!(run(zklock(&h, &["--write", "-n", &p, "true"])).0, 75);
    let (code, out, _) = run(zklock(&h, &["holders", "--read", &p]));
    assert_eq!(code, 0);
    assert!(
        out.starts_with("holder\t") && out.contains("\tread\trust-side\t"),
        "{out}"
    );
    drop(r);
    assert_eq!(run(zklock(&h, &["--write", "-n", &p, "true"])).0, 0);
    // Semaphore: with both leases taken, zklock cannot get one.
    let p = path("sem");
    let s = Semaphore::new(&c, &p, 2).unwrap();
    let (l1, l2) = (s.lock().unwrap(), s.lock().unwrap());
    assert_eq!(
        run(zklock(&h, &["--semaphore", "2", "-n", &p, "true"])).0,
        75
    );
    let (code, out, _) = run(zklock(&h, &["holders", "--semaphore", "2", &p]));
    assert_eq!((code, out.lines().count()), (0, 2), "{out}");
    drop(l1);
    assert_eq!(
        run(zklock(&h, &["--semaphore", "2", "-n", &p, "true"])).0,
        0
    );
    drop(l2);
    // Simple lock.
    let p = path("simple");
    let sl = SimpleLock::new(&c, &p).unwrap();
    let g = sl.try_lock().unwrap().unwrap();
    assert_eq!(run(zklock(&h, &["--simple", "-n", &p, "true"])).0, 75);
    let out = run(zklock(&h, &["holders", "--simple", &p])).1;
    assert!(
        out.starts_with("holder\trust-side\t") && out.ends_with("s\n"),
        "{out}"
    );
    drop(g);
    assert_eq!(run(zklock(&h, &["--simple", "-n", &p, "true"])).0, 0);
    // The kazoo protocol (kazoo node names) works the same way.
    let p = path("kazoo");
    let (code, out, err) = run(zklock(&h, &["--protocol", "kazoo", &p, "sh", "-c", "true"]));
    assert_eq!(code, 0, "{out}{err}");
}

#[test]
fn usage_connection_and_command_errors() {
    let h = hosts();
    for bad in [
        &["/p"][..],
        &["--read", "--write", "/p", "true"],
        &["--nope", "/p", "true"],
        &["relative", "true"],
        // Too large to be a session timeout (and once an Instant overflow: a panic).
        &["--session-timeout", "1e19", "/p", "true"],
        &["--session-timeout", "-1", "/p", "true"],
    ] {
        let (code, _, err) = run(zklock(&h, bad));
        assert_eq!(code, 64, "{bad:?}: {err}");
        assert!(!err.contains("panicked"), "{bad:?}: {err}");
    }
    let (code, out, _) = run(zklock(&h, &["--help"]));
    assert_eq!(code, 0);
    assert!(out.contains("Exit status"));
    let (code, _, err) = run(zklock(&h, &[&path("nocmd"), "/nonexistent/command"]));
    assert_eq!(code, 127, "{err}");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("127.0.0.1:{port}");
    let t = Instant::now();
    let (code, _, err) = run(zklock(&nowhere, &["--session-timeout", "1", "/p", "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// Runs `zklock --on-lost <action>` over `command`, stops the server while it runs, and
/// returns (exit code, stderr, how long after the stop zklock ended).
fn lose_session_while_running(action: &str, command: &[&str]) -> (i32, String, Duration) {
    let (code, err, took, _) = lose_session_with(&["--on-lost", action], command);
    (code, err, took)
}

/// As [`lose_session_while_running`] with any options; also returns the wall-clock time the
/// server was stopped at.
fn lose_session_with(
    opts: &[&str],
    command: &[&str],
) -> (i32, String, Duration, std::time::SystemTime) {
    let mut zk = TestingServer::start().expect("start a real ZooKeeper server");
    let h = zk.connect_string();
    let mut args = vec!["--session-timeout", "2"];
    args.extend_from_slice(opts);
    let p = path("lost");
    args.extend_from_slice(&[p.as_str(), "--"]);
    args.extend_from_slice(command);
    let child = zklock(&h, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_guarded();
    // Wait until it holds the lock (its node exists), then take the server away.
    let c = client(&h, "observer");
    let m = Mutex::new(&c, &p).unwrap();
    let t = Instant::now();
    while m.participants().unwrap().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "zklock never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(m);
    c.close();
    zk.stop();
    let stopped = Instant::now();
    let wall = std::time::SystemTime::now();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        stopped.elapsed(),
        wall,
    )
}

#[test]
fn lost_session_terminates_the_command() {
    let (code, err, took) = lose_session_while_running("term", &["sleep", "60"]);
    // Exit 80: the lock was lost while COMMAND ran; COMMAND's own end is on stderr.
    assert_eq!(code, 80, "{err}");
    assert!(err.contains("lost the lock"), "{err}");
    if err.contains("may hold it at once") {
        // Seen only once the session had expired, or while a reconnect's answer was awaited:
        // another client may hold the lock already, so COMMAND is killed at once.
        assert!(err.contains("was killed by signal 9"), "{err}");
    } else {
        assert!(err.contains("SIGTERM"), "{err}");
        assert!(err.contains("was killed by signal 15"), "{err}");
    }
    assert!(took < Duration::from_secs(15), "{took:?}");
}

/// --on-lost acts at lease end (at most 2 s − 0.2 s after the last renewal, T = 2 s), not at
/// the client's expiry verdict (7/5 T = 2.8 s after the last answer); --kill-after escalates a
/// SIGTERM the command ignores.
#[test]
fn lost_lease_terms_at_lease_end_and_kill_after_escalates() {
    let dir = tempfile::tempdir().unwrap();
    let termfile = dir.path().join("term");
    let script = format!(
        "trap 'date +%s%N > {}; exit 3' TERM; while true; do sleep 0.02; done",
        termfile.display()
    );
    let (code, err, _, stopped) = lose_session_with(&["--on-lost", "term"], &["sh", "-c", &script]);
    assert_eq!(code, 80, "{err}");
    // The client's reconnect may reach the stopping server before its port closes: the grant
    // it would be given is unknown, so the servers may hand the lock on at once, and the
    // command is killed at once, without a SIGTERM (hold-model.md, "The timeout, per connect").
    let at_once = |err: &str| err.contains("may hold it at once");
    if at_once(&err) {
        assert!(err.contains("was killed by signal 9"), "{err}");
    } else {
        // It ends on the SIGTERM, or, if its trap takes longer than the servers' hand-over
        // allows (a tenth of the 2 s session, less the kill's lead: a loaded machine), on the
        // SIGKILL.
        assert!(err.contains("sending SIGTERM"), "{err}");
        assert!(
            err.contains("exited with 3") || err.contains("was killed by signal 9"),
            "the command ended after the SIGTERM: {err}"
        );
        // When its trap ran (it may be killed first), it ran at the lease's end.
        if let Ok(nanos) = std::fs::read_to_string(&termfile) {
            let nanos: u128 = nanos.trim().parse().unwrap();
            let stop = stopped
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let after = Duration::from_nanos((nanos - stop) as u64);
            eprintln!("server stopped; the command got SIGTERM {after:?} later");
            assert!(after < Duration::from_millis(2300), "{after:?}: {err}");
        }
    }

    let (code, err, _, _) = lose_session_with(
        &["--on-lost", "term", "--kill-after", "0.5"],
        &["sh", "-c", "trap '' TERM; exec sleep 60"],
    );
    assert_eq!(code, 80, "{err}");
    assert!(
        (at_once(&err) || err.contains("SIGTERM")) && err.contains("SIGKILL"),
        "{err}"
    );
    assert!(err.contains("was killed by signal 9"), "{err}");
}

#[test]
fn lost_session_can_kill_or_leave_the_command() {
    let (code, err, _) = lose_session_while_running("kill", &["sleep", "60"]);
    assert_eq!(code, 80, "{err}");
    assert!(err.contains("was killed by signal 9"), "{err}");
    assert!(
        err.contains("lost the lock") && err.contains("SIGKILL"),
        "{err}"
    );
    let (code, err, took) = lose_session_while_running("ignore", &["sleep", "7"]);
    // It ran to its end, unsafely: still exit 80, its own status on stderr.
    assert_eq!(code, 80, "{err}");
    assert!(
        err.contains("exited with 0"),
        "the command ran to its end: {err}"
    );
    assert!(
        err.contains("lost the lock") && err.contains("keeps running"),
        "{err}"
    );
    assert!(took >= Duration::from_secs(3), "{took:?}");
}

/// Whether process `pid` still runs (a zombie has ended).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit(')').next().map(|r| r.trim_start().to_string()))
        .is_some_and(|r| !r.starts_with('Z'))
}

/// Starts `zklock PATH -- sh -c SCRIPT` where SCRIPT first writes its pid to a file; returns
/// zklock's child process and the command's pid.
fn start_command(h: &str, p: &str, dir: &std::path::Path, script: &str) -> (ChildGuard, u32) {
    start_command_with(h, p, dir, script, |_| {})
}

/// As [`start_command`], with `setup` applied to zklock's `Command` before it starts.
fn start_command_with(
    h: &str,
    p: &str,
    dir: &std::path::Path,
    script: &str,
    setup: impl FnOnce(&mut Command),
) -> (ChildGuard, u32) {
    start_command_opts(h, &[], p, dir, script, setup)
}

/// As [`start_command_with`], with zklock's options `opts` before PATH.
fn start_command_opts(
    h: &str,
    opts: &[&str],
    p: &str,
    dir: &std::path::Path,
    script: &str,
    setup: impl FnOnce(&mut Command),
) -> (ChildGuard, u32) {
    let pidfile = dir.join("pid");
    let script = format!("echo $$ > {}; {script}", pidfile.display());
    let mut args = vec!["--session-timeout", "2"];
    args.extend_from_slice(opts);
    args.extend_from_slice(&[p, "--", "sh", "-c", &script]);
    let mut c = zklock(h, &args);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    setup(&mut c);
    let mut z = c.spawn_guarded();
    let t = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return (z, pid);
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = z.kill();
            let _ = z.wait();
            panic!("the command did not start");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Tries `zklock -n PATH COMMAND` again and again while `until` is false, where COMMAND looks
/// at the first command while this try holds the lock; returns, for each try, whether it got the
/// lock, whether the first command was running during that hold, and whether it was running
/// just before the try (so that the caller can tell that some tries overlapped it).
fn second_tries(h: &str, p: &str, first: u32, until: impl Fn() -> bool) -> Vec<(bool, bool, bool)> {
    // Exit 3 when /proc/FIRST exists and is not a zombie: the first command still runs.
    let check = format!("grep -qv ') Z ' /proc/{first}/stat 2>/dev/null && exit 3; exit 0");
    let mut tries = Vec::new();
    while !until() {
        let alive_before = alive(first);
        let (code, _, err) = run(zklock(h, &["-n", p, "sh", "-c", &check]));
        assert!(
            matches!(code, 0 | 3 | 75),
            "unexpected status {code}: {err}"
        );
        tries.push((code != 75, code == 3, alive_before));
    }
    tries
}

/// SIGTERM to zklock goes on to COMMAND; zklock waits for it, releases, and exits with its
/// status: nobody else gets the lock while COMMAND still runs (flock(1)'s promise).
#[test]
fn sigterm_to_zklock_goes_to_the_command_and_the_lock_outlives_it() {
    let h = hosts();
    let p = path("sigterm");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = format!(
        "trap 'echo TERM >> {l}' TERM; i=0; while [ $i -lt 15 ]; do sleep 0.1; i=$((i+1)); done; echo done >> {l}",
        l = log.display()
    );
    let (mut z, cmd) = start_command(&h, &p, dir.path(), &script);
    assert!(zklock::testing::process::send_signal(z.id(), libc::SIGTERM));
    let zid = z.id();
    let tries = second_tries(&h, &p, cmd, || !alive(zid));
    let status = z.wait().unwrap();
    assert_eq!(status.code(), Some(0), "zklock exits with COMMAND's status");
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text, "TERM\ndone\n",
        "COMMAND got the SIGTERM and ran to its end"
    );
    assert!(!tries.is_empty());
    assert!(
        tries.iter().all(|(_, overlapped, _)| !overlapped),
        "a second zklock got the lock while COMMAND ran: {tries:?}"
    );
    assert!(
        tries.iter().any(|(got, _, before)| !got && *before),
        "no try while COMMAND ran"
    );
    let (code, _, err) = run(zklock(&h, &["-n", &p, "true"]));
    assert_eq!(code, 0, "free once zklock released: {err}");
}

/// SIGKILL to zklock (nothing can be caught): COMMAND dies with it, so it never runs while the
/// lock is free; the lock comes free when the server expires zklock's session.
#[test]
fn sigkill_to_zklock_kills_the_command_too() {
    let h = hosts();
    let p = path("sigkill");
    let dir = tempfile::tempdir().unwrap();
    let (mut z, cmd) = start_command(&h, &p, dir.path(), "exec sleep 30");
    let t = Instant::now();
    assert!(zklock::testing::process::send_signal(z.id(), libc::SIGKILL));
    let _ = z.wait();
    while alive(cmd) && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let died = t.elapsed();
    assert!(!alive(cmd), "COMMAND outlived zklock");
    assert!(
        died < Duration::from_secs(1),
        "COMMAND died {died:?} after zklock"
    );
    // The lock comes free only at the server's expiry of the killed zklock's session (2 s).
    let mut free_at = None;
    while free_at.is_none() && t.elapsed() < Duration::from_secs(15) {
        if run(zklock(&h, &["-n", &p, "true"])).0 == 0 {
            free_at = Some(t.elapsed());
        }
    }
    let free_at = free_at.expect("the lock came free after zklock's session expired");
    assert!(
        died < free_at,
        "COMMAND died at {died:?}, the lock was free at {free_at:?}"
    );
    eprintln!("after SIGKILL of zklock: COMMAND died at {died:?}, lock free at {free_at:?}");
}

/// The lines a child writes to `stdout`, as they come (the channel ends when it closes).
fn lines_of(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    use std::io::{BufRead, BufReader};
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// `holders --json --watch`: one JSON array per change of the queue, driven by a watch (no
/// line while nothing changes).
#[test]
fn holders_json_watch_follows_the_queue() {
    let h = hosts();
    let p = path("watch");
    let (code, out, err) = run(zklock(&h, &["holders", "--json", &p]));
    assert_eq!((code, out.as_str()), (0, "[]\n"), "{err}");
    // Held in a guard: a failing test kills it (it ran on for half an hour once).
    let mut w = zklock(&h, &["holders", "--json", "--watch", &p])
        .stdout(Stdio::piped())
        .spawn_guarded();
    let rx = lines_of(w.stdout.take().unwrap());
    // Each listing is a state to wait for: it comes, or zklock ends (its stdout closes). The
    // bound only ends a hung test: on a machine at load 10-25 the first listing (zklock's
    // start and connect) took longer than 10 s.
    let next = |what: &str| match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(line) => line,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("zklock holders --watch ended before the listing {what}")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("no listing {what}"),
    };
    assert_eq!(next("at start"), "[]");
    let c = client(&h, "watched-holder");
    let m = Mutex::new(&c, &p).unwrap();
    let g = m.lock().unwrap();
    let listing: serde_json::Value = serde_json::from_str(&next("after the acquire")).unwrap();
    let first = &listing.as_array().unwrap()[0];
    assert_eq!(first["role"], "holder", "{listing}");
    assert_eq!(first["holder_id"], "watched-holder", "{listing}");
    assert!(
        first["sequence"].as_i64().is_some() && first["node"].is_string(),
        "{listing}"
    );
    // Nothing changes: nothing is printed (a watch, not polling).
    assert!(rx.recv_timeout(Duration::from_millis(800)).is_err());
    drop(g);
    assert_eq!(next("after the release"), "[]");
    let _ = w.kill();
    let _ = w.wait();
}

/// `holders --watch` lists a lock taken between its look at what the path is and its watch on
/// it: it once found the path free, then set its watch on a queue that already had the holder
/// and waited for a change that had come (no listing, until the next change; one run in
/// twenty of `holders_json_watch_follows_the_queue`). Here the command's replies come 2 s late
/// through a proxy, and the lock is taken right after the command's look left.
#[test]
fn holders_watch_lists_a_lock_taken_between_its_look_and_its_watch() {
    use zklock::testing::TcpProxy;
    /// zookeeper-client lists children with ZooKeeper's getChildren (op 8).
    const GET_CHILDREN: i32 = 8;
    let h = hosts();
    let p = path("watch-race");
    // The path a plain persistent node (no container reaper takes it while it is empty).
    let zk = {
        let _scope = spawns_core::enter(&crate::common::ThreadSpawner);
        futures::executor::block_on(zookeeper_client::Client::connect(&h)).unwrap()
    };
    let persistent =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    futures::executor::block_on(zk.mkdir(&p, &persistent)).unwrap();
    let proxy = TcpProxy::start(&h).unwrap();
    let mut w = zklock(
        &proxy.connect_string(),
        &["holders", "--json", "--watch", &p],
    )
    .stdout(Stdio::piped())
    .spawn_guarded();
    let rx = lines_of(w.stdout.take().unwrap());
    let next = |what: &str| {
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no listing {what} ({e})"))
    };
    assert_eq!(next("at start"), "[]");
    let c = client(&h, "raced-holder");
    let m = Mutex::new(&c, &p).unwrap();
    // A change for the command to look at: a lock taken and given back at once.
    proxy.set_server_delay(Duration::from_secs(2));
    let listed = proxy.requests_seen(GET_CHILDREN);
    drop(m.lock().unwrap());
    // Its look at the path lists it (after the event, 2 s late, and its getData, 2 s more):
    // the lock is taken again as soon as that listing passed the proxy.
    assert!(
        eventually(Duration::from_secs(30), || proxy
            .requests_seen(GET_CHILDREN)
            > listed),
        "the command never looked at the path again"
    );
    let _g = m.lock().unwrap();
    let listing: serde_json::Value = serde_json::from_str(&next("after the acquire")).unwrap();
    assert_eq!(listing[0]["holder_id"], "raced-holder", "{listing}");
    let _ = w.kill();
    let _ = w.wait();
}

/// Sends `sig` to a `zklock` that waits for a lock held by another client: it exits 128+N at
/// once and its queue node is gone with it, so the next acquirer gets the lock as soon as the
/// holder lets go, not a session timeout (6 s) later.
fn signal_while_waiting_frees_the_queue_at_once(sig: i32, name: &str) {
    let h = hosts();
    let p = path(name);
    let c = client(&h, "holder");
    let m = Mutex::new(&c, &p).unwrap();
    let g = m.lock().unwrap();
    let mut z = zklock(&h, &["--session-timeout", "6", &p, "--", "echo", "ran"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_guarded();
    let t = Instant::now();
    while m.participants().unwrap().len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(10), "zklock never queued");
        std::thread::sleep(Duration::from_millis(10));
    }
    let t = Instant::now();
    assert!(zklock::testing::process::send_signal(z.id(), sig));
    while z.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let exited = t.elapsed();
    let queue_after_exit = m.participants().unwrap().len();
    drop(g);
    let c2 = client(&h, "next");
    let m2 = Mutex::new(&c2, &p).unwrap();
    let t = Instant::now();
    let next = m2.try_lock_for(Duration::from_secs(10)).unwrap();
    let next_waited = t.elapsed();
    drop(next);
    let out = z.wait_with_output().unwrap();
    eprintln!(
        "signal {sig} to a waiting zklock: exited after {exited:?} ({:?}); {queue_after_exit} \
         node(s) left; the next acquirer waited {next_waited:?}",
        out.status
    );
    assert_eq!(
        out.status.code(),
        Some(128 + sig),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(exited < Duration::from_secs(2), "{exited:?}");
    assert!(out.stdout.is_empty(), "COMMAND must not run");
    assert_eq!(queue_after_exit, 1, "only the holder is queued");
    assert!(next_waited < Duration::from_secs(1), "{next_waited:?}");
    let (code, _, err) = run(zklock(&h, &["-n", &p, "true"]));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn sigterm_to_a_waiting_zklock_ends_its_wait_and_frees_the_queue_at_once() {
    signal_while_waiting_frees_the_queue_at_once(libc::SIGTERM, "wait-term");
}

#[test]
fn sigint_to_a_waiting_zklock_ends_its_wait_and_frees_the_queue_at_once() {
    signal_while_waiting_frees_the_queue_at_once(libc::SIGINT, "wait-int");
}

/// COMMAND is `sh` trapping SIGINT: a line per SIGINT it gets, then "done" after 1.5 s.
fn int_counting_script(log: &std::path::Path) -> String {
    format!(
        "trap 'echo INT >> {l}' INT; i=0; while [ $i -lt 15 ]; do sleep 0.1; i=$((i+1)); done; echo done >> {l}",
        l = log.display()
    )
}

/// COMMAND, logging as [`int_counting_script`] does, saw one SIGINT and ended by itself, and
/// zklock exited with its status (0).
fn assert_one_int(log: &std::path::Path, out: &Output, what: &str) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    assert_eq!(
        text,
        "INT\ndone\n",
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: zklock exits with COMMAND's status"
    );
}

/// Every core kept busy (spinning threads) until dropped, also when the test fails.
struct BusyCores {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyCores {
    fn start() -> BusyCores {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        BusyCores { stop, threads }
    }
}

impl Drop for BusyCores {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One Ctrl-C typed at the terminal goes to the whole foreground process group, zklock and
/// COMMAND: COMMAND sees it once (zklock does not pass on what COMMAND got itself), and
/// zklock exits with COMMAND's status.
#[test]
fn one_ctrl_c_at_the_terminal_reaches_the_command_once() {
    use std::io::Write;
    let h = hosts();
    let p = path("ctrl-c");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (mut master, slave) = zklock::testing::process::open_pty().unwrap();
    let (z, cmd) = start_command_with(&h, &p, dir.path(), &int_counting_script(&log), |c| {
        c.stdin(Stdio::from(slave));
        zklock::testing::process::controlling_terminal_on_stdin(c);
    });
    assert!(alive(cmd));
    master.write_all(b"\x03").unwrap();
    let out = z.wait_with_output().unwrap();
    assert_one_int(&log, &out, "COMMAND saw the Ctrl-C once");
    let (code, _, err) = run(zklock(&h, &["-n", &p, "true"]));
    assert_eq!(code, 0, "released: {err}");
}

/// A SIGINT sent to zklock alone (kill PID) is passed on to COMMAND, once.
#[test]
fn sigint_to_zklock_alone_reaches_the_command_once() {
    let h = hosts();
    let p = path("sigint-alone");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (z, cmd) = start_command(&h, &p, dir.path(), &int_counting_script(&log));
    assert!(alive(cmd));
    assert!(zklock::testing::process::send_signal(z.id(), libc::SIGINT));
    let out = z.wait_with_output().unwrap();
    assert_one_int(
        &log,
        &out,
        "COMMAND saw the SIGINT sent to zklock alone once",
    );
}

/// Waits for zklock to end, at most `within`; past that kills it (COMMAND dies with it) and
/// fails the test.
fn finish(mut z: ChildGuard, within: Duration) -> Output {
    let t = Instant::now();
    while z.try_wait().unwrap().is_none() {
        if t.elapsed() > within {
            let _ = z.kill();
            let out = z.wait_with_output().unwrap();
            panic!(
                "zklock did not end within {within:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    z.wait_with_output().unwrap()
}

/// A signal sent to zklock's whole group the instant COMMAND has started (COMMAND sends it to
/// its own group as its first act) reaches COMMAND once: zklock's witness of the group watches
/// from before COMMAND's exec, not from whenever zklock's thread runs again after it (beside a
/// loaded machine's other work, COMMAND saw a group's SIGINT twice).
#[test]
fn a_group_signal_at_the_commands_start_reaches_it_once() {
    use std::os::unix::process::CommandExt;
    let h = hosts();
    let dir = tempfile::tempdir().unwrap();
    // Every core kept busy, as beside a build: zklock's thread waits for a core after COMMAND's
    // exec while COMMAND runs on.
    let _busy = BusyCores::start();
    for round in 0..8 {
        let p = path(&format!("sigint-at-start-{round}"));
        let log = dir.path().join(format!("log{round}"));
        let script = format!(
            "trap 'echo INT >> {l}' INT; kill -INT 0; sleep 0.3; echo done >> {l}",
            l = log.display()
        );
        let (z, _) = start_command_with(&h, &p, dir.path(), &script, |c| {
            c.process_group(0);
        });
        let out = finish(z, Duration::from_secs(20));
        assert_one_int(
            &log,
            &out,
            &format!("round {round}: COMMAND saw its group's SIGINT once"),
        );
    }
}

/// A supervisor's `kill -INT -- -PGID` reaches every process of zklock's group, COMMAND
/// included: zklock does not pass on what COMMAND got itself, so COMMAND sees it once (as with a
/// Ctrl-C typed at the terminal).
#[test]
fn sigint_to_zklocks_process_group_reaches_the_command_once() {
    use std::os::unix::process::CommandExt;
    let h = hosts();
    let p = path("sigint-group");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (z, cmd) = start_command_with(&h, &p, dir.path(), &int_counting_script(&log), |c| {
        // zklock leads a process group of its own, as a supervisor starts its jobs.
        c.process_group(0);
    });
    assert!(alive(cmd));
    let group = format!("-{}", z.id());
    let kill = Command::new("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = finish(z, Duration::from_secs(20));
    assert_one_int(&log, &out, "COMMAND saw the group's SIGINT once");
}

/// `zklock --revocable PATH COMMAND` hears `zklock revoke PATH`: it ends COMMAND as --on-lost
/// does (SIGTERM), releases, and exits 81; the next waiter gets the lock; `revoke` said the
/// holder listens.
#[test]
fn revoke_reaches_a_revocable_zklock_holder_and_the_next_waiter_gets_the_lock() {
    let h = hosts();
    let p = path("revocable");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let script = format!(
        "trap 'echo TERM >> {l}; exit 3' TERM; while :; do sleep 0.1; done",
        l = log.display()
    );
    let (z, _cmd) = start_command_opts(&h, &["--revocable"], &p, dir.path(), &script, |_| {});
    let waiter = zklock(&h, &["-w", "20", &p, "echo", "next"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_guarded();
    let c = client(&h, "revoke-watcher");
    let m = Mutex::new(&c, &p).unwrap();
    assert!(
        zklock::testing::eventually(Duration::from_secs(10), || m.participants().unwrap().len()
            == 2),
        "the waiter never queued"
    );
    let (code, out, err) = run(zklock(&h, &["revoke", &p]));
    assert_eq!(code, 0, "{err}");
    assert!(out.trim().starts_with(&format!("{p}/")), "{out}");
    assert!(
        err.contains("asked") && !err.contains("did not make"),
        "{err}"
    );
    let out = finish(z, Duration::from_secs(20));
    let zerr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(81), "{zerr}");
    assert!(zerr.contains("revoke"), "{zerr}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "TERM\n");
    let w = waiter.wait_with_output().unwrap();
    assert_eq!(
        (w.status.code(), String::from_utf8_lossy(&w.stdout).trim()),
        (Some(0), "next"),
        "{}",
        String::from_utf8_lossy(&w.stderr)
    );
}

/// `zklock revoke` of a holder that did not make its lock revocable says so (it will not let
/// go), and the holder keeps its lock.
#[test]
fn revoke_of_a_holder_that_is_not_revocable_says_so() {
    let h = hosts();
    let p = path("not-revocable");
    let dir = tempfile::tempdir().unwrap();
    let (mut z, cmd) = start_command(&h, &p, dir.path(), "exec sleep 30");
    let (code, out, err) = run(zklock(&h, &["revoke", &p]));
    assert_eq!(code, 0, "{err}");
    assert!(out.trim().starts_with(&format!("{p}/")), "{out}");
    assert!(err.contains("did not make its lock revocable"), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(cmd), "a holder that is not revocable keeps going");
    assert!(zklock::testing::process::send_signal(z.id(), libc::SIGTERM));
    let _ = z.wait();
}

/// flock's habits: -w SECONDS, -s / -x, -c COMMAND_STRING, combined short flags, and a --help per
/// subcommand; the manual page is the definition's.
#[test]
fn flock_habits_help_per_subcommand_and_the_man_page() {
    let h = hosts();
    let p = path("habits");
    let (code, out, err) = run(zklock(
        &h,
        &["-w", "5", "-x", "-c", "echo \"$ZKLOCK_PATH\"", &p],
    ));
    assert_eq!((code, out.trim()), (0, p.as_str()), "{err}");
    let (code, _, err) = run(zklock(&h, &["-nv", "-s", &p, "true"]));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("acquired") && err.contains("released"),
        "{err}"
    );
    let (code, out, _) = run(zklock(&h, &["holders", "--help"]));
    assert!(
        code == 0 && out.contains("--json") && out.contains("--watch"),
        "{out}"
    );
    let (code, out, _) = run(zklock(&h, &["revoke", "--help"]));
    assert!(code == 0 && out.contains("NODE"), "{out}");
    let (code, out, _) = run(zklock(&h, &["--help"]));
    assert!(
        code == 0 && out.contains("Exit status") && out.contains("80"),
        "{out}"
    );
    let mut man_cmd = Command::new(ZKLOCK);
    man_cmd.arg("--man");
    let (code, man, _) = run(man_cmd);
    assert_eq!(code, 0);
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man/zklock.1"),
    )
    .unwrap();
    assert!(
        man == committed,
        "man/zklock.1 is not what the command's definition gives: run `zklock --man > man/zklock.1`"
    );
}

/// Every manual page a page of man/ cites (`zklock-revoke(1)`) is in man/ too, and each is the
/// command's definition (`zklock --man=PAGE`).
#[test]
fn every_manual_page_cited_exists_and_is_the_definitions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let mut pages = vec!["zklock".to_string()];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(page) = pages.pop() {
        if !seen.insert(page.clone()) {
            continue;
        }
        let file = dir.join(format!("{page}.1"));
        let committed = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{} is cited but missing: {e}", file.display()));
        let mut c = Command::new(ZKLOCK);
        c.arg(format!("--man={page}"));
        let (code, man, err) = run(c);
        assert_eq!(code, 0, "{page}: {err}");
        assert!(
            man == committed,
            "man/{page}.1 is not the definition's: run `zklock --man={page} > man/{page}.1`"
        );
        // Citations: NAME(1), with roff's escaped hyphens.
        let text = committed.replace("\\-", "-");
        for (i, _) in text.match_indices("(1)") {
            let name: String = text[..i]
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if name.starts_with("zklock") {
                pages.push(name);
            }
        }
    }
    assert!(seen.len() >= 3, "{seen:?}");
}

/// `revoke --help` lists only what revoke uses: no -v, -s, -x (nor the other kind flags).
#[test]
fn revoke_help_lists_only_its_own_options() {
    let (code, out, _) = run(zklock(&hosts(), &["revoke", "--help"]));
    assert_eq!(code, 0);
    for flag in [
        "-v,",
        "--verbose",
        "-s,",
        "-x,",
        "--read",
        "--write",
        "--semaphore",
        "--simple",
    ] {
        assert!(!out.contains(flag), "{flag} in: {out}");
    }
    // Still accepted, as 0.2 took them.
    let (code, _, err) = run(zklock(
        &hosts(),
        &["revoke", "-v", "-x", &path("revoke-quiet")],
    ));
    assert_eq!(code, 0, "{err}");
}

/// A timeout too long for the clock (`-w 1e30`, `-w inf`) is forever, as no -w is; what is no
/// number at all is refused.
#[test]
fn a_timeout_too_long_to_count_is_forever() {
    let h = hosts();
    let p = path("forever");
    for w in ["1e30", "inf"] {
        let (code, out, err) = run(zklock(&h, &["-w", w, &p, "echo", "ran"]));
        assert_eq!((code, out.trim()), (0, "ran"), "-w {w}: {err}");
    }
    let (code, _, err) = run(zklock(&h, &["-w", "nan", &p, "true"]));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("not a number"), "{err}");
}

/// -n bounds the whole call, connect included, and a failed connect says why; a bad path is a
/// usage error found before connecting.
#[test]
fn nonblock_bounds_the_connect_says_why_and_bad_paths_fail_before_connecting() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = format!("127.0.0.1:{port}");
    let t = Instant::now();
    let (code, _, err) = run(zklock(&refused, &["-n", "/p", "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("connection refused"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "{:?} (default: 10 s)",
        t.elapsed()
    );
    let (code, _, err) = run(zklock("no-such-host.invalid:2181", &["-n", "/p", "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("cannot resolve host"), "{err}");
    let t = Instant::now();
    let (code, _, err) = run(zklock(&refused, &["--timeout", "1.5", "/p", "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    for bad in ["relative/path", "/a//b", "/a/"] {
        let t = Instant::now();
        let (code, _, err) = run(zklock(&refused, &["--session-timeout", "30", bad, "true"]));
        assert_eq!(code, 64, "{bad}: {err}");
        assert!(err.contains("invalid argument"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}

/// `holders` finds the kind by itself; a path with foreign children is named as such (65); a
/// mutex on a simple lock's path says what is there.
#[test]
fn holders_finds_the_lock_kind_by_itself() {
    let h = hosts();
    let c = client(&h, "kind-finder");
    let m = path("kind-mutex");
    let rw = path("kind-rw");
    let sem = path("kind-sem");
    let simple = path("kind-simple");
    let mutex = Mutex::new(&c, &m).unwrap();
    let _g1 = mutex.lock().unwrap();
    let rwl = ReadWriteLock::new(&c, &rw).unwrap();
    let _g2 = rwl.read().lock().unwrap();
    let s = Semaphore::new(&c, &sem, 3).unwrap();
    let _l = s.lock().unwrap();
    let sl = SimpleLock::new(&c, &simple).unwrap();
    let _g3 = sl.try_lock().unwrap().unwrap();
    for (p, what) in [
        (&m, "mutex"),
        (&rw, "read"),
        (&sem, "semaphore"),
        (&simple, "simple"),
    ] {
        let (code, out, err) = run(zklock(&h, &["holders", p]));
        assert_eq!(code, 0, "{what}: {err}");
        assert!(
            out.starts_with("holder\t") && out.contains("kind-finder"),
            "{what}: {out}"
        );
        if what == "read" {
            assert!(out.contains("\tread\t"), "{out}");
        }
    }
    // Nothing there: nothing listed.
    assert_eq!(run(zklock(&h, &["holders", &path("kind-none")])).1, "");
    // Children that are no lock.
    let foreign = path("kind-foreign");
    let admin = zklock::testing::Admin::connect(&h).unwrap();
    let parent = foreign.rsplit_once('/').unwrap().0;
    let _ = admin.create(parent, b"");
    admin.create(&foreign, b"").unwrap();
    admin.create(&format!("{foreign}/config"), b"x").unwrap();
    let (code, _, err) = run(zklock(&h, &["holders", &foreign]));
    assert_eq!(code, 65, "{err}");
    assert!(
        err.contains("config") && err.contains("no lock layout"),
        "{err}"
    );
    // A mutex on a simple lock's node: not "unreachable" (69) but what is there, and what
    // takes it (issue 40).
    let (code, _, err) = run(zklock(&h, &["-n", &simple, "true"]));
    assert_eq!(code, 65, "{err}");
    assert!(
        err.contains("is a simple lock's node") && err.contains("--simple"),
        "{err}"
    );
}

/// flock's `-o` (`--close`: COMMAND does not inherit the lock's descriptor) is accepted: a
/// ZooKeeper lock has no descriptor to inherit, so COMMAND runs as without it (issue 40).
#[test]
fn flocks_close_option_is_accepted() {
    let h = hosts();
    let p = path("close");
    for args in [
        &["-o", &p, "echo", "ran"][..],
        &["--close", &p, "echo", "ran"],
        &["-no", &p, "echo", "ran"],
    ] {
        let (code, out, err) = run(zklock(&h, args));
        assert_eq!((code, out.as_str()), (0, "ran\n"), "{args:?}: {err}");
    }
}

/// `zklock revoke PATH` asks a revocable holder to let go (Curator's protocol).
#[test]
fn revoke_asks_a_revocable_holder_and_prints_its_node() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use zklock::Lockable;
    let h = hosts();
    let p = path("revoke");
    let c = client(&h, "asked-one");
    let m = Mutex::per_handle(&c, &p).unwrap();
    let asked = Arc::new(AtomicBool::new(false));
    let a = asked.clone();
    m.make_revocable(Box::new(move || a.store(true, Ordering::SeqCst)))
        .unwrap();
    let _g = m.lock().unwrap();
    let (code, out, err) = run(zklock(&h, &["revoke", &p]));
    assert_eq!(code, 0, "{err}");
    assert!(out.trim().starts_with(&format!("{p}/")), "{out}");
    assert!(!err.contains("did not make"), "it did: {err}");
    let t = Instant::now();
    while !asked.load(Ordering::SeqCst) {
        assert!(t.elapsed() < Duration::from_secs(10), "never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(m.is_held(), "asked, not forced");
    let (code, _, err) = run(zklock(&h, &["revoke", &path("revoke-none")]));
    assert_eq!(code, 0);
    assert!(err.contains("nobody to ask"), "{err}");
}

/// `--server-tick-ms` is the tick the hold's lease reckons with: a 1 s session on servers said
/// to tick every 6 s can never prove its lease renewed, so the command is told the lock is no
/// longer provably held (80); with the servers' real tick (500 ms) it runs to its end.
#[test]
fn the_server_tick_flag_sets_the_tick_the_lease_reckons_with() {
    let h = hosts();
    let p = path("tick");
    let (code, _, err) = run(zklock(
        &h,
        &[
            "--session-timeout",
            "1",
            "--server-tick-ms",
            "500",
            &p,
            "sleep",
            "2",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(zklock(
        &h,
        &[
            "--session-timeout",
            "1",
            "--server-tick-ms",
            "6000",
            &p,
            "sleep",
            "2",
        ],
    ));
    assert_eq!(code, 80, "{err}");
    let (code, _, err) = run(zklock(&h, &["--server-tick-ms", "0", &p, "true"]));
    assert_eq!(code, 64, "{err}");
}

/// Writes `password` and a newline (as `echo` does) to `dir/name`; returns the file's path.
fn password_file(dir: &std::path::Path, name: &str, password: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, format!("{password}\n")).unwrap();
    f.to_str().unwrap().to_string()
}

/// A script that waits until `gate` exists.
fn wait_for(gate: &std::path::Path) -> String {
    format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display())
}

/// Digest credentials from a file or the environment, and creator-only ACLs: the creator
/// holds; another identity is refused with 77 and told whom the servers take it for; its
/// `holders` shows what it may (the queue, with "?" for the ids its ACL hides) and exits 77.
#[test]
fn digest_credentials_and_creator_only_acls() {
    let h = hosts();
    let dir = tempfile::tempdir().unwrap();
    let bob_pw = password_file(dir.path(), "bob", "bob-secret");
    let alice_pw = password_file(dir.path(), "alice", "alice-secret");
    let bob = ["--digest-user", "bob", "--digest-password-file", &bob_pw];
    let alice = [
        "--digest-user",
        "alice",
        "--digest-password-file",
        &alice_pw,
    ];
    let with = |who: &[&str], rest: &[&str]| {
        let v: Vec<&str> = who.iter().chain(rest).copied().collect();
        run(zklock(&h, &v))
    };

    // A path made open by an earlier lock: bob's node under it is his alone.
    let p = path("acl-open-parent");
    assert_eq!(run(zklock(&h, &[&p, "true"])).0, 0);
    let gate = dir.path().join("gate");
    let (mut z, _) = start_command_with(&h, &p, dir.path(), &wait_for(&gate), |c| {
        // From the environment only: nothing of it on the command line.
        c.env("ZKL_DIGEST_USER", "bob")
            .env("ZKL_DIGEST_PASSWORD", "bob-secret")
            .env("ZKL_ACL", "creator");
    });
    let (code, out, err) = with(&bob, &["holders", &p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("holder\t") && !out.contains('?'), "{out}");
    let (code, out, err) = with(&alice, &["holders", &p]);
    assert_eq!(code, 77, "{out}{err}");
    let fields: Vec<&str> = out.trim_end().split('\t').collect();
    assert_eq!((fields[0], fields[2]), ("holder", "?"), "{out}");
    assert!(
        err.contains("not authorized") && err.contains("digest:alice"),
        "{err}"
    );
    let (code, out, err) = with(&alice, &["holders", "--json", &p]);
    assert_eq!(code, 77, "{err}");
    assert!(out.contains("\"holder_id\":null"), "{out}");
    std::fs::write(&gate, "").unwrap();
    assert!(z.wait().unwrap().success());

    // A path bob made creator-only: alice can neither lock under it nor list it.
    let q = unique_root("cli-acl-creator");
    let (code, _, err) = with(&bob, &["--acl", "creator", &q, "true"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = with(&alice, &["-n", &q, "true"]);
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains("not authorized") && err.contains("digest:alice"),
        "{err}"
    );
    let (code, out, err) = with(&alice, &["holders", &q]);
    assert_eq!((code, out.as_str()), (77, ""), "{err}");
    assert!(err.contains("digest:alice"), "{err}");
    // Bob with a wrong password is another identity: refused the same way.
    let wrong = password_file(dir.path(), "wrong", "nope");
    let (code, _, err) = with(
        &["--digest-user", "bob", "--digest-password-file", &wrong],
        &["-n", &q, "true"],
    );
    assert_eq!(code, 77, "{err}");
    // The creator itself is served.
    let (code, out, err) = with(&bob, &[&q, "sh", "-c", "echo in"]);
    assert_eq!((code, out.as_str()), (0, "in\n"), "{err}");
    // No identity for a creator-only ACL: a usage error before connecting; a user without a
    // password says where to put it.
    let (code, _, err) = run(zklock(&h, &["--acl", "creator", &q, "true"]));
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--sasl-user") && err.contains("--tls-cert"),
        "{err}"
    );
    let (code, _, err) = run(zklock(&h, &["--digest-user", "bob", &q, "true"]));
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--digest-password-file") && err.contains("ZKL_DIGEST_PASSWORD"),
        "{err}"
    );
}

/// `zklock ARGS` against `hosts` with none of the ZKL_* variables of the test's environment.
fn zklock_clean(hosts: &str, args: &[&str]) -> Command {
    let mut c = zklock(hosts, args);
    for (k, _) in std::env::vars() {
        if k.starts_with("ZKL_") {
            c.env_remove(k);
        }
    }
    c
}

/// `--tls-ca/--tls-cert/--tls-key ...` for a client certificate of `certs`.
fn tls_args(certs: &TestingCerts, client: &ClientCert) -> Vec<String> {
    let s = |p: &std::path::Path| p.to_str().unwrap().to_string();
    vec![
        "--tls-ca".into(),
        s(certs.ca_path()),
        "--tls-cert".into(),
        s(client.cert_path()),
        "--tls-key".into(),
        s(client.key_path()),
    ]
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Mutual TLS from flags: locks over `tcp+tls://` and over a plain host list (the flags turn
/// TLS on); an encrypted key with its password from a file or the environment; x509
/// identities in creator-only ACLs; and each way it fails says why, with 77.
#[test]
fn mutual_tls_with_files_from_flags() {
    let s = TestingServer::start_tls(ClientAuth::Need).unwrap();
    let certs = s.certs().unwrap();
    let alice = certs.client("alice").unwrap();
    let bob = certs.client("bob").unwrap();
    let p = path("mtls");
    for hosts in [s.connect_string(), s.address()] {
        let mut args = tls_args(certs, &alice);
        args.extend(["-w", "20", &p, "sh", "-c", "echo locked"].map(String::from));
        let (code, out, err) = run(zklock_clean(&hosts, &strs(&args)));
        assert_eq!((code, out.as_str()), (0, "locked\n"), "{hosts}: {err}");
    }
    // holders over TLS.
    let mut args = tls_args(certs, &alice);
    args.extend(["holders", &p].map(String::from));
    let (code, out, err) = run(zklock_clean(&s.connect_string(), &strs(&args)));
    assert_eq!((code, out.as_str()), (0, ""), "{err}");

    // An encrypted key, its password from a file, then from the environment.
    let dir = tempfile::tempdir().unwrap();
    if crate::common::ffi::have("openssl") {
        let pw = password_file(dir.path(), "keypw", "key-secret");
        let enc = dir.path().join("alice.p8");
        let st = Command::new("openssl")
            .args(["pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in"])
            .arg(alice.key_path())
            .arg("-out")
            .arg(&enc)
            .arg("-passout")
            .arg(format!("file:{pw}"))
            .status()
            .unwrap();
        assert!(st.success());
        let enc = enc.to_str().unwrap();
        let cert = alice.cert_path().to_str().unwrap();
        let ca = certs.ca_path().to_str().unwrap();
        let base = ["--tls-ca", ca, "--tls-cert", cert, "--tls-key", enc];
        let with = |extra: &[&str]| -> Vec<String> {
            let tail = [&p as &str, "true"];
            base.iter()
                .chain(extra)
                .chain(&tail)
                .map(|a| a.to_string())
                .collect()
        };
        let (code, _, err) = run(zklock_clean(
            &s.connect_string(),
            &strs(&with(&["--tls-key-password-file", &pw])),
        ));
        assert_eq!(code, 0, "{err}");
        let mut c = zklock_clean(&s.connect_string(), &strs(&with(&[])));
        c.env("ZKL_TLS_KEY_PASSWORD", "key-secret");
        let (code, _, err) = run(c);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = run(zklock_clean(&s.connect_string(), &strs(&with(&[]))));
        assert_eq!(code, 64, "{err}");
        assert!(
            err.contains("encrypted") && err.contains("--tls-key-password-file"),
            "{err}"
        );
    }

    // x509 identities in a creator-only ACL: bob is refused alice's lock, and told who he is.
    let q = unique_root("cli-mtls-creator");
    let mut args = tls_args(certs, &alice);
    args.extend(["--acl", "creator", &q, "true"].map(String::from));
    let (code, _, err) = run(zklock_clean(&s.connect_string(), &strs(&args)));
    assert_eq!(code, 0, "{err}");
    let mut args = tls_args(certs, &bob);
    args.extend(["-w", "10", &q, "true"].map(String::from));
    let (code, _, err) = run(zklock_clean(&s.connect_string(), &strs(&args)));
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains("not authorized") && err.contains("x509:") && err.contains("bob"),
        "{err}"
    );

    // No client certificate; the system's CAs (which do not know the test CA): 77, in words
    // that name the option to give.
    let ca = certs.ca_path().to_str().unwrap();
    for (args, fix) in [
        (&["--tls-ca", ca][..], "(--tls-cert and --tls-key)\n"),
        (&["--tls"], "(--tls-ca)\n"),
    ] {
        let v: Vec<&str> = args
            .iter()
            .copied()
            .chain(["-w", "10", &p, "true"])
            .collect();
        let t = Instant::now();
        let (code, _, err) = run(zklock_clean(&s.connect_string(), &v));
        assert_eq!(code, 77, "{args:?}: {err}");
        assert!(
            err.contains("authentication failed") && err.ends_with(fix),
            "{err}"
        );
        // In the command's words only (issue 40): no Rust item, no C function.
        assert!(!err.contains("::") && !err.contains("zkl_"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(12), "{:?}", t.elapsed());
    }
}

/// Mutual TLS from the environment alone: the command line has the path and the command only.
#[test]
fn mutual_tls_from_the_environment_only() {
    let s = TestingServer::start_tls(ClientAuth::Need).unwrap();
    let certs = s.certs().unwrap();
    let alice = certs.client("alice").unwrap();
    let p = path("mtls-env");
    let dir = tempfile::tempdir().unwrap();
    let env = |c: &mut Command, hosts: &str| {
        c.env("ZKL_HOSTS", hosts)
            .env("ZKL_TLS_CA", certs.ca_path())
            .env("ZKL_TLS_CERT", alice.cert_path())
            .env("ZKL_TLS_KEY", alice.key_path());
    };
    for hosts in [s.connect_string(), s.address()] {
        let mut c = Command::new(ZKLOCK);
        c.args([&p as &str, "sh", "-c", "echo locked"])
            .stdin(Stdio::null());
        env(&mut c, &hosts);
        let (code, out, err) = run(c);
        assert_eq!((code, out.as_str()), (0, "locked\n"), "{hosts}: {err}");
    }
    // While it holds: its command line, as ps shows it, is the path and the command only.
    let gate = dir.path().join("gate");
    let (mut z, _) =
        start_command_with(&s.connect_string(), &p, dir.path(), &wait_for(&gate), |c| {
            env(c, &s.connect_string())
        });
    let argv = std::fs::read(format!("/proc/{}/cmdline", z.id())).unwrap();
    let argv = String::from_utf8_lossy(&argv);
    let key = alice.key_path().to_str().unwrap();
    assert!(!argv.contains("--tls") && !argv.contains(key), "{argv}");
    std::fs::write(&gate, "").unwrap();
    assert!(z.wait().unwrap().success());
    // ZKL_TLS alone: TLS with the system's CAs, which refuse the test CA (77); without it,
    // a plaintext client on the TLS port, told so.
    let mut c = zklock_clean(&s.address(), &["-w", "10", &p, "true"]);
    c.env("ZKL_TLS", "1");
    let (code, _, err) = run(c);
    assert_eq!(code, 77, "{err}");
    let (code, _, err) = run(zklock_clean(&s.address(), &["-w", "5", &p, "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("TLS port") && err.contains("--tls"), "{err}");
}

/// SASL: the password from a file or from the environment, never from the command line (no
/// such option, and nothing of it in what ps shows, nor in COMMAND's environment); a wrong
/// password is 77 and says so; SASL identities in creator-only ACLs.
#[test]
fn sasl_password_from_a_file_or_the_environment_never_argv() {
    let s = TestingServer::start_sasl(&[("bob", "bob-secret"), ("alice", "alice-secret")]).unwrap();
    let h = s.connect_string();
    let dir = tempfile::tempdir().unwrap();
    let bob_pw = password_file(dir.path(), "bob", "bob-secret");
    let p = path("sasl");
    let show_env = "echo \"[$ZKL_SASL_PASSWORD]\"";
    let (code, out, err) = run(zklock_clean(
        &h,
        &[
            "--sasl-user",
            "bob",
            "--sasl-password-file",
            &bob_pw,
            &p,
            "sh",
            "-c",
            show_env,
        ],
    ));
    assert_eq!((code, out.as_str()), (0, "[]\n"), "{err}");
    let mut c = zklock_clean(&h, &[&p, "sh", "-c", show_env]);
    c.env("ZKL_SASL_USER", "bob")
        .env("ZKL_SASL_PASSWORD", "bob-secret");
    let (code, out, err) = run(c);
    // COMMAND does not inherit the password.
    assert_eq!((code, out.as_str()), (0, "[]\n"), "{err}");
    let mut c = zklock_clean(&h, &["--sasl-password-file", &bob_pw, &p, "true"]);
    c.env("ZKL_SASL_USER", "bob");
    assert_eq!(run(c).0, 0);

    // A wrong password: 77, and the message says whose.
    let mut c = zklock_clean(&h, &["--sasl-user", "bob", "-w", "10", &p, "true"]);
    c.env("ZKL_SASL_PASSWORD", "wrong");
    let t = Instant::now();
    let (code, _, err) = run(c);
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains("authentication failed") && err.contains("bob"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(12), "{:?}", t.elapsed());
    // No password: a usage error that says where to put it. On the command line: no such option.
    let (code, _, err) = run(zklock_clean(&h, &["--sasl-user", "bob", &p, "true"]));
    assert_eq!(code, 64, "{err}");
    assert!(
        err.contains("--sasl-password-file") && err.contains("ZKL_SASL_PASSWORD"),
        "{err}"
    );
    for flag in ["--sasl-password", "--password"] {
        let (code, _, err) = run(zklock_clean(
            &h,
            &["--sasl-user", "bob", flag, "bob-secret", &p, "true"],
        ));
        assert_eq!(code, 64, "{err}");
        assert!(err.contains("unexpected argument"), "{err}");
    }

    // What ps shows of a holding zklock, and COMMAND's environment: no password.
    let gate = dir.path().join("gate");
    let (mut z, cmd_pid) = start_command_with(&h, &p, dir.path(), &wait_for(&gate), |c| {
        c.env("ZKL_SASL_USER", "bob")
            .env("ZKL_SASL_PASSWORD", "bob-secret");
    });
    let argv = std::fs::read(format!("/proc/{}/cmdline", z.id())).unwrap();
    assert!(!String::from_utf8_lossy(&argv).contains("bob-secret"));
    let environ = std::fs::read(format!("/proc/{cmd_pid}/environ")).unwrap();
    assert!(!String::from_utf8_lossy(&environ).contains("bob-secret"));
    if crate::common::ffi::have("ps") {
        let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
        assert!(!String::from_utf8_lossy(&ps.stdout).contains("bob-secret"));
    }
    std::fs::write(&gate, "").unwrap();
    assert!(z.wait().unwrap().success());

    // SASL identities in a creator-only ACL.
    let q = unique_root("cli-sasl-creator");
    let (code, _, err) = run(zklock_clean(
        &h,
        &[
            "--sasl-user",
            "bob",
            "--sasl-password-file",
            &bob_pw,
            "--acl",
            "creator",
            &q,
            "true",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    let mut c = zklock_clean(&h, &["--sasl-user", "alice", "-n", &q, "true"]);
    c.env("ZKL_SASL_PASSWORD", "alice-secret");
    let (code, _, err) = run(c);
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("sasl:alice"), "{err}");
}

/// Issue 28: `-w 0.01` and `-w 0.05` on a free lock exited 69 ("ZooKeeper unreachable"): the
/// deadline ran out inside a request (the connect took most of it). A deadline is a timeout:
/// 75, or 0 with the command run when the one round trip found the lock free; never 69. On a
/// held lock, 75.
#[test]
fn a_tiny_wait_is_not_acquired_never_unreachable() {
    let h = hosts();
    let p = path("tiny-wait");
    for w in ["0.001", "0.01", "0.02", "0.05"] {
        for _ in 0..3 {
            let (code, out, err) = run(zklock(&h, &["-w", w, &p, "echo", "ran"]));
            match code {
                0 => assert_eq!(out, "ran\n", "{err}"),
                75 => assert!(out.is_empty() && err.contains("not acquired"), "{out}{err}"),
                _ => panic!("-w {w} on a free lock exited {code}: {err}"),
            }
        }
    }
    let c = client(&h, "holder");
    let m = Mutex::new(&c, &p).unwrap();
    let g = m.lock().unwrap();
    for w in ["0.01", "0.05"] {
        let (code, out, err) = run(zklock(&h, &["-w", w, &p, "echo", "ran"]));
        assert_eq!(code, 75, "-w {w} on a held lock: {out}{err}");
    }
    drop(g);
    assert!(eventually(Duration::from_secs(30), || m
        .participants()
        .unwrap()
        .is_empty()));
}

/// Issue 42: an acquire that says "held" can vouch for it. A waiting `zklock` whose lease ran
/// out while it waited gets its turn and must prove its lease before it runs COMMAND (two
/// round trips to the leader, slowed here by its link); it is frozen (SIGSTOP) while it proves,
/// past its session timeout: the server expires its session and another client takes the
/// lock. Thawed, it must not run COMMAND (before: it ran it, as its acquire returned success
/// for a hold of an expired session, while the other client held the lock).
#[test]
fn a_command_frozen_past_its_session_while_its_hold_is_proven_never_runs() {
    use zklock::testing::{process::send_signal, TcpProxy};
    // zookeeper-client's sync and multi op codes: the proof's two requests (syncs before
    // issue 37, committed checks since).
    const SYNC: i32 = 9;
    const MULTI: i32 = 14;
    let h = hosts();
    let p = path("frozen-proof");
    let holder = client(&h, "holder");
    let m = Mutex::new(&holder, &p).unwrap();
    let g = m.lock().unwrap();
    let proxy = TcpProxy::start(&h).unwrap();
    let mut w = zklock(
        &proxy.connect_string(),
        &["--session-timeout", "3", &p, "--", "echo", "ran"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn_guarded();
    assert!(
        eventually(Duration::from_secs(20), || m
            .participants()
            .is_ok_and(|q| q.len() == 2)),
        "zklock never queued"
    );
    // Longer than the lease of a session that holds nothing (T - T/10 after its connect).
    std::thread::sleep(Duration::from_secs(4));
    proxy.set_server_delay(Duration::from_millis(1000));
    let proofs = || proxy.requests_seen(SYNC) + proxy.requests_seen(MULTI);
    let before = proofs();
    drop(g);
    assert!(
        eventually(Duration::from_secs(20), || proofs() > before),
        "zklock never set out to prove its lease"
    );
    assert!(send_signal(w.id(), libc::SIGSTOP));
    let next = client(&h, "next");
    let mn = Mutex::new(&next, &p).unwrap();
    let got = mn.try_lock_for(Duration::from_secs(30));
    assert!(send_signal(w.id(), libc::SIGCONT));
    proxy.set_server_delay(Duration::ZERO);
    let gn = got
        .unwrap()
        .expect("the other client acquires once the frozen zklock's session expired");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = w.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "zklock did not end after it was thawed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    w.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    w.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    eprintln!("zklock after the thaw: {status:?}; stdout {out:?}; stderr {err:?}");
    assert!(
        !out.contains("ran"),
        "zklock ran its command while another client held the lock ({status:?}, {err})"
    );
    assert!(!status.success(), "zklock exited 0 without its command");
    assert!(gn.is_held());
}

/// One trial of the hand-over: a `zklock` on `holder_hosts` runs a COMMAND that ignores
/// SIGTERM (with a long --kill-after) and appends a heartbeat every 10 ms; `cut` cuts the
/// holder off; another `zklock` on `waiter_hosts` then takes the lock and its COMMAND writes
/// the instant it starts. Returns the margin (ms) from the lost COMMAND's last heartbeat to the
/// next COMMAND's first instant: zklock must have killed the first before the servers could
/// hand the lock on, so it is positive.
fn handover_trial(
    holder_hosts: &str,
    waiter_hosts: &str,
    cut: impl FnOnce(),
    dir: &std::path::Path,
    trial: usize,
) -> f64 {
    let p = path("handover");
    let (beats, next) = (
        dir.join(format!("beats-{trial}")),
        dir.join(format!("next-{trial}")),
    );
    let heartbeat = format!(
        "trap '' TERM; while :; do date +%s%N >> {}; sleep 0.01; done",
        beats.display()
    );
    // The holder's start: a connect that a busy machine's server did not answer within the
    // 2 s session (exit 69, COMMAND never ran) is not the hand-over this measures: started
    // again, up to three times.
    let mut starts = 0;
    let mut holder = loop {
        starts += 1;
        let mut holder = zklock(
            holder_hosts,
            &[
                "--session-timeout",
                "2",
                "--kill-after",
                "30",
                &p,
                "sh",
                "-c",
                &heartbeat,
            ],
        )
        .stderr(Stdio::piped())
        .spawn_guarded();
        let mut ended = None;
        let ran = eventually(Duration::from_secs(30), || {
            ended = holder.try_wait().unwrap();
            std::fs::read_to_string(&beats).is_ok_and(|b| b.lines().count() >= 3) || ended.is_some()
        }) && ended.is_none();
        if ran {
            break holder;
        }
        let mut stderr = String::new();
        if let Some(mut e) = holder.stderr.take() {
            std::io::Read::read_to_string(&mut e, &mut stderr).unwrap();
        }
        assert!(
            ended.is_some_and(|s| s.code() == Some(69)) && starts < 3,
            "trial {trial}: the holder's COMMAND never ran; zklock: {ended:?}: {stderr}"
        );
        eprintln!("trial {trial}: the holder's connect failed, started again: {stderr}");
    };
    cut();
    let first = format!("date +%s%N >> {}", next.display());
    // The waiter's connect: members electing a new leader take no session meanwhile (exit
    // 69 after the connect's 10 s); started again, up to three times.
    let mut tries = 0;
    loop {
        tries += 1;
        let (code, _, err) = run(zklock(waiter_hosts, &["-w", "60", &p, "sh", "-c", &first]));
        if code == 69 && tries < 3 && err.contains("no ZooKeeper session") {
            eprintln!("trial {trial}: the next zklock's connect failed, started again: {err}");
            continue;
        }
        assert_eq!(code, 0, "trial {trial}: the next zklock: {err}");
        break;
    }
    let status = holder.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut holder.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(80), "the holder's exit: {stderr}");
    let read = |f: &std::path::Path| -> Vec<i128> {
        std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let last = *read(&beats).iter().max().unwrap();
    let start = *read(&next).iter().min().unwrap();
    let margin_ms = (start - last) as f64 / 1e6;
    assert!(
        margin_ms > 0.0,
        "trial {trial}: the lost COMMAND's last heartbeat came {:.1} ms after the next COMMAND's first; holder said: {stderr}",
        -margin_ms
    );
    margin_ms
}

/// How many hand-over trials a test runs: 1, or `ZKLOCK_HANDOVER_TRIALS` (200 for the
/// measurement).
fn handover_trials() -> usize {
    std::env::var("ZKLOCK_HANDOVER_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

fn print_margins(what: &str, mut margins: Vec<f64>) {
    margins.sort_by(f64::total_cmp);
    eprintln!(
        "{what}: {} trials: smallest margin {:.1} ms, median {:.1} ms",
        margins.len(),
        margins[0],
        margins[margins.len() / 2]
    );
}

/// The holder's link to the servers goes silent while its COMMAND runs (and ignores SIGTERM,
/// with a long --kill-after): zklock must kill COMMAND before the servers could hand the lock
/// on, so another zklock's COMMAND starts only after the first one's last heartbeat.
/// `ZKLOCK_HANDOVER_TRIALS=200` runs the long measurement and prints the smallest margin.
#[test]
fn a_lost_commands_last_heartbeat_comes_before_the_next_commands_first() {
    let h = hosts();
    let dir = tempfile::tempdir().unwrap();
    let margins = (0..handover_trials())
        .map(|trial| {
            let proxy = zklock::testing::TcpProxy::start(&h).unwrap();
            handover_trial(
                &proxy.connect_string(),
                &h,
                || proxy.set_blackhole(true),
                dir.path(),
                trial,
            )
        })
        .collect();
    print_margins("link silenced", margins);
}

/// As above, but the holder's ZooKeeper member is cut off from the other two (a partition
/// that holds its bytes until the heal), the leader in even trials and a follower in odd ones,
/// while the holder's client still talks to it; the other zklock talks to the other two.
#[test]
fn a_lost_commands_last_heartbeat_comes_before_the_next_commands_first_when_its_member_is_cut_off()
{
    let cluster = zklock::testing::TestingCluster::start_partitionable(3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut margins = Vec::new();
    for trial in 0..handover_trials() {
        assert!(
            eventually(Duration::from_secs(60), || cluster.leader().is_some()
                && (0..3).all(|i| cluster.serving(i))),
            "the ensemble serves"
        );
        let leader = cluster.leader().unwrap();
        let cut = if trial % 2 == 0 {
            leader
        } else {
            (leader + 1) % 3
        };
        let others: Vec<String> = (0..3)
            .filter(|&i| i != cut)
            .map(|i| cluster.member_connect_string(i))
            .collect();
        margins.push(handover_trial(
            &cluster.member_connect_string(cut),
            &others.join(","),
            || cluster.isolate(cut),
            dir.path(),
            trial,
        ));
        cluster.heal(cut);
    }
    print_margins("member cut off from the quorum", margins);
}

/// Durations are printed as people write them, "within 1 s", not as Rust's Debug writes them
/// ("within 999.98172ms", "2.999986386s") (issue 40).
#[test]
fn durations_are_printed_for_people() {
    // A server that takes connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hosts = silent.local_addr().unwrap().to_string();
    let (code, _, err) = run(zklock(&hosts, &["-w", "1", &path("durations"), "true"]));
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("within 1 s:"), "{err}");
    // The whole of stderr: no duration with nine decimals, none of Debug's "ms"/"s" glued on.
    let glued = regex_lite_glued(&err);
    assert!(glued.is_empty(), "{glued:?} in {err}");
}

/// Numbers glued to a unit as Debug prints durations (`1.5s`, `999.98ms`).
fn regex_lite_glued(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ':' || c == ',')
        .filter(|w| {
            let unit = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
            w.len() > unit.len()
                && w.starts_with(|c: char| c.is_ascii_digit())
                && ["s", "ms", "µs", "ns"].contains(&unit)
        })
        .map(str::to_string)
        .collect()
}
