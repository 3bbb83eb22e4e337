//! The nemesis soak: every recipe at once under real faults, and a check of every hold.
//!
//! Run it with `scripts/soak.sh [minutes]` (CI: 1 minute). By hand:
//! `cargo run --features testing --example soak -- --minutes 5` (`--help` for the knobs).
//!
//! One binary, two roles. The **coordinator** (no subcommand) starts a three-member ensemble
//! whose quorum links go through proxies ([`TestingCluster::start_partitionable`]), puts each
//! client process behind proxies of its own (one [`TcpProxy`] per member), and starts the
//! client processes (`soak client ...`). A *busy* client (sessions of 3 and 4 s) runs one thread
//! per workload, all at once: a mutex, a semaphore mutex, a simple lock, a read-write lock's
//! writer (which downgrades to a read hold now and then) and a reader, a semaphore of 3 leases,
//! and a multi-lock over the mutex and the semaphore mutex; each acquire is blocking (with a
//! cancel armed), bounded by a random timeout, or try-once, and a canceller thread cancels some
//! of them. A *quiet* client (sessions of 1 and 2 s: shorter than the followers' syncLimit x
//! tickTime) holds one exclusive lock for seconds at a time and sends little else: the holder
//! that a follower cut off from its leader can go on answering after the leader expired it.
//!
//! Meanwhile nemeses inject faults: one on the servers (kill and restart the leader or a
//! follower; partition a follower, with the clients connected to it, from the rest, preferably
//! while a quiet client holds a lock through it; or partition a follower for less than
//! syncLimit x tickTime while the clients connected to it move to other members: their
//! connection to it is cut, they may come back to it, it is cut again and refused), one on the
//! clients (SIGSTOP past or short of the session timeout, black-hole a client's connections,
//! reset them, drop one reply, kill a client and start a new one, or have a client fork a
//! child, through libc's fork or the raw clone system call, that lets go of every handle it
//! inherited and exits: nothing of the parent's may change, and a forked child must exit at
//! once; a cloned one may hang on a lock of libc's and is killed). A partition holds bytes, as
//! a real one does ([`TestingCluster::isolate`]): what the follower forwarded before or during
//! it reaches the leader at the heal, and is applied if the members had not yet given up on
//! each other. Each kind comes up once per round, in a random order. With `--all-at-once true`
//! (what `scripts/soak.sh` runs) every kind overlaps: server faults come twice as often and a
//! second client nemesis faults the clients' networks while the first one works.
//!
//! Every client writes its events as JSON lines with CLOCK_MONOTONIC timestamps (one clock for
//! every process of the machine): `acq` when an acquire returned a hold, `chk` each time the
//! holder checked `is_held()` and was told Held (taken after the answer: the holder acts only
//! after such a check), `lost` when it was told otherwise, `rel` when it called release. A hold
//! is judged on its *believed* interval, from its acquire's return to its last `chk`; a hold
//! never believed is not judged. The checks: no two exclusive holders of one path, no writer
//! beside a reader, never more than 3 leases, fencing tokens strictly increasing in order of
//! acquisition among the believed holders of an exclusive lock. At the end, with every fault
//! healed: each client stops working and idles with its session open, and none of them may
//! still own a lock node (a leak); then they exit, and no lock node may be left under the
//! soak's root, and every lock must be acquirable. The judge is checked on fabricated
//! violations before each run. One summary line; exit status 1 on any violation, each printed
//! with its holds and the faults before it; 2 if the soak itself failed (a member that would
//! not restart). The events, faults, client logs and (on a violation) the servers' logs and
//! transaction logs stay in the results directory (`--out`, default `target/soak/<time>`); a
//! violation's evidence says who removed each lock node (session, client, zxid, transaction),
//! read with ZooKeeper's `TxnLogToolkit`.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zklock::testing::{eventually, Admin, TcpProxy, TestingCluster};
use zklock::{
    Client, Deadline, LeaderElection, Lockable, MultiLock, Mutex, Options, ReadWriteLock,
    Semaphore, SemaphoreMutex, SimpleLock,
};

const ROOT: &str = "/soak";
const MUTEX: &str = "/soak/mutex";
const SMUTEX: &str = "/soak/smutex";
const SIMPLE: &str = "/soak/simple";
const RW: &str = "/soak/rw";
const SEM: &str = "/soak/sem";
/// A leader election: a hold is a leadership, believed while `is_leader()`.
const ELECTION: &str = "/soak/election";
const LEASES: u32 = 3;
/// The servers' tickTime (`TestingCluster`'s zoo.cfg).
const TICK: Duration = Duration::from_millis(500);

/// The fault kinds, in the order of the summary line.
const FAULT_KINDS: [&str; 14] = [
    "kill-leader",
    "kill-follower",
    "partition",
    "partition-move",
    "leader-cut",
    "rolling-limits",
    "sigstop-long",
    "sigstop-short",
    "blackhole",
    "reset",
    "drop-reply",
    "kill-client",
    "fork-child",
    "clone-child",
];

/// What went wrong with the soak's own machinery (a member that would not restart, a client
/// that would not start or stop): not a violation, but the run did not do all its job.
static PROBLEMS: StdMutex<Vec<String>> = StdMutex::new(Vec::new());

fn problem(msg: String) {
    let first = msg.lines().next().unwrap_or("").to_string();
    eprintln!("soak: PROBLEM {first}");
    PROBLEMS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(first);
}

/// CLOCK_MONOTONIC now, in nanoseconds: the same clock in every process of the machine.
fn now_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// xorshift64*: enough randomness for a nemesis, and no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut r = Rng((seed ^ 0x9E37_79B9_7F4A_7C15) | 1);
        r.next();
        r
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi.saturating_sub(lo) + 1)
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64 - 1) as usize]
    }
}

/// Fault kinds dealt like cards: each kind once per round, in a random order, so that even a
/// short run injects every kind.
struct Deck {
    kinds: &'static [&'static str],
    left: Vec<&'static str>,
}

impl Deck {
    fn new(kinds: &'static [&'static str]) -> Deck {
        Deck {
            kinds,
            left: Vec::new(),
        }
    }
    fn deal(&mut self, rng: &mut Rng) -> &'static str {
        if self.left.is_empty() {
            self.left = self.kinds.to_vec();
        }
        let i = rng.range(0, self.left.len() as u64 - 1) as usize;
        self.left.swap_remove(i)
    }
    /// Puts a kind back (it could not be injected now).
    fn undo(&mut self, kind: &'static str) {
        self.left.push(kind);
    }
}

const CLIENT_FAULTS: [&str; 8] = [
    "sigstop-long",
    "sigstop-short",
    "blackhole",
    "reset",
    "drop-reply",
    "kill-client",
    "fork-child",
    "clone-child",
];
const SERVER_FAULTS: [&str; 6] = [
    "kill-leader",
    "kill-follower",
    "partition",
    "partition-move",
    "leader-cut",
    "rolling-limits",
];
/// The client faults that need no client process of their own (only its proxies): what the
/// second client nemesis of `--all-at-once` deals.
const NET_FAULTS: [&str; 3] = ["blackhole", "reset", "drop-reply"];

/// `--name value` arguments.
struct Args(HashMap<String, String>);

