//! Protected creates (Curator's term): every lock node carries a fresh unique id in its name,
//! so a create whose reply was lost is found again and adopted only if our session owns it;
//! one attempt never leaves two nodes, and a failed attempt never leaves one.

use std::sync::Arc;
use std::time::Instant;

use zookeeper_client as zk;

use super::{background_delete, background_delete_attempt, delete_node, min_deadline, retriable};
use crate::client::{Client, Session};
use crate::error::{Error, Result};

/// Deletes the node of a failed attempt: now if possible, else in the background.
pub(crate) fn cleanup(session: &Arc<Session>, node: &str) {
    let budget = Instant::now() + session.zk.session_timeout();
    if let Err(e) = delete_node(session, node, budget) {
        if e.is_connection_loss() {
            background_delete(session.clone(), node.to_string());
        }
    }
}

/// Creates the ephemeral node `dir/name` (sequential: the server appends the number), creating
/// missing parents as containers. `name` must hold a fresh unique id: after a lost reply the
/// node is looked up by it and adopted if our session owns it, so one attempt never makes two
/// nodes. Returns the node's name and creation zxid.
pub(crate) fn create_ephemeral(
    client: &Client,
    session: &Arc<Session>,
    dir: &str,
    name: &str,
    data: &[u8],
    sequential: bool,
    deadline: Option<Instant>,
) -> Result<(String, i64)> {
    let full = format!("{dir}/{name}");
    let mode = if sequential {
        zk::CreateMode::EphemeralSequential
    } else {
        zk::CreateMode::Ephemeral
    };
    let opts = mode.with_acls(zk::Acls::anyone_all());
    let mut parents_made = false;
    loop {
        if let Some(e) = session.ended_error() {
            return Err(e);
        }
        let d = min_deadline(deadline, session.call_deadline());
        match session.wait_raw(session.zk.create(&full, data, &opts), d) {
            Ok((stat, seq)) => {
                let made = if sequential {
                    format!("{name}{seq}")
                } else {
                    name.to_string()
                };
                return Ok((made, stat.czxid));
            }
            Err(zk::Error::NoNode) if !parents_made => {
                client.create_parents(session, dir, d, client.protocol())?;
                parents_made = true;
            }
            Err(zk::Error::NodeExists) if !sequential => {
                // Only an earlier try of ours can have made this name (it holds a fresh id).
                match find_own(session, dir, name, sequential, deadline)? {
                    Some(x) => return Ok(x),
                    None => {
                        return Err(Error::ZooKeeper(format!(
                            "node {full} exists and is not ours"
                        )))
                    }
                }
            }
            Err(e) if retriable(&e) => {
                if let Some(x) = recover(session, dir, name, sequential, deadline)? {
                    return Ok(x);
                }
            }
            Err(e) => return Err(session.map_err(e)),
        }
    }
}

/// Looks for the node an earlier create of `name` may have made; adopts it only if our session
/// owns it.
fn find_own(
    session: &Session,
    dir: &str,
    name: &str,
    sequential: bool,
    deadline: Option<Instant>,
) -> Result<Option<(String, i64)>> {
    loop {
        if let Some(e) = session.ended_error() {
            return Err(e);
        }
        if deadline.is_some_and(|dl| Instant::now() >= dl) {
            return Err(Error::ConnectionLoss(
                "could not look for our node before the deadline".into(),
            ));
        }
        let d = min_deadline(deadline, session.call_deadline());
        let found = if sequential {
            match session.wait_raw(session.zk.list_children(dir), d) {
                Ok(children) => children.into_iter().find(|c| c.starts_with(name)),
                Err(zk::Error::NoNode) => None,
                Err(e) if retriable(&e) => continue,
                Err(e) => return Err(session.map_err(e)),
            }
        } else {
            Some(name.to_string())
        };
        let Some(found) = found else { return Ok(None) };
        match session.wait_raw(session.zk.check_stat(&format!("{dir}/{found}")), d) {
            Ok(Some(stat)) if stat.ephemeral_owner == session.id => {
                log::info!("adopted node {dir}/{found} after a lost create reply");
                return Ok(Some((found, stat.czxid)));
            }
            Ok(_) => return Ok(None),
            Err(e) if retriable(&e) => continue,
            Err(e) => return Err(session.map_err(e)),
        }
    }
}

/// After a create whose reply was lost: the node it made, if it made one that our session owns;
/// `None` to create again. When that cannot be learned before `deadline`, the attempt's node is
/// removed in the background (never an orphan) and the error says so.
pub(crate) fn recover(
    session: &Arc<Session>,
    dir: &str,
    name: &str,
    sequential: bool,
    deadline: Option<Instant>,
) -> Result<Option<(String, i64)>> {
    let confirmed = if deadline.is_some_and(|dl| Instant::now() >= dl) {
        Err(Error::ConnectionLoss(format!(
            "could not confirm the node {dir}/{name} before the deadline"
        )))
    } else {
        find_own(session, dir, name, sequential, deadline)
    };
    if matches!(&confirmed, Err(e) if e.is_connection_loss()) {
        forget_attempt(session, dir, name, sequential);
    }
    confirmed
}

/// A create whose outcome we could not learn in time: make sure its node goes away.
fn forget_attempt(session: &Arc<Session>, dir: &str, name: &str, sequential: bool) {
    if sequential {
        background_delete_attempt(session, dir.to_string(), name.to_string());
    } else {
        background_delete(session.clone(), format!("{dir}/{name}"));
    }
}
