//! zklock's hold model (`docs/hold-model.md`), checked exhaustively with stateright: the part
//! of ZooKeeper the lease rests on (a leader and two followers, the leader's expiry of
//! sessions, followers' touches reported to the leader within a gap, revalidation of a moving
//! session with the grant of the member that takes it, a member cut off from the others, a
//! leader cut off from its quorum and deposed after its followers' `syncLimit`, a new leader
//! filing every session with its creation grant) and the client's rules (the lease's anchor
//! and grant, renewals that a quorum commits, a reconnect's unread answer, the one release
//! path, a reentrant acquire that proves its lease). Time is a small integer clock; one
//! exclusive lock node at one path; two clients, each one participant.
//!
//! The property: never two clients that both believe they hold (`Held`), never a client that
//! believes a hold whose node is gone, and never an acquire's success for a hold that is not
//! `Held`. Seeded bugs ([`Bug`]) put back a rule the library once had; each must be found.
//!
//! Facts of `docs/hold-model.md` the model encodes, by number: 1 (the leader expires a session
//! no earlier than its last touch plus the session timeout granted at its latest connect:
//! `Tick`), 2 and 3 (a follower's touch reaches the leader within the ping gap: `Report`), 4 and
//! 7 (a renewal is a write a quorum commits: a cut-off leader answers none; the old `sync`
//! renewal is [`Bug::SyncRenewalLongLeaderSyncLimit`]), 5 (a moving session is revalidated
//! with the grant of the member that takes it: `ApplyConnect`), 6 and 7 (a new leader files
//! every session at its start plus the grant its creation logged: `Tick`'s election).

use std::fmt::Write;

use stateright::{Checker, HasDiscoveries, Model, Property};

/// Members of the ensemble.
pub const MEMBERS: u8 = 3;

/// The member restarted with a lower `maxSessionTimeout` (a rolling change): it grants
/// [`Config::low_grant`] to a session that reconnects to it.
pub const LOW_MEMBER: u8 = 2;

/// A rule the library once had, put back: the checker must find each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// The release's old `delete(path, -1)`: a delete applied late removes whatever node is at
    /// the path, another holder's included.
    ReleaseDeleteAnyVersion,
    /// The old tick, `min(2 s, T/2)`: the client reckons with a shorter gap between a
    /// follower's touch and the leader's reading of it than the servers' tick makes.
    TickMin2sHalfT,
    /// The session timeout granted at the first connect, kept for good.
    FirstGrantKept,
    /// Renewals by `sync`, which a leader cut off from its quorum answers until its own
    /// `syncLimit` (longer than its followers').
    SyncRenewalLongLeaderSyncLimit,
    /// A reentrant acquire of a hold that is not `Held` succeeds without proving the lease.
    ReentrantWithoutProof,
    /// The lease runs on while a reconnect's answer is awaited (its grant unknown).
    ReconnectAnswerIgnored,
}

impl Bug {
    /// Every seeded bug.
    pub const ALL: [Bug; 6] = [
        Bug::ReleaseDeleteAnyVersion,
        Bug::TickMin2sHalfT,
        Bug::FirstGrantKept,
        Bug::SyncRenewalLongLeaderSyncLimit,
        Bug::ReentrantWithoutProof,
        Bug::ReconnectAnswerIgnored,
    ];

