//! The peers' workloads: W1 (uncontended), RT (a round trip), W2 (contended), W3 (handoff),
//! W4 (notifications per release), W5 (read-write mix).

use super::*;

// ------------------------------------------------------------------ W1

/// W1; returns the row's metrics.
pub(crate) fn w1(b: &Bench) -> J {
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
pub(crate) fn rt(b: &Bench) {
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
pub(crate) fn w2(b: &Bench, clients: usize) -> J {
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

pub(crate) fn w3(b: &Bench) {
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

pub(crate) fn w4(b: &Bench) {
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

pub(crate) fn w5(b: &Bench, clients: usize) {
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
pub(crate) fn uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}
