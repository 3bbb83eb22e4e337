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

// The workloads and their support, after the log macro they use.
mod bench;
mod ffi;
mod report;
mod scale;
mod server;
mod tls;
mod workloads;

use bench::*;
use report::*;
use scale::*;
use server::*;
use tls::*;
use workloads::*;

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
