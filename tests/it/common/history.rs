//! A shared history file proving mutual exclusion across threads and processes, and a worker
//! mode of the test binary itself (the read-write lock, semaphore, multi-lock and interop
//! tests).
#![allow(dead_code)]

use super::*;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use zklock::{Deadline, Lockable};
use zklock::{Mutex, Protocol, ReadWriteLock, Semaphore};

/// A tiny deterministic PRNG (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------------------------------
// The shared history.
//
// Every holder appends "enter <R|W> <who>" right after its acquire returned and "exit <R|W>
// <who>" right before it releases, each line with ONE write(2) on an O_APPEND descriptor. The
// exit line is written before the release request leaves, and the next holder's enter line
// after its acquire returned, so the file's order is a valid order of real events: replaying
// it, a writer that enters while anyone is inside (or a reader while a writer is) is a real
// overlap. Java (FileOutputStream append) and Python (os.O_APPEND) peers write the same lines.

pub struct History {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl History {
    pub fn new() -> History {
        let dir = tempfile::Builder::new()
            .prefix("zklock-history-")
            .tempdir()
            .unwrap();
        let path = dir.path().join("history.log");
        std::fs::File::create(&path).unwrap();
        History { path, _dir: dir }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn writer(&self) -> HistoryWriter {
        HistoryWriter::open(&self.path)
    }

    /// Replays the history; panics on any overlap.
    pub fn check(&self) -> Stats {
        check_history(&std::fs::read_to_string(&self.path).unwrap())
    }
}

pub struct HistoryWriter(std::fs::File);

impl HistoryWriter {
    pub fn open(path: &Path) -> HistoryWriter {
        HistoryWriter(std::fs::OpenOptions::new().append(true).open(path).unwrap())
    }
    pub fn enter(&mut self, kind: char, who: &str) {
        self.line(&format!("enter {kind} {who}\n"));
    }
    /// An enter line that carries the hold's fencing token (the every-language test's).
    pub fn enter_with_token(&mut self, kind: char, who: &str, token: i64) {
        self.line(&format!("enter {kind} {who} {token}\n"));
    }
    pub fn exit(&mut self, kind: char, who: &str) {
        self.line(&format!("exit {kind} {who}\n"));
    }
    fn line(&mut self, l: &str) {
        // One write(2) per line (small buffer, O_APPEND): atomic and ordered in the file.
        let n = self.0.write(l.as_bytes()).unwrap();
        assert_eq!(n, l.len(), "short append to the history");
    }
}

#[derive(Debug, Default)]
pub struct Stats {
    pub peak_readers: usize,
    /// Most semaphore leases ('S') held at once.
    pub peak_leases: usize,
    pub reads: usize,
    pub writes: usize,
    /// Completed holds per holder name.
    pub by_who: BTreeMap<String, usize>,
}

impl Stats {
    /// Completed holds of holders whose name starts with `prefix`.
    pub fn holds_of(&self, prefix: &str) -> usize {
        self.by_who
            .iter()
            .filter(|(w, _)| w.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}

pub fn check_history(text: &str) -> Stats {
    let mut readers: BTreeMap<String, usize> = BTreeMap::new();
    let mut writer: Option<String> = None;
    let mut leases: BTreeMap<String, usize> = BTreeMap::new();
    let mut st = Stats::default();
    for (no, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // An enter line may end with the hold's fencing token (check_tokens reads it).
        let tokened = f.len() == 4 && f[0] == "enter";
        assert!(
            f.len() == 3 || tokened,
            "bad history line {}: {line:?}",
            no + 1
        );
        let (ev, kind, who) = (f[0], f[1], f[2].to_string());
        let nreaders: usize = readers.values().sum();
        match (ev, kind) {
            ("enter", "W") => {
                assert!(
                    writer.is_none() && nreaders == 0,
                    "line {}: writer {who} entered while writer {writer:?} and readers {readers:?} were inside",
                    no + 1
                );
                writer = Some(who);
            }
            ("enter", "R") => {
                assert!(
                    writer.is_none(),
                    "line {}: reader {who} entered while writer {writer:?} was inside",
                    no + 1
                );
                *readers.entry(who).or_default() += 1;
                st.peak_readers = st.peak_readers.max(nreaders + 1);
            }
            ("exit", "W") => {
                assert_eq!(
                    writer.as_deref(),
                    Some(who.as_str()),
                    "line {}: exit of a writer not inside",
                    no + 1
                );
                writer = None;
                st.writes += 1;
                *st.by_who.entry(who).or_default() += 1;
            }
            ("exit", "R") => {
                let n = readers
                    .get_mut(&who)
                    .unwrap_or_else(|| panic!("line {}: exit of a reader not inside", no + 1));
                *n -= 1;
                if *n == 0 {
                    readers.remove(&who);
                }
                st.reads += 1;
                *st.by_who.entry(who).or_default() += 1;
            }
            ("enter", "S") => {
                *leases.entry(who).or_default() += 1;
                st.peak_leases = st.peak_leases.max(leases.values().sum());
            }
            ("exit", "S") => {
                let n = leases
                    .get_mut(&who)
                    .unwrap_or_else(|| panic!("line {}: exit of a lease not held", no + 1));
                *n -= 1;
                if *n == 0 {
                    leases.remove(&who);
                }
                *st.by_who.entry(who).or_default() += 1;
            }
            _ => panic!("bad history line {}: {line:?}", no + 1),
        }
    }
    st
}

/// The fencing tokens of the history's enter lines that carry one, which must strictly
/// increase in the file's order (the order of the acquires); returns how many there are.
pub fn check_tokens(text: &str) -> usize {
    let mut last: Option<(i64, &str)> = None;
    let mut n = 0;
    for (no, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 4 {
            continue;
        }
        let token: i64 = f[3]
            .parse()
            .unwrap_or_else(|_| panic!("line {}: a token that is no number: {line:?}", no + 1));
        if let Some((before, by)) = last {
            assert!(
                token > before,
                "line {}: {} holds with token {token}, after {by} held with token {before}",
                no + 1,
                f[2]
            );
        }
        last = Some((token, f[2]));
        n += 1;
    }
    n
}

// ---------------------------------------------------------------------------------------
// Worker processes: the test binary itself, started with ZKLOCK_WORKER set, runs a load of
// zklock holders and appends to the history (see `run_worker_if_asked`).

/// Starts this test binary as a zklock worker process. `lock`: "mutex" | "rw" | "read" |
/// "write" | "semaphore:N"; `action`: "load" (for `ms`), "hold" (once, `ms` long), "try" (timeout `ms`).
#[allow(clippy::too_many_arguments)]
pub fn spawn_worker(
    entry_test: &str,
    hosts: &str,
    path: &str,
    protocol: &str,
    lock: &str,
    action: &str,
    ms: u64,
    history: &Path,
    who: &str,
    read_fraction: f64,
) -> Proc {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        entry_test,
        "--nocapture",
        "--test-threads=1",
        "--quiet",
    ])
    .env("ZKLOCK_WORKER", "1")
    .env(
        "ZKLOCK_WORKER_ARGS",
        format!(
            "{hosts} {path} {protocol} {lock} {action} {ms} {} {who} {read_fraction}",
            history.display()
        ),
    );
    Proc::spawn(cmd, &format!("zklock worker {who}"))
}

/// The body of the worker-entry test: runs the worker when this process was started as one,
/// else does nothing.
pub fn run_worker_if_asked() {
    if std::env::var_os("ZKLOCK_WORKER").is_none() {
        return;
    }
    let args = std::env::var("ZKLOCK_WORKER_ARGS").unwrap();
    let a: Vec<&str> = args.split(' ').collect();
    let (hosts, path, protocol, lock, action) = (a[0], a[1], a[2], a[3], a[4]);
    let ms: u64 = a[5].parse().unwrap();
    let mut hist = HistoryWriter::open(Path::new(a[6]));
    let who = a[7];
    let read_fraction: f64 = a[8].parse().unwrap();
    let protocol = if protocol == "kazoo" {
        Protocol::Kazoo
    } else {
        Protocol::Curator
    };
    let client = connect(hosts, protocol);
    let mutex = Mutex::new(&client, path).unwrap();
    let rw = ReadWriteLock::new(&client, path).unwrap();
    let sem = lock
        .strip_prefix("semaphore:")
        .map(|n| Semaphore::new(&client, path, n.parse().unwrap()).unwrap());
    let say = |s: &str| {
        let mut o = std::io::stdout().lock();
        writeln!(o, "{s}").unwrap();
        o.flush().unwrap();
    };
    // One hold: acquire (waiting until `deadline`, None = forever), history, sleep, release.
    let mut hold =
        |kind: char, deadline: Option<Instant>, sleep: Duration, announce: bool| -> bool {
            let got = match (lock, kind) {
                (_, 'S') => Lockable::acquire(
                    sem.as_ref().unwrap(),
                    deadline.map_or(Deadline::Forever, Deadline::At),
                )
                .unwrap()
                .is_some(),
                ("mutex", _) => mutex.acquire_until_deadline(deadline),
                (_, 'R') => rw
                    .read()
                    .acquire(deadline.map_or(Deadline::Forever, Deadline::At))
                    .unwrap()
                    .is_some(),
                _ => rw
                    .write()
                    .acquire(deadline.map_or(Deadline::Forever, Deadline::At))
                    .unwrap()
                    .is_some(),
            };
            if !got {
                return false;
            }
            hist.enter(kind, who);
            if announce {
                say("HELD");
            }
            std::thread::sleep(sleep);
            hist.exit(kind, who);
            match (lock, kind) {
                (_, 'S') => sem.as_ref().unwrap().release().unwrap(),
                ("mutex", _) => mutex.release().unwrap(),
                (_, 'R') => rw.read().release().unwrap(),
                _ => rw.write().release().unwrap(),
            }
            true
        };
    let fixed_kind = match lock {
        "read" => 'R',
        l if l.starts_with("semaphore:") => 'S',
        _ => 'W',
    };
    match action {
        "load" => {
            let mut rng = Rng::new(std::process::id() as u64);
            let end = Instant::now() + Duration::from_millis(ms);
            let mut n = 0;
            while Instant::now() < end {
                let kind = if lock == "rw" {
                    if rng.next_f64() < read_fraction {
                        'R'
                    } else {
                        'W'
                    }
                } else {
                    fixed_kind
                };
                let sleep = Duration::from_millis(if kind == 'R' { 20 } else { 3 });
                assert!(hold(kind, None, sleep, false));
                n += 1;
            }
            say(&format!("DONE {n}"));
        }
        "count" => {
            // The mutex `ms` times, each enter line with its fencing token, from when
            // HISTORY.go exists (all holders start at once).
            say("READY");
            let go = format!("{}.go", a[6]);
            while !Path::new(&go).exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
            for _ in 0..ms {
                assert!(mutex.acquire_until_deadline(None));
                hist.enter_with_token('W', who, mutex.fencing_token().unwrap());
                std::thread::sleep(Duration::from_millis(5));
                hist.exit('W', who);
                mutex.release().unwrap();
            }
            say(&format!("DONE {ms}"));
        }
        "hold" => {
            assert!(hold(fixed_kind, None, Duration::from_millis(ms), true));
            say("RELEASED");
        }
        "try" => {
            let ok = hold(
                fixed_kind,
                Some(Instant::now() + Duration::from_millis(ms)),
                Duration::from_millis(10),
                false,
            );
            say(if ok { "ACQUIRED" } else { "NOT_ACQUIRED" });
        }
        other => panic!("unknown worker action {other}"),
    }
}

trait MutexExt {
    fn acquire_until_deadline(&self, deadline: Option<Instant>) -> bool;
}

impl MutexExt for Mutex {
    fn acquire_until_deadline(&self, deadline: Option<Instant>) -> bool {
        match deadline {
            None => self.lock().map(std::mem::forget).is_ok(),
            Some(d) => self
                .try_lock_until(d)
                .unwrap()
                .map(std::mem::forget)
                .is_some(),
        }
    }
}

/// A child process whose stdout lines arrive on a channel.
pub struct Proc {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    pub seen: Vec<String>,
    pub what: String,
}

impl Proc {
    /// Spawns `cmd` with stdout piped into lines.
    pub fn spawn(mut cmd: Command, what: &str) -> Proc {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Proc {
            child,
            lines,
            seen: Vec::new(),
            what: what.to_string(),
        }
    }

    /// Waits for a stdout line equal to `want` (panics on exit or `timeout`).
    pub fn expect_line(&mut self, want: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let hit = l.trim() == want;
                    self.seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "{}: no {want:?} within {timeout:?}; printed {:?}",
                        self.what, self.seen
                    )
                }
                Err(_) => panic!(
                    "{}: ended before printing {want:?}; printed {:?}",
                    self.what, self.seen
                ),
            }
        }
    }

    /// Waits for a successful exit within `timeout` (kills it and panics otherwise); returns
    /// every stdout line.
    pub fn wait_ok(mut self, timeout: Duration) -> Vec<String> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                // Drain what the reader thread still holds.
                std::thread::sleep(Duration::from_millis(50));
                self.seen.extend(self.lines.try_iter());
                assert!(
                    st.success(),
                    "{} exited with {st}; stdout: {:?}",
                    self.what,
                    self.seen
                );
                return std::mem::take(&mut self.seen);
            }
            if Instant::now() >= end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} did not finish within {timeout:?}; stdout: {:?}",
                    self.what, self.seen
                );
            }
            self.seen.extend(self.lines.try_iter());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
