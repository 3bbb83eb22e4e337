//! The semaphore in Curator's layout (`InterProcessSemaphoreV2`): `P/locks/` is a fair mutex
//! guarding the count, leases are ephemeral-sequential `P/leases/_c_<uuid>-lease-<seq>`; the
//! mutex holder creates its lease node, then holds the lease once the number of lease nodes is
//! <= N (watching `P/leases` until it is). An acquirer that found the mutex free sends its lease
//! create, the listing and the mutex's delete in one round trip (3 a cycle with the release, not
//! 4); if the count is then over N it removes its lease node and queues for the mutex again, to
//! wait holding it as Curator does.

use std::sync::Arc;

use zookeeper_client as zk;

use super::leases::{bound, list_watch, wait, Leases};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::lease_prefix;
use crate::recipes::hold::Hold;
use crate::recipes::protected::{self, create_ephemeral};
use crate::session::Session;
use crate::wait::Signal;

/// What [`RawSemaphore::take_curator_at_once`] came to.
pub(super) enum AtOnce {
    /// The lease is ours.
    Held(Hold),
    /// Every lease was taken (our node is gone again, and so is our hold of the mutex).
    Full,
    /// Not learned (parents missing, or the listing lost in an acquire that may wait: a
    /// try-once attempt's lost listing is its error); nothing of ours is left.
    Again,
}

impl Leases {
    /// Curator: create our lease node, then hold once there are at most N lease nodes (a
    /// try-once attempt, `try_once`, never waits for that: its `d` is its pinned instant).
    pub(super) fn take_curator(
        &self,
        session: &Arc<Session>,
        d: Deadline,
        try_once: bool,
        signal: &Arc<Signal>,
    ) -> Result<Option<Hold>> {
        let mut prefix = lease_prefix();
        let data = self.client.holder_id().as_bytes();
        // First try: create our lease node and list the leases in one round trip.
        let (mut made, mut listed) =
            self.create_and_list(session, &prefix, data, d, try_once, None)?;
        if made.is_none() {
            // Not made, or not known to be (a create held in a partition may be applied
            // later; its node is removed when it appears): the next create gets a fresh id.
            prefix = lease_prefix();
        }
        loop {
            let (name, token) = match &made {
                Some(m) => m.clone(),
                None => {
                    // (A create whose outcome stays unknown fails the attempt; its node is
                    // removed in the background if it appears.)
                    let m =
                        create_ephemeral(&self.client, session, &self.dir, &prefix, data, true, d)?;
                    made = Some(m.clone());
                    m
                }
            };
            let listing = match listed.take() {
                Some(c) => Ok(Some((c, None))),
                None => list_watch(session, &self.dir, d).map(|l| l.map(|(c, w)| (c, Some(w)))),
            };
            let (children, watcher) = match listing {
                Ok(Some((c, w))) => (c, w),
                Ok(None) => (Vec::new(), None),
                Err(e) => {
                    self.remove_lease(session, &name, try_once, d);
                    return Err(e);
                }
            };
            if !children.contains(&name) {
                if let Some(e) = session.ended_error() {
                    return Err(e);
                }
                log::warn!("lease node {name} vanished; creating it again");
                made = None;
                continue;
            }
            if children.len() <= self.max_leases as usize {
                return Ok(Some(Hold::new(session.clone(), self.child(&name), token)));
            }
            if try_once {
                self.remove_lease(session, &name, try_once, d);
                return Ok(None);
            }
            // Listed without a watch (the first time): list again, with one.
            let Some(watcher) = watcher else { continue };
            match wait(session, watcher, d, signal) {
                Ok(true) => {}
                Ok(false) => {
                    self.remove_lease(session, &name, try_once, d);
                    return Ok(None);
                }
                Err(e) => {
                    self.remove_lease(session, &name, try_once, d);
                    return Err(e);
                }
            }
        }
    }