    /// Its name, lowercase (`ZKLOCK_MODEL_SEED_BUG`).
    pub fn name(self) -> &'static str {
        match self {
            Bug::ReleaseDeleteAnyVersion => "release_delete_any_version",
            Bug::TickMin2sHalfT => "tick_min_2s_half_t",
            Bug::FirstGrantKept => "first_grant_kept",
            Bug::SyncRenewalLongLeaderSyncLimit => "sync_renewal_long_leader_synclimit",
            Bug::ReentrantWithoutProof => "reentrant_without_proof",
            Bug::ReconnectAnswerIgnored => "reconnect_answer_ignored",
        }
    }

    /// The bug named `name`.
    pub fn named(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// The bounds and settings of one check.
#[derive(Clone, Debug)]
pub struct Config {
    /// A rule put back, or none: today's rules.
    pub bug: Option<Bug>,
    /// The clock runs from 0 to this.
    pub horizon: u8,
    /// The session timeout granted at the first connect (every member but [`LOW_MEMBER`]
    /// grants it).
    pub grant: u8,
    /// What [`LOW_MEMBER`] grants.
    pub low_grant: u8,
    /// The longest a follower's touch takes to reach the leader (its ping gap).
    pub gap: u8,
    /// The followers' `syncLimit` (in clock units): a cut-off leader is replaced after it.
    pub follower_sync_limit: u8,
    /// The leader's own `syncLimit`: it answers its clients' `sync`s until then.
    pub leader_sync_limit: u8,
    /// How many faults one run may have (cut, reconnect, lost answer, stray delete).
    pub faults: u8,
}

impl Config {
    /// The bounds `cargo test --test model` checks (`large`: the long run's).
    pub fn new(bug: Option<Bug>, large: bool) -> Config {
        Config {
            bug,
            horizon: if large { 8 } else { 6 },
            grant: 3,
            low_grant: 1,
            gap: 2,
            follower_sync_limit: 1,
            leader_sync_limit: 3,
            faults: if large { 3 } else { 2 },
        }
    }

    fn has(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    /// The gap the client reckons with (fact 2, 3: the tick's half, with slack).
    fn assumed_gap(&self) -> u8 {
        if self.has(Bug::TickMin2sHalfT) {
            self.gap - 1
        } else {
            self.gap
        }
    }

    /// What member `m` grants a session that connects to it.
    fn grant_of(&self, m: u8) -> u8 {
        if m == LOW_MEMBER {
            self.low_grant
        } else {
            self.grant
        }
    }
}

/// A reconnect under way: the member asked, and whether it took the session (revalidated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reconnect {
    member: u8,
    taken: bool,
}

/// One client and its session, as the servers and the client each see it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    // The servers' side.
    /// The session lives at the servers.
    alive: bool,
    /// When the leader expires it (fact 1).
    expiry: u8,
    /// The timeout the leader files its touches with (the latest connect's grant).
    server_t: u8,
    /// The grant its creation logged (what a new leader files it with).
    stored_t: u8,
    /// A follower's touch at this instant, not yet read by the leader (facts 2, 3).
    report: Option<(u8, u8)>,
    // The client's side.
    /// The member the session is connected to (None: reconnecting).
    conn: Option<u8>,
    /// The first grant, and the least the client has read (fact 1, per connect).
    first_t: u8,
    least_t: u8,
    /// The lease's anchor: an instant the leader provably heard of the session.
    anchor: u8,
    /// Since when a reconnect's answer is awaited.
    asking: Option<u8>,
    reconnect: Option<Reconnect>,
    /// A renewal in flight: (sent, through member).
    renewal: Option<(u8, u8)>,
    /// The latest answered touch through a follower: (sent, answered): the chain's j.
    touched: Option<(u8, u8)>,
    /// The hold's count (reentrant); 0: none.
    holds: u8,
    /// The id of the lock node this client made (while the servers keep it).
    node: Option<u8>,
    /// A delete of node id, sent and held by a partition, applied later.
    stray_delete: Option<u8>,
    /// An acquire returned success for a hold that was not `Held`.
    unheld_success: bool,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    now: u8,
    leader: u8,
    /// A member cut off from the others, since when.
    cut: Option<(u8, u8)>,
    /// The cut-off member was the leader when it was cut.
    cut_leader: bool,
    faults: u8,
    next_id: u8,
    /// The lock node at the path: (client, id).
    owner: Option<(usize, u8)>,
    clients: [Client; 2],
}

/// What can happen next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    Tick,
    Acquire(usize),
    Reacquire(usize),
    Release(usize),
    SendRenewal(usize),
    AnswerRenewal(usize),
    Report(usize),
    Cut(u8),
    Reconnect(usize, u8),
    ApplyConnect(usize),
    AnswerConnect(usize),
    LoseConnectAnswer(usize),
    ReleaseWithStrayDelete(usize),
    ApplyStrayDelete(usize),
}