impl Args {
    fn parse(args: &[String]) -> Args {
        let mut m = HashMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if let Some(k) = a.strip_prefix("--") {
                m.insert(k.to_string(), it.next().cloned().unwrap_or_default());
            }
        }
        Args(m)
    }
    fn get<T: std::str::FromStr>(&self, k: &str, default: T) -> T {
        self.0
            .get(k)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
    fn text(&self, k: &str) -> Option<String> {
        self.0.get(k).cloned()
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("client") {
        client_main(&Args::parse(&args[1..]));
        return ExitCode::SUCCESS;
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!(
            "usage: soak [--minutes M] [--clients N] [--quiet N] [--session-ms MS,..] [--quiet-session-ms MS,..] [--seed S] [--out DIR] [--all-at-once true] [--txnlog true]"
        );
        return ExitCode::SUCCESS;
    }
    match coordinator(&Args::parse(&args)) {
        Ok(false) => ExitCode::FAILURE,
        Ok(true) if PROBLEMS.lock().map_or(true, |p| !p.is_empty()) => ExitCode::from(2),
        Ok(true) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak: could not run: {e}");
            ExitCode::from(2)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The client process.
// ---------------------------------------------------------------------------------------------

/// The client's event log: one `write` per line, so that a line is whole or absent even if the
/// process is killed.
struct EventLog(StdMutex<File>);

impl EventLog {
    fn put(&self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(line.as_bytes());
    }
}

#[derive(Clone, Copy, Debug)]
enum Work {
    Mutex,
    SemaphoreMutex,
    Simple,
    RwWriter,
    RwReader,
    Semaphore,
    Multi,
    Election,
}

const WORKS: [(Work, &str); 8] = [
    (Work::Mutex, "mutex"),
    (Work::SemaphoreMutex, "smutex"),
    (Work::Simple, "simple"),
    (Work::RwWriter, "writer"),
    (Work::RwReader, "reader"),
    (Work::Semaphore, "sem"),
    (Work::Multi, "multi"),
    (Work::Election, "election"),
];

fn client_main(a: &Args) {
    let id = a.text("id").unwrap_or_else(|| "?".into());
    let hosts = a.text("hosts").expect("--hosts");
    let events = a.text("events").expect("--events");
    let session = Duration::from_millis(a.get("session-ms", 4000));
    let seed: u64 = a.get("seed", 1);
    let quiet = a.get("quiet", false);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&events)
        .expect("open the event log");
    let log = Arc::new(EventLog(StdMutex::new(file)));
    log.put(json!({"e": "start", "t": now_ns(), "c": id, "pid": std::process::id()}));
    // The coordinator writes `stop` to our stdin (finish, release, stay connected and idle),
    // then closes it (close the session and exit).
    let stop = Arc::new(AtomicBool::new(false));
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    // Whether the child is made by the raw clone system call (else by fork).
    let (fork_tx, fork_rx) = mpsc::channel::<bool>();
    {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while matches!(io::stdin().read_line(&mut line), Ok(n) if n > 0) {
                match line.trim() {
                    "stop" => stop.store(true, Ordering::SeqCst),
                    // The coordinator's fork faults.
                    "fork" => {
                        let _ = fork_tx.send(false);
                    }
                    "clone" => {
                        let _ = fork_tx.send(true);
                    }
                    _ => {}
                }
                line.clear();
            }
            stop.store(true, Ordering::SeqCst);
            let _ = exit_tx.send(());
        });
    }
    let options = Options::default()
        .session_timeout(session)
        .connect_timeout(Duration::from_secs(5))
        .server_tick_time(TICK)
        .holder_id(format!("soak-{id}"));
    let client = loop {
        match Client::connect(&hosts, options.clone()) {
            Ok(c) => break c,
            Err(e) => {
                log.put(json!({"e": "err", "t": now_ns(), "w": format!("{id}/connect"), "x": e.to_string()}));
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    };
    // A busy client runs every workload at once; a quiet one holds one exclusive lock for long
    // stretches and sends little else (pings, its checks' renewals): the holder a cut-off
    // follower can keep answering.
    let works: Vec<(Work, String)> = if quiet {
        let (w, name) =
            [WORKS[0], WORKS[1], WORKS[2], WORKS[3]][((seed ^ (seed >> 32)) % 4) as usize];
        vec![(w, format!("quiet-{name}"))]
    } else {
        WORKS.iter().map(|(w, n)| (*w, n.to_string())).collect()
    };
    // Each session this client has (a new one after an expiry): the transaction logs name
    // sessions, the evidence names clients.
    {
        let (client, log, stop) = (client.clone(), log.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut last = 0;
            while !stop.load(Ordering::SeqCst) {
                let sid = client.session_id();
                if sid != last && sid != 0 {
                    log.put(json!({"e": "session", "t": now_ns(), "sid": sid}));
                    last = sid;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
    }
    // The fork fault: a child forked while this client's workers hold and wait lets go of
    // every inherited handle and exits, as a pre-fork server's worker or a Python child does;
    // nothing of this process's may change (the judge sees it if a hold of ours goes).
    {
        let (client, log) = (client.clone(), log.clone());
        std::thread::spawn(move || {
            while let Ok(raw) = fork_rx.recv() {
                let handles: Vec<Arc<dyn Lockable>> = INHERITABLE
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                let inherited = client.clone();
                let t = now_ns();
                let work = move || {
                    for h in &handles {
                        let _ = h.release();
                    }
                    drop(handles);
                    inherited.close();
                    0
                };
                let child = if raw {
                    zklock::testing::process::clone_child(work)
                } else {
                    zklock::testing::process::fork_child(work)
                };
                let outcome = match child {
                    Ok(pid) => {
                        match zklock::testing::process::wait_child(pid, Duration::from_secs(10)) {
                            Some(code) => format!("exit {code}"),
                            None => {
                                signal(pid, libc::SIGKILL);
                                let _ = zklock::testing::process::wait_child(
                                    pid,
                                    Duration::from_secs(5),
                                );
                                "hung: killed after 10 s".to_string()
                            }
                        }
                    }
                    Err(e) => format!("fork failed: {e}"),
                };
                let how = if raw { "clone" } else { "fork" };
                log.put(json!({"e": "fork", "t": t, "x": outcome, "how": how}));
            }
        });
    }
    let mut threads = Vec::new();
    for (i, (work, name)) in works.into_iter().enumerate() {
        let (client, log, stop) = (client.clone(), log.clone(), stop.clone());
        let wid = format!("{id}/{name}");
        let rng = Rng::new(seed.wrapping_mul(31).wrapping_add(i as u64 + 1));
        threads.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || worker(work, wid, client, log, stop, rng, quiet))
                .expect("spawn a worker"),
        );
    }
    for t in threads {
        let _ = t.join();
    }
    // Idle with the session open: whatever lock node of ours is left now was leaked.
    log.put(json!({"e": "idle", "t": now_ns(), "sid": client.session_id()}));
    let _ = exit_rx.recv_timeout(Duration::from_secs(300));
    client.close();
    log.put(json!({"e": "exit", "t": now_ns()}));
}

/// Every lock handle of this client process: what a forked child inherits and lets go of.
static INHERITABLE: StdMutex<Vec<Arc<dyn Lockable>>> = StdMutex::new(Vec::new());

/// One workload's locks: what it acquires, the holds an acquire makes (path, lock whose token
/// it is), its mode, and the read half a writer downgrades to.
struct Handles {
    main: Arc<dyn Lockable>,
    /// For a multi-lock: each lock's path and handle (each gets a hold record of its own).
    parts: Vec<(&'static str, Arc<dyn Lockable>)>,
    path: &'static str,
    mode: &'static str,
    downgrade: Option<Arc<dyn Lockable>>,
    /// Long holds, blocking acquires (a quiet client).
    quiet: bool,
}

fn handles(work: Work, client: &Client, quiet: bool) -> zklock::Result<Handles> {
    let one = |main: Arc<dyn Lockable>, path, mode| Handles {
        main,
        parts: Vec::new(),
        path,
        mode,
        downgrade: None,
        quiet,
    };
    Ok(match work {
        Work::Mutex => one(Arc::new(Mutex::new(client, MUTEX)?), MUTEX, "x"),
        Work::SemaphoreMutex => one(Arc::new(SemaphoreMutex::new(client, SMUTEX)?), SMUTEX, "x"),
        Work::Simple => one(Arc::new(SimpleLock::new(client, SIMPLE)?), SIMPLE, "x"),
        Work::RwReader => one(
            Arc::new(ReadWriteLock::new(client, RW)?.read_lock()),
            RW,
            "r",
        ),
        Work::RwWriter => {
            let rw = ReadWriteLock::new(client, RW)?;
            let mut h = one(Arc::new(rw.write_lock()), RW, "w");
            h.downgrade = Some(Arc::new(rw.read_lock()));
            h
        }
        Work::Semaphore => one(Arc::new(Semaphore::new(client, SEM, LEASES)?), SEM, "l"),
        Work::Election => one(
            Arc::new(LeaderElection::new(client, ELECTION)?),
            ELECTION,
            "x",
        ),
        Work::Multi => {
            let m: Arc<dyn Lockable> = Arc::new(Mutex::new(client, MUTEX)?);
            let s: Arc<dyn Lockable> = Arc::new(SemaphoreMutex::new(client, SMUTEX)?);
            let multi = MultiLock::from_boxed(vec![Box::new(m.clone()), Box::new(s.clone())]);
            Handles {
                main: Arc::new(multi),
                parts: vec![(MUTEX, m), (SMUTEX, s)],
                path: "",
                mode: "x",
                downgrade: None,
                quiet,
            }
        }
    })
}

/// Cancels the attempt numbered `n` at `at`, if it is still under way then (a cancel is
/// sticky: one made after the attempt ended would end the next one, see [`Canceller::ended`]).
struct Canceller {
    tx: mpsc::Sender<(u64, Instant)>,
    current: Arc<StdMutex<u64>>,
    lock: Arc<dyn Lockable>,
}

impl Canceller {
    fn start(lock: Arc<dyn Lockable>) -> Canceller {
        let (tx, rx) = mpsc::channel::<(u64, Instant)>();
        let current = Arc::new(StdMutex::new(0));
        let (cur, l) = (current.clone(), lock.clone());
        std::thread::spawn(move || {
            while let Ok((n, at)) = rx.recv() {
                std::thread::sleep(at.saturating_duration_since(Instant::now()));
                let cur = cur.lock().unwrap();
                if *cur == n {
                    l.cancel();
                }
            }
        });
        Canceller { tx, current, lock }
    }

    /// Attempt `n` begins.
    fn begins(&self, n: u64) {
        *self.current.lock().unwrap() = n;
    }

    /// The attempt has returned: no cancel is made for it from now on, and one made after it
    /// returned is forgotten.
    fn ended(&self) {
        *self.current.lock().unwrap() = 0;
        self.lock.reset_cancel();
    }
}

fn worker(
    work: Work,
    wid: String,
    client: Client,
    log: Arc<EventLog>,
    stop: Arc<AtomicBool>,
    mut rng: Rng,
    quiet: bool,
) {
    let h = loop {
        match handles(work, &client, quiet) {
            Ok(h) => break h,
            Err(e) => {
                log.put(json!({"e": "err", "t": now_ns(), "w": wid, "x": e.to_string()}));
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    {
        let mut all = INHERITABLE.lock().unwrap_or_else(|e| e.into_inner());
        all.push(h.main.clone());
        all.extend(h.parts.iter().map(|(_, l)| l.clone()));
        all.extend(h.downgrade.clone());
    }
    let canceller = Canceller::start(h.main.clone());
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        // Blocking (always with a cancel armed, so a stuck queue cannot stop the worker for
        // good), a random timeout (sometimes cancelled earlier), or try-once.
        let roll = if quiet { 0 } else { rng.range(0, 99) };
        let (deadline, cancel_after) = if quiet {
            (Deadline::Forever, Some(rng.ms(20_000, 30_000)))
        } else if roll < 25 {
            (Deadline::Forever, Some(rng.ms(100, 6000)))
        } else if roll < 70 {
            let t = rng.ms(0, 3000);
            let c = rng.chance(0.2).then(|| rng.ms(0, t.as_millis() as u64));
            (Deadline::after(t), c)
        } else {
            (Deadline::TryOnce, None)
        };
        canceller.begins(n);
        if let Some(c) = cancel_after {
            let _ = canceller.tx.send((n, Instant::now() + c));
        }
        let r = h.main.acquire(deadline);
        canceller.ended();
        let t = now_ns();
        match r {
            Ok(Some(token)) => hold(&h, &wid, n, token, t, &log, &mut rng),
            Ok(None) => {
                log.put(json!({"e": "none", "t": t, "w": wid}));
            }
            Err(e) => {
                log.put(json!({"e": "err", "t": t, "w": wid, "x": e.to_string()}));
                std::thread::sleep(rng.ms(10, 200));
            }
        }
        std::thread::sleep(rng.ms(0, 40));
    }
}

/// Checks `lock` and records the answer for each hold, timestamped after the answer came (the
/// holder acts after it: a believed interval ends no earlier than this).
fn check(lock: &dyn Lockable, ids: &[String], log: &EventLog) -> bool {
    let state = lock.hold_state();
    let t = now_ns();
    let held = state == zklock::HoldState::Held;
    for h in ids {
        if held {
            log.put(json!({"e": "chk", "t": t, "h": h}));
        } else {
            log.put(json!({"e": "lost", "t": t, "h": h, "s": format!("{state:?}")}));
        }
    }
    held
}

/// Acts while believing (checks every few ms), for a random while.
fn act(lock: &dyn Lockable, ids: &[String], log: &EventLog, rng: &mut Rng, quiet: bool) -> bool {
    // Mostly short holds (many handoffs); some long enough to span a fault (a partition, a
    // pause), so that a holder keeps checking while its session may be expiring.
    let hold_for = if quiet {
        rng.ms(2000, 10_000)
    } else if rng.chance(0.2) {
        rng.ms(1000, 10_000)
    } else {
        rng.ms(0, 300)
    };
    let pause = if quiet { (50, 200) } else { (2, 30) };
    let start = Instant::now();
    let mut held = check(lock, ids, log);
    while held && start.elapsed() < hold_for {
        std::thread::sleep(rng.ms(pause.0, pause.1));
        held = check(lock, ids, log);
    }
    held
}

fn release(lock: &dyn Lockable, ids: &[String], log: &EventLog) {
    let t = now_ns();
    let r = match lock.release() {
        Ok(()) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    for h in ids {
        log.put(json!({"e": "rel", "t": t, "h": h, "r": r}));
    }
}

fn hold(h: &Handles, wid: &str, n: u64, token: i64, t: u64, log: &EventLog, rng: &mut Rng) {
    let hid = format!("{wid}/{n}");
    let holds: Vec<(String, &str, i64)> = if h.parts.is_empty() {
        vec![(hid.clone(), h.path, token)]
    } else {
        h.parts
            .iter()
            .map(|(p, l)| {
                (
                    format!("{hid}{p}"),
                    *p,
                    l.fencing_token().unwrap_or(i64::MIN),
                )
            })
            .collect()
    };
    for (id, path, token) in &holds {
        log.put(json!({"e": "acq", "t": t, "h": id, "p": path, "m": h.mode, "k": token}));
    }
    let ids: Vec<String> = holds.into_iter().map(|(id, _, _)| id).collect();
    let held = act(&*h.main, &ids, log, rng, h.quiet);
    let Some(read) = h.downgrade.as_ref().filter(|_| held && rng.chance(0.4)) else {
        release(&*h.main, &ids, log);
        return;
    };
    // Downgrade: take the read lock while holding the write lock, then let the write lock go.
    let r = read.acquire(Deadline::after(Duration::from_secs(2)));
    let t = now_ns();
    match r {
        Ok(Some(token)) => {
            let rid = vec![format!("{hid}d")];
            log.put(json!({"e": "acq", "t": t, "h": rid[0], "p": h.path, "m": "r", "k": token, "d": true}));
            // The first look right after the acquire (the write lock's release may take long
            // under faults, and the lease may run out meanwhile).
            check(&**read, &rid, log);
            release(&*h.main, &ids, log);
            act(&**read, &rid, log, rng, h.quiet);
            release(&**read, &rid, log);
        }
        Ok(None) => {
            log.put(json!({"e": "none", "t": t, "w": format!("{wid}/downgrade")}));
            release(&*h.main, &ids, log);
        }
        Err(e) => {
            log.put(
                json!({"e": "err", "t": t, "w": format!("{wid}/downgrade"), "x": e.to_string()}),
            );
            release(&*h.main, &ids, log);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The coordinator.
// ---------------------------------------------------------------------------------------------

/// One injected fault: kind, target, when (CLOCK_MONOTONIC ns).
#[derive(Clone, Debug)]
struct Fault {
    kind: &'static str,
    target: String,
    start: u64,
    end: u64,
}

type Faults = Arc<StdMutex<Vec<Fault>>>;

fn record(faults: &Faults, kind: &'static str, target: String, start: u64) {
    let f = Fault {
        kind,
        target,
        start,
        end: now_ns(),
    };
    faults.lock().unwrap_or_else(|e| e.into_inner()).push(f);
}

/// A client slot's network: its proxies (one per member), and a lock that one fault at a time
/// holds on it (the two nemeses may both want it).
struct Net {
    index: usize,
    proxies: Vec<TcpProxy>,
    busy: StdMutex<()>,
    quiet: bool,
    session: Duration,
    /// The event log of the slot's current process.
    events: StdMutex<PathBuf>,
}

impl Net {
    /// Whether the slot's client holds a lock now, by its event log: its last hold event is an
    /// acquire or a check that said Held.
    fn holding(&self) -> bool {
        let path = self
            .events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // The tail of the log is enough.
        let Ok(mut f) = File::open(path) else {
            return false;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut tail = Vec::new();
        if f.seek(SeekFrom::Start(len.saturating_sub(16 * 1024)))
            .is_err()
            || f.read_to_end(&mut tail).is_err()
        {
            return false;
        }
        String::from_utf8_lossy(&tail)
            .lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| match v.get("e").and_then(Value::as_str) {
                Some("acq" | "chk") => Some(true),
                Some("lost" | "rel" | "idle" | "exit") => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }
}

/// One client slot: its network and its current process.
struct Slot {
    index: usize,
    incarnation: usize,
    session: Duration,
    /// A quiet client (one long-held lock) rather than a busy one (every workload).
    quiet: bool,
    net: Arc<Net>,
    child: Option<Child>,
}

impl Slot {
    fn id(&self) -> String {
        format!("{}.{}", self.index, self.incarnation)
    }
    fn hosts(&self) -> String {
        self.net
            .proxies
            .iter()
            .map(|p| p.connect_string())
            .collect::<Vec<_>>()
            .join(",")
    }
    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

struct Run {
    out: PathBuf,
    exe: PathBuf,
    seed: u64,
}

impl Run {
    fn spawn(&self, slot: &mut Slot) -> io::Result<()> {
        let id = slot.id();
        let events = self.out.join(format!("events-{id}.jsonl"));
        *slot.net.events.lock().unwrap_or_else(|e| e.into_inner()) = events.clone();
        let stderr = File::create(self.out.join(format!("client-{id}.log")))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("client")
            .args(["--id", &id, "--hosts", &slot.hosts()])
            .arg("--events")
            .arg(&events)
            .args([
                "--session-ms",
                &slot.session.as_millis().to_string(),
                "--seed",
                &(self.seed ^ ((slot.index as u64) << 32) ^ slot.incarnation as u64).to_string(),
                "--quiet",
                &slot.quiet.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::from(stderr.try_clone()?))
            .stderr(Stdio::from(stderr));
        zklock::testing::process::die_with_parent(&mut cmd);
        slot.child = Some(cmd.spawn()?);
        Ok(())
    }
}

fn signal(pid: u32, sig: i32) {
    zklock::testing::process::send_signal(pid, sig);
}

/// The ops a lock acquire or release sends (create, create2, delete, exists, getData,
/// getChildren, getChildren2, sync, multi), for the one-shot proxy faults; deletes (a release,
/// a cancelled attempt's clean-up) and creates are where a lost reply is most dangerous, so
/// they come up more often.
const OPS: [i32; 14] = [2, 2, 2, 2, 1, 15, 15, 14, 3, 4, 8, 12, 9, 2];

/// The proxy through which the client of `slot` is connected now, if any.
fn live_proxy(net: &Net) -> Option<&TcpProxy> {
    net.proxies.iter().find(|p| p.connections() > 0)
}

/// One client fault on a random slot; returns false if nothing was injected.
fn client_fault(
    kind: &'static str,
    run: &Run,
    slots: &mut [Slot],
    rng: &mut Rng,
    faults: &Faults,
) -> bool {
    let i = rng.range(0, slots.len() as u64 - 1) as usize;
    let net = slots[i].net.clone();
    let Ok(_busy) = net.busy.try_lock() else {
        return false;
    };
    let slot = &mut slots[i];
    let Some(pid) = slot.pid() else { return false };
    let session = slot.session.as_millis() as u64;
    let start = now_ns();
    let target = format!("client {}", slot.id());
    match kind {
        "sigstop-long" | "sigstop-short" => {
            let d = if kind == "sigstop-long" {
                rng.ms(session * 13 / 10, session * 5 / 2)
            } else {
                rng.ms(session / 10, session * 6 / 10)
            };
            signal(pid, libc::SIGSTOP);
            std::thread::sleep(d);
            signal(pid, libc::SIGCONT);
            record(faults, kind, format!("{target} for {d:?}"), start);
        }
        "blackhole" | "reset" | "drop-reply" => {
            return net_fault(kind, &slot.net, &target, rng, faults);
        }
        "fork-child" | "clone-child" => {
            let Some(stdin) = slot.child.as_mut().and_then(|c| c.stdin.as_mut()) else {
                return false;
            };
            let word: &[u8] = if kind == "fork-child" {
                b"fork\n"
            } else {
                b"clone\n"
            };
            if stdin.write_all(word).and_then(|()| stdin.flush()).is_err() {
                return false;
            }
            record(faults, kind, target, start);
        }
        "kill-client" => {
            signal(pid, libc::SIGKILL);
            if let Some(mut c) = slot.child.take() {
                let _ = c.wait();
            }
            record(faults, kind, target, start);
            std::thread::sleep(rng.ms(0, 1500));
            slot.incarnation += 1;
            if let Err(e) = run.spawn(slot) {
                problem(format!("could not start client {}: {e}", slot.id()));
            }
        }
        _ => unreachable!(),
    }
    true
}

/// One fault on a client's network (its proxies): black-hole it, reset a connection at a
/// request, drop one reply. The caller holds `net.busy`. Returns false if nothing was injected.
fn net_fault(kind: &'static str, net: &Net, target: &str, rng: &mut Rng, faults: &Faults) -> bool {
    let session = net.session.as_millis() as u64;
    let start = now_ns();
    match kind {
        "blackhole" => {
            let d = rng.ms(session / 4, session * 2);
            for p in &net.proxies {
                p.set_blackhole(true);
            }
            std::thread::sleep(d);
            let cut = rng.chance(0.5);
            for p in &net.proxies {
                p.set_blackhole(false);
                if cut {
                    p.cut_all();
                }
            }
            let how = if cut { ", then cut" } else { "" };
            record(faults, kind, format!("{target} for {d:?}{how}"), start);
        }
        "reset" => {
            let Some(p) = live_proxy(net) else {
                return false;
            };
            let op = *rng.pick(&OPS);
            p.reset_at_next_op(op);
            let fired = eventually(Duration::from_secs(3), || !p.reset_pending());
            if !fired {
                // Disarm (no request has op -1) and close its connections instead.
                p.reset_at_next_op(-1);
                p.cut_all();
            }
            let how = if fired {
                format!("reset at op {op}")
            } else {
                "closed".into()
            };
            record(faults, kind, format!("{target}: {how}"), start);
        }
        "drop-reply" => {
            let Some(p) = live_proxy(net) else {
                return false;
            };
            let before = p.replies_dropped();
            let mut fired = None;
            for _ in 0..3 {
                let op = *rng.pick(&OPS);
                p.drop_reply_of_next_op(op);
                if eventually(Duration::from_secs(2), || p.replies_dropped() > before) {
                    fired = Some(op);
                    break;
                }
                p.drop_reply_of_next_op(-1);
            }
            let Some(op) = fired else { return false };
            record(faults, kind, format!("{target}: reply to op {op}"), start);
        }
        _ => unreachable!(),
    }
    true
}

/// Which client slots are connected to member `m` now (through their proxy to it).
/// A client's proxies to every member but `member`.
fn proxies_but(net: &Net, member: usize) -> impl Iterator<Item = &TcpProxy> {
    net.proxies
        .iter()
        .enumerate()
        .filter(move |(m, _)| *m != member)
        .map(|(_, p)| p)
}

fn clients_on(nets: &[Arc<Net>], m: usize) -> Vec<usize> {
    (0..nets.len())
        .filter(|&s| nets[s].proxies[m].connections() > 0)
        .collect()
}

/// One server fault; waits until every member serves again.
fn server_fault(
    kind: &'static str,
    cluster: &mut TestingCluster,
    nets: &[Arc<Net>],
    rng: &mut Rng,
    faults: &Faults,
) -> bool {
    let n = cluster.len();
    let Some(leader) = cluster.leader() else {
        std::thread::sleep(Duration::from_millis(500));
        return false;
    };
    let follower = (leader + 1 + rng.range(0, n as u64 - 2) as usize) % n;
    let start = now_ns();
    match kind {
        "rolling-limits" => {
            // A rolling configuration change: a follower restarted with other session limits
            // (a lower maximum than some clients ask for, or none below theirs), which it
            // grants to every session that reconnects to it from then on.
            let max = *rng.pick(&[1200u64, 2000, 3000, 60_000]);
            let line = format!("maxSessionTimeout={max}");
            let mut tries = 0;
            while let Err(e) = cluster.restart_with_config(follower, &[line.as_str()]) {
                tries += 1;
                problem(format!(
                    "restarting member {follower} failed (try {tries}): {e}"
                ));
                if tries >= 3 {
                    break;
                }
            }
            record(faults, kind, format!("member {follower} now {line}"), start);
        }
        "kill-leader" | "kill-follower" => {
            let i = if kind == "kill-leader" {
                leader
            } else {
                follower
            };
            cluster.kill(i);
            let down = rng.ms(200, 4000);
            std::thread::sleep(down);
            let mut tries = 0;
            while let Err(e) = cluster.restart(i) {
                tries += 1;
                problem(format!("restarting member {i} failed (try {tries}): {e}"));
                if tries >= 3 {
                    break;
                }
            }
            record(faults, kind, format!("member {i} down {down:?}"), start);
        }
        "partition" | "leader-cut" => {
            // A network partition whose minority side holds a follower and the clients
            // connected to it: the follower is cut off from the other members, and so are those
            // clients (their proxies to the other members are black-holed). Their follower
            // answers them for syncLimit x tickTime while the leader hears nothing of their
            // sessions; then they cannot reach anyone, and their sessions expire. The target:
            // the follower of a quiet client that holds a lock now (waiting up to 10 s for one),
            // else the follower with the most clients (a client busy with another fault stays
            // out of it). A leader cut off (`leader-cut`) answers its own clients' `sync`s
            // until its own syncLimit runs out, while the others elect a new leader: only
            // renewals a quorum committed keep their holds believed.
            let mut target = (kind == "leader-cut").then_some(leader);
            let wait_until = Instant::now() + Duration::from_secs(10);
            while target.is_none() && Instant::now() < wait_until {
                target = (0..nets.len())
                    .filter(|&s| nets[s].quiet && nets[s].holding())
                    .find_map(|s| {
                        (0..n).find(|&m| m != leader && nets[s].proxies[m].connections() > 0)
                    });
                if target.is_none() {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            let f = target.unwrap_or_else(|| {
                (0..n)
                    .filter(|&i| i != leader)
                    .max_by_key(|&i| (clients_on(nets, i).len(), i == follower))
                    .unwrap_or(follower)
            });
            let with: Vec<(usize, std::sync::MutexGuard<'_, ()>)> = clients_on(nets, f)
                .into_iter()
                .filter_map(|s| nets[s].busy.try_lock().ok().map(|g| (s, g)))
                .collect();
            let others = |s: usize| proxies_but(&nets[s], f);
            // The fault starts now (not when the search for a target began).
            let start = now_ns();
            for (s, _) in &with {
                others(*s).for_each(|p| p.set_blackhole(true));
            }
            let d = rng.ms(1000, 9000);
            // The partition holds bytes (as a real one): what crossed it late is delivered at
            // the heal, applied if the members had not yet given up on each other.
            cluster.isolate(f);
            std::thread::sleep(d);
            let held = cluster.held_from(f);
            cluster.heal(f);
            for (s, _) in &with {
                others(*s).for_each(|p| {
                    p.set_blackhole(false);
                    p.cut_all();
                });
            }
            let slots: Vec<usize> = with.iter().map(|(s, _)| *s).collect();
            drop(with);
            record(
                faults,
                kind,
                format!(
                    "member {f} for {d:?} (held {held} bytes from it), with client slots {slots:?}"
                ),
                start,
            );
        }
        "partition-move" => {
            // A partition that holds bytes, shorter than syncLimit x tickTime (so what the
            // follower forwarded is still applied after the heal), while the clients connected
            // to the follower move to other members: their connection to it is cut, they come
            // back to it (the follower's revalidation of their sessions is held too), it is cut
            // again with the follower refusing them, and their sessions move. Preferably the
            // follower of a client that holds a lock now.
            let on = |m: usize| clients_on(nets, m);
            let f = (0..n)
                .filter(|&i| i != leader)
                .max_by_key(|&i| {
                    let holders = on(i).iter().filter(|&&s| nets[s].holding()).count();
                    (holders, on(i).len(), i == follower)
                })
                .unwrap_or(follower);
            let with: Vec<(usize, std::sync::MutexGuard<'_, ()>)> = on(f)
                .into_iter()
                .filter_map(|s| nets[s].busy.try_lock().ok().map(|g| (s, g)))
                .collect();
            let start = now_ns();
            let began = Instant::now();
            cluster.isolate(f);
            // Let requests sent now cross into the partition, then move the clients: first
            // back to the follower (the other members refuse them for a moment), whose
            // revalidation of their sessions is held after those requests, then away.
            std::thread::sleep(rng.ms(50, 500));
            let others = |s: usize| proxies_but(&nets[s], f);
            let back: Vec<usize> = with
                .iter()
                .map(|(s, _)| {
                    others(*s).for_each(|p| p.refuse_new(true));
                    let p = &nets[*s].proxies[f];
                    let n = p.connects_seen();
                    p.cut_all();
                    n
                })
                .collect();
            eventually(Duration::from_millis(800), || {
                with.iter()
                    .zip(&back)
                    .all(|((s, _), n)| nets[*s].proxies[f].connects_seen() > *n)
            });
            for (s, _) in &with {
                nets[*s].proxies[f].refuse_new(true);
                others(*s).for_each(|p| p.refuse_new(false));
                nets[*s].proxies[f].cut_all();
            }
            let d = rng.ms(1200, 2300);
            std::thread::sleep(d.saturating_sub(began.elapsed()));
            let held = cluster.held_from(f);
            cluster.heal(f);
            let d = began.elapsed();
            for (s, _) in &with {
                nets[*s].proxies[f].refuse_new(false);
            }
            let slots: Vec<usize> = with.iter().map(|(s, _)| *s).collect();
            drop(with);
            record(
                faults,
                kind,
                format!("member {f} for {d:?} (held {held} bytes from it), client slots {slots:?} moved off it"),
                start,
            );
        }
        _ => unreachable!(),
    }
    if !eventually(Duration::from_secs(60), || {
        (0..n).all(|i| cluster.serving(i))
    }) {
        problem(format!(
            "the ensemble did not recover within 60 s after {kind}"
        ));
    }
    true
}

fn coordinator(a: &Args) -> io::Result<bool> {
    judge_self_check().map_err(|e| io::Error::other(format!("the judge is broken: {e}")))?;
    let minutes: f64 = a.get("minutes", 5.0);
    let n_clients: usize = a.get("clients", 5);
    let n_quiet: usize = a.get("quiet", 2);
    // Session timeouts, dealt to the busy and to the quiet clients in turn. The quiet ones'
    // are shorter than the followers' syncLimit x tickTime (2.5 s): a follower cut off from the
    // leader goes on answering such a client after the leader may have expired its session.
    let ms_list = |k: &str, default: &str| -> io::Result<Vec<Duration>> {
        let v: Vec<Duration> = a
            .text(k)
            .unwrap_or_else(|| default.into())
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .map(Duration::from_millis)
            .collect();
        if v.is_empty() {
            return Err(io::Error::other(format!("--{k}: a list of milliseconds")));
        }
        Ok(v)
    };
    let sessions = ms_list("session-ms", "4000,3000")?;
    let quiet_sessions = ms_list("quiet-session-ms", "1000,2000")?;
    let seed: u64 = a.get("seed", now_ns());
    // Every fault kind at once: faults on the servers come twice as often, and a second
    // client nemesis faults the clients' networks while the first one works.
    let all_at_once: bool = a.get("all-at-once", false);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let out = a
        .text("out")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("target/soak/{stamp}")));
    std::fs::create_dir_all(&out)?;
    println!(
        "soak: {minutes} min, {n_clients} busy clients (sessions {sessions:?}) + {n_quiet} quiet (sessions {quiet_sessions:?}), {}, seed {seed}, results in {}",
        if all_at_once { "every fault kind at once" } else { "one server and one client fault at a time" },
        out.display()
    );
    let mut cluster = TestingCluster::start_partitionable(3)?;
    let members: Vec<String> = (0..3).map(|i| cluster.member_connect_string(i)).collect();
    {
        let admin = Admin::connect(&cluster.connect_string()).map_err(io::Error::other)?;
        let _ = admin.create(ROOT, b"");
    }
    let run = Run {
        out: out.clone(),
        exe: std::env::current_exe()?,
        seed,
    };
    let mut slots = Vec::new();
    for index in 0..n_clients + n_quiet {
        let quiet = index >= n_clients;
        let proxies = members
            .iter()
            .map(|m| TcpProxy::start(m))
            .collect::<io::Result<Vec<_>>>()?;
        let mut slot = Slot {
            index,
            incarnation: 0,
            session: if quiet {
                quiet_sessions[(index - n_clients) % quiet_sessions.len()]
            } else {
                sessions[index % sessions.len()]
            },
            quiet,
            net: Arc::new(Net {
                index,
                session: if quiet {
                    quiet_sessions[(index - n_clients) % quiet_sessions.len()]
                } else {
                    sessions[index % sessions.len()]
                },
                proxies,
                busy: StdMutex::new(()),
                quiet,
                events: StdMutex::new(PathBuf::new()),
            }),
            child: None,
        };
        run.spawn(&mut slot)?;
        slots.push(slot);
    }
    let faults: Faults = Arc::new(StdMutex::new(Vec::new()));
    // The soak's time starts when the clients do (every time printed is relative to it).
    let t0 = now_ns();
    let end = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    // Let the clients connect and start before the first fault.
    std::thread::sleep(Duration::from_secs(3));
    let server_nemesis = {
        let faults = faults.clone();
        let nets: Vec<Arc<Net>> = slots.iter().map(|s| s.net.clone()).collect();
        let mut rng = Rng::new(seed ^ 0x5E4F);
        let mut deck = Deck::new(&SERVER_FAULTS);
        std::thread::spawn(move || {
            let pause = if all_at_once {
                (500, 2000)
            } else {
                (1000, 4000)
            };
            while Instant::now() < end {
                std::thread::sleep(rng.ms(pause.0, pause.1));
                if Instant::now() >= end {
                    break;
                }
                let kind = deck.deal(&mut rng);
                if !server_fault(kind, &mut cluster, &nets, &mut rng, &faults) {
                    deck.undo(kind);
                }
            }
            cluster
        })
    };
    let net_nemesis = all_at_once.then(|| {
        let faults = faults.clone();
        let nets: Vec<Arc<Net>> = slots.iter().map(|s| s.net.clone()).collect();
        let mut rng = Rng::new(seed ^ 0x0E7);
        let mut deck = Deck::new(&NET_FAULTS);
        std::thread::spawn(move || {
            while Instant::now() < end {
                std::thread::sleep(rng.ms(500, 2500));
                if Instant::now() >= end {
                    break;
                }
                let kind = deck.deal(&mut rng);
                let net = &nets[rng.range(0, nets.len() as u64 - 1) as usize];
                let injected = match net.busy.try_lock() {
                    Ok(_busy) => {
                        let target = format!("client slot {}", net.index);
                        net_fault(kind, net, &target, &mut rng, &faults)
                    }
                    Err(_) => false,
                };
                if !injected {
                    deck.undo(kind);
                }
            }
        })
    });
    // The client nemesis runs on this thread: it (re)starts client processes, which die with
    // the thread that started them.
    let mut rng = Rng::new(seed ^ 0xC11E);
    let mut deck = Deck::new(&CLIENT_FAULTS);
    while Instant::now() < end {
        std::thread::sleep(rng.ms(500, 2500));
        if Instant::now() >= end {
            break;
        }
        let kind = deck.deal(&mut rng);
        if !client_fault(kind, &run, &mut slots, &mut rng, &faults) {
            deck.undo(kind);
        }
    }
    if let Some(t) = net_nemesis {
        let _ = t.join();
    }
    let cluster = server_nemesis
        .join()
        .map_err(|_| io::Error::other("the server nemesis panicked"))?;
    let soak_secs = (now_ns() - t0) as f64 / 1e9;

    // Heal: every member serves, no client is stopped or cut off (each fault ended itself).
    if !eventually(Duration::from_secs(60), || {
        (0..3).all(|i| cluster.serving(i))
    }) {
        problem("the ensemble does not serve at the end".into());
    }
    for s in &slots {
        if let Some(pid) = s.pid() {
            signal(pid, libc::SIGCONT);
        }
        for p in &s.net.proxies {
            p.set_blackhole(false);
        }
    }
    let mut violations: Vec<String> = Vec::new();
    // Stop the clients' work: they finish, release what they hold and idle with their sessions
    // open. A lock node of an idle client's live session is one it leaked.
    for s in &mut slots {
        if let Some(stdin) = s.child.as_mut().and_then(|c| c.stdin.as_mut()) {
            let _ = stdin.write_all(b"stop\n");
            let _ = stdin.flush();
        }
    }
    let longest = sessions
        .iter()
        .chain(&quiet_sessions)
        .max()
        .copied()
        .unwrap_or_default();
    leak_check(&cluster, &out, &slots, longest, &mut violations);
    // Then they close their sessions and exit.
    for s in &mut slots {
        if let Some(c) = s.child.as_mut() {
            drop(c.stdin.take());
        }
    }
    let stop_by = Instant::now() + Duration::from_secs(30);
    for s in &mut slots {
        if let Some(mut c) = s.child.take() {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < stop_by {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(c.try_wait(), Ok(None)) {
                problem(format!(
                    "client {} did not exit within 30 s of its stdin closing; killed",
                    s.id()
                ));
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }

    let faults = faults.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let (holds, lines) = read_events(&out)?;
    judge(&holds, &lines, &faults, t0, &mut violations);
    fork_check(&out, &mut violations)?;
    end_checks(&cluster, longest, &mut violations);

    let acquired = holds.len();
    let not_held = not_held_at_first_look(&holds).count();
    let mut per_path: BTreeMap<&str, usize> = BTreeMap::new();
    for h in holds.values() {
        *per_path.entry(h.path.as_str()).or_default() += 1;
    }
    println!("holds per path: {per_path:?}");
    if !violations.is_empty() {
        let mut f = File::create(out.join("violations.txt"))?;
        for v in &violations {
            println!("VIOLATION {v}");
            writeln!(f, "{v}\n")?;
        }
        for i in 0..cluster.len() {
            let _ = std::fs::copy(
                cluster.log_path(i),
                out.join(format!("zookeeper-member{i}.log")),
            );
        }
        match txn_log_evidence(&cluster, &out) {
            Ok(summary) => {
                writeln!(
                    f,
                    "Who removed each lock node (the members' transaction logs):"
                )?;
                f.write_all(summary.as_bytes())?;
            }
            Err(e) => problem(format!("could not read the transaction logs: {e}")),
        }
        println!(
            "soak: evidence in {}/violations.txt (events-*.jsonl, zookeeper-member*.log, txnlog.txt beside it)",
            out.display()
        );
    }
    if violations.is_empty() && a.get("txnlog", false) {
        // Asked for: who removed each lock node, without a violation.
        match txn_log_evidence(&cluster, &out) {
            Ok(summary) => std::fs::write(out.join("removals.txt"), summary)?,
            Err(e) => problem(format!("could not read the transaction logs: {e}")),
        }
    }
    let counts: Vec<String> = FAULT_KINDS
        .iter()
        .map(|k| format!("{k} {}", faults.iter().filter(|f| f.kind == *k).count()))
        .collect();
    let problems = PROBLEMS.lock().map(|p| p.len()).unwrap_or(0);
    let problems = if problems > 0 {
        format!(" (and {problems} problem(s) of the soak's own, above: exit status 2)")
    } else {
        String::new()
    };
    // Two participants of the election that both said `is_leader()` at once.
    let double_leaders = violations.iter().filter(|v| v.contains(ELECTION)).count();
    println!(
        "soak: {:.1} min, {} holds, faults: {}; successes not Held at the first look {not_held}; double leaders {double_leaders}; violations {}{problems}",
        soak_secs / 60.0,
        group_thousands(acquired),
        counts.join(", "),
        violations.len()
    );
    let mut f = File::create(out.join("faults.txt"))?;
    for x in &faults {
        writeln!(
            f,
            "+{:.3}s..+{:.3}s {} {}",
            rel(x.start, t0),
            rel(x.end, t0),
            x.kind,
            x.target
        )?;
    }
    Ok(violations.is_empty())
}

/// Reads the members' transaction logs (ZooKeeper's `TxnLogToolkit`), writes every transaction
/// on the soak's nodes, and each session's creation and close, to `out/txnlog.txt` (one line a
/// zxid, from whichever member has it), and returns who removed each lock node: for each node
/// created under the soak's root, the transaction that removed it (a delete or a multi naming
/// it, with its session, client and zxid, or its owner's closeSession), one line per node.
fn txn_log_evidence(cluster: &TestingCluster, out: &Path) -> io::Result<String> {
    let classpath = std::env::var("ZOOKEEPER_CLASSPATH").unwrap_or_else(|_| {
        "/usr/share/java/zookeeper.jar:/usr/share/java/zookeeper-jute.jar:/usr/share/java/slf4j-api.jar"
            .into()
    });
    let mut txns: BTreeMap<u64, String> = BTreeMap::new();
    for i in 0..cluster.len() {
        let dir = cluster.dir().join(format!("member{i}/data/version-2"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if !e.file_name().to_string_lossy().starts_with("log.") {
                continue;
            }
            let dump = Command::new("java")
                .args(["-cp", &classpath])
                .arg("org.apache.zookeeper.server.persistence.TxnLogToolkit")
                .arg("-d")
                .arg(e.path())
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()?;
            for line in String::from_utf8_lossy(&dump.stdout).lines() {
                // "<date> session 0x.. cxid 0x.. zxid 0x.. <type> <details>"
                let Some(at) = line.find(" session 0x") else {
                    continue;
                };
                let txn = &line[at + 1..];
                let w: Vec<&str> = txn.splitn(8, ' ').collect();
                let Some(zxid) = w
                    .get(5)
                    .and_then(|z| u64::from_str_radix(z.trim_start_matches("0x"), 16).ok())
                else {
                    continue;
                };
                let kind = w.get(6).copied().unwrap_or("");
                if txn.contains(ROOT) || kind == "createSession" || kind == "closeSession" {
                    txns.entry(zxid).or_insert_with(|| txn.to_string());
                }
            }
        }
    }
    // Session id -> client, from the clients' `session` events.
    let mut clients: HashMap<i64, String> = HashMap::new();
    for e in std::fs::read_dir(out)?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(id) = name
            .strip_prefix("events-")
            .and_then(|n| n.strip_suffix(".jsonl"))
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        for v in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            if let Some(sid) = v.get("sid").and_then(Value::as_i64) {
                clients.insert(sid, id.to_string());
            }
        }
    }
    let who = |session: &str| -> String {
        let sid = i64::from_str_radix(session.trim_start_matches("0x"), 16)
            .or_else(|_| {
                u64::from_str_radix(session.trim_start_matches("0x"), 16).map(|v| v as i64)
            })
            .unwrap_or(0);
        match clients.get(&sid) {
            Some(c) => format!("session {session} (client {c})"),
            None => format!("session {session}"),
        }
    };
    let mut dump = File::create(out.join("txnlog.txt"))?;
    // Live nodes: path -> (creating zxid, owner session).
    let mut live: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut summary = String::new();
    // Deletes by a session other than the node's creator's: what to look at first.
    let mut foreign = String::new();
    for (zxid, txn) in &txns {
        writeln!(dump, "{txn}")?;
        let w: Vec<&str> = txn.splitn(8, ' ').collect();
        let (session, kind, rest) = (
            w[1],
            w.get(6).copied().unwrap_or(""),
            w.get(7).copied().unwrap_or(""),
        );
        let path_of = |r: &str| -> String {
            r.trim_start_matches('\'')
                .split([',', ' '])
                .next()
                .unwrap_or("")
                .to_string()
        };
        match kind {
            k if k.starts_with("create") && k != "createSession" => {
                live.insert(path_of(rest), (*zxid, session.to_string()));
            }
            "delete" => {
                let path = path_of(rest);
                let by = who(session);
                match live.remove(&path) {
                    Some((cz, owner)) => {
                        let line = format!(
                            "{path} (created {cz:#x} by {}) deleted by {by}: zxid {zxid:#x}, delete\n",
                            who(&owner)
                        );
                        if owner != session && path != ROOT {
                            foreign += &line;
                        }
                        summary += &line;
                    }
                    None => summary += &format!("{path} deleted by {by}: zxid {zxid:#x}, delete\n"),
                }
            }
            "closeSession" => {
                let gone: Vec<String> = live
                    .iter()
                    .filter(|(_, (_, o))| o == session)
                    .map(|(p, _)| p.clone())
                    .collect();
                for path in gone {
                    if let Some((cz, _)) = live.remove(&path) {
                        summary += &format!(
                            "{path} (created {cz:#x}) removed with its owner {}: zxid {zxid:#x}, closeSession\n",
                            who(session)
                        );
                    }
                }
            }
            "multi" => {
                summary += &format!("multi by {}: zxid {zxid:#x}: {rest}\n", who(session));
            }
            _ => {}
        }
    }
    if foreign.is_empty() {
        foreign = "(none)\n".into();
    }
    Ok(format!(
        "Deleted by a session other than its creator's:\n{foreign}\nEvery removal:\n{summary}"
    ))
}

fn group_thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn rel(t: u64, t0: u64) -> f64 {
    (t as f64 - t0 as f64) / 1e9
}

// ---------------------------------------------------------------------------------------------
// The judge.
// ---------------------------------------------------------------------------------------------

/// One hold, from the events of its holder.
#[derive(Debug, Default, Clone)]
struct Hold {
    id: String,
    /// The participant (client id / workload): its own holds may overlap (a downgrade).
    worker: String,
    path: String,
    mode: String,
    token: i64,
    acq: u64,
    last_chk: Option<u64>,
    lost: Option<(u64, String)>,
    rel: Option<(u64, String)>,
}

impl Hold {
    /// The believed interval: from the acquire's return to the last check that said Held.
    fn believed(&self) -> Option<(u64, u64)> {
        self.last_chk.map(|c| (self.acq, c.max(self.acq)))
    }

    fn describe(&self, t0: u64) -> String {
        let mut s = format!(
            "{} ({}) token {:#x} acquired +{:.3}s",
            self.id,
            self.mode,
            self.token,
            rel(self.acq, t0)
        );
        match self.last_chk {
            Some(c) => s += &format!(", last believed +{:.3}s", rel(c, t0)),
            None => s += ", never believed",
        }
        if let Some((t, st)) = &self.lost {
            s += &format!(", told {st} +{:.3}s", rel(*t, t0));
        }
        match &self.rel {
            Some((t, r)) => s += &format!(", released +{:.3}s ({r})", rel(*t, t0)),
            None => s += ", never released (process ended)",
        }
        s
    }
}

/// Every hold by id, and each hold's raw event lines (the evidence).
type Events = (BTreeMap<String, Hold>, HashMap<String, Vec<String>>);

/// Every forked child exited at once with 0 (it let go of what it inherited without waiting
/// for anything, and sent nothing on its parent's session; what it might have released of its
/// parent's, the judge sees as a hold that ended while believed).
fn fork_check(out: &Path, violations: &mut Vec<String>) -> io::Result<()> {
    for entry in std::fs::read_dir(out)?.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if !name.starts_with("events-") {
            continue;
        }
        for line in BufReader::new(File::open(&path)?).lines() {
            let Ok(v) = serde_json::from_str::<Value>(&line?) else {
                continue;
            };
            if v.get("e").and_then(Value::as_str) != Some("fork") {
                continue;
            }
            let outcome = v.get("x").and_then(Value::as_str).unwrap_or("");
            // A child of the raw clone call may hang on a lock of libc's that another thread
            // held at the clone (malloc's: no atfork handler resets it); it is killed, and
            // what matters is that nothing of the parent's changed (the judge's part).
            let cloned = v.get("how").and_then(Value::as_str) == Some("clone");
            if outcome != "exit 0" && !(cloned && outcome.starts_with("hung")) {
                violations.push(format!("a forked child ({name}): {outcome}"));
            }
        }
    }
    Ok(())
}

fn read_events(out: &Path) -> io::Result<Events> {
    let mut holds: BTreeMap<String, Hold> = BTreeMap::new();
    let mut lines: HashMap<String, Vec<String>> = HashMap::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(out)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("events-"))
        })
        .collect();
    files.sort();
    for f in files {
        for line in BufReader::new(File::open(&f)?).lines() {
            let line = line?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let Some(h) = v.get("h").and_then(Value::as_str) else {
                continue;
            };
            let t = v.get("t").and_then(Value::as_u64).unwrap_or(0);
            let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            lines.entry(h.to_string()).or_default().push(line.clone());
            match v.get("e").and_then(Value::as_str) {
                Some("acq") => {
                    let worker = h.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
                    holds.insert(
                        h.to_string(),
                        Hold {
                            id: h.to_string(),
                            worker,
                            path: text("p"),
                            mode: text("m"),
                            token: v.get("k").and_then(Value::as_i64).unwrap_or(i64::MIN),
                            acq: t,
                            ..Hold::default()
                        },
                    );
                }
                Some("chk") => {
                    if let Some(x) = holds.get_mut(h) {
                        x.last_chk = Some(x.last_chk.map_or(t, |c| c.max(t)));
                    }
                }
                Some("lost") => {
                    if let Some(x) = holds.get_mut(h) {
                        x.lost.get_or_insert((t, text("s")));
                    }
                }
                Some("rel") => {
                    if let Some(x) = holds.get_mut(h) {
                        x.rel = Some((t, text("r")));
                    }
                }
                _ => {}
            }
        }
    }
    Ok((holds, lines))
}

/// The faults that were under way within 10 s before `t` or at it.
fn faults_near(faults: &[Fault], t: u64, t0: u64) -> String {
    let window = 10_000_000_000u64;
    let near: Vec<String> = faults
        .iter()
        .filter(|f| f.start <= t && f.end + window >= t)
        .map(|f| {
            format!(
                "[+{:.3}s..+{:.3}s {} {}]",
                rel(f.start, t0),
                rel(f.end, t0),
                f.kind,
                f.target
            )
        })
        .collect();
    if near.is_empty() {
        "none within 10 s".into()
    } else {
        near.join(" ")
    }
}

/// The event lines of holds `ids`, shortened: the acquire, the first and last checks (with
/// how many between), and what came after (lost, release).
fn evidence(ids: &[&str], lines: &HashMap<String, Vec<String>>) -> String {
    let mut s = String::new();
    for id in ids {
        let all = lines.get(*id).map(Vec::as_slice).unwrap_or_default();
        let chks: Vec<usize> = (0..all.len())
            .filter(|&i| all[i].contains("\"e\":\"chk\""))
            .collect();
        for (i, l) in all.iter().enumerate() {
            let inner = chks.len() > 2 && chks[1..chks.len() - 1].contains(&i);
            if inner {
                if i == chks[1] {
                    s += &format!(
                        "\n      ... {} more checks that said Held ...",
                        chks.len() - 2
                    );
                }
                continue;
            }
            s += "\n      ";
            s += l;
        }
    }
    s
}

const MAX_REPORTED: usize = 25;

fn judge(
    holds: &BTreeMap<String, Hold>,
    lines: &HashMap<String, Vec<String>>,
    faults: &[Fault],
    t0: u64,
    violations: &mut Vec<String>,
) {
    let mut by_path: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds.values() {
        by_path.entry(h.path.as_str()).or_default().push(h);
    }
    let mut found = 0usize;
    let mut report = |violations: &mut Vec<String>, v: String| {
        found += 1;
        if found <= MAX_REPORTED {
            violations.push(v);
        } else if found == MAX_REPORTED + 1 {
            violations.push(format!("(more than {MAX_REPORTED}; the rest not printed)"));
        }
    };
    for (path, list) in &by_path {
        // Believed intervals, by start.
        let mut iv: Vec<(u64, u64, &Hold)> = list
            .iter()
            .filter_map(|h| h.believed().map(|(a, b)| (a, b, *h)))
            .collect();
        iv.sort_by_key(|(a, _, _)| *a);
        if *path == SEM {
            // Never more than LEASES at once: sweep the starts and ends.
            let mut points: Vec<(u64, i32, &Hold)> = Vec::new();
            for (a, b, h) in &iv {
                points.push((*a, 1, h));
                points.push((*b, -1, h));
            }
            // At one instant, ends before starts (a believed interval is closed at its last
            // check, the next holder's starts later).
            points.sort_by_key(|(t, d, _)| (*t, *d));
            let mut active: Vec<&Hold> = Vec::new();
            for (t, d, h) in points {
                if d < 0 {
                    active.retain(|x| x.id != h.id);
                    continue;
                }
                active.push(h);
                // Reported once per episode: when the count first goes past the limit.
                if active.len() == LEASES as usize + 1 {
                    let ids: Vec<&str> = active.iter().map(|x| x.id.as_str()).collect();
                    report(
                        violations,
                        format!(
                            "more-than-{LEASES}-leases {path} at +{:.3}s: {} believed at once:\n    {}\n    faults: {}\n    events:{}",
                            rel(t, t0),
                            active.len(),
                            active.iter().map(|x| x.describe(t0)).collect::<Vec<_>>().join("\n    "),
                            faults_near(faults, t, t0),
                            evidence(&ids, lines)
                        ),
                    );
                }
            }
        } else {
            // Exclusion: a hold overlaps the earlier holds still believed when it started. The
            // overlaps of one earlier hold are one violation (a stale believer usually overlaps
            // several holders in a row).
            let mut active: Vec<(u64, &Hold)> = Vec::new();
            let mut groups: Vec<(&str, &Hold, Vec<&Hold>)> = Vec::new();
            for (a, b, h) in &iv {
                active.retain(|(end, _)| *end > *a);
                for (_, other) in &active {
                    if other.worker == h.worker {
                        continue; // one participant (a downgrade's write and read holds)
                    }
                    if h.mode == "r" && other.mode == "r" {
                        continue;
                    }
                    let what = if h.mode == "r" || other.mode == "r" {
                        "writer-beside-reader"
                    } else {
                        "two-exclusive-holders"
                    };
                    match groups
                        .iter_mut()
                        .find(|(w, o, _)| *w == what && o.id == other.id)
                    {
                        Some((_, _, later)) => later.push(h),
                        None => groups.push((what, other, vec![h])),
                    }
                }
                active.push((*b, h));
            }
            for (what, other, later) in groups {
                let shown: Vec<String> = later.iter().take(3).map(|h| h.describe(t0)).collect();
                let more = if later.len() > 3 {
                    format!("\n    ... and {} more", later.len() - 3)
                } else {
                    String::new()
                };
                report(
                    violations,
                    format!(
                        "{what} {path}: believed at once by\n    {}\n  and {} later holder(s):\n    {}{more}\n    faults: {}\n    events:{}",
                        other.describe(t0),
                        later.len(),
                        shown.join("\n    "),
                        faults_near(faults, later[0].acq, t0),
                        evidence(&[other.id.as_str(), later[0].id.as_str()], lines)
                    ),
                );
            }
            // Fencing tokens: strictly increasing in order of acquisition among believed
            // exclusive holds.
            let mut last: Option<&Hold> = None;
            for (_, _, h) in iv.iter().filter(|(_, _, h)| h.mode != "r") {
                if let Some(p) = last {
                    if h.token <= p.token {
                        report(
                            violations,
                            format!(
                                "token-order {path}: a later holder has a token not above an earlier one's\n    {}\n    {}\n    faults: {}\n    events:{}",
                                p.describe(t0),
                                h.describe(t0),
                                faults_near(faults, h.acq, t0),
                                evidence(&[p.id.as_str(), h.id.as_str()], lines)
                            ),
                        );
                    }
                }
                last = Some(h);
            }
        }
    }
    for h in not_held_at_first_look(holds) {
        report(
            violations,
            format!(
                "success-not-held {}: an acquire returned success for a hold not Held at its first look\n    {}\n    faults: {}\n    events:{}",
                h.path,
                h.describe(t0),
                faults_near(faults, h.acq, t0),
                evidence(&[h.id.as_str()], lines)
            ),
        );
    }
}

/// The holds whose acquire returned success but whose first look said they were not Held: an
/// acquire vouches for its hold as it returns (docs/hold-model.md, "Success is Held"), and the
/// holder looks at once.
fn not_held_at_first_look(holds: &BTreeMap<String, Hold>) -> impl Iterator<Item = &Hold> {
    holds
        .values()
        .filter(|h| h.last_chk.is_none() && h.lost.is_some())
}

/// The session of client `id` once it reported idle (its `idle` event), if it has.
fn idle_session(out: &Path, id: &str) -> Option<i64> {
    let text = std::fs::read_to_string(out.join(format!("events-{id}.jsonl"))).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("e").and_then(Value::as_str) == Some("idle"))
        .and_then(|v| v.get("sid").and_then(Value::as_i64))
}

/// With every client idle (work stopped, holds released, session open): no lock node of theirs
/// may remain once a release's background retries have had time (a session timeout).
fn leak_check(
    cluster: &TestingCluster,
    out: &Path,
    slots: &[Slot],
    session: Duration,
    violations: &mut Vec<String>,
) {
    let mut idle: HashMap<i64, String> = HashMap::new();
    let all_idle = eventually(Duration::from_secs(60), || {
        for s in slots.iter().filter(|s| s.child.is_some()) {
            if let Some(sid) = idle_session(out, &s.id()) {
                idle.insert(sid, s.id());
            }
        }
        idle.len() == slots.iter().filter(|s| s.child.is_some()).count()
    });
    if !all_idle {
        let busy: Vec<String> = slots
            .iter()
            .filter(|s| s.child.is_some() && !idle.values().any(|v| *v == s.id()))
            .map(|s| s.id())
            .collect();
        violations.push(format!(
            "stuck: client(s) {busy:?} did not finish their work within 60 s of being told to stop"
        ));
    }
    let Ok(admin) = Admin::connect(&cluster.connect_string()) else {
        violations.push("end: cannot connect to the ensemble".into());
        return;
    };
    let mut leaked = Vec::new();
    let clean = eventually(session + Duration::from_secs(5), || {
        let mut all = Vec::new();
        leaked.clear();
        if ephemerals(&admin, ROOT, &mut all).is_err() {
            return false;
        }
        leaked.extend(all.into_iter().filter(|(_, o)| idle.contains_key(o)));
        leaked.is_empty()
    });
    if !clean {
        for (path, owner) in &leaked {
            let data = admin
                .node(path)
                .ok()
                .flatten()
                .map(|n| String::from_utf8_lossy(&n.data).replace('\n', "\\n"))
                .unwrap_or_default();
            violations.push(format!(
                "node-left {path}: owned by the live session {owner:#x} of client {}, which holds nothing (idle since its work stopped); data {data:?}",
                idle[owner]
            ));
        }
    }
}

/// Every ephemeral node under `path` (path, owner session).
fn ephemerals(admin: &Admin, path: &str, out: &mut Vec<(String, i64)>) -> zklock::Result<()> {
    for c in admin.children(path)? {
        let p = format!("{path}/{c}");
        if let Some(info) = admin.node(&p)? {
            if info.ephemeral_owner != 0 {
                out.push((p.clone(), info.ephemeral_owner));
            }
        }
        ephemerals(admin, &p, out)?;
    }
    Ok(())
}

/// With every fault healed and every client gone: no node left, every lock acquirable.
fn end_checks(cluster: &TestingCluster, session: Duration, violations: &mut Vec<String>) {
    let hosts = cluster.connect_string();
    let admin = match Admin::connect(&hosts) {
        Ok(a) => a,
        Err(e) => {
            violations.push(format!("end: cannot connect to the ensemble: {e}"));
            return;
        }
    };
    // Sessions of killed clients end one session timeout after their last touch.
    let mut left = Vec::new();
    let gone = eventually(session * 3 + Duration::from_secs(10), || {
        left.clear();
        ephemerals(&admin, ROOT, &mut left).is_ok() && left.is_empty()
    });
    if !gone {
        violations.push(format!(
            "node-left: {} lock node(s) under {ROOT} {:?} after every client ended",
            left.len(),
            left.iter()
                .map(|(p, o)| format!("{p} (session {o:#x})"))
                .collect::<Vec<_>>()
        ));
    }
    let client = match Client::connect(
        &hosts,
        Options::default()
            .session_timeout(Duration::from_secs(10))
            .server_tick_time(TICK),
    ) {
        Ok(c) => c,
        Err(e) => {
            violations.push(format!("end: cannot connect a client: {e}"));
            return;
        }
    };
    let wait = Deadline::after(Duration::from_secs(15));
    let boxed = |l: Box<dyn Lockable>| l;
    acquirable(
        MUTEX,
        Mutex::new(&client, MUTEX).map(|l| boxed(Box::new(l))),
        wait,
        violations,
    );
    acquirable(
        SMUTEX,
        SemaphoreMutex::new(&client, SMUTEX).map(|l| boxed(Box::new(l))),
        wait,
        violations,
    );
    acquirable(
        SIMPLE,
        SimpleLock::new(&client, SIMPLE).map(|l| boxed(Box::new(l))),
        wait,
        violations,
    );
    acquirable(
        ELECTION,
        LeaderElection::new(&client, ELECTION).map(|l| boxed(Box::new(l))),
        wait,
        violations,
    );
    acquirable(
        "/soak/rw (write)",
        ReadWriteLock::new(&client, RW).map(|l| boxed(Box::new(l.write_lock()))),
        wait,
        violations,
    );
    acquirable(
        "/soak/rw (read)",
        ReadWriteLock::new(&client, RW).map(|l| boxed(Box::new(l.read_lock()))),
        wait,
        violations,
    );
    // Every lease of the semaphore, at once.
    match Semaphore::new(&client, SEM, LEASES) {
        Ok(sem) => {
            let mut got = 0;
            for _ in 0..LEASES {
                match Lockable::acquire(&sem, wait) {
                    Ok(Some(_)) => got += 1,
                    Ok(None) => break,
                    Err(e) => {
                        violations.push(format!("not-acquirable: {SEM} at the end: {e}"));
                        break;
                    }
                }
            }
            if got < LEASES {
                violations.push(format!(
                    "not-acquirable: {SEM}: only {got} of {LEASES} leases within 15 s at the end"
                ));
            }
            for _ in 0..got {
                let _ = Lockable::release(&sem);
            }
        }
        Err(e) => violations.push(format!("not-acquirable: {SEM}: {e}")),
    }
    let multi = (|| -> zklock::Result<Box<dyn Lockable>> {
        let m: Box<dyn Lockable> = Box::new(Mutex::new(&client, MUTEX)?);
        let s: Box<dyn Lockable> = Box::new(SemaphoreMutex::new(&client, SMUTEX)?);
        Ok(Box::new(MultiLock::from_boxed(vec![m, s])))
    })();
    acquirable(
        "multi-lock (mutex + semaphore mutex)",
        multi,
        wait,
        violations,
    );
    client.close();
}

fn acquirable(
    name: &str,
    lock: zklock::Result<Box<dyn Lockable>>,
    wait: Deadline,
    violations: &mut Vec<String>,
) {
    let r = lock.and_then(|l| {
        let got = l.acquire(wait)?;
        if got.is_some() {
            l.release()?;
        }
        Ok(got)
    });
    match r {
        Ok(Some(_)) => {}
        Ok(None) => violations.push(format!("not-acquirable: {name} within 15 s at the end")),
        Err(e) => violations.push(format!("not-acquirable: {name} at the end: {e}")),
    }
}

/// The judge finds each kind of violation in fabricated holds, and nothing in legal ones (a
/// downgrade's overlapping write and read holds, readers together, 3 leases, a hold never
/// believed): run before every soak, so that "violations 0" means something.
fn judge_self_check() -> Result<(), String> {
    let h = |id: &str, path: &str, mode: &str, token: i64, acq: u64, chk: Option<u64>| {
        let worker = id.splitn(3, '/').take(2).collect::<Vec<_>>().join("/");
        let hold = Hold {
            id: id.into(),
            worker,
            path: path.into(),
            mode: mode.into(),
            token,
            acq,
            last_chk: chk,
            ..Hold::default()
        };
        (id.to_string(), hold)
    };
    let holds: BTreeMap<String, Hold> = [
        // Two exclusive holders (a, b), then a token below the previous holder's (c); d was
        // never believed.
        h("a/mutex/1", MUTEX, "x", 10, 100, Some(200)),
        h("b/mutex/1", MUTEX, "x", 11, 150, Some(250)),
        h("d/mutex/1", MUTEX, "x", 12, 120, None),
        h("c/mutex/1", MUTEX, "x", 5, 300, Some(400)),
        // A downgrade (legal), readers together (legal), a reader beside the writer.
        h("a/writer/1", RW, "w", 20, 1000, Some(1100)),
        h("a/writer/1d", RW, "r", 20, 1050, Some(1300)),
        h("b/reader/1", RW, "r", 21, 1200, Some(1250)),
        h("c/reader/1", RW, "r", 22, 1090, Some(1095)),
        // 3 leases (legal), then 4.
        h("a/sem/1", SEM, "l", 30, 2000, Some(2100)),
        h("b/sem/1", SEM, "l", 31, 2010, Some(2100)),
        h("c/sem/1", SEM, "l", 32, 2020, Some(2100)),
        h("d/sem/1", SEM, "l", 33, 2200, Some(2300)),
        h("e/sem/1", SEM, "l", 34, 2050, Some(2060)),
    ]
    .into_iter()
    .chain([(
        "f/mutex/1".to_string(),
        // An acquire that returned success for a hold whose first look said Uncertain.
        Hold {
            lost: Some((5010, "Uncertain".into())),
            ..h("f/mutex/1", MUTEX, "x", 50, 5000, None).1
        },
    )])
    .collect();
    let mut found = Vec::new();
    judge(&holds, &HashMap::new(), &[], 0, &mut found);
    let kinds: Vec<&str> = found
        .iter()
        .map(|v| v.split(' ').next().unwrap_or(""))
        .collect();
    let want = [
        "two-exclusive-holders",
        "token-order",
        "writer-beside-reader",
        "more-than-3-leases",
        "success-not-held",
    ];
    let mut sorted = kinds.clone();
    sorted.sort();
    let mut want_sorted = want.to_vec();
    want_sorted.sort();
    if sorted != want_sorted {
        return Err(format!(
            "found {kinds:?} in the fabricated holds, expected {want:?}"
        ));
    }
    Ok(())
}
