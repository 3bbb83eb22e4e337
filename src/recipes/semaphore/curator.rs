//! The semaphore in Curator's layout (`InterProcessSemaphoreV2`): `P/locks/` is a fair mutex
//! guarding the count, leases are ephemeral-sequential `P/leases/_c_<uuid>-lease-<seq>`; the
//! mutex holder creates its lease node, then holds the lease once the number of lease nodes is
//! <= N (watching `P/leases` until it is). An acquire's first round trip carries the mutex's
//! create and listing and the lease's create and listing: when the mutex turns out free, the
//! lease was made and counted while it was ours, and the mutex is given back without waiting
//! (2 round trips a cycle with the release, as the mutex's); when it was not free, the lease
//! node goes away again and the acquirer waits for the mutex the ordinary way.

use std::sync::Arc;

use zookeeper_client as zk;

use super::leases::{bound, list_watch, wait, Leases};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::{lease_prefix, Kind};
use crate::recipes::hold::Hold;
use crate::recipes::protected::{self, create_ephemeral};
use crate::recipes::queue::{Entry, Exclusive, Queue};
use crate::session::{SendTime, Session, Via};
use crate::wait::Signal;

/// What the first round trip of an acquire ([`Leases::take_curator_first`]) came to.
pub(super) enum First {
    /// The lease is ours (the guarding mutex is being given back).
    Held(Hold),
    /// The guarding mutex is ours and the lease is still to take: our lease node (made while
    /// the mutex was ours, so counted as Curator counts it), if one was made.
    Guarded(Hold, Option<(String, i64)>),
    /// Queued for the guarding mutex behind another holder (our node in it, its czxid, the
    /// queue as listed); our lease node is gone again.
    Queued(String, i64, Vec<String>),
    /// Nothing of ours is left: take the ordinary way.
    Again,
}

