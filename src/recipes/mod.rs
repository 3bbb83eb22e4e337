//! The lock recipes, and the machinery the queue-based ones share: a participant's node in a
//! lock's queue and the acquire loop (create, list, watch the one node that blocks us, wait).
//! Who owns a node, when a hold is believed and how a node goes away live in the `hold`
//! module; the one front and guard in `front`.

mod front;
mod hold;
mod multi_lock;
mod mutex;
mod protected;
mod revoke;
pub(crate) use revoke::request as request_revoke;
mod rwlock;
mod semaphore;
mod semaphore_mutex;
mod simple_lock;

use std::sync::Arc;

use zookeeper_client as zk;

pub use front::{Guard, Lock, Lockable};
pub use hold::HoldState;
pub use multi_lock::{MultiLock, MultiLockFailure, MultiLockGuard, RawMultiLock};
pub use mutex::{Mutex, MutexGuard, RawMutex};
pub use rwlock::{
    RawReadLock, RawWriteLock, ReadGuard, ReadLock, ReadWriteLock, WriteGuard, WriteLock,
};
pub use semaphore::{Lease, Semaphore};
pub use semaphore_mutex::{RawSemaphoreMutex, SemaphoreMutex, SemaphoreMutexGuard};
pub use simple_lock::{RawSimpleLock, SimpleLock, SimpleLockGuard};

pub(crate) use hold::{Begin, Hold, Holds, Owner};

use crate::client::{Client, Session};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{self, AttemptId, Contender, Kind, Protocol};
use crate::runtime::Outcome;
use crate::wait::CancelToken;

/// One contender in a lock's queue, as `participants()` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// The node's name (a child of the lock path).
    pub node: String,
    /// The sequence number the server gave it (queue order).
    pub sequence: i64,
    /// The holder id stored in the node (empty if the node had no UTF-8 data).
    pub holder_id: String,
    /// Whether this participant holds the lock now.
    pub is_holder: bool,
    /// Whether it is a reader (shared) node of a read-write lock.
    pub is_reader: bool,
    /// When its node was created, by the server's clock, in milliseconds since the Unix epoch
    /// (how long it has been queued or holding: `zklock holders --watch` shows it).
    pub created_ms: i64,
}

/// The earlier contender a participant must wait for, if any, and whether it is the only
/// contender ahead that blocks it.
pub(crate) type Blocker = fn(&[Contender], usize) -> Option<(usize, bool)>;

/// Exclusive: blocked by the immediate predecessor; it is the only blocker iff it is first.
pub(crate) fn exclusive_blocker(_: &[Contender], idx: usize) -> Option<(usize, bool)> {
    if idx == 0 {
        None
    } else {
        Some((idx - 1, idx == 1))
    }
}

/// One kind of participant at one lock path: what an acquire needs to know.
#[derive(Clone)]
pub(crate) struct Queue {
    pub(crate) client: Client,
    pub(crate) path: String,
    pub(crate) protocol: Protocol,
    pub(crate) kind: Kind,
    pub(crate) blocker: Blocker,
    /// Whether the NodeDeleted of a sole blocker may mean "held" without listing again (only
    /// where the listing proves that no node can appear ahead of ours: hold-model.md).
    pub(crate) fast_handoff: bool,
}

impl Queue {
    pub(crate) fn new(
        client: &Client,
        path: &str,
        protocol: Protocol,
        kind: Kind,
        blocker: Blocker,
        fast: bool,
    ) -> Result<Queue> {
        crate::path::validate_path(path)?;
        Ok(Queue {
            client: client.clone(),
            path: path.to_string(),
            protocol,
            kind,
            blocker,
            fast_handoff: fast,
        })
    }

    fn child(&self, name: &str) -> String {
        format!("{}/{}", self.path, name)
    }

    /// Creates our node and lists the queue, pipelined: both requests leave before we wait for
    /// either, so this costs one round trip. Returns (our node name, czxid, children).
    fn create_and_list(
        &self,
        session: &Arc<Session>,
        prefix: &str,
        d: Deadline,
    ) -> Result<(String, i64, Vec<String>)> {
        let full_prefix = self.child(prefix);
        let data = self.client.holder_id().as_bytes();
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        let mut parents_made = false;
        loop {
            let create = session.zk.create(&full_prefix, data, &opts);
            let list = session.zk.list_children(&self.path);
            // Replies come in request order: wait for the listing's first, and the create's is
            // then already in (this thread is woken once per round trip, not twice).
            let listed = session.call(list, d);
            let (name, czxid) = match session.call(create, d) {
                Ok((stat, seq)) => {
                    let name = format!("{prefix}{seq}");
                    if let Ok(children) = listed {
                        return Ok((name, stat.czxid, children));
                    }
                    (name, stat.czxid)
                }
                Err(zk::Error::NoNode) if !parents_made => {
                    self.client.create_parents(
                        session,
                        &self.path,
                        session.cap(d),
                        self.protocol,
                    )?;
                    parents_made = true;
                    continue;
                }
                Err(e) if crate::client::is_retriable(&e) => {
                    // The create may have been applied although its reply was lost: find our node
                    // by its unique id before creating again (never two nodes for one attempt).
                    match protected::recover(session, &self.path, prefix, true, d)? {
                        Some(found) => found,
                        None => continue,
                    }
                }
                Err(e) => return Err(session.map_err(e)),
            };
            return match self.list(session, d) {
                Ok(children) => Ok((name, czxid, children)),
                Err(e) => {
                    self.cleanup(session, &name);
                    Err(e)
                }
            };
        }
    }

