//! The judge: every hold read from the clients' event logs and checked (no two exclusive
//! holders, no writer beside a reader, at most the semaphore's leases, tokens in order),
//! the end's checks (no leak, no node left, every lock acquirable), and the transaction logs'
//! evidence of a violation.

use super::*;

/// Reads the members' transaction logs (ZooKeeper's `TxnLogToolkit`), writes every transaction
/// on the soak's nodes, and each session's creation and close, to `out/txnlog.txt` (one line a
/// zxid, from whichever member has it), and returns who removed each lock node: for each node
/// created under the soak's root, the transaction that removed it (a delete or a multi naming
/// it, with its session, client and zxid, or its owner's closeSession), one line per node.
pub(crate) fn txn_log_evidence(cluster: &TestingCluster, out: &Path) -> io::Result<String> {
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

/// One hold, from the events of its holder.
#[derive(Debug, Default, Clone)]
pub(crate) struct Hold {
    pub(crate) id: String,
    /// The participant (client id / workload): its own holds may overlap (a downgrade).
    pub(crate) worker: String,
    pub(crate) path: String,
    pub(crate) mode: String,
    pub(crate) token: i64,
    pub(crate) acq: u64,
    pub(crate) last_chk: Option<u64>,
    pub(crate) lost: Option<(u64, String)>,
    pub(crate) rel: Option<(u64, String)>,
}

impl Hold {
    /// The believed interval: from the acquire's return to the last check that said Held.
    pub(crate) fn believed(&self) -> Option<(u64, u64)> {
        self.last_chk.map(|c| (self.acq, c.max(self.acq)))
    }

    pub(crate) fn describe(&self, t0: u64) -> String {
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
pub(crate) type Events = (BTreeMap<String, Hold>, HashMap<String, Vec<String>>);

/// Every forked child exited at once with 0 (it let go of what it inherited without waiting
/// for anything, and sent nothing on its parent's session; what it might have released of its
/// parent's, the judge sees as a hold that ended while believed).
pub(crate) fn fork_check(out: &Path, violations: &mut Vec<String>) -> io::Result<()> {
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

pub(crate) fn read_events(out: &Path) -> io::Result<Events> {
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
pub(crate) fn faults_near(faults: &[Fault], t: u64, t0: u64) -> String {
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
pub(crate) fn evidence(ids: &[&str], lines: &HashMap<String, Vec<String>>) -> String {
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

pub(crate) const MAX_REPORTED: usize = 25;

pub(crate) fn judge(
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
pub(crate) fn not_held_at_first_look(
    holds: &BTreeMap<String, Hold>,
) -> impl Iterator<Item = &Hold> {
    holds
        .values()
        .filter(|h| h.last_chk.is_none() && h.lost.is_some())
}

/// The session of client `id` once it reported idle (its `idle` event), if it has.
pub(crate) fn idle_session(out: &Path, id: &str) -> Option<i64> {
    let text = std::fs::read_to_string(out.join(format!("events-{id}.jsonl"))).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("e").and_then(Value::as_str) == Some("idle"))
        .and_then(|v| v.get("sid").and_then(Value::as_i64))
}

/// With every client idle (work stopped, holds released, session open): no lock node of theirs
/// may remain once a release's background retries have had time (a session timeout).
pub(crate) fn leak_check(
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
pub(crate) fn ephemerals(
    admin: &Admin,
    path: &str,
    out: &mut Vec<(String, i64)>,
) -> zklock::Result<()> {
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
pub(crate) fn end_checks(
    cluster: &TestingCluster,
    session: Duration,
    violations: &mut Vec<String>,
) {
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

pub(crate) fn acquirable(
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
pub(crate) fn judge_self_check() -> Result<(), String> {
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
