//! One attempt of an acquire, and every node it makes. An [`Attempt`] owns what the steps of
//! one try at a lock share: the session it runs on, its deadline (a try-once attempt's pinned
//! instant: one for every step, the removal of its nodes included), the instant its give-backs
//! must end by, and its cancel signal. Its creates are protected (Curator's term): every node
//! carries a fresh unique id of its create in its name, so a create whose reply was lost is
//! found again by that id, and one attempt never leaves two nodes; a missing parent is made
//! (again, when the servers' container reaper took an emptied one). A node it made is a
//! [`Made`] until it becomes a hold: dropped on any other way out, it is removed through the
//! one release path. A recipe writes only its rules.

use std::sync::Arc;
use std::time::Instant;

use zookeeper_client as zk;

use super::hold::{self, Hold};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::Protocol;
use crate::session::{is_retriable, Client, SendTime, Session, Via};
use crate::wait::Signal;

/// How many times an attempt makes its lock's parents when its create finds one missing: the
/// servers' container reaper may remove an emptied lock directory (made under the Curator
/// protocol) between the parents' create and the node's, so once is not always enough.
const PARENT_TRIES: u32 = 3;

/// One try at a lock (see the module's text).
pub(crate) struct Attempt {
    pub(crate) client: Client,
    /// The lock's protocol: which kind of parents its creates make.
    protocol: Protocol,
    pub(crate) session: Arc<Session>,
    /// The deadline of every step (a try-once attempt's: its pinned instant).
    pub(crate) d: Deadline,
    /// A try-once attempt never waits for another holder.
    pub(crate) try_once: bool,
    /// Until when the removal of a node of the attempt is waited for (else one session
    /// timeout): a try-once attempt's pinned instant, or the enclosing operation's.
    bound: Option<Instant>,
    pub(crate) signal: Arc<Signal>,
}

impl Attempt {
    /// Begins an attempt at a lock of `protocol` with deadline `d` on `client`'s session (a
    /// fresh one if the last ended). A try-once deadline is pinned to one session timeout from
    /// now.
    pub(crate) fn begin(
        client: &Client,
        protocol: Protocol,
        d: Deadline,
        signal: &Arc<Signal>,
    ) -> Result<Attempt> {
        let (try_once, d) = d.pinned(client.session_timeout());
        let session = client.session_for(d, Some(signal))?;
        Ok(Attempt {
            client: client.clone(),
            protocol,
            session,
            d,
            try_once,
            bound: if try_once { d.instant() } else { None },
            signal: signal.clone(),
        })
    }

    /// An attempt on `session` (an operation of a hold: the read node of a downgrade), which no
    /// cancel ends.
    pub(crate) fn on(
        client: &Client,
        protocol: Protocol,
        session: &Arc<Session>,
        d: Deadline,
    ) -> Attempt {
        Attempt {
            client: client.clone(),
            protocol,
            session: session.clone(),
            d,
            try_once: false,
            bound: None,
            signal: Signal::new(),
        }
    }

    /// A step of this attempt with a deadline of its own (the semaphore's guarding mutex, which
    /// a try-once acquire waits for a little): the same session and signal, its nodes given
    /// back by this attempt's bound, or its own pinned instant.
    pub(crate) fn within(&self, d: Deadline) -> Attempt {
        let (try_once, d) = d.pinned(self.client.session_timeout());
        Attempt {
            client: self.client.clone(),
            protocol: self.protocol,
            session: self.session.clone(),
            d,
            try_once,
            bound: self.bound.or(if try_once { d.instant() } else { None }),
            signal: self.signal.clone(),
        }
    }

    /// Until when the removal of a node of the attempt (or a hold it gives back) is waited
    /// for; `None`: the release path's own bound.
    pub(crate) fn bound(&self) -> Option<Instant> {
        self.bound
    }

    /// The deadline of the attempt's first round trip: a lock found free in it is held,
    /// however short the deadline (`Deadline::first_round`).
    pub(crate) fn first_round(&self) -> Deadline {
        self.d.first_round(self.client.session_timeout())
    }

    /// Our node `path`, made by this attempt with creation zxid `token`.
    pub(crate) fn made(&self, path: String, token: i64) -> Made {
        Made {
            session: self.session.clone(),
            path,
            token,
            bound: self.bound,
            kept: false,
        }
    }

    /// Runs `try_` until it does not find a parent of `dirs` missing (`Ok(None)`), making them
    /// between tries (`PARENT_TRIES` times at most, then the missing parent is the error).
    pub(crate) fn with_parents<T>(
        &self,
        dirs: &[&str],
        d: Deadline,
        mut try_: impl FnMut() -> Result<Option<T>>,
    ) -> Result<T> {
        let mut made = 0;
        loop {
            if let Some(t) = try_()? {
                return Ok(t);
            }
            if made == PARENT_TRIES {
                return Err(self.session.record_end_and_map(zk::Error::NoNode));
            }
            create_parents(&self.client, &self.session, self.protocol, dirs, d)?;
            made += 1;
        }
    }

