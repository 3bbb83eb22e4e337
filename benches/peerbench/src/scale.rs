//! zklock's own workloads: W6 (a queue of N waiters), W7 (sessions holding open), W8 (threads
//! of one session).

use super::*;

// ------------------------------------------------------------------ W6

/// What one W6 round measured.
#[derive(Default)]
pub(crate) struct Round {
    /// Handoff latencies recorded (ns).
    pub(crate) lat: Vec<u64>,
    /// First recorded handoff's release time and last recorded acquisition time.
    pub(crate) window: (u64, u64),
    pub(crate) completed: bool,
    pub(crate) errors: usize,
    pub(crate) rss_queued: u64,
    pub(crate) armed: i64,
    pub(crate) form_ns: u64,
    /// The server's load while the queue stood still (`BENCH_W6_QUIET_S`), then from the
    /// holder's release to the last recorded handoff.
    pub(crate) queued_load: Option<(LoadSample, LoadSample)>,
    pub(crate) run_load: Option<(LoadSample, LoadSample)>,
}

/// One W6 round: the holder holds, `ms.len()` waiter threads queue, the holder releases and
/// the chain runs; acquisitions `skip..skip + take` are recorded. With `requeue` every waiter
/// queues again after its release (steady queue length), otherwise each acquires once.
pub(crate) fn w6_round(
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
pub(crate) fn wait_armed(target: i64, limit: Duration) -> i64 {
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

pub(crate) fn w6(b: &Bench, n: usize) {
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
pub(crate) fn w7(b: &Bench, sessions: usize) {
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
pub(crate) fn w8(b: &Bench, threads: usize) {
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