    fn list(&self, session: &Session, d: Deadline) -> Result<Vec<String>> {
        match session.retry(d, || session.zk.list_children(&self.path)) {
            Ok(c) => Ok(c),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(session.map_err(e)),
        }
    }

    /// The acquire loop of one attempt: `Ok(None)` when not acquired by `d` (nothing left).
    pub(crate) fn acquire(&self, d: Deadline, cancel: &CancelToken) -> Result<Option<Hold>> {
        Ok(self.acquire_noting_wait(d, cancel)?.map(|(hold, _)| hold))
    }

    /// [`Queue::acquire`], also telling whether the attempt had to wait for another holder
    /// (false: held at its first look).
    pub(crate) fn acquire_noting_wait(
        &self,
        d: Deadline,
        cancel: &CancelToken,
    ) -> Result<Option<(Hold, bool)>> {
        // This thread waits for every request it sends here (see `runtime::Caller`).
        let _caller = crate::runtime::Caller::enter();
        // Registered first: a cancel from here on is heard, even while a fresh session opens.
        let reg = cancel.register();
        // A try-once attempt has one instant for every step.
        let (try_once, d) = d.pinned(self.client.session_timeout());
        let session = self.client.session_for(d, Some(&reg.signal))?;
        let prefix = AttemptId::new().prefix(self.protocol, self.kind);
        let (mut name, mut token, mut children) = self.create_and_list(&session, &prefix, d)?;
        let mut waited = false;
        // Held, unless a cancel came meanwhile (then the node goes: cancel works at any time).
        let held = |name: &str, token: i64, waited: bool| {
            if reg.signal.is_cancelled() {
                self.cleanup(&session, name);
                return Err(session.ended_error().unwrap_or(Error::Cancelled));
            }
            Ok(Some((
                Hold::new(session.clone(), self.child(name), token),
                waited,
            )))
        };
        loop {
            let queue = node::contenders(children);
            let Some(idx) = queue.iter().position(|c| c.name == name) else {
                // Our node is gone although the session lives (deleted by hand): queue again.
                if let Some(e) = session.ended_error() {
                    return Err(e);
                }
                log::warn!("lock node {name} vanished; queueing again");
                (name, token, children) = self.create_and_list(&session, &prefix, d)?;
                continue;
            };
            let Some((w, sole)) = (self.blocker)(&queue, idx) else {
                return held(&name, token, waited);
            };
            if try_once {
                self.cleanup(&session, &name);
                return Ok(None);
            }
            // The no-relist handoff is safe only if nothing can appear ahead of us: a downgrade
            // read node (non-sequential, carrying an earlier writer's number) can, so it is off
            // when a node ahead could be a writer that downgrades. Readers are not blocked by
            // read nodes, so for them it always holds.
            let fast = self.fast_handoff
                && sole
                && (self.kind == Kind::Read
                    || !queue[..idx].iter().any(|c| node::may_downgrade(&c.name)));
            let target = self.child(&queue[w].name);
            // Keep nothing of the listing while we wait: it is O(queue length) per waiter, so
            // O(n²) memory for n waiters in one process.
            drop(queue);
            let watched = match session.call(session.zk.check_and_watch_stat(&target), d) {
                Ok((Some(_), watcher)) => Some(watcher),
                // Any connection trouble (the crate fails a request on a reset socket with the
                // socket's error, not ConnectionLoss): look again once reconnected.
                Ok((None, _)) => None,
                Err(e) if crate::client::is_retriable(&e) => None,
                Err(e) => {
                    self.cleanup(&session, &name);
                    return Err(session.map_err(e));
                }
            };
            if let Some(watcher) = watched {
                match session.wait_watch(watcher, d.instant(), &reg.signal) {
                    Outcome::Ready(ev) => match ev.event_type {
                        zk::EventType::NodeDeleted if fast => return held(&name, token, true),
                        zk::EventType::Session if ev.session_state.is_terminated() => {
                            return Err(session.ended_error().unwrap_or(Error::SessionExpired));
                        }
                        _ => {}
                    },
                    Outcome::TimedOut => {
                        self.cleanup(&session, &name);
                        return Ok(None);
                    }
                    Outcome::Cancelled => {
                        self.cleanup(&session, &name);
                        return Err(session.ended_error().unwrap_or(Error::Cancelled));
                    }
                }
            } else if d.passed() {
                self.cleanup(&session, &name);
                return Ok(None);
            }
            waited = true;
            children = match self.list(&session, d) {
                Ok(c) => c,
                Err(e) => {
                    self.cleanup(&session, &name);
                    return Err(e);
                }
            };
        }
    }