    /// Curator, while a lease is mostly free: create our lease node, list the leases and release
    /// the guarding mutex in one round trip (a session's requests are applied in order, so the
    /// node is made and counted while the mutex is still ours). With at most N lease nodes the
    /// lease is held; otherwise the node goes away again (`Full`): a lease waiter must keep the
    /// mutex while it waits (waiters that counted each other's nodes without it could wait for
    /// ever), so the caller takes the mutex again and waits the ordinary way. The count alone
    /// keeps leases apart: at most N nodes existed when ours was counted.
    pub(super) fn take_curator_at_once(
        &self,
        session: &Arc<Session>,
        guard: Hold,
        d: Deadline,
        try_once: bool,
    ) -> Result<AtOnce> {
        let prefix = lease_prefix();
        let data = self.client.holder_id().as_bytes();
        let (made, listed) =
            self.create_and_list(session, &prefix, data, d, try_once, Some(guard))?;
        // The parents are missing (the ordinary way makes them).
        let Some((name, token)) = made else {
            return Ok(AtOnce::Again);
        };
        match listed {
            Some(children)
                if children.contains(&name) && children.len() <= self.max_leases as usize =>
            {
                Ok(AtOnce::Held(Hold::new(
                    session.clone(),
                    self.child(&name),
                    token,
                )))
            }
            listed => {
                // Through the one release path, waited for as every give-back (a try-once
                // attempt never past its instant: its listing may have been lost at it).
                self.remove_lease(session, &name, try_once, d);
                match listed {
                    Some(c) if c.contains(&name) => Ok(AtOnce::Full),
                    // The listing was lost: a try does not start over (its instant is near, or
                    // gone, and the connection with it).
                    None if try_once => Err(session.ended_error().unwrap_or_else(|| {
                        Error::ConnectionLoss("no reply from ZooKeeper to the lease listing".into())
                    })),
                    _ => Ok(AtOnce::Again),
                }
            }
        }
    }

    /// Creates the lease node `prefix<seq>` and lists the leases, pipelined: one round trip;
    /// `release` (the guarding mutex's hold) is released in that same round trip, after both.
    /// Returns the node (None if the create must be retried the protected way) and the listing
    /// (None if it must be taken again). A create whose reply was lost is looked up by its
    /// attempt id, never sent twice.
    #[allow(clippy::type_complexity)]
    fn create_and_list(
        &self,
        session: &Arc<Session>,
        prefix: &str,
        data: &[u8],
        d: Deadline,
        try_once: bool,
        release: Option<Hold>,
    ) -> Result<(Option<(String, i64)>, Option<Vec<String>>)> {
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        let full = self.child(prefix);
        let create = session.zk.create(&full, data, &opts);
        // No watch yet: mostly there is a lease free, and a watch set and dropped unfired
        // costs the server one more request (the crate removes it); a wait lists again with one.
        let list = session.zk.list_children(&self.dir);
        let released = release.map(Hold::release_sent);
        // Replies come in request order: the listing's after the create's, the delete's last.
        let listed = session.call(list, d).ok();
        let created = session.call(create, d);
        if let Some(Err(e)) = released.map(|r| r.finish(bound(try_once, d))) {
            log::warn!("releasing the mutex of the semaphore {}: {e}", self.path);
        }
        match created {
            Ok((stat, seq)) => Ok((Some((format!("{prefix}{seq}"), stat.czxid)), listed)),
            // The parents are missing: the protected create makes them.
            Err(zk::Error::NoNode) => Ok((None, None)),
            Err(e) if crate::session::is_retriable(&e) => {
                let found = protected::recover(session, &self.dir, prefix, true, d)?;
                if found.is_none() {
                    // Not applied yet, but not dead: held in a partition, it may be applied
                    // later; a node with this id is removed when it appears (the caller's
                    // next create gets a fresh one).
                    crate::recipes::hold::background_forget(
                        session,
                        self.dir.clone(),
                        prefix.to_string(),
                    );
                }
                Ok((found, None))
            }
            Err(e) => Err(session.record_end_and_map(e)),
        }
    }
}
