//! The client process: its workloads (one thread each), their acquires, checks and releases,
//! and the event log the judge reads.

use super::*;

/// The client's event log: one `write` per line, so that a line is whole or absent even if the
/// process is killed.
pub(crate) struct EventLog(pub(crate) StdMutex<File>);

impl EventLog {
    pub(crate) fn put(&self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        let mut f = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = f.write_all(line.as_bytes());
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Work {
    Mutex,
    SemaphoreMutex,
    Simple,
    RwWriter,
    RwReader,
    Semaphore,
    Multi,
    Election,
}

pub(crate) const WORKS: [(Work, &str); 8] = [
    (Work::Mutex, "mutex"),
    (Work::SemaphoreMutex, "smutex"),
    (Work::Simple, "simple"),
    (Work::RwWriter, "writer"),
    (Work::RwReader, "reader"),
    (Work::Semaphore, "sem"),
    (Work::Multi, "multi"),
    (Work::Election, "election"),
];

pub(crate) fn client_main(a: &Args) {
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
pub(crate) static INHERITABLE: StdMutex<Vec<Arc<dyn Lockable>>> = StdMutex::new(Vec::new());

/// One workload's locks: what it acquires, the holds an acquire makes (path, lock whose token
/// it is), its mode, and the read half a writer downgrades to.
pub(crate) struct Handles {
    pub(crate) main: Arc<dyn Lockable>,
    /// For a multi-lock: each lock's path and handle (each gets a hold record of its own).
    pub(crate) parts: Vec<(&'static str, Arc<dyn Lockable>)>,
    pub(crate) path: &'static str,
    pub(crate) mode: &'static str,
    pub(crate) downgrade: Option<Arc<dyn Lockable>>,
    /// Long holds, blocking acquires (a quiet client).
    pub(crate) quiet: bool,
}

pub(crate) fn handles(work: Work, client: &Client, quiet: bool) -> zklock::Result<Handles> {
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
pub(crate) struct Canceller {
    pub(crate) tx: mpsc::Sender<(u64, Instant)>,
    pub(crate) current: Arc<StdMutex<u64>>,
    pub(crate) lock: Arc<dyn Lockable>,
}

impl Canceller {
    pub(crate) fn start(lock: Arc<dyn Lockable>) -> Canceller {
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
    pub(crate) fn begins(&self, n: u64) {
        *self.current.lock().unwrap() = n;
    }

    /// The attempt has returned: no cancel is made for it from now on, and one made after it
    /// returned is forgotten.
    pub(crate) fn ended(&self) {
        *self.current.lock().unwrap() = 0;
        self.lock.reset_cancel();
    }
}

pub(crate) fn worker(
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
pub(crate) fn check(lock: &dyn Lockable, ids: &[String], log: &EventLog) -> bool {
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
pub(crate) fn act(
    lock: &dyn Lockable,
    ids: &[String],
    log: &EventLog,
    rng: &mut Rng,
    quiet: bool,
) -> bool {
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

pub(crate) fn release(lock: &dyn Lockable, ids: &[String], log: &EventLog) {
    let t = now_ns();
    let r = match lock.release() {
        Ok(()) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    for h in ids {
        log.put(json!({"e": "rel", "t": t, "h": h, "r": r}));
    }
}

pub(crate) fn hold(
    h: &Handles,
    wid: &str,
    n: u64,
    token: i64,
    t: u64,
    log: &EventLog,
    rng: &mut Rng,
) {
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
