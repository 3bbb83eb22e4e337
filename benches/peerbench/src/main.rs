//! zklock's implementation of the peer-benchmark contract of `../shared/peers/README.md`:
//! the same workloads W1–W5 as `peers/common/python/harness.py` and the Java harness, through
//! zklock's Rust API (or its C ABI for W1–W3 with `BENCH_RECIPE=ffi`), plus W6 (scale) and RT
//! (one plain round trip through the blocking facade, like raw-java's RT).
//!
//! Recipes: `lock` = `Mutex` (W5: `ReadWriteLock`, like the peers' `lock`), `semaphore` =
//! `SemaphoreMutex` (Curator's `InterProcessSemaphoreMutex`), `lease` = `Semaphore` with one
//! lease (kazoo's `Semaphore(max_leases=1)`), `simple` = `SimpleLock`, `rw` = the write half of
//! `ReadWriteLock` (both halves for W5), `ffi` = `Mutex` through the C ABI (W1–W3).
//!
//! ```text
//! peerbench <W1|W2|W3|W4|W5|W6|W7|W8|RT|TLS> [clients]
//! env: ZK_CONNECT (127.0.0.1:2182), BENCH_RECIPE (lock | semaphore | lease | simple | rw | ffi),
//!      BENCH_RUN_ID, BENCH_ITERS BENCH_WARMUP BENCH_DURATION BENCH_SAMPLES BENCH_W3_WARMUP
//!      BENCH_QUEUE_WAIT_MS BENCH_WAITERS BENCH_RELEASES BENCH_SETTLE_S BENCH_READ_FRACTION,
//!      W6: BENCH_W6_HANDOFFS (300) BENCH_W6_WARMUP (20) BENCH_W6_STACK_KIB (64)
//!          BENCH_W6_SESSIONS (per-waiter | shared) BENCH_W6_QUIET_S (0: the server's load
//!          while the formed queue stands still that long; needs BENCH_ZK_PID for its CPU)
//!      W7: BENCH_W7_LOCKS (0) BENCH_W7_HOLD_S (60); every session: BENCH_SESSION_MS (10000)
//!      TLS: BENCH_TLS_ROUNDS (2) BENCH_TLS_CONNECTS (20) BENCH_TLS_FIRST (plain | tls)
//! ```
//!
//! One JSON line per result on stdout, logs on stderr; exit 0 ok, 2 usage, 3 unsupported.
//!
//! W6 (zklock only): a holder and N waiters (threads blocked in `lock()`; N = `clients`, or
//! 10, 100 and 1,000 in turn), each with its own session unless `BENCH_W6_SESSIONS=shared`.
//! Once the queue is formed (the server's armed-watch count reaches N and is stable), the
//! holder releases; every waiter that gets the lock records the handoff latency (the previous
//! holder's release call → this `lock()` returning), releases at once and queues again at the
//! back, so the queue stays N long. Metrics: handoff p50/p99/mean, acquisitions/s, and resident
//! memory (VmRSS) per session and per waiting acquire (thread included, measured between "all
//! sessions connected" and "all N waiters queued").
//!
//! TLS (zklock only, issue 27): TLS beside plaintext in one process. It starts its own two
//! servers (`zklock::testing`, same settings: one plaintext, one TLS-only and
//! server-authenticated; `ZK_CONNECT` is not used) and runs the connect time, W1 and W2 with
//! `clients` (8) against each, in rounds that alternate which server goes first; rows
//! `CONNECT`, `W1` and `W2` with params `transport` (plain | tls) and `round`, then a `TLS` row
//! of TLS ÷ plaintext ratios (see `tls()`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use zklock::{Client, Lockable, Options};

// ------------------------------------------------------------------ environment, logging

fn env_str(k: &str, d: &str) -> String {
    match std::env::var(k) {
        Ok(v) if !v.is_empty() => v,
        _ => d.to_string(),
    }
}

fn env_num<T: std::str::FromStr>(k: &str, d: T) -> T {
    match std::env::var(k) {
        Ok(v) if !v.is_empty() => v.parse().unwrap_or_else(|_| {
            eprintln!("peerbench: bad value {v:?} for {k}");
            std::process::exit(2)
        }),
        _ => d,
    }
}

fn connect_string() -> String {
    env_str("ZK_CONNECT", "127.0.0.1:2182")
}

/// The session timeout every session asks for: `BENCH_SESSION_MS` (10 s by default).
fn session_timeout() -> Duration {
    Duration::from_millis(env_num("BENCH_SESSION_MS", 10_000))
}

fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

macro_rules! log {
    ($($t:tt)*) => { eprintln!("peerbench: {}", format!($($t)*)) };
}

// ------------------------------------------------------------------ a tiny JSON writer

#[derive(Clone)]
enum J {
    Null,
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(String),
    Obj(Vec<(String, J)>),
}