/// The model: today's rules, or one seeded bug.
pub struct HoldModel {
    pub config: Config,
}

const NAMES: [&str; 2] = ["A", "B"];

impl HoldModel {
    /// Whether client `c` believes it holds (`Held`): it holds, and its lease runs.
    pub fn believes(&self, s: &State, c: usize) -> bool {
        let cl = &s.clients[c];
        cl.holds > 0 && s.now < self.lease_end(cl)
    }

    /// The lease's end: anchor plus the grant reckoned with, and no later than a reconnect's
    /// request whose answer is awaited.
    fn lease_end(&self, cl: &Client) -> u8 {
        let t = if self.config.has(Bug::FirstGrantKept) {
            cl.first_t
        } else {
            cl.least_t
        };
        let end = cl.anchor.saturating_add(t);
        match cl.asking {
            Some(a) if !self.config.has(Bug::ReconnectAnswerIgnored) => end.min(a),
            _ => end,
        }
    }

    /// Whether requests through member `m` reach a quorum (its leader not cut off from it).
    fn reaches_quorum(&self, s: &State, m: u8) -> bool {
        match s.cut {
            Some((cut, _)) => m != cut && cut != s.leader,
            None => true,
        }
    }

    fn touch_at_leader(s: &mut State, c: usize) {
        let now = s.now;
        let cl = &mut s.clients[c];
        if cl.alive {
            cl.expiry = now + cl.server_t;
        }
    }

    /// The session of `c` ends at the servers: its node goes.
    fn end_session(s: &mut State, c: usize) {
        let cl = &mut s.clients[c];
        cl.alive = false;
        cl.report = None;
        cl.renewal = None;
        cl.reconnect = None;
        cl.node = None;
        if s.owner.is_some_and(|(o, _)| o == c) {
            s.owner = None;
        }
    }
}

