//! The nemeses: the faults they inject on the servers, the clients and the clients' networks,
//! the record of each, and the client slots they fault (their proxies and processes).

use super::*;

/// One injected fault: kind, target, when (CLOCK_MONOTONIC ns).
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    pub(crate) kind: &'static str,
    pub(crate) target: String,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

pub(crate) type Faults = Arc<StdMutex<Vec<Fault>>>;

pub(crate) fn record(faults: &Faults, kind: &'static str, target: String, start: u64) {
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
pub(crate) struct Net {
    pub(crate) index: usize,
    pub(crate) proxies: Vec<TcpProxy>,
    pub(crate) busy: StdMutex<()>,
    pub(crate) quiet: bool,
    pub(crate) session: Duration,
    /// The event log of the slot's current process.
    pub(crate) events: StdMutex<PathBuf>,
}

impl Net {
    /// Whether the slot's client holds a lock now, by its event log: its last hold event is an
    /// acquire or a check that said Held.
    pub(crate) fn holding(&self) -> bool {
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
pub(crate) struct Slot {
    pub(crate) index: usize,
    pub(crate) incarnation: usize,
    pub(crate) session: Duration,
    /// A quiet client (one long-held lock) rather than a busy one (every workload).
    pub(crate) quiet: bool,
    pub(crate) net: Arc<Net>,
    pub(crate) child: Option<Child>,
}

impl Slot {
    pub(crate) fn id(&self) -> String {
        format!("{}.{}", self.index, self.incarnation)
    }
    pub(crate) fn hosts(&self) -> String {
        self.net
            .proxies
            .iter()
            .map(|p| p.connect_string())
            .collect::<Vec<_>>()
            .join(",")
    }
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

pub(crate) struct Run {
    pub(crate) out: PathBuf,
    pub(crate) exe: PathBuf,
    pub(crate) seed: u64,
}

impl Run {
    pub(crate) fn spawn(&self, slot: &mut Slot) -> io::Result<()> {
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

pub(crate) fn signal(pid: u32, sig: i32) {
    zklock::testing::process::send_signal(pid, sig);
}

/// The ops a lock acquire or release sends (create, create2, delete, exists, getData,
/// getChildren, getChildren2, sync, multi), for the one-shot proxy faults; deletes (a release,
/// a cancelled attempt's clean-up) and creates are where a lost reply is most dangerous, so
/// they come up more often.
pub(crate) const OPS: [i32; 14] = [2, 2, 2, 2, 1, 15, 15, 14, 3, 4, 8, 12, 9, 2];

/// The proxy through which the client of `slot` is connected now, if any.
pub(crate) fn live_proxy(net: &Net) -> Option<&TcpProxy> {
    net.proxies.iter().find(|p| p.connections() > 0)
}

/// One client fault on a random slot; returns false if nothing was injected.
pub(crate) fn client_fault(
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
pub(crate) fn net_fault(
    kind: &'static str,
    net: &Net,
    target: &str,
    rng: &mut Rng,
    faults: &Faults,
) -> bool {
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
pub(crate) fn proxies_but(net: &Net, member: usize) -> impl Iterator<Item = &TcpProxy> {
    net.proxies
        .iter()
        .enumerate()
        .filter(move |(m, _)| *m != member)
        .map(|(_, p)| p)
}

pub(crate) fn clients_on(nets: &[Arc<Net>], m: usize) -> Vec<usize> {
    (0..nets.len())
        .filter(|&s| nets[s].proxies[m].connections() > 0)
        .collect()
}

/// One server fault; waits until every member serves again.
pub(crate) fn server_fault(
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