    /// What the reply `created` to our create of `dir/name` says (a sequential node's name is
    /// `name` and the server's number). A create whose reply was lost is looked up by its id,
    /// never sent twice: when it cannot be found, a sequential one may still be applied (held
    /// in a partition), so a node with its id is removed when it appears, and the next create
    /// needs a fresh id ([`Created::Unknown`]).
    pub(crate) fn settle(
        &self,
        dir: &str,
        name: &str,
        sequential: bool,
        created: std::result::Result<(zk::Stat, zk::CreateSequence), zk::Error>,
        d: Deadline,
    ) -> Result<Created> {
        let session = &self.session;
        match created {
            Ok((stat, seq)) => {
                let name = if sequential {
                    format!("{name}{seq}")
                } else {
                    name.to_string()
                };
                Ok(Created::Made(
                    self.made(format!("{dir}/{name}"), stat.czxid),
                ))
            }
            Err(zk::Error::NoNode) => Ok(Created::NoParents),
            Err(zk::Error::NodeExists) if !sequential => {
                // Only an earlier try of this attempt can have made this name (it holds the
                // attempt's fresh id).
                match find_own(session, dir, name, sequential, d)? {
                    Some((name, czxid)) => {
                        Ok(Created::Made(self.made(format!("{dir}/{name}"), czxid)))
                    }
                    None => Err(Error::ZooKeeper(
                        format!("node {dir}/{name} exists and is not this attempt's").into(),
                    )),
                }
            }
            Err(e) if is_retriable(&e) => match recover(session, dir, name, sequential, d)? {
                Some((name, czxid)) => Ok(Created::Made(self.made(format!("{dir}/{name}"), czxid))),
                None if sequential => {
                    hold::background_forget(session, dir.to_string(), name.to_string());
                    Ok(Created::Unknown(e))
                }
                // Not made: the same name may be created again (NodeExists then finds it).
                None => Ok(Created::Unknown(e)),
            },
            Err(e) => Err(session.record_end_and_map(e)),
        }
    }

    /// Creates our ephemeral node `dir/name` (sequential: the server appends the number),
    /// making missing parents. `name` holds a fresh unique id of this create. A sequential
    /// create whose outcome stays unknown fails the attempt (its node is removed in the
    /// background if it appears).
    pub(crate) fn create(
        &self,
        dir: &str,
        name: &str,
        data: &[u8],
        sequential: bool,
        d: Deadline,
    ) -> Result<Made> {
        let mode = if sequential {
            zk::CreateMode::EphemeralSequential
        } else {
            zk::CreateMode::Ephemeral
        };
        let opts = self.client.create_options(mode);
        let full = format!("{dir}/{name}");
        self.with_parents(&[dir], d, || loop {
            if let Some(e) = self.session.ended_error() {
                return Err(e);
            }
            let sent = SendTime::now();
            let created = self.session.call_sent(
                sent,
                Via::Leader,
                self.session.zk.create(&full, data, &opts),
                d,
            );
            match self.settle(dir, name, sequential, created, d)? {
                Created::Made(m) => return Ok(Some(m)),
                Created::NoParents => return Ok(None),
                Created::Unknown(e) if sequential => {
                    return Err(self
                        .session
                        .unanswered(&e, format!("whether {full} was made")))
                }
                Created::Unknown(_) => {}
            }
        })
    }
}

/// What a create of an attempt came to ([`Attempt::settle`]).
pub(crate) enum Created {
    /// Our node.
    Made(Made),
    /// A parent is missing: nothing was made.
    NoParents,
    /// The reply was lost (this error) and no node of the create was found.
    Unknown(zk::Error),
}

/// A node an attempt made, not (yet) a hold: removed when dropped, through the one release
/// path, waited for until the attempt's bound at most.
pub(crate) struct Made {
    session: Arc<Session>,
    path: String,
    token: i64,
    bound: Option<Instant>,
    /// Became a hold, or is gone: nothing to remove.
    kept: bool,
}

impl Made {
    /// The node's name (the last segment of its path).
    pub(crate) fn name(&self) -> &str {
        crate::path::name(&self.path)
    }

    /// The node is the hold.
    pub(crate) fn into_hold(mut self) -> Hold {
        self.kept = true;
        Hold::new(
            self.session.clone(),
            std::mem::take(&mut self.path),
            self.token,
        )
    }

    /// The node is a hold whose fencing token is `token` (a downgrade's read node keeps the
    /// write hold's).
    pub(crate) fn into_hold_with_token(mut self, token: i64) -> Hold {
        self.token = token;
        self.into_hold()
    }

    /// The node is gone already (deleted by hand): nothing to remove.
    pub(crate) fn gone(mut self) {
        self.kept = true;
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        if !self.kept {
            let _ = hold::remove_node(&self.session, &self.path, false, self.bound);
        }
    }
}