impl J {
    fn write(&self, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Int(i) => out.push_str(&i.to_string()),
            J::Num(x) if x.is_finite() => out.push_str(&format!("{x:?}")),
            J::Num(_) => out.push_str("null"),
            J::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            J::Obj(kv) => {
                out.push('{');
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    J::Str(k.clone()).write(out);
                    out.push_str(": ");
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Builds a JSON object: `obj![("k", J::Int(1)), ...]`.
struct Obj(Vec<(String, J)>);

impl Obj {
    fn new() -> Obj {
        Obj(Vec::new())
    }
    fn put(&mut self, k: &str, v: J) -> &mut Obj {
        self.0.push((k.to_string(), v));
        self
    }
    fn int(&mut self, k: &str, v: impl TryInto<i64>) -> &mut Obj {
        self.put(k, J::Int(v.try_into().unwrap_or(i64::MAX)))
    }
    fn num(&mut self, k: &str, v: f64) -> &mut Obj {
        self.put(k, J::Num(v))
    }
    fn take(&mut self) -> J {
        J::Obj(std::mem::take(&mut self.0))
    }
}

impl J {
    /// A number of an object: `metrics.get("cycle_p50_us")`.
    fn get(&self, k: &str) -> Option<f64> {
        let J::Obj(kv) = self else { return None };
        kv.iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| match v {
                J::Int(i) => Some(*i as f64),
                J::Num(x) => Some(*x),
                _ => None,
            })
    }
}

fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The harness's percentile: the k-th smallest with k = round(p/100·n + 0.5) − 1.
fn pct(sorted: &[u64], p: f64) -> u64 {
    let n = sorted.len();
    let k = ((p / 100.0 * n as f64 + 0.5).round() as i64 - 1).clamp(0, n as i64 - 1);
    sorted[k as usize]
}

fn lat_summary(m: &mut Obj, prefix: &str, xs: &[u64]) {
    let keys = ["p50", "p99", "mean", "max"].map(|s| format!("{prefix}_{s}_us"));
    if xs.is_empty() {
        for k in &keys {
            m.put(k, J::Null);
        }
        return;
    }
    let mut s = xs.to_vec();
    s.sort_unstable();
    let mean = s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64;
    m.num(&keys[0], r1(pct(&s, 50.0) as f64 / 1e3));
    m.num(&keys[1], r1(pct(&s, 99.0) as f64 / 1e3));
    m.num(&keys[2], r1(mean / 1e3));
    m.num(&keys[3], r1(*s.last().unwrap() as f64 / 1e3));
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Local-free ISO timestamp (UTC).
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil_from_days (H. Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn emit(recipe: &str, workload: &str, params: J, metrics: J) {
    let lang = if recipe == "ffi" {
        "rust (C ABI)"
    } else {
        "rust"
    };
    let rec = Obj::new()
        .put("impl", J::Str("zklock".into()))
        .put("recipe", J::Str(recipe.into()))
        .put("workload", J::Str(workload.into()))
        .put("params", params)
        .put("metrics", metrics)
        .put("lib_version", J::Str(env!("CARGO_PKG_VERSION").into()))
        .put("lang", J::Str(lang.into()))
        .put("host", J::Str(hostname()))
        .put("ts", J::Str(timestamp()))
        .put("run_id", J::Str(env_str("BENCH_RUN_ID", "")))
        .take();
    let mut s = String::new();
    rec.write(&mut s);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

// ------------------------------------------------------------------ server probes (4lw)

fn four_letter(cmd: &str) -> String {
    let cs = connect_string();
    let first = cs.split(',').next().unwrap_or_default();
    let first = first.split('/').next().unwrap_or_default();
    let mut out = String::new();
    if let Ok(mut s) = TcpStream::connect(first) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.write_all(cmd.as_bytes());
        let _ = s.read_to_string(&mut out);
    }
    out
}

fn mntr_lines() -> Vec<(String, String)> {
    four_letter("mntr")
        .lines()
        .filter_map(|l| {
            l.split_once('\t')
                .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Sum of watchers the server triggered (mntr `zk_sum_node_*_watch_count`).
fn server_watch_triggers() -> i64 {
    mntr_lines()
        .iter()
        .filter(|(k, _)| k.starts_with("zk_sum_node_") && k.ends_with("_watch_count"))
        .map(|(_, v)| v.parse::<f64>().unwrap_or(0.0) as i64)
        .sum()
}

/// mntr `zk_watch_count`: data + child watches armed.
fn server_watch_count() -> i64 {
    mntr_lines()
        .iter()
        .find(|(k, _)| k == "zk_watch_count")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(-1)
}

/// wchs "Total watches" (data watches only in 3.8).
fn server_watches_armed() -> i64 {
    four_letter("wchs")
        .lines()
        .find(|l| l.contains("Total watches"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// W4's "queue formed": the server's armed-watch count unchanged for 1 s (four polls 250 ms
/// apart), at most `limit`. Returns the count.
fn wait_queue_formed(limit: Duration) -> i64 {
    let t = Instant::now();
    let (mut prev, mut stable) = (-1, 0);
    while t.elapsed() < limit {
        let w = server_watch_count();
        stable = if w == prev { stable + 1 } else { 0 };
        prev = w;
        if stable >= 4 && t.elapsed() > Duration::from_secs(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    prev
}

/// mntr `zk_packets_received`: every packet the server has read from its clients.
fn server_packets_received() -> i64 {
    mntr_lines()
        .iter()
        .find(|(k, _)| k == "zk_packets_received")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(-1)
}

/// One sample of the server's load: (now_ns, CPU seconds of the server process `BENCH_ZK_PID`
/// (utime + stime), if given and readable, mntr `zk_packets_received`).
type LoadSample = (u64, Option<f64>, i64);

fn server_load_sample() -> LoadSample {
    let cpu = std::env::var("BENCH_ZK_PID").ok().and_then(|pid| {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let f: Vec<&str> = st.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        // /proc counts in USER_HZ clock ticks, 100 a second on Linux
        Some(ticks / 100.0)
    });
    (now_ns(), cpu, server_packets_received())
}

/// The server's load between two samples, into `m`: `<prefix>_server_cpu_pct` (% of one core),
/// `<prefix>_server_pkts_per_s` and `<prefix>_s` (the window).
fn server_load(a: LoadSample, b: LoadSample, prefix: &str, m: &mut Obj) {
    let dt = b.0.saturating_sub(a.0) as f64 / 1e9;
    let cpu = match (a.1, b.1) {
        (Some(x), Some(y)) if dt > 0.0 => J::Num(r1(100.0 * (y - x) / dt)),
        _ => J::Null,
    };
    m.put(&format!("{prefix}_server_cpu_pct"), cpu);
    m.put(
        &format!("{prefix}_server_pkts_per_s"),
        if dt > 0.0 {
            J::Num(r1((b.2 - a.2) as f64 / dt))
        } else {
            J::Null
        },
    );
    m.num(&format!("{prefix}_s"), r2(dt));
}

/// (VmRSS KiB, Threads) of this process.
fn proc_status() -> (i64, i64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1)
    };
    (field("VmRSS:"), field("Threads:"))
}

/// Resident memory of this process, bytes (VmRSS).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

// ------------------------------------------------------------------ lock adapters

/// The harness's view of one lock handle of one session.
trait Lock: Send + Sync {
    fn acquire(&self) -> zklock::Result<()>;
    fn release(&self) -> zklock::Result<()>;
    fn cancel(&self);
}

/// Every recipe through the library's own `Lockable` (a `Semaphore` takes one lease per call).
impl<T: zklock::Lockable + Send + Sync> Lock for T {
    fn acquire(&self) -> zklock::Result<()> {
        zklock::Lockable::acquire(self, zklock::Deadline::Forever)?
            .map(drop)
            .ok_or(zklock::Error::Timeout)
    }
    fn release(&self) -> zklock::Result<()> {
        zklock::Lockable::release(self)
    }
    fn cancel(&self) {
        zklock::Lockable::cancel(self)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Recipe {
    /// `Mutex` (W5: `ReadWriteLock`).
    Lock,
    /// `SemaphoreMutex` (Curator's `InterProcessSemaphoreMutex`).
    Semaphore,
    /// `Semaphore` with one lease (kazoo's `Semaphore(max_leases=1)`).
    Lease,
    /// `SimpleLock`.
    Simple,
    /// `Mutex` through the C ABI (W1–W3).
    Ffi,
    /// `ReadWriteLock`: its write half for W1–W4 and W6, both halves for W5.
    Rw,
}

impl Recipe {
    fn parse(s: &str) -> Option<Recipe> {
        Some(match s {
            "" | "lock" | "mutex" => Recipe::Lock,
            "semaphore" => Recipe::Semaphore,
            "lease" => Recipe::Lease,
            "simple" => Recipe::Simple,
            "ffi" => Recipe::Ffi,
            "rw" => Recipe::Rw,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            Recipe::Lock => "lock",
            Recipe::Semaphore => "semaphore",
            Recipe::Lease => "lease",
            Recipe::Simple => "simple",
            Recipe::Ffi => "ffi",
            Recipe::Rw => "rw",
        }
    }
}

/// One session of the benchmark: the Rust client, or a C-ABI client for `ffi`.
enum Session {
    Rust(Client),
    Ffi(ffi::FfiClient),
}

struct Bench {
    recipe: Recipe,
    /// The host list every session connects to (`ZK_CONNECT` unless a mode starts its own servers).
    hosts: String,
    /// The options of every Rust session (the TLS mode adds `Options::tls`).
    options: Options,
    /// Extra params of every W1/W2 row (the TLS mode's `transport` and `round`).
    tags: Vec<(String, J)>,
}

impl Bench {
    /// The harness's bench: sessions to `ZK_CONNECT` with the session timeout `BENCH_SESSION_MS`
    /// (10 s by default).
    fn new(recipe: Recipe) -> Bench {
        Bench {
            recipe,
            hosts: connect_string(),
            options: Options::default().session_timeout(session_timeout()),
            tags: Vec::new(),
        }
    }

    /// A row's params: `o` and this bench's tags.
    fn params(&self, o: &mut Obj) -> J {
        for (k, v) in &self.tags {
            o.put(k, v.clone());
        }
        o.take()
    }

    fn new_client(&self) -> Session {
        if self.recipe == Recipe::Ffi {
            return Session::Ffi(ffi::FfiClient::connect(&self.hosts).unwrap_or_else(|e| {
                log!("C ABI connect failed: {e}");
                std::process::exit(1)
            }));
        }
        let c = Client::connect(&self.hosts, self.options.clone()).unwrap_or_else(|e| {
            log!("connect failed: {e}");
            std::process::exit(1)
        });
        Session::Rust(c)
    }

    fn lock(&self, s: &Session, path: &str) -> Box<dyn Lock> {
        let r: zklock::Result<Box<dyn Lock>> = match (s, self.recipe) {
            (Session::Rust(c), Recipe::Lock) => {
                zklock::Mutex::new(c, path).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Semaphore) => {
                zklock::SemaphoreMutex::new(c, path).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Lease) => {
                zklock::Semaphore::new(c, path, 1).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Simple) => {
                zklock::SimpleLock::new(c, path).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Rw) => zklock::ReadWriteLock::new(c, path)
                .map(|m| Box::new(m.write_lock()) as Box<dyn Lock>),
            (Session::Ffi(c), _) => c.mutex(path).map(|m| Box::new(m) as Box<dyn Lock>),
            (Session::Rust(_), Recipe::Ffi) => unreachable!("an ffi bench has C-ABI sessions"),
        };
        r.unwrap_or_else(|e| {
            log!("lock handle: {e}");
            std::process::exit(1)
        })
    }

    fn notifications(&self, s: &Session) -> u64 {
        match s {
            Session::Rust(c) => c.watch_events(),
            Session::Ffi(_) => 0,
        }
    }

    fn close(&self, s: Session) {
        match s {
            Session::Rust(c) => c.close(),
            Session::Ffi(c) => drop(c),
        }
    }

    /// A fresh path per run under `/peerbench/zklock-<recipe>/`. Every node zklock creates
    /// above its lock nodes is a container, which the server deletes once empty (within
    /// `znode.container.checkIntervalMs`, 60 s by default), so nothing is left behind.
    fn base_path(&self, w: &str) -> String {
        let rid = env_str("BENCH_RUN_ID", &std::process::id().to_string());
        let rnd = (now_ns() ^ (u64::from(std::process::id()) << 20)) % (1 << 30);
        format!("/peerbench/zklock-{}/{w}-{rid}-{rnd}", self.recipe.name())
    }
}

fn must(r: zklock::Result<()>, what: &str) {
    if let Err(e) = r {
        log!("{what}: {e}");
        std::process::exit(1);
    }
}

// ------------------------------------------------------------------ W1

/// W1; returns the row's metrics.
fn w1(b: &Bench) -> J {
    let iters: usize = env_num("BENCH_ITERS", 2000);
    let warm: usize = env_num("BENCH_WARMUP", 100);
    let path = b.base_path("W1");
    let c = b.new_client();
    let m = b.lock(&c, &path);
    for _ in 0..warm {
        must(m.acquire(), "acquire");
        must(m.release(), "release");
    }
    let mut lat = Vec::with_capacity(iters);
    let cpu_start = zklock::testing::process::process_cpu_time();
    let t_start = now_ns();
    for _ in 0..iters {
        let t = now_ns();
        must(m.acquire(), "acquire");
        must(m.release(), "release");
        lat.push(now_ns() - t);
    }
    let el = (now_ns() - t_start) as f64 / 1e9;
    let cpu = zklock::testing::process::process_cpu_time() - cpu_start;
    let mut met = Obj::new();
    lat_summary(&mut met, "cycle", &lat);
    met.num("cycles_per_s", r1(iters as f64 / el));
    // Client CPU (user + sys, every thread of this process) per cycle: no busy-waiting.
    met.num(
        "cpu_us_per_cycle",
        r1(cpu.as_secs_f64() * 1e6 / iters as f64),
    );
    let params = b.params(
        Obj::new()
            .int("iters", iters)
            .int("warmup", warm)
            .int("clients", 1),
    );
    let met = met.take();
    emit(b.recipe.name(), "W1", params, met.clone());
    drop(m);
    b.close(c);
    met
}

// ------------------------------------------------------------------ RT

/// Extra, like raw-java's `RT`: one plain round trip through zklock's blocking facade (listing
/// the queue of an empty lock path: one getChildren answered NoNode), 2000 after 200 warm-up.
fn rt(b: &Bench) {
    let path = b.base_path("RT");
    let Session::Rust(c) = b.new_client() else {
        log!("RT runs through the Rust API only");
        std::process::exit(3)
    };
    let m = zklock::Mutex::new(&c, &path).unwrap_or_else(|e| {
        log!("{e}");
        std::process::exit(1)
    });
    let one = || {
        let t = now_ns();
        if let Err(e) = m.participants() {
            log!("participants: {e}");
            std::process::exit(1);
        }
        now_ns() - t
    };
    for _ in 0..200 {
        one();
    }
    let xs: Vec<u64> = (0..2000).map(|_| one()).collect();
    let mut met = Obj::new();
    lat_summary(&mut met, "rt", &xs);
    emit(
        "participants",
        "RT",
        Obj::new().int("iters", 2000).take(),
        met.take(),
    );
    c.close();
}

// ------------------------------------------------------------------ W2

/// W2 with `clients` sessions; returns the row's metrics.
fn w2(b: &Bench, clients: usize) -> J {
    let dur: f64 = env_num("BENCH_DURATION", 10.0);
    let path = b.base_path("W2");
    let cs: Vec<Session> = (0..clients).map(|_| b.new_client()).collect();
    let ms: Vec<Box<dyn Lock>> = cs.iter().map(|c| b.lock(c, &path)).collect();
    let holder = AtomicBool::new(false);
    let counter = AtomicU64::new(0);
    let viol = AtomicU64::new(0);
    let late = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let end = AtomicU64::new(u64::MAX);
    let go = std::sync::Barrier::new(clients + 1);
    let results: Vec<(u64, Vec<u64>)> = std::thread::scope(|s| {
        let hs: Vec<_> = ms
            .iter()
            .map(|m| {
                let (holder, counter, viol, late, stop, end, go) =
                    (&holder, &counter, &viol, &late, &stop, &end, &go);
                s.spawn(move || {
                    let mut count = 0u64;
                    let mut waits = Vec::new();
                    go.wait();
                    while !stop.load(Ordering::Relaxed) {
                        let t = now_ns();
                        if let Err(e) = m.acquire() {
                            log!("worker: {e}");
                            break;
                        }
                        let ta = now_ns();
                        // critical section: overlap detection + non-atomic increment
                        if holder.swap(true, Ordering::SeqCst) {
                            viol.fetch_add(1, Ordering::Relaxed);
                        }
                        let v = counter.load(Ordering::SeqCst);
                        std::thread::yield_now();
                        counter.store(v + 1, Ordering::SeqCst);
                        holder.store(false, Ordering::SeqCst);
                        if let Err(e) = m.release() {
                            log!("worker release: {e}");
                            break;
                        }
                        if ta <= end.load(Ordering::Relaxed) {
                            count += 1;
                            waits.push(ta - t);
                        } else {
                            late.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    (count, waits)
                })
            })
            .collect();
        end.store(now_ns() + (dur * 1e9) as u64, Ordering::SeqCst);
        go.wait();
        std::thread::sleep(Duration::from_secs_f64(dur));
        stop.store(true, Ordering::SeqCst);
        hs.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let total: u64 = results.iter().map(|r| r.0).sum();
    let all: Vec<u64> = results.iter().flat_map(|r| r.1.iter().copied()).collect();
    let lost = (total + late.load(Ordering::SeqCst)) as i64 - counter.load(Ordering::SeqCst) as i64;
    let mut met = Obj::new();
    met.num("acq_per_s", r1(total as f64 / dur))
        .int("total_acq", total)
        .int("fair_min", results.iter().map(|r| r.0).min().unwrap_or(0))
        .int("fair_max", results.iter().map(|r| r.0).max().unwrap_or(0))
        .int(
            "violations",
            viol.load(Ordering::SeqCst) as i64 + lost.max(0),
        )
        .int("lost_updates", lost);
    lat_summary(&mut met, "wait", &all);
    let met = met.take();
    emit(
        b.recipe.name(),
        "W2",
        b.params(Obj::new().int("clients", clients).num("duration_s", dur)),
        met.clone(),
    );
    drop(ms);
    for c in cs {
        b.close(c);
    }
    met
}

// ------------------------------------------------------------------ W3

fn w3(b: &Bench) {
    let samples: usize = env_num("BENCH_SAMPLES", 300);
    let warm: usize = env_num("BENCH_W3_WARMUP", 10);
    let qwait: f64 = env_num("BENCH_QUEUE_WAIT_MS", 20.0);
    let path = b.base_path("W3");
    let (ca, cb) = (b.new_client(), b.new_client());
    let (ma, mb) = (b.lock(&ca, &path), b.lock(&cb, &path));
    let (go_tx, go_rx) = mpsc::channel::<bool>();
    let (got_tx, got_rx) = mpsc::channel::<u64>();
    let mut xs = Vec::with_capacity(samples);
    std::thread::scope(|s| {
        let mb = &mb;
        s.spawn(move || {
            while let Ok(true) = go_rx.recv() {
                must(mb.acquire(), "B acquire");
                let t1 = now_ns();
                must(mb.release(), "B release");
                let _ = got_tx.send(t1);
            }
        });
        for i in 0..samples + warm {
            must(ma.acquire(), "A acquire");
            let _ = go_tx.send(true);
            std::thread::sleep(Duration::from_secs_f64(qwait / 1e3)); // let B queue
            let t0 = now_ns();
            must(ma.release(), "A release");
            let t1 = got_rx.recv().expect("B reports");
            if i >= warm {
                xs.push(t1.saturating_sub(t0));
            }
        }
        let _ = go_tx.send(false);
    });
    let mut met = Obj::new();
    lat_summary(&mut met, "handoff", &xs);
    emit(
        b.recipe.name(),
        "W3",
        Obj::new()
            .int("samples", samples)
            .num("queue_wait_ms", qwait)
            .take(),
        met.take(),
    );
    drop((ma, mb));
    b.close(ca);
    b.close(cb);
}

// ------------------------------------------------------------------ W4

fn w4(b: &Bench) {
    let waiters: usize = env_num("BENCH_WAITERS", 50);
    let releases: usize = env_num("BENCH_RELEASES", 20);
    let settle: f64 = env_num("BENCH_SETTLE_S", 1.0);
    let path = b.base_path("W4");
    let holder = b.new_client();
    let cs: Vec<Session> = (0..waiters).map(|_| b.new_client()).collect();
    let hm = b.lock(&holder, &path);
    let ms: Vec<Box<dyn Lock>> = cs.iter().map(|c| b.lock(c, &path)).collect();
    must(hm.acquire(), "holder acquire");
    let released = StdMutex::new(0usize);
    let done = (StdMutex::new(None::<u64>), Condvar::new());
    let notif = |all: &[Session]| {
        all.iter().map(|c| b.notifications(c)).sum::<u64>() + b.notifications(&holder)
    };
    let mut met = Obj::new();
    std::thread::scope(|s| {
        for m in &ms {
            let (released, done) = (&released, &done);
            s.spawn(move || {
                if m.acquire().is_err() {
                    return; // cancelled at cleanup
                }
                let last = {
                    let mut r = released.lock().unwrap();
                    if *r < releases {
                        *r += 1;
                        false
                    } else {
                        true
                    }
                };
                if last {
                    *done.0.lock().unwrap() = Some(now_ns());
                    done.1.notify_all();
                    return; // keep holding; released at cleanup
                }
                must(m.release(), "waiter release");
            });
        }
        // wait until the queue is formed: armed watches stable for 1 s
        wait_queue_formed(Duration::from_secs(60));
        let armed_before = server_watches_armed();
        let mntr_before = server_watch_count();
        let n0 = notif(&cs);
        let s0 = server_watch_triggers();
        let t0 = now_ns();
        *released.lock().unwrap() = 1;
        must(hm.release(), "holder release");
        let (t_end, ok) = {
            let g = done.0.lock().unwrap();
            let (g, _) = done
                .1
                .wait_timeout_while(g, Duration::from_secs(120), |t| t.is_none())
                .unwrap();
            ((*g).unwrap_or_else(now_ns), g.is_some())
        };
        std::thread::sleep(Duration::from_secs_f64(settle));
        let n1 = notif(&cs);
        let s1 = server_watch_triggers();
        let armed_after = server_watches_armed();
        let mntr_after = server_watch_count();
        met.num(
            "notifications_per_release",
            r2((n1 - n0) as f64 / releases as f64),
        )
        .int("client_notifications", n1 - n0)
        .num(
            "server_triggers_per_release",
            r2((s1 - s0) as f64 / releases as f64),
        )
        .int("server_triggers", s1 - s0)
        .int("wchs_total_before", armed_before)
        .int("wchs_total_after", armed_after)
        .int("mntr_watch_count_before", mntr_before)
        .int("mntr_watch_count_after", mntr_after)
        .put("completed", J::Bool(ok))
        .num(
            "mean_handoff_us",
            r1((t_end - t0) as f64 / releases as f64 / 1e3),
        );
        for m in &ms {
            m.cancel();
        }
    });
    emit(
        b.recipe.name(),
        "W4",
        Obj::new()
            .int("waiters", waiters)
            .int("releases", releases)
            .take(),
        met.take(),
    );
    drop(ms);
    drop(hm);
    for c in cs {
        b.close(c);
    }
    b.close(holder);
}

// ------------------------------------------------------------------ W5

fn w5(b: &Bench, clients: usize) {
    if !matches!(b.recipe, Recipe::Lock | Recipe::Rw) {
        log!(
            "zklock/{}: W5 unsupported (the read-write lock is recipe lock or rw)",
            b.recipe.name()
        );
        std::process::exit(3);
    }
    let dur: f64 = env_num("BENCH_DURATION", 10.0);
    let rfrac: f64 = env_num("BENCH_READ_FRACTION", 0.8);
    let path = b.base_path("W5");
    let cs: Vec<Session> = (0..clients).map(|_| b.new_client()).collect();
    let hs: Vec<(zklock::ReadLock, zklock::WriteLock)> = cs
        .iter()
        .map(|c| {
            let Session::Rust(c) = c else {
                unreachable!("W5 runs through the Rust API")
            };
            let rw = zklock::ReadWriteLock::new(c, &path).unwrap_or_else(|e| {
                log!("rw lock: {e}");
                std::process::exit(1)
            });
            (rw.read_lock(), rw.write_lock())
        })
        .collect();
    // (readers, writer, max readers, violations)
    let st = StdMutex::new((0u32, false, 0u32, 0u64));
    let stop = AtomicBool::new(false);
    let end = now_ns() + (dur * 1e9) as u64;
    let results: Vec<(Vec<u64>, Vec<u64>)> = std::thread::scope(|s| {
        let ths: Vec<_> = hs
            .iter()
            .enumerate()
            .map(|(i, (rl, wl))| {
                let (st, stop) = (&st, &stop);
                s.spawn(move || {
                    let mut rng = 1000 + i as u64;
                    let (mut rw, mut ww) = (Vec::new(), Vec::new());
                    while !stop.load(Ordering::Relaxed) {
                        let is_read = uniform(&mut rng) < rfrac;
                        let h: &dyn Lock = if is_read { rl } else { wl };
                        let t = now_ns();
                        if let Err(e) = h.acquire() {
                            log!("rw worker: {e}");
                            break;
                        }
                        let ta = now_ns();
                        {
                            let mut g = st.lock().unwrap();
                            if is_read {
                                g.3 += u64::from(g.1);
                                g.0 += 1;
                                g.2 = g.2.max(g.0);
                            } else {
                                g.3 += u64::from(g.1 || g.0 > 0);
                                g.1 = true;
                            }
                        }
                        std::thread::yield_now();
                        {
                            let mut g = st.lock().unwrap();
                            if is_read {
                                g.0 -= 1;
                            } else {
                                g.1 = false;
                            }
                        }
                        if let Err(e) = h.release() {
                            log!("rw worker release: {e}");
                            break;
                        }
                        if ta <= end {
                            if is_read { &mut rw } else { &mut ww }.push(ta - t);
                        }
                    }
                    (rw, ww)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(dur));
        stop.store(true, Ordering::SeqCst);
        ths.into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let r: Vec<u64> = results.iter().flat_map(|x| x.0.iter().copied()).collect();
    let w: Vec<u64> = results.iter().flat_map(|x| x.1.iter().copied()).collect();
    let g = *st.lock().unwrap();
    let mut met = Obj::new();
    met.num("ops_per_s", r1((r.len() + w.len()) as f64 / dur))
        .num("read_ops_per_s", r1(r.len() as f64 / dur))
        .num("write_ops_per_s", r1(w.len() as f64 / dur))
        .int("violations", g.3)
        .int("max_concurrent_readers", g.2);
    lat_summary(&mut met, "read_wait", &r);
    lat_summary(&mut met, "write_wait", &w);
    let params = Obj::new()
        .int("clients", clients)
        .num("duration_s", dur)
        .num("read_fraction", rfrac)
        .take();
    emit(b.recipe.name(), "W5", params, met.take());
    drop(hs);
    for c in cs {
        b.close(c);
    }
}

/// A uniform number in [0, 1) (splitmix64), seeded per client like the harness's.
fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

// ------------------------------------------------------------------ W6

/// What one W6 round measured.
#[derive(Default)]
struct Round {
    /// Handoff latencies recorded (ns).
    lat: Vec<u64>,
    /// First recorded handoff's release time and last recorded acquisition time.
    window: (u64, u64),
    completed: bool,
    errors: usize,
    rss_queued: u64,
    armed: i64,
    form_ns: u64,
    /// The server's load while the queue stood still (`BENCH_W6_QUIET_S`), then from the
    /// holder's release to the last recorded handoff.
    queued_load: Option<(LoadSample, LoadSample)>,
    run_load: Option<(LoadSample, LoadSample)>,
}

/// One W6 round: the holder holds, `ms.len()` waiter threads queue, the holder releases and
/// the chain runs; acquisitions `skip..skip + take` are recorded. With `requeue` every waiter
/// queues again after its release (steady queue length), otherwise each acquires once.
fn w6_round(
    hm: &dyn Lock,
    ms: &[Box<dyn Lock>],
    stack_kib: usize,
    requeue: bool,
    skip: usize,
    take: usize,
    watches0: i64,
) -> Round {
    let n = ms.len();
    let count = AtomicUsize::new(0);
    let last_release = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let alive = AtomicUsize::new(n);
    let lat = StdMutex::new(Vec::with_capacity(take));
    let window = StdMutex::new((0u64, 0u64));
    let done = (StdMutex::new(false), Condvar::new());
    let errors = AtomicUsize::new(0);
    let mut r = Round::default();
    must(hm.acquire(), "holder acquire");
    let t_spawn = now_ns();
    std::thread::scope(|s| {
        for m in ms {
            let (count, last_release, stop, alive, lat, window, done, errors) = (
                &count,
                &last_release,
                &stop,
                &alive,
                &lat,
                &window,
                &done,
                &errors,
            );
            std::thread::Builder::new()
                .stack_size(stack_kib * 1024)
                .spawn_scoped(s, move || {
                    while !stop.load(Ordering::SeqCst) {
                        match m.acquire() {
                            Ok(()) => {}
                            Err(zklock::Error::Cancelled) => break,
                            Err(e) => {
                                if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                                    log!("W6 waiter: {e}");
                                }
                                break;
                            }
                        }
                        let t = now_ns();
                        let k = count.fetch_add(1, Ordering::SeqCst);
                        let prev = last_release.load(Ordering::SeqCst);
                        if k >= skip && k < skip + take {
                            lat.lock().unwrap().push(t.saturating_sub(prev));
                        }
                        if k == skip {
                            window.lock().unwrap().0 = prev;
                        }
                        if k + 1 == skip + take {
                            window.lock().unwrap().1 = t;
                            stop.store(true, Ordering::SeqCst);
                            *done.0.lock().unwrap() = true;
                            done.1.notify_all();
                        }
                        last_release.store(now_ns(), Ordering::SeqCst);
                        if let Err(e) = m.release() {
                            log!("W6 release: {e}");
                            break;
                        }
                        if !requeue {
                            break;
                        }
                    }
                    alive.fetch_sub(1, Ordering::SeqCst);
                })
                .expect("spawn a waiter thread");
        }
        // The queue is formed when every waiter has armed its one watch.
        r.armed = wait_armed(watches0 + n as i64, Duration::from_secs(300)) - watches0;
        r.form_ns = now_ns() - t_spawn;
        r.rss_queued = rss_bytes();
        // the queue stands still: what N queued sessions cost the server
        let quiet: f64 = env_num("BENCH_W6_QUIET_S", 0.0);
        let q0 = server_load_sample();
        if quiet > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(quiet));
            r.queued_load = Some((q0, server_load_sample()));
        }
        let q1 = server_load_sample();
        last_release.store(now_ns(), Ordering::SeqCst);
        must(hm.release(), "holder release");
        r.completed = {
            let g = done.0.lock().unwrap();
            let (g, _) = done
                .1
                .wait_timeout_while(g, Duration::from_secs(300), |d| !*d)
                .unwrap();
            *g
        };
        r.run_load = Some((q1, server_load_sample()));
        stop.store(true, Ordering::SeqCst);
        // Cancel whatever still waits; an acquire that starts after a cancel is not affected,
        // so repeat until every thread is out.
        let t_stop = Instant::now();
        while alive.load(Ordering::SeqCst) > 0 && t_stop.elapsed() < Duration::from_secs(120) {
            for m in ms {
                m.cancel();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    r.lat = std::mem::take(&mut *lat.lock().unwrap());
    r.window = *window.lock().unwrap();
    r.errors = errors.load(Ordering::Relaxed);
    r
}

/// Waits until the server's armed-watch count reaches `target` and holds still for 0.2 s.
fn wait_armed(target: i64, limit: Duration) -> i64 {
    let t = Instant::now();
    let (mut prev, mut stable) = (-1, 0);
    while t.elapsed() < limit {
        let w = server_watch_count();
        stable = if w == prev { stable + 1 } else { 0 };
        prev = w;
        if w >= target && stable >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    prev
}

fn w6(b: &Bench, n: usize) {
    let handoffs: usize = env_num("BENCH_W6_HANDOFFS", 300);
    let warm: usize = env_num("BENCH_W6_WARMUP", 20);
    let stack_kib: usize = env_num("BENCH_W6_STACK_KIB", 64);
    let shared = match env_str("BENCH_W6_SESSIONS", "per-waiter").as_str() {
        "shared" => true,
        "per-waiter" => false,
        o => {
            log!("BENCH_W6_SESSIONS must be per-waiter or shared, not {o:?}");
            std::process::exit(2)
        }
    };
    let mode = env_str("BENCH_W6_MODE", "requeue");
    let requeue = match mode.as_str() {
        "requeue" => true,
        "drain" => false,
        o => {
            log!("BENCH_W6_MODE must be requeue or drain, not {o:?}");
            std::process::exit(2)
        }
    };
    if b.recipe == Recipe::Ffi {
        log!("W6 runs through the Rust API only");
        std::process::exit(3);
    }
    if n < 2 {
        log!("W6 needs at least 2 waiters");
        std::process::exit(2);
    }
    let path = b.base_path(&format!("W6{mode}{n}"));
    let rss0 = rss_bytes();
    let holder = b.new_client();
    let cs: Vec<Session> = if shared {
        Vec::new()
    } else {
        (0..n).map(|_| b.new_client()).collect()
    };
    let hm = b.lock(&holder, &path);
    let handles = || -> Vec<Box<dyn Lock>> {
        (0..n)
            .map(|i| b.lock(if shared { &holder } else { &cs[i] }, &path))
            .collect()
    };
    let mut ms = handles();
    let watches0 = server_watch_count().max(0);
    let rss1 = rss_bytes();

    // requeue: one round, `warm` acquisitions skipped. drain: rounds of n - 1 recorded
    // handoffs (the first acquisition of a round, by the waiter queued right behind the
    // holder, is skipped: it needs no listing), until `handoffs` are recorded.
    let mut rounds = Vec::new();
    let mut recorded = 0;
    while recorded < handoffs {
        let (skip, take) = if requeue {
            (warm, handoffs)
        } else {
            (1, (n - 1).min(handoffs - recorded))
        };
        if !rounds.is_empty() {
            // Fresh handles: a round ends by cancelling its waiters, and a cancel that finds no
            // acquire under way is kept for the handle's next one (a drain round's waiters are
            // mostly done by then), which would end at once.
            ms = handles();
        }
        let r = w6_round(hm.as_ref(), &ms, stack_kib, requeue, skip, take, watches0);
        recorded += r.lat.len();
        let stop = !r.completed || r.errors > 0 || r.lat.is_empty();
        rounds.push(r);
        if stop {
            break;
        }
    }
    let first = &rounds[0];
    let xs: Vec<u64> = rounds.iter().flat_map(|r| r.lat.iter().copied()).collect();
    let busy_ns: u64 = rounds
        .iter()
        .map(|r| r.window.1.saturating_sub(r.window.0))
        .sum();
    let ok = rounds.iter().all(|r| r.completed && r.errors == 0);
    let mut met = Obj::new();
    met.int("waiters", n).put("mode", J::Str(mode.clone()));
    lat_summary(&mut met, "handoff", &xs);
    met.num(
        "acq_per_s",
        if ok && busy_ns > 0 {
            r1(xs.len() as f64 / (busy_ns as f64 / 1e9))
        } else {
            0.0
        },
    )
    .int("handoffs", xs.len())
    .int("rounds", rounds.len())
    .put("completed", J::Bool(ok))
    .int("armed_watches", first.armed)
    .num(
        "rss_per_session_kib",
        r1(rss1.saturating_sub(rss0) as f64 / n as f64 / 1024.0),
    )
    .num(
        "rss_per_waiter_kib",
        r1((first.rss_queued as f64 - rss1 as f64) / n as f64 / 1024.0),
    )
    .num("rss_before_mib", r1(rss1 as f64 / 1048576.0))
    .num("rss_queued_mib", r1(first.rss_queued as f64 / 1048576.0))
    .int("thread_stack_kib", stack_kib)
    .num("queue_form_s", r2(first.form_ns as f64 / 1e9));
    if let Some((a, z)) = first.queued_load {
        server_load(a, z, "queued", &mut met);
    }
    if let Some((a, z)) = first.run_load {
        server_load(a, z, "run", &mut met);
    }
    met.put(
        "sessions",
        J::Str(if shared {
            "shared".into()
        } else {
            "per-waiter".into()
        }),
    );
    let params = Obj::new()
        .int("clients", n)
        .int("waiters", n)
        .int("handoffs", handoffs)
        .put("mode", J::Str(mode))
        .take();
    emit(b.recipe.name(), "W6", params, met.take());
    drop(ms);
    drop(hm);
    for c in cs {
        b.close(c);
    }
    b.close(holder);
}

// ------------------------------------------------------------------ W7 hold open, W8 threads

/// W7 hold open: `sessions` sessions, each holding `BENCH_W7_LOCKS` (0 = idle) locks on
/// distinct paths, kept open `BENCH_W7_HOLD_S` (60) seconds and measured from outside
/// (scripts/bench-scale.sh: the server's `cons` per connection, /proc/<pid>/status). Logs
/// "W7 READY pid=<pid>" on stderr once everything is held; the row comes at the end.
fn w7(b: &Bench, sessions: usize) {
    let locks: usize = env_num("BENCH_W7_LOCKS", 0);
    let hold: f64 = env_num("BENCH_W7_HOLD_S", 60.0);
    let path = b.base_path("W7");
    let t = Instant::now();
    let cs: Vec<Session> = (0..sessions).map(|_| b.new_client()).collect();
    let mut held = Vec::with_capacity(sessions * locks);
    for (i, c) in cs.iter().enumerate() {
        for j in 0..locks {
            let m = b.lock(c, &format!("{path}/s{i}-l{j}"));
            must(m.acquire(), "W7 acquire");
            held.push(m);
        }
    }
    let setup = t.elapsed().as_secs_f64();
    log!("W7 READY pid={}", std::process::id());
    std::thread::sleep(Duration::from_secs_f64(hold));
    let (rss, threads) = proc_status();
    let met = Obj::new()
        .num("setup_s", r2(setup))
        .int("rss_kib", rss)
        .int("threads", threads)
        .take();
    let params = Obj::new()
        .int("sessions", sessions)
        .int("locks", locks)
        .num("hold_s", hold)
        .take();
    emit(b.recipe.name(), "W7", params, met);
    for m in &held {
        let _ = m.release();
    }
    drop(held);
    for c in cs {
        b.close(c);
    }
}

/// W8 many threads, one session: `threads` threads share ONE session, each loops acquire →
/// release on its own lock path for `BENCH_DURATION` seconds. Metric: acquisitions per second.
fn w8(b: &Bench, threads: usize) {
    let dur: f64 = env_num("BENCH_DURATION", 10.0);
    let path = b.base_path("W8");
    let c = b.new_client();
    let ms: Vec<Box<dyn Lock>> = (0..threads)
        .map(|i| b.lock(&c, &format!("{path}/t{i}")))
        .collect();
    for m in &ms {
        // the parents are created outside the timed loop
        must(m.acquire(), "W8 acquire");
        must(m.release(), "W8 release");
    }
    let go = std::sync::Barrier::new(threads + 1);
    let end = AtomicU64::new(u64::MAX);
    let mut t0 = 0;
    let counts: Vec<u64> = std::thread::scope(|s| {
        let hs: Vec<_> = ms
            .iter()
            .map(|m| {
                let (go, end) = (&go, &end);
                s.spawn(move || {
                    go.wait();
                    let end = end.load(Ordering::SeqCst);
                    let mut k = 0u64;
                    while now_ns() < end {
                        must(m.acquire(), "W8 acquire");
                        must(m.release(), "W8 release");
                        k += 1;
                    }
                    k
                })
            })
            .collect();
        t0 = now_ns();
        end.store(t0 + (dur * 1e9) as u64, Ordering::SeqCst);
        go.wait();
        hs.into_iter().map(|h| h.join().unwrap_or(0)).collect()
    });
    let secs = (now_ns() - t0) as f64 / 1e9;
    let tot: u64 = counts.iter().sum();
    let met = Obj::new()
        .num("acq_per_s", r1(tot as f64 / secs))
        .int("total_acq", tot)
        .int("fair_min", counts.iter().copied().min().unwrap_or(0))
        .int("fair_max", counts.iter().copied().max().unwrap_or(0))
        .take();
    let params = Obj::new()
        .int("threads", threads)
        .num("duration_s", dur)
        .take();
    emit(b.recipe.name(), "W8", params, met);
    drop(ms);
    b.close(c);
}

// ------------------------------------------------------------------ TLS beside plaintext

/// The connect time: `Client::connect` until the session is established, `n` connects after 2
/// unrecorded ones, each client closed before the next. With `tick` the options say the
/// servers' tick (`Options::server_tick_time`), so the connect does not ask the server for it
/// (`conf`, over TLS a handshake of its own). Emits a `CONNECT` row, returns its metrics.
fn connect_time(b: &Bench, n: usize, tick: Option<Duration>) -> J {
    let options = match tick {
        Some(t) => b.options.clone().server_tick_time(t),
        None => b.options.clone(),
    };
    let one = || {
        let t = now_ns();
        let c = Client::connect(&b.hosts, options.clone()).unwrap_or_else(|e| {
            log!("connect failed: {e}");
            std::process::exit(1)
        });
        let dt = now_ns() - t;
        c.close();
        dt
    };
    for _ in 0..2 {
        one();
    }
    let xs: Vec<u64> = (0..n).map(|_| one()).collect();
    let mut met = Obj::new();
    lat_summary(&mut met, "connect", &xs);
    let met = met.take();
    emit(
        b.recipe.name(),
        "CONNECT",
        b.params(Obj::new().int("connects", n).int("warmup", 2).put(
            "tick",
            J::Str(if tick.is_some() { "given" } else { "asked" }.into()),
        )),
        met.clone(),
    );
    met
}

/// One round of the TLS mode: per transport (0 plaintext, 1 TLS), the metrics of its
/// `CONNECT` rows (the tick asked, the tick given), `W1` and `W2` rows.
struct TlsRound {
    connect: [J; 2],
    connect_given: [J; 2],
    w1: [J; 2],
    w2: [J; 2],
}

/// `peerbench TLS [clients]` (issue 27's benchmark: TLS beside plaintext in one run). Starts two
/// servers with the same settings (`zklock::testing`: a plaintext `TestingServer::start()` and
/// a TLS-only `TestingServer::start_tls(ClientAuth::None)`, server-authenticated: the client
/// has only the CA), then runs `BENCH_TLS_ROUNDS` (2) rounds; in each, the connect time
/// (`BENCH_TLS_CONNECTS`, 20 connects), W1 and W2 with `clients` (8) sessions, each against
/// one server then the other, the order alternating from round to round (`BENCH_TLS_FIRST`:
/// `plain` or `tls` first in round 1). Every measurement is a row (params `transport`, `round`);
/// then one `TLS` row: TLS ÷ plaintext per round, median over rounds, and the targets (W1 p50
/// at most 1.25×, W2 at least 0.85×). The handshake cost per connect is the TLS connect time
/// less the plaintext one.
fn tls(recipe: Recipe, clients: usize) {
    use zklock::testing::{ClientAuth, TestingServer};
    if recipe == Recipe::Ffi {
        log!("the TLS mode runs through the Rust API (the C ABI's connect takes no options here)");
        std::process::exit(3);
    }
    let rounds: usize = env_num("BENCH_TLS_ROUNDS", 2).max(1);
    let connects: usize = env_num("BENCH_TLS_CONNECTS", 20).max(1);
    let first = env_str("BENCH_TLS_FIRST", "plain");
    let tls_first = match first.as_str() {
        "plain" => false,
        "tls" => true,
        o => {
            log!("BENCH_TLS_FIRST must be plain or tls, not {o:?}");
            std::process::exit(2)
        }
    };
    let started = |what: &str, r: std::io::Result<TestingServer>| {
        r.unwrap_or_else(|e| {
            log!("start the {what} server: {e}");
            std::process::exit(1)
        })
    };
    let plain_server = started("plaintext", TestingServer::start());
    let tls_server = started("TLS", TestingServer::start_tls(ClientAuth::None));
    let certs = tls_server.certs().expect("a TLS server has certificates");
    let options = Options::default().session_timeout(Duration::from_secs(10));
    let mut benches = [
        Bench {
            recipe,
            hosts: plain_server.connect_string(),
            options: options.clone(),
            tags: Vec::new(),
        },
        Bench {
            recipe,
            hosts: tls_server.connect_string(),
            options: options.tls(zklock::Tls::new().ca_file(certs.ca_path())),
            tags: Vec::new(),
        },
    ];
    const NAMES: [&str; 2] = ["plain", "tls"];
    log!(
        "TLS beside plaintext: {} and {}, {rounds} round(s), {connects} connects, W1, W2 with {clients} clients",
        benches[0].hosts,
        benches[1].hosts
    );
    let mut done: Vec<TlsRound> = Vec::new();
    for r in 0..rounds {
        let order = if (r % 2 == 1) == tls_first {
            [0, 1]
        } else {
            [1, 0]
        };
        for (i, b) in benches.iter_mut().enumerate() {
            b.tags = vec![
                ("transport".into(), J::Str(NAMES[i].into())),
                ("round".into(), J::Int(r as i64 + 1)),
            ];
        }
        let step = |f: &dyn Fn(&Bench) -> J| {
            let mut out = [J::Null, J::Null];
            for i in order {
                out[i] = f(&benches[i]);
            }
            out
        };
        done.push(TlsRound {
            connect: step(&|b| connect_time(b, connects, None)),
            connect_given: step(&|b| connect_time(b, connects, Some(SERVER_TICK))),
            w1: step(&|b| w1(b)),
            w2: step(&|b| w2(b, clients)),
        });
    }

    // per transport: the median over rounds; TLS ÷ plaintext: per round, then the median
    let both = |f: &dyn Fn(&TlsRound) -> &[J; 2], k: &str| -> [Option<f64>; 2] {
        [0, 1].map(|i| median(done.iter().filter_map(|r| f(r)[i].get(k)).collect()))
    };
    let ratio = |f: &dyn Fn(&TlsRound) -> &[J; 2], k: &str| -> Option<f64> {
        median(
            done.iter()
                .filter_map(|r| Some(f(r)[1].get(k)? / f(r)[0].get(k).filter(|&x| x > 0.0)?))
                .collect(),
        )
    };
    let w1p50 = both(&|r| &r.w1, "cycle_p50_us");
    let w1p99 = both(&|r| &r.w1, "cycle_p99_us");
    let w2 = both(&|r| &r.w2, "acq_per_s");
    let conn = both(&|r| &r.connect, "connect_p50_us");
    let w1_ratio = ratio(&|r| &r.w1, "cycle_p50_us");
    let w1_p99_ratio = ratio(&|r| &r.w1, "cycle_p99_us");
    let w2_ratio = ratio(&|r| &r.w2, "acq_per_s");
    let conn_given = both(&|r| &r.connect_given, "connect_p50_us");
    let extra = |f: &dyn Fn(&TlsRound) -> &[J; 2]| {
        median(
            done.iter()
                .filter_map(|r| {
                    Some(f(r)[1].get("connect_p50_us")? - f(r)[0].get("connect_p50_us")?)
                })
                .collect(),
        )
    };
    let handshake = extra(&|r| &r.connect);
    let handshake_given = extra(&|r| &r.connect_given);
    let opt = |x: Option<f64>, scale: f64, round: fn(f64) -> f64| match x {
        Some(x) => J::Num(round(x / scale)),
        None => J::Null,
    };
    let met = Obj::new()
        .put("w1_p50_plain_us", opt(w1p50[0], 1.0, r1))
        .put("w1_p50_tls_us", opt(w1p50[1], 1.0, r1))
        .put("w1_p50_ratio", opt(w1_ratio, 1.0, r2))
        .put("w1_p99_plain_us", opt(w1p99[0], 1.0, r1))
        .put("w1_p99_tls_us", opt(w1p99[1], 1.0, r1))
        .put("w1_p99_ratio", opt(w1_p99_ratio, 1.0, r2))
        .put("w2_acq_per_s_plain", opt(w2[0], 1.0, r1))
        .put("w2_acq_per_s_tls", opt(w2[1], 1.0, r1))
        .put("w2_ratio", opt(w2_ratio, 1.0, r2))
        .put("connect_plain_ms", opt(conn[0], 1e3, r2))
        .put("connect_tls_ms", opt(conn[1], 1e3, r2))
        .put("handshake_ms", opt(handshake, 1e3, r2))
        .put("connect_tick_given_plain_ms", opt(conn_given[0], 1e3, r2))
        .put("connect_tick_given_tls_ms", opt(conn_given[1], 1e3, r2))
        .put("handshake_tick_given_ms", opt(handshake_given, 1e3, r2))
        .put(
            "w1_target_met",
            w1_ratio.map_or(J::Null, |x| J::Bool(x <= 1.25)),
        )
        .put(
            "w2_target_met",
            w2_ratio.map_or(J::Null, |x| J::Bool(x >= 0.85)),
        )
        .take();
    log!(
        "TLS ÷ plaintext: W1 p50 {:.2}× (target ≤ 1.25), W1 p99 {:.2}×, W2 {clients} clients {:.2}× (target ≥ 0.85); \
         connect {:.2} ms vs {:.2} ms (TLS costs {:.2} ms; {:.2} ms with the tick given)",
        w1_ratio.unwrap_or(f64::NAN),
        w1_p99_ratio.unwrap_or(f64::NAN),
        w2_ratio.unwrap_or(f64::NAN),
        conn[1].unwrap_or(f64::NAN) / 1e3,
        conn[0].unwrap_or(f64::NAN) / 1e3,
        handshake.unwrap_or(f64::NAN) / 1e3,
        handshake_given.unwrap_or(f64::NAN) / 1e3
    );
    let params = Obj::new()
        .int("clients", clients)
        .int("rounds", rounds)
        .int("connects", connects)
        .put("first", J::Str(first))
        .int("iters", env_num::<usize>("BENCH_ITERS", 2000))
        .num("duration_s", env_num("BENCH_DURATION", 10.0))
        .put("client_auth", J::Str("none".into()))
        .take();
    emit(recipe.name(), "TLS", params, met);
    drop(benches);
    drop(tls_server);
    drop(plain_server);
}

/// The `tickTime` of `zklock::testing`'s servers, for the connects that say it.
const SERVER_TICK: Duration = Duration::from_millis(500);

/// The median (mean of the middle two for an even count); `None` for no values.
fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(xs[n / 2]),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

// ------------------------------------------------------------------ the C ABI

mod ffi {
    //! W1–W3 through zklock's C ABI (`zklock::testing::ffi::zkl_*`), called exactly as a C program would:
    //! NUL-terminated strings, status codes, out-pointers, opaque handles.

    use std::ffi::{CStr, CString};

    use zklock::testing::ffi::{
        zkl_client, zkl_client_connect, zkl_client_free, zkl_last_error_message, zkl_lock,
        zkl_lock_acquire, zkl_lock_cancel, zkl_lock_free, zkl_lock_release, zkl_mutex_new,
        zkl_status,
    };

    fn last_error() -> String {
        let p = zkl_last_error_message();
        if p.is_null() {
            return String::new();
        }
        // SAFETY: the library returns NULL or a NUL-terminated string it owns, valid until the
        // next call on this thread.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    fn check(st: zkl_status) -> zklock::Result<()> {
        match st {
            zkl_status::ZKL_OK => Ok(()),
            zkl_status::ZKL_CANCELLED => Err(zklock::Error::Cancelled),
            zkl_status::ZKL_TIMEOUT => Err(zklock::Error::Timeout),
            zkl_status::ZKL_NOT_HELD => Err(zklock::Error::NotHeld),
            st => Err(zklock::Error::ZooKeeper(
                format!("{st:?}: {}", last_error()).into(),
            )),
        }
    }

    /// A `zkl_client*`.
    pub struct FfiClient(*mut zkl_client);

    /// A `zkl_lock*` from `zkl_mutex_new`.
    pub struct FfiMutex(*mut zkl_lock);

    // SAFETY: a zkl_client may be used by any number of threads at once.
    unsafe impl Send for FfiClient {}
    // SAFETY: as above.
    unsafe impl Sync for FfiClient {}
    // SAFETY: a zkl_lock may move between threads; the harness uses each from one thread at a
    // time (W1 is single-threaded), and zkl_lock_cancel may be called from any thread.
    unsafe impl Send for FfiMutex {}
    // SAFETY: as above.
    unsafe impl Sync for FfiMutex {}

    impl FfiClient {
        pub fn connect(hosts: &str) -> Result<FfiClient, String> {
            let hosts = CString::new(hosts).map_err(|e| e.to_string())?;
            let mut out: *mut zkl_client = std::ptr::null_mut();
            // SAFETY: hosts is NUL-terminated; out is valid for writing.
            let ms = super::session_timeout().as_millis() as _;
            // SAFETY: as above.
            let st = unsafe { zkl_client_connect(hosts.as_ptr(), ms, &mut out) };
            check(st).map_err(|e| e.to_string())?;
            Ok(FfiClient(out))
        }

        pub fn mutex(&self, path: &str) -> zklock::Result<FfiMutex> {
            let path =
                CString::new(path).map_err(|e| zklock::Error::InvalidArgument(e.to_string()))?;
            let mut out: *mut zkl_lock = std::ptr::null_mut();
            // SAFETY: self.0 is a live client; path is NUL-terminated; out is valid for writing.
            check(unsafe { zkl_mutex_new(self.0, path.as_ptr(), &mut out) })?;
            Ok(FfiMutex(out))
        }
    }

    impl Drop for FfiClient {
        fn drop(&mut self) {
            // SAFETY: self.0 is a live client, freed once.
            unsafe { zkl_client_free(self.0) }
        }
    }

    impl super::Lock for FfiMutex {
        fn acquire(&self) -> zklock::Result<()> {
            // SAFETY: self.0 is a live lock, used by one thread at a time.
            check(unsafe { zkl_lock_acquire(self.0, -1) })
        }
        fn release(&self) -> zklock::Result<()> {
            // SAFETY: as above.
            check(unsafe { zkl_lock_release(self.0) })
        }
        fn cancel(&self) {
            // SAFETY: self.0 is a live lock; cancel may be called from any thread.
            let _ = unsafe { zkl_lock_cancel(self.0) };
        }
    }

    impl Drop for FfiMutex {
        fn drop(&mut self) {
            // SAFETY: self.0 is a live lock, freed once, not in use by another thread.
            unsafe { zkl_lock_free(self.0) }
        }
    }
}

// ------------------------------------------------------------------ main

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() || args[0] == "--bench" {
        // `cargo bench` passes --bench; this program is driven by the peers harness instead.
        eprintln!(
            "usage: peerbench W1|W2|W3|W4|W5|W6|RT|TLS [clients]   (see ../shared/peers/README.md)"
        );
        std::process::exit(if args.is_empty() { 2 } else { 0 });
    }
    let Some(recipe) = Recipe::parse(&env_str("BENCH_RECIPE", "lock")) else {
        log!(
            "unknown BENCH_RECIPE {:?}: lock | semaphore | simple | ffi | rw",
            env_str("BENCH_RECIPE", "")
        );
        std::process::exit(2);
    };
    let n: Option<usize> = match args.get(1).filter(|a| !a.is_empty()) {
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                log!("bad client count {a:?}");
                std::process::exit(2)
            }
        },
        None => None,
    };
    let b = Bench::new(recipe);
    let w = args[0].to_uppercase();
    if recipe == Recipe::Ffi && !matches!(w.as_str(), "W1" | "W2" | "W3" | "W7" | "W8") {
        log!(
            "the C ABI variant runs W1 to W3 (W4 counts watch events, W5 needs the read-write \
             lock, W6 the Rust API)"
        );
        std::process::exit(3);
    }
    match w.as_str() {
        "RT" => rt(&b),
        "W1" => {
            w1(&b);
        }
        "W2" => {
            w2(&b, n.unwrap_or(8));
        }
        "TLS" => tls(recipe, n.unwrap_or(8)),
        "W3" => w3(&b),
        "W4" => w4(&b),
        "W5" => w5(&b, n.unwrap_or(8)),
        "W7" => w7(&b, n.unwrap_or(1)),
        "W8" => w8(&b, n.unwrap_or(1)),
        "W6" => match n {
            Some(n) => w6(&b, n),
            None => {
                for n in [10, 100, 1000] {
                    w6(&b, n)
                }
            }
        },
        _ => {
            log!("unknown workload {w}");
            std::process::exit(2)
        }
    }
}