impl Model for HoldModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let t = self.config.grant;
        let client = |conn: u8| Client {
            alive: true,
            expiry: t,
            server_t: t,
            stored_t: t,
            report: None,
            conn: Some(conn),
            first_t: t,
            least_t: t,
            anchor: 0,
            asking: None,
            reconnect: None,
            renewal: None,
            touched: None,
            holds: 0,
            node: None,
            stray_delete: None,
            unheld_success: false,
        };
        // A on a follower or on the leader; B on the leader.
        (0..2)
            .map(|a| State {
                now: 0,
                leader: 0,
                cut: None,
                cut_leader: false,
                faults: 0,
                next_id: 1,
                owner: None,
                clients: [client(a), client(0)],
            })
            .collect()
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let cfg = &self.config;
        // Time moves once every follower's touch due by now reached the leader (facts 2, 3),
        // unless a cut holds it.
        let overdue = s.clients.iter().any(|cl| {
            cl.report.is_some_and(|(t, m)| {
                // Read before the gap has passed (its bound has slack): a write sent the
                // gap after the touch's answer reaches the leader after the touch.
                s.now + 1 >= t + cfg.gap && s.cut.is_none_or(|(cut, _)| cut != m)
            })
        });
        if s.now < cfg.horizon && !overdue {
            actions.push(Action::Tick);
        }
        let faults_left = s.faults < cfg.faults;
        for c in 0..2 {
            // The faults strike A; B is the other participant, which must never hold with A.
            let fault = faults_left && c == 0;
            let cl = &s.clients[c];
            if !cl.alive {
                continue;
            }
            let settled = cl.reconnect.is_none() && cl.asking.is_none();
            // Three holds in a run at most (node ids stay few: the state space is finite).
            if cl.holds == 0
                && settled
                && s.next_id <= 3
                && s.owner.is_none()
                && cl.conn.is_some_and(|m| self.reaches_quorum(s, m))
            {
                actions.push(Action::Acquire(c));
            }
            if c == 0 && cl.holds == 1 {
                actions.push(Action::Reacquire(c));
            }
            if cl.holds > 0 {
                actions.push(Action::Release(c));
                if fault && cl.holds == 1 && cl.stray_delete.is_none() {
                    actions.push(Action::ReleaseWithStrayDelete(c));
                }
                // One renewal sent per instant at most.
                let sent_now = cl.touched.is_some_and(|(sj, _)| sj == s.now);
                if cl.renewal.is_none() && cl.conn.is_some() && settled && !sent_now {
                    actions.push(Action::SendRenewal(c));
                }
            }
            if cl.renewal.is_some() {
                actions.push(Action::AnswerRenewal(c));
            }
            if cl.report.is_some() {
                actions.push(Action::Report(c));
            }
            if fault && cl.reconnect.is_none() {
                for m in 0..MEMBERS {
                    if Some(m) != cl.conn && s.cut.is_none_or(|(cut, _)| cut != m) {
                        actions.push(Action::Reconnect(c, m));
                    }
                }
            }
            if let Some(r) = cl.reconnect {
                if !r.taken {
                    actions.push(Action::ApplyConnect(c));
                } else {
                    actions.push(Action::AnswerConnect(c));
                    if fault {
                        actions.push(Action::LoseConnectAnswer(c));
                    }
                }
            }
        }
        for c in 0..2 {
            if s.clients[c].stray_delete.is_some() {
                actions.push(Action::ApplyStrayDelete(c));
            }
        }
        if faults_left && s.cut.is_none() {
            for m in 0..MEMBERS {
                actions.push(Action::Cut(m));
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let cfg = &self.config;
        let mut s = last.clone();
        match action {
            Action::Tick => {
                s.now += 1;
                // A leader cut off from its followers is replaced after their syncLimit; the
                // new one files every session at its start plus its creation grant (fact 7).
                if let Some((cut, since)) = s.cut {
                    if cut == s.leader && s.now >= since + cfg.follower_sync_limit {
                        s.leader = (cut + 1) % MEMBERS;
                        for cl in &mut s.clients {
                            if cl.alive {
                                cl.expiry = s.now + cl.stored_t;
                                cl.server_t = cl.stored_t;
                                cl.report = None;
                            }
                        }
                    }
                }
                // The leader expires what it filed until now (fact 1).
                for c in 0..2 {
                    if s.clients[c].alive && s.clients[c].expiry <= s.now {
                        HoldModel::end_session(&mut s, c);
                    }
                }
            }
            Action::Acquire(c) => {
                // The create, a committed write: the node is this attempt's, the lease proven
                // by its answer ("Success is Held").
                let id = s.next_id;
                s.next_id += 1;
                s.owner = Some((c, id));
                HoldModel::touch_at_leader(&mut s, c);
                let cl = &mut s.clients[c];
                cl.node = Some(id);
                cl.holds = 1;
                cl.anchor = s.now;
            }
            Action::Reacquire(c) => {
                let held = self.believes(&s, c);
                let cl = &mut s.clients[c];
                if held {
                    cl.holds += 1;
                } else if cfg.has(Bug::ReentrantWithoutProof) {
                    cl.holds += 1;
                    cl.unheld_success = true;
                } else {
                    return None;
                }
            }
            Action::Release(c) => {
                let cl = &mut s.clients[c];
                cl.holds -= 1;
                if cl.holds == 0 {
                    // The one release path: only this hold's own node.
                    if let Some(id) = cl.node.take() {
                        if s.owner == Some((c, id)) {
                            s.owner = None;
                        }
                    }
                }
            }
            Action::ReleaseWithStrayDelete(c) => {
                // The release's first try is held by a partition (its reply never comes); a
                // retry removes the node; the held copy is applied later.
                s.faults += 1;
                let cl = &mut s.clients[c];
                cl.holds = 0;
                let id = cl.node.take()?;
                cl.stray_delete = Some(id);
                if s.owner == Some((c, id)) {
                    s.owner = None;
                }
            }
            Action::ApplyStrayDelete(c) => {
                let id = s.clients[c].stray_delete.take()?;
                if cfg.has(Bug::ReleaseDeleteAnyVersion) || s.owner == Some((c, id)) {
                    if let Some((o, _)) = s.owner.take() {
                        s.clients[o].node = None;
                    }
                }
            }
            Action::SendRenewal(c) => {
                let now = s.now;
                let cl = &mut s.clients[c];
                cl.renewal = Some((now, cl.conn?));
            }
            Action::AnswerRenewal(c) => {
                let (sent, m) = s.clients[c].renewal?;
                let now = s.now;
                let old_leader_answers = cfg.has(Bug::SyncRenewalLongLeaderSyncLimit)
                    && s.cut_leader
                    && s.cut.is_some_and(|(cut, since)| {
                        cut == m && now < since + cfg.leader_sync_limit
                    });
                if old_leader_answers {
                    // A sync the cut-off leader answers alone: its own table, nobody's else.
                    let cl = &mut s.clients[c];
                    cl.renewal = None;
                    cl.anchor = cl.anchor.max(sent);
                    return Some(s);
                }
                if !self.reaches_quorum(&s, m) || !s.clients[c].alive {
                    return None;
                }
                if m == s.leader {
                    // The leader touched it as it committed the write (facts 4, 7).
                    HoldModel::touch_at_leader(&mut s, c);
                    let cl = &mut s.clients[c];
                    cl.renewal = None;
                    cl.anchor = cl.anchor.max(sent);
                } else {
                    // The follower touched it now; the leader reads the touch within the gap.
                    // The anchor is the earlier touch j's send time, once this write was sent
                    // the gap after j's answer (the chain of "Why it is sound").
                    let gap = cfg.assumed_gap();
                    let cl = &mut s.clients[c];
                    cl.renewal = None;
                    if cl.report.is_none() {
                        cl.report = Some((now, m));
                    }
                    if let Some((sj, rj)) = cl.touched {
                        if sent >= rj + gap {
                            cl.anchor = cl.anchor.max(sj);
                        }
                    }
                    cl.touched = Some((sent, now));
                }
            }
            Action::Report(c) => {
                let (_, m) = s.clients[c].report?;
                if !self.reaches_quorum(&s, m) {
                    return None;
                }
                s.clients[c].report = None;
                HoldModel::touch_at_leader(&mut s, c);
            }
            Action::Cut(m) => {
                s.faults += 1;
                s.cut = Some((m, s.now));
                s.cut_leader = m == s.leader;
            }
            Action::Reconnect(c, m) => {
                // The connection is lost; a connect request goes to member m.
                s.faults += 1;
                let now = s.now;
                let cl = &mut s.clients[c];
                cl.conn = None;
                cl.renewal = None;
                cl.touched = None;
                cl.asking = cl.asking.or(Some(now));
                cl.reconnect = Some(Reconnect {
                    member: m,
                    taken: false,
                });
            }
            Action::ApplyConnect(c) => {
                // The member revalidates the session with its own grant (fact 5).
                let r = s.clients[c].reconnect?;
                if !self.reaches_quorum(&s, r.member) {
                    return None;
                }
                let g = cfg.grant_of(r.member);
                let now = s.now;
                let cl = &mut s.clients[c];
                cl.server_t = g;
                cl.expiry = now + g;
                cl.reconnect = Some(Reconnect { taken: true, ..r });
            }
            Action::AnswerConnect(c) => {
                let r = s.clients[c].reconnect.take()?;
                let cl = &mut s.clients[c];
                cl.least_t = cl.least_t.min(cfg.grant_of(r.member));
                cl.asking = None;
                cl.conn = Some(r.member);
            }
            Action::LoseConnectAnswer(c) => {
                s.faults += 1;
                s.clients[c].reconnect = None;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("never two believers", |m: &HoldModel, s: &State| {
                !(m.believes(s, 0) && m.believes(s, 1))
            }),
            Property::always("no belief without the node", |m: &HoldModel, s: &State| {
                (0..2).all(|c| {
                    !m.believes(s, c)
                        || s.clients[c].node.is_some_and(|id| s.owner == Some((c, id)))
                })
            }),
            Property::always("success is Held", |_: &HoldModel, s: &State| {
                s.clients.iter().all(|cl| !cl.unheld_success)
            }),
            Property::sometimes("both clients hold in turn", |_: &HoldModel, s: &State| {
                s.next_id >= 3
            }),
        ]
    }
}

/// What one check found.
pub struct Outcome {
    /// States explored (unique).
    pub states: usize,
    /// A violated property and its trace, if any.
    pub violation: Option<(&'static str, String)>,
    /// Whether the model reached both clients holding in turn (it is not vacuous).
    pub not_vacuous: bool,
}

/// Checks the model under `config`, exhaustively within its bounds.
pub fn check(config: Config, threads: usize) -> Outcome {
    let checker = HoldModel {
        config: config.clone(),
    }
    .checker()
    .threads(threads)
    // The first violation ends a check (breadth first: the shortest trace).
    .finish_when(HasDiscoveries::AnyFailures)
    .spawn_bfs()
    .join();
    let states = checker.unique_state_count();
    let mut violation = None;
    for name in [
        "never two believers",
        "no belief without the node",
        "success is Held",
    ] {
        if let Some(path) = checker.discovery(name) {
            violation = Some((
                name,
                trace(&config, path.clone().into_states(), path.into_actions()),
            ));
            break;
        }
    }
    Outcome {
        states,
        violation,
        not_vacuous: checker.discovery("both clients hold in turn").is_some(),
    }
}

/// A counterexample as a readable sequence of events: which client or member did what, at
/// which instant, and what each client believed after it.
pub fn trace(config: &Config, states: Vec<State>, actions: Vec<Action>) -> String {
    let model = HoldModel {
        config: config.clone(),
    };
    let mut out = String::new();
    let say = |s: &State, a: &Action| -> String {
        let who = |c: &usize| NAMES[*c];
        match a {
            Action::Tick => format!("the clock reaches {}", s.now + 1),
            Action::Acquire(c) => format!("{} creates the lock node and holds (committed)", who(c)),
            Action::Reacquire(c) => format!("{} acquires again (reentrant)", who(c)),
            Action::Release(c) => format!("{} releases (deletes its own node)", who(c)),
            Action::ReleaseWithStrayDelete(c) => format!(
                "{} releases; its first delete is held by a partition, a retry removes the node",
                who(c)
            ),
            Action::ApplyStrayDelete(c) => {
                format!(
                    "{}'s held delete reaches the servers and is applied",
                    who(c)
                )
            }
            Action::SendRenewal(c) => format!(
                "{} sends a renewal through member {}",
                who(c),
                s.clients[*c].conn.unwrap_or(9)
            ),
            Action::AnswerRenewal(c) => format!("{}'s renewal is answered", who(c)),
            Action::Report(c) => format!("a follower's touch of {} reaches the leader", who(c)),
            Action::Cut(m) => format!(
                "member {m}{} is cut off from the others (its links hold messages)",
                if *m == s.leader { " (the leader)" } else { "" }
            ),
            Action::Reconnect(c, m) => format!(
                "{} loses its connection and asks member {m} to take its session",
                who(c)
            ),
            Action::ApplyConnect(c) => {
                let m = s.clients[*c].reconnect.map_or(9, |r| r.member);
                format!(
                    "member {m} takes {}'s session, granting {}",
                    who(c),
                    config.grant_of(m)
                )
            }
            Action::AnswerConnect(c) => format!("{} reads the connect's answer", who(c)),
            Action::LoseConnectAnswer(c) => format!("{}'s connect answer is lost", who(c)),
        }
    };
    let _ = writeln!(
        out,
        "seeded bug: {}",
        config.bug.map_or("none (today's rules)", Bug::name)
    );
    for (i, a) in actions.iter().enumerate() {
        let (before, after) = (&states[i], &states[i + 1]);
        let beliefs: Vec<String> = (0..2)
            .map(|c| {
                let cl = &after.clients[c];
                let state = if model.believes(after, c) {
                    "Held"
                } else if cl.holds > 0 {
                    "not Held"
                } else {
                    "-"
                };
                format!(
                    "{} {state}{}",
                    NAMES[c],
                    if cl.alive { "" } else { " (session expired)" }
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  t={:<2} {:<80} | leader {}; {}",
            before.now,
            say(before, a),
            after.leader,
            beliefs.join(", ")
        );
    }
    out
}
