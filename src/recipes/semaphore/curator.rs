//! The semaphore in Curator's layout (`InterProcessSemaphoreV2`): `P/locks/` is a fair mutex
//! guarding the count, leases are ephemeral-sequential `P/leases/_c_<uuid>-lease-<seq>`; the
//! mutex holder creates its lease node, then holds the lease once the number of lease nodes is
//! <= N (watching `P/leases` until it is). An acquire's first round trip carries the mutex's
//! create and listing and the lease's create and listing: when the mutex turns out free, the
//! lease was made and counted while it was ours, and the mutex is given back without waiting
//! (2 round trips a cycle with the release, as the mutex's); when it was not free, the lease
//! node goes away again and the acquirer waits for the mutex the ordinary way.

use zookeeper_client as zk;

use super::leases::{list_watch, wait, Leases};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::{lease_prefix, Kind};
use crate::recipes::attempt::{Attempt, Created, Made};
use crate::recipes::hold::Hold;
use crate::recipes::queue::{Entry, Exclusive, Queue};
use crate::session::{SendTime, Via};

/// What the first round trip of an acquire ([`Leases::take_curator_first`]) came to.
pub(super) enum First {
    /// The lease is ours (the guarding mutex is being given back).
    Held(Hold),
    /// The guarding mutex is ours and the lease is still to take: our lease node (made while
    /// the mutex was ours, so counted as Curator counts it), if one was made.
    Guarded(Hold, Option<Made>),
    /// Queued for the guarding mutex behind another holder (our node in it, the queue as
    /// listed); our lease node is gone again.
    Queued(Made, Vec<String>),
    /// Nothing of ours is left: take the ordinary way.
    Again,
}

impl Leases {
    /// Curator, holding the guarding mutex: create our lease node (or take `start`, made while
    /// it was ours), then hold once there are at most N lease nodes (a try-once attempt never
    /// waits for that).
    pub(super) fn take_curator(&self, a: &Attempt, start: Option<Made>) -> Result<Option<Hold>> {
        let (session, d) = (&a.session, a.d);
        let data = self.client.holder_id().as_bytes();
        // First try: our lease node made while holding the mutex (`start`, then listed again
        // with a watch), or create it and list the leases in one round trip.
        let (mut made, mut listed) = match start {
            Some(m) => (Some(m), None),
            None => self.create_and_list(a, data, d)?,
        };
        loop {
            // (A create whose outcome stays unknown fails the attempt; its node is removed in
            // the background if it appears.)
            let mine = match made.take() {
                Some(m) => m,
                None => a.create(&self.dir, &lease_prefix(), data, true, d)?,
            };
            let listing = match listed.take() {
                Some(c) => Some((c, None)),
                None => list_watch(session, &self.dir, d)?.map(|(c, w)| (c, Some(w))),
            };
            let (children, watcher) = listing.unwrap_or((Vec::new(), None));
            if !children.iter().any(|c| c == mine.name()) {
                if let Some(e) = session.ended_error() {
                    mine.gone();
                    return Err(e);
                }
                log::warn!("lease node {} vanished; creating it again", mine.name());
                mine.gone();
                continue;
            }
            if children.len() <= self.max_leases as usize {
                return Ok(Some(mine.into_hold()));
            }
            if a.try_once {
                return Ok(None);
            }
            // Listed without a watch (the first time): list again, with one.
            if let Some(watcher) = watcher {
                if !wait(session, watcher, d, &a.signal)? {
                    return Ok(None);
                }
            }
            made = Some(mine);
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
        a: &Attempt,
    ) -> Result<First> {
        let session = &a.session;
        let data = self.client.holder_id().as_bytes();
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        // The first round trip runs to its answer even past a short deadline, as the mutex's.
        let first = a.first_round();
        a.with_parents(&[&guard.path, &self.dir], a.d, || {
            let prefix = lease_prefix();
            let full = self.child(&prefix);
            let sent = SendTime::now();
            let (entry, (create, list)) = guard.enter_with(a, Kind::Lock, first, || {
                (
                    session.zk.create(&full, data, &opts),
                    session.zk.list_children(&self.dir),
                )
            });
            let listed = session.call_sent(sent, Via::Server, list, first);
            let created = session.call_sent(sent, Via::Leader, create, first);
            // The leases' listing counts our node only when its create was answered.
            let answered = created.is_ok();
            let lease = a.settle(&self.dir, &prefix, true, created, a.d);
            // Nothing of ours is left behind when either fails: what was made goes as it drops.
            let (entry, lease) = (entry?, lease?);
            let lease = match lease {
                Created::Made(m) => Some(m),
                // Not made (parents missing, or its reply lost): made the ordinary way.
                Created::NoParents | Created::Unknown(_) => None,
            };
            let queue = match entry {
                Entry::Made(mine, Some(queue)) => (mine, queue),
                Entry::Made(mine, None) => {
                    // The mutex's listing was lost: ours or not is learned the ordinary way.
                    drop(lease);
                    let queue = guard.list(session, a.d)?;
                    return Ok(Some(First::Queued(mine, queue)));
                }
                Entry::NoParents => return Ok(None),
                Entry::Unknown => return Ok(Some(First::Again)),
            };
            let (mine, queue) = queue;
            if !guard.holds_in(mine.name(), queue.clone()) {
                drop(lease);
                return Ok(Some(First::Queued(mine, queue)));
            }
            let guard_hold = mine.into_hold();
            let Some(lease) = lease else {
                return Ok(Some(First::Guarded(guard_hold, None)));
            };
            Ok(Some(match listed {
                Ok(c) if answered && !c.iter().any(|n| n == lease.name()) => {
                    // Our node vanished: a fresh one.
                    lease.gone();
                    First::Guarded(guard_hold, None)
                }
                Ok(c) if answered && c.len() <= self.max_leases as usize => {
                    guard_hold.release_unwaited();
                    First::Held(lease.into_hold())
                }
                // Over N (or the listing lost): wait with the mutex, as Curator does.
                _ => First::Guarded(guard_hold, Some(lease)),
            }))
        })
    }

    /// Creates a lease node and lists the leases, pipelined: one round trip. Returns the node
    /// (None if the create must be made again: its parents are missing, or its reply was lost
    /// and no node of it was found) and the listing (None if it must be taken again).
    fn create_and_list(
        &self,
        a: &Attempt,
        data: &[u8],
        d: Deadline,
    ) -> Result<(Option<Made>, Option<Vec<String>>)> {
        let session = &a.session;
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        let prefix = lease_prefix();
        let full = self.child(&prefix);
        let sent = SendTime::now();
        let create = session.zk.create(&full, data, &opts);
        // No watch yet: mostly there is a lease free, and a watch set and dropped unfired
        // costs the server one more request (the crate removes it); a wait lists again with one.
        let list = session.zk.list_children(&self.dir);
        // Replies come in request order: the listing's after the create's.
        let listed = session.call_sent(sent, Via::Server, list, d).ok();
        let created = session.call_sent(sent, Via::Leader, create, d);
        let answered = created.is_ok();
        Ok(match a.settle(&self.dir, &prefix, true, created, d)? {
            Created::Made(m) => (Some(m), listed.filter(|_| answered)),
            Created::NoParents | Created::Unknown(_) => (None, None),
        })
    }
}
