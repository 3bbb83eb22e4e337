//! A semaphore's lease directory: where its lease nodes live, how many there may be, and the
//! waits on it that both layouts share.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use zookeeper_client as zk;

use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::Protocol;
use crate::recipes::raw::read_node;
use crate::session::{Client, Session};
use crate::wait::Signal;

/// The semaphore's place and size (both layouts work on it).
pub(super) struct Leases {
    pub(super) client: Client,
    /// The semaphore's path.
    pub(super) path: String,
    pub(super) protocol: Protocol,
    pub(super) max_leases: u32,
    /// Where the lease nodes live (`P/leases` or `P`).
    pub(super) dir: String,
    /// kazoo: P exists and its stored count was checked.
    pub(super) root_checked: AtomicBool,
}

impl Clone for Leases {
    /// The same directory (a clone checks the kazoo count again, once).
    fn clone(&self) -> Self {
        Leases {
            client: self.client.clone(),
            path: self.path.clone(),
            protocol: self.protocol,
            max_leases: self.max_leases,
            dir: self.dir.clone(),
            root_checked: AtomicBool::new(false),
        }
    }
}

impl Leases {
    /// The lease nodes: (name, holder id, creation time in ms, whether its ACL hides it from
    /// this client), oldest first.
    pub(super) fn list(&self) -> Result<Vec<(String, String, i64, bool)>> {
        let session = self.client.session()?;
        let d = session.one_call();
        let children = match session.retry(d, || session.zk.list_children(&self.dir)) {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(session.record_end_and_map(e)),
        };
        // kazoo keeps its count in P's data and its guard beside P; every child of the lease
        // directory is a lease.
        let futs: Vec<_> = children
            .iter()
            .map(|c| session.zk.get_data(&self.child(c)))
            .collect();
        let mut out = Vec::with_capacity(children.len());
        for (name, f) in children.into_iter().zip(futs) {
            let read = session.call(f, d);
            if let Some((data, created, hidden)) = read_node(&session, &self.child(&name), read, d)?
            {
                let id = String::from_utf8(data).unwrap_or_default();
                out.push((name, id, created, hidden));
            }
        }
        out.sort_by_key(|(_, _, created, _)| *created);
        Ok(out)
    }

    pub(super) fn child(&self, name: &str) -> String {
        format!("{}/{}", self.dir, name)
    }
}

/// Waits for a watch of an acquire: Ok(true) woken (look again), Ok(false) deadline passed.
pub(super) fn wait(
    session: &Session,
    watcher: zk::OneshotWatcher,
    d: Deadline,
    signal: &Arc<Signal>,
) -> Result<bool> {
    Ok(session.wait_watch(watcher, d.instant(), signal)?.is_some())
}

/// Lists `dir`'s children and watches them, retrying on connection loss until `d` or the
/// session ends. `None` if `dir` does not exist.
pub(super) fn list_watch(
    session: &Session,
    dir: &str,
    d: Deadline,
) -> Result<Option<(Vec<String>, zk::OneshotWatcher)>> {
    match session.retry(d, || session.zk.list_and_watch_children(dir)) {
        Ok(x) => Ok(Some(x)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(session.record_end_and_map(e)),
    }
}