/// Looks for the node an earlier create of `name` (a create's id) may have made.
fn find_own(
    session: &Session,
    dir: &str,
    name: &str,
    sequential: bool,
    d: Deadline,
) -> Result<Option<(String, i64)>> {
    if d.passed() {
        return Err(session.deadline_passed("could not look for our node before the deadline"));
    }
    // The listing may go to a follower that has not yet applied our create: read only what the
    // leader has confirmed (a failed sync is a failed look, never a listing taken anyway).
    match session.retry(d, || session.zk.sync(dir)) {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(e) => return Err(session.record_end_and_map(e)),
    }
    let found = if sequential {
        match session.retry(d, || session.zk.list_children(dir)) {
            Ok(children) => children.into_iter().find(|c| c.starts_with(name)),
            Err(zk::Error::NoNode) => None,
            Err(e) => return Err(session.record_end_and_map(e)),
        }
    } else {
        Some(name.to_string())
    };
    let Some(found) = found else { return Ok(None) };
    match session.retry(d, || session.zk.check_stat(&format!("{dir}/{found}"))) {
        // The id is this create's alone; the owner check only guards against a node of an
        // earlier session of ours (the id is fresh, so that cannot happen, but it costs nothing).
        Ok(Some(stat)) if stat.ephemeral_owner == session.id => {
            log::info!("found node {dir}/{found} again after a lost create reply");
            Ok(Some((found, stat.czxid)))
        }
        Ok(_) => Ok(None),
        Err(e) => Err(session.record_end_and_map(e)),
    }
}

/// After a create whose reply was lost: the node it made, if it made one; `None` to create
/// again. When that cannot be learned before `d`, the create's node is removed in the
/// background (never an orphan) and the error says so.
fn recover(
    session: &Arc<Session>,
    dir: &str,
    name: &str,
    sequential: bool,
    d: Deadline,
) -> Result<Option<(String, i64)>> {
    let confirmed = find_own(session, dir, name, sequential, d);
    // Unknown (the deadline ran out, or the connection failed): the create may be applied.
    if matches!(&confirmed, Err(e) if e.is_connection_loss() || *e == Error::Timeout) {
        if sequential {
            hold::background_forget(session, dir.to_string(), name.to_string());
        } else {
            hold::background_delete(
                session.clone(),
                format!("{dir}/{name}"),
                hold::Owned::ByName,
            );
        }
    }
    confirmed
}

/// Creates each of `dirs` and its missing ancestors (and a missing chroot node): container
/// nodes under the Curator protocol, so the server reaps empty lock directories; persistent
/// nodes under kazoo's, which remembers directories it made and fails if they vanish. All
/// creates leave at once and are applied in order: one round trip whatever the depth.
fn create_parents(
    client: &Client,
    session: &Session,
    protocol: Protocol,
    dirs: &[&str],
    d: Deadline,
) -> Result<()> {
    let mode = match protocol {
        Protocol::Curator => zk::CreateMode::Container,
        Protocol::Kazoo => zk::CreateMode::Persistent,
    };
    let opts = client.create_options(mode);
    let prefixes = |p: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut prefix = String::new();
        for seg in p[1..].split('/').filter(|s| !s.is_empty()) {
            prefix.push('/');
            prefix.push_str(seg);
            out.push(prefix.clone());
        }
        out
    };
    let chroot = match session.root() {
        Some(_) => prefixes(session.zk.path()),
        None => Vec::new(),
    };
    let mut own: Vec<String> = Vec::new();
    for p in dirs.iter().flat_map(|p| prefixes(p)) {
        if !own.contains(&p) {
            own.push(p);
        }
    }
    let mut pending = Vec::new();
    if let Some(root) = session.root() {
        // A missing chroot node is created too (Curator does the same for its namespace).
        for p in &chroot {
            pending.push((p, root.create(p, &[], &opts)));
        }
    }
    for p in &own {
        pending.push((p, session.zk.create(p, &[], &opts)));
    }
    for (p, f) in pending {
        match session.call(f, d) {
            // Made, there already, or (its own parent gone under it, the servers' container
            // reaper) to be made again by the caller's next try.
            Ok(_) | Err(zk::Error::NodeExists | zk::Error::NoNode) => {}
            // A parent made by another identity under a creator-only ACL: said as such, not
            // left for the lock node's create to report as a missing node.
            Err(e @ (zk::Error::NoAuth | zk::Error::InvalidAcl)) => {
                return Err(match session.record_end_and_map(e) {
                    Error::ZooKeeper(m) => {
                        Error::ZooKeeper(m.context(format_args!("cannot create {p}")))
                    }
                    other => other,
                });
            }
            // Any other refusal (an ephemeral parent, a quota) is the lock node's create's to
            // report; a lost connection or the session's end is this call's.
            Err(e) => match session.record_end_and_map(e) {
                Error::ZooKeeper(_) => {}
                other => return Err(other),
            },
        }
    }
    Ok(())
}
