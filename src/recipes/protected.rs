//! Protected creates (Curator's term): every lock node carries a fresh unique id of its attempt
//! in its name, so a create whose reply was lost is found again by that id; one attempt never
//! leaves two nodes, and a failed attempt never leaves one.

use std::sync::Arc;

use zookeeper_client as zk;

use super::hold::background_forget;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::Protocol;
use crate::session::{is_retriable, Client, SendTime, Session, Via};

/// Creates the ephemeral node `dir/name` (sequential: the server appends the number), creating
/// missing parents. `name` must hold a fresh unique id of this attempt: after a lost reply the
/// node is looked up by it, so one attempt never makes two nodes. Returns the node's name and
/// creation zxid.
pub(crate) fn create_ephemeral(
    client: &Client,
    session: &Arc<Session>,
    dir: &str,
    name: &str,
    data: &[u8],
    sequential: bool,
    d: Deadline,
) -> Result<(String, i64)> {
    let full = format!("{dir}/{name}");
    let mode = if sequential {
        zk::CreateMode::EphemeralSequential
    } else {
        zk::CreateMode::Ephemeral
    };
    let opts = client.create_options(mode);
    // Parents are made again when the servers' container reaper removed an emptied one
    // between their create and ours (`PARENT_TRIES` times at most).
    let mut parents_made = 0;
    loop {
        if let Some(e) = session.ended_error() {
            return Err(e);
        }
        let sent = SendTime::now();
        match session.call_sent(sent, Via::Leader, session.zk.create(&full, data, &opts), d) {
            Ok((stat, seq)) => {
                let made = if sequential {
                    format!("{name}{seq}")
                } else {
                    name.to_string()
                };
                return Ok((made, stat.czxid));
            }
            Err(zk::Error::NoNode) if parents_made < crate::recipes::PARENT_TRIES => {
                create_parents(client, session, dir, d, client.protocol())?;
                parents_made += 1;
            }
            Err(zk::Error::NodeExists) if !sequential => {
                // Only an earlier try of this attempt can have made this name (it holds the
                // attempt's fresh id).
                return match find_own(session, dir, name, sequential, d)? {
                    Some(x) => Ok(x),
                    None => Err(Error::ZooKeeper(
                        format!("node {full} exists and is not this attempt's").into(),
                    )),
                };
            }
            Err(e) if is_retriable(&e) => {
                if let Some(x) = recover(session, dir, name, sequential, d)? {
                    return Ok(x);
                }
                if sequential {
                    // Not applied yet, but not dead: held in a partition, it may be applied
                    // later, and a second create with this id would make a second node of the
                    // attempt. This one is removed when it appears; the caller tries again
                    // with a fresh id.
                    background_forget(session, dir.to_string(), name.to_string());
                    return Err(session.unanswered(&e, format!("whether {full} was made")));
                }
            }
            Err(e) => return Err(session.record_end_and_map(e)),
        }
    }
}

/// Looks for the node an earlier create of `name` (this attempt's id) may have made.
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
        // The id is this attempt's alone; the owner check only guards against a node of an
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
/// again. When that cannot be learned before `d`, the attempt's node is removed in the
/// background (never an orphan) and the error says so.
pub(crate) fn recover(
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
            background_forget(session, dir.to_string(), name.to_string());
        } else {
            super::hold::background_delete(
                session.clone(),
                format!("{dir}/{name}"),
                super::hold::Owned::ByName,
            );
        }
    }
    confirmed
}

/// Creates the missing ancestors of the node `path` (nothing for a child of the root).
pub(crate) fn create_parents_of(
    client: &Client,
    session: &Session,
    path: &str,
    d: Deadline,
    protocol: Protocol,
) -> Result<()> {
    match crate::path::parent(path) {
        "/" => Ok(()),
        parent => create_parents(client, session, parent, d, protocol),
    }
}

/// Creates `path` and its missing ancestors (and a missing chroot node): container nodes
/// under the Curator protocol, so the server reaps empty lock directories; persistent nodes
/// under kazoo's, which remembers directories it made and fails if they vanish. All creates
/// leave at once and are applied in order: one round trip whatever the depth.
pub(crate) fn create_parents(
    client: &Client,
    session: &Session,
    path: &str,
    d: Deadline,
    protocol: Protocol,
) -> Result<()> {
    create_parents_all(client, session, &[path], d, protocol)
}

/// [`create_parents`] of each of `paths`, all in the one round trip (a semaphore's guarding
/// mutex and lease directory).
pub(crate) fn create_parents_all(
    client: &Client,
    session: &Session,
    paths: &[&str],
    d: Deadline,
    protocol: Protocol,
) -> Result<()> {
    let mode = match protocol {
        Protocol::Curator => zk::CreateMode::Container,
        Protocol::Kazoo => zk::CreateMode::Persistent,
    };
    let opts = client.create_options(mode);
    let prefixes = |p: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut prefix = String::new();
        for seg in p[1..].split('/') {
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
    for p in paths.iter().flat_map(|p| prefixes(p)) {
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