impl Leases {
    /// Curator, holding the guarding mutex: create our lease node (or take `start`, made while
    /// it was ours), then hold once there are at most N lease nodes (a try-once attempt,
    /// `try_once`, never waits for that: its `d` is its pinned instant).
    pub(super) fn take_curator(
        &self,
        session: &Arc<Session>,
        d: Deadline,
        try_once: bool,
        signal: &Arc<Signal>,
        start: Option<(String, i64)>,
    ) -> Result<Option<Hold>> {
        let mut prefix = lease_prefix();
        let data = self.client.holder_id().as_bytes();
        // First try: our lease node made while holding the mutex (`start`, then listed again
        // with a watch), or create it and list the leases in one round trip.
        let (mut made, mut listed) = match start {
            Some(m) => (Some(m), None),
            None => self.create_and_list(session, &prefix, data, d)?,
        };
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

    /// The first round trip of an acquire: the guarding mutex's create and listing, then our
    /// lease node's create and the leases' listing, all sent before any reply is awaited. A
    /// session's requests are applied in order, so when the mutex listing shows our node first,
    /// the mutex was ours from then on, and our lease node was made and counted while it was:
    /// Curator's count rule. With at most N lease nodes the lease is held and the mutex given
    /// back without waiting; with more, the mutex is kept and the caller waits for a lease with
    /// it. When the mutex was not free, our lease node (made without it) is removed before we
    /// wait for the mutex: counted meanwhile by the mutex's holder, it could only make it wait,
    /// never let one lease too many through. Missing parents of both are made in one round trip.
    pub(super) fn take_curator_first(
        &self,
        guard: &Queue<Exclusive>,
        session: &Arc<Session>,
        d: Deadline,
        try_once: bool,
    ) -> Result<First> {
        let data = self.client.holder_id().as_bytes();
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        // The first round trip runs to its answer even past a short deadline, as the mutex's.
        let first = d.first_round(self.client.session_timeout());
        let mut parents_made = 0;
        loop {
            let prefix = lease_prefix();
            let full = self.child(&prefix);
            let sent = SendTime::now();
            let (entry, (create, list)) = guard.enter_with(session, Kind::Lock, first, || {
                (
                    session.zk.create(&full, data, &opts),
                    session.zk.list_children(&self.dir),
                )
            });
            let listed = session.call_sent(sent, Via::Server, list, first);
            let created = session.call_sent(sent, Via::Leader, create, first);
            // Nothing of ours is left behind when either fails.
            let (entry, lease) = match (entry, self.lease_made(session, &prefix, created, d)) {
                (Ok(entry), Ok(lease)) => (entry, lease),
                (Ok(Entry::Made(name, ..)), Err(e)) => {
                    guard.cleanup(session, &name, bound(try_once, d));
                    return Err(e);
                }
                (Err(e), Ok(lease)) => {
                    self.give_back(session, &lease, try_once, d);
                    return Err(e);
                }
                (Ok(_), Err(e)) | (Err(e), Err(_)) => return Err(e),
            };
            match entry {
                Entry::Made(name, czxid, Some(queue)) => {
                    if !guard.holds_in(&name, queue.clone()) {
                        self.give_back(session, &lease, try_once, d);
                        return Ok(First::Queued(name, czxid, queue));
                    }
                    let guard_hold = Hold::new(session.clone(), guard.child(&name), czxid);
                    let Some((lease_name, token)) = lease else {
                        // Not made (parents missing, or its reply lost): made the ordinary way.
                        return Ok(First::Guarded(guard_hold, None));
                    };
                    return Ok(match listed {
                        Ok(c) if c.contains(&lease_name) && c.len() <= self.max_leases as usize => {
                            guard_hold.release_unwaited();
                            First::Held(Hold::new(session.clone(), self.child(&lease_name), token))
                        }
                        // Our node vanished: a fresh one.
                        Ok(c) if !c.contains(&lease_name) => First::Guarded(guard_hold, None),
                        // Over N (or the listing lost): wait with the mutex, as Curator does.
                        _ => First::Guarded(guard_hold, Some((lease_name, token))),
                    });
                }
                Entry::Made(name, czxid, None) => {
                    // The mutex's listing was lost: ours or not is learned the ordinary way.
                    self.give_back(session, &lease, try_once, d);
                    let queue = match guard.list(session, d) {
                        Ok(q) => q,
                        Err(e) => {
                            guard.cleanup(session, &name, bound(try_once, d));
                            return Err(e);
                        }
                    };
                    return Ok(First::Queued(name, czxid, queue));
                }
                Entry::NoParents if parents_made < crate::recipes::PARENT_TRIES => {
                    self.give_back(session, &lease, try_once, d);
                    protected::create_parents_all(
                        &self.client,
                        session,
                        &[&guard.path, &self.dir],
                        d,
                        self.protocol,
                    )?;
                    parents_made += 1;
                }
                Entry::NoParents | Entry::Unknown => {
                    self.give_back(session, &lease, try_once, d);
                    return Ok(First::Again);
                }
            }
        }
    }

    /// Removes the lease node of a first round trip that did not count it (`lease`, if made).
    fn give_back(
        &self,
        session: &Arc<Session>,
        lease: &Option<(String, i64)>,
        try_once: bool,
        d: Deadline,
    ) {
        if let Some((name, _)) = lease {
            self.remove_lease(session, name, try_once, d);
        }
    }

    /// Creates the lease node `prefix<seq>` and lists the leases, pipelined: one round trip.
    /// Returns the node (None if the create must be retried the protected way) and the listing
    /// (None if it must be taken again).
    #[allow(clippy::type_complexity)]
    fn create_and_list(
        &self,
        session: &Arc<Session>,
        prefix: &str,
        data: &[u8],
        d: Deadline,
    ) -> Result<(Option<(String, i64)>, Option<Vec<String>>)> {
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        let full = self.child(prefix);
        let sent = SendTime::now();
        let create = session.zk.create(&full, data, &opts);
        // No watch yet: mostly there is a lease free, and a watch set and dropped unfired
        // costs the server one more request (the crate removes it); a wait lists again with one.
        let list = session.zk.list_children(&self.dir);
        // Replies come in request order: the listing's after the create's.
        let listed = session.call_sent(sent, Via::Server, list, d).ok();
        let created = session.call_sent(sent, Via::Leader, create, d);
        let made = self.lease_made(session, prefix, created, d)?;
        let listed = listed.filter(|_| made.is_some());
        Ok((made, listed))
    }

    /// What the reply to our lease node's create (`prefix<seq>`) says of it: the node, or
    /// None when it must be made again (its parents are missing; or its reply was lost and no
    /// node of it was found, and a node with its id is removed when it appears: the next
    /// create needs a fresh id). A create whose reply was lost is looked up by its attempt id,
    /// never sent twice.
    fn lease_made(
        &self,
        session: &Arc<Session>,
        prefix: &str,
        created: std::result::Result<(zk::Stat, zk::CreateSequence), zk::Error>,
        d: Deadline,
    ) -> Result<Option<(String, i64)>> {
        match created {
            Ok((stat, seq)) => Ok(Some((format!("{prefix}{seq}"), stat.czxid))),
            // The parents are missing: the protected create makes them.
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) if crate::session::is_retriable(&e) => {
                let found = protected::recover(session, &self.dir, prefix, true, d)?;
                if found.is_none() {
                    // Not applied yet, but not dead: held in a partition, it may be applied
                    // later; a node with this id is removed when it appears.
                    crate::recipes::hold::background_forget(
                        session,
                        self.dir.clone(),
                        prefix.to_string(),
                    );
                }
                Ok(found)
            }
            Err(e) => Err(session.record_end_and_map(e)),
        }
    }
}