    /// Deletes our node of a failed attempt: now if possible, else in the background.
    fn cleanup(&self, session: &Arc<Session>, name: &str) {
        let _ = hold::remove_node(session, &self.child(name), false);
    }

    /// The queue: every contender with its holder id, in order.
    pub(crate) fn participants(&self) -> Result<Vec<Participant>> {
        let session = self.client.session()?;
        let queue = node::contenders(self.list(&session, Deadline::Forever)?);
        let d = session.call_deadline();
        let futs: Vec<_> = queue
            .iter()
            .map(|c| session.zk.get_data(&self.child(&c.name)))
            .collect();
        let mut out = Vec::with_capacity(queue.len());
        for (i, (c, f)) in queue.iter().zip(futs).enumerate() {
            let (holder_id, created_ms) = match session.wait_raw(f, d) {
                Ok((data, stat)) => (String::from_utf8(data).unwrap_or_default(), stat.ctime),
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(session.map_err(e)),
            };
            let is_reader = node::is_reader(&c.name);
            let is_holder = if is_reader {
                rwlock::reader_blocker(&queue, i).is_none()
            } else {
                rwlock::writer_blocker(&queue, i).is_none()
            };
            out.push(Participant {
                node: c.name.clone(),
                sequence: c.seq,
                holder_id,
                is_holder,
                is_reader,
                created_ms,
            });
        }
        Ok(out)
    }
}

/// A queue-based lock as one participant table sees it: the queue it joins, its holds, and the
/// token that cancels its waits. The mutex, the semaphore mutex and each read-write half are one
/// of these with their own rules for who the participant is.
pub(crate) struct QueueLock {
    pub(crate) queue: Queue,
    pub(crate) holds: Holds,
    pub(crate) cancel: CancelToken,
}

impl QueueLock {
    pub(crate) fn new(
        queue: Queue,
        owner: Owner,
        reentrant: bool,
        what: &'static str,
    ) -> QueueLock {
        QueueLock {
            holds: Holds::new(owner, reentrant, format!("the {what} at {}", queue.path)),
            queue,
            cancel: CancelToken::new(),
        }
    }

    /// Starts an acquire of the calling participant (reentrant count, or a fresh attempt).
    pub(crate) fn begin(&self) -> Result<Begin<'_>> {
        self.holds.begin()
    }

    /// A fresh attempt through the queue.
    pub(crate) fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        match self.begin()? {
            Begin::Reentered(token) => Ok(Some(token)),
            Begin::Fresh(ticket) => Ok(self
                .queue
                .acquire(d, &self.cancel)?
                .map(|h| ticket.complete(h))),
        }
    }
}

/// The `Lockable` methods that only ask the participant table (`$holds`) and the cancel token
/// (`$cancel`): the same for every recipe that keeps its holds in a [`Holds`].
macro_rules! holds_methods {
    ($($holds:ident).+, $($cancel:ident).+) => {
        fn release(&self) -> $crate::Result<()> {
            self.$($holds).+.release()
        }
        fn stats(&self) -> $crate::LockStats {
            self.$($holds).+.stats.snapshot()
        }
        fn make_revocable(&self, f: Box<dyn Fn() + Send + Sync>) -> $crate::Result<()> {
            self.$($holds).+.make_revocable(f)
        }
        fn wait_revoke_request(
            &self,
            t: Option<std::time::Duration>,
        ) -> $crate::Result<bool> {
            self.$($holds).+.wait_revoke_request(t)
        }
        fn hold_state(&self) -> $crate::recipes::HoldState {
            self.$($holds).+.state()
        }
        fn fencing_token(&self) -> $crate::Result<i64> {
            self.$($holds).+.fencing_token()
        }
        fn lease_remaining(&self) -> Option<std::time::Duration> {
            self.$($holds).+.lease_remaining()
        }
        fn cancel(&self) {
            self.$($cancel).+.cancel()
        }
        fn wait_lost(&self, t: Option<std::time::Duration>) -> bool {
            self.$($holds).+.wait_lost(t)
        }
        fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
            self.$($holds).+.on_lost(f)
        }
    };
}
pub(crate) use holds_methods;

/// `Lockable` for a recipe type whose `$field` is its [`QueueLock`], with the recipe's own
/// acquire (`$acquire`, a method of the type taking a [`Deadline`]) and order rank.
macro_rules! queue_lockable {
    ($t:ty, $($field:ident).+, $acquire:ident, $rank:expr) => {
        impl $crate::recipes::Lockable for $t {
            fn path(&self) -> &str {
                &self.$($field).+.queue.path
            }
            fn acquire(&self, d: $crate::Deadline) -> $crate::Result<Option<i64>> {
                self.$($field).+.holds.stats.attempt(|| self.$acquire(d))
            }
            fn participants(&self) -> $crate::Result<Vec<$crate::recipes::Participant>> {
                self.$($field).+.queue.participants()
            }
            fn order_rank(&self) -> u8 {
                $rank
            }
            fn request_revoke(&self, node: &str) -> $crate::Result<bool> {
                self.$($field).+.queue.client.request_revoke(node)
            }
            $crate::recipes::holds_methods!($($field).+.holds, $($field).+.cancel);
        }
    };
}
pub(crate) use queue_lockable;
