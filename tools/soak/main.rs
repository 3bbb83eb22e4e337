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

mod check;
mod client;
mod nemesis;

use check::*;
use client::*;
use nemesis::*;

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
// The coordinator.
// ---------------------------------------------------------------------------------------------

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
