//! The lock recipes, and the machinery they share: a participant's node in a lock's queue,
//! the acquire loop (create, list, watch the one node that blocks us, wait), cleanup that
//! never leaves an orphan, release, the truth about holding, and fencing tokens.

mod multi_lock;
mod mutex;
mod protected;
mod rwlock;
mod semaphore;
mod semaphore_mutex;
mod simple_lock;

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

pub use multi_lock::{Lockable, MultiLock, MultiLockFailure, MultiLockGuard};
pub use mutex::{Mutex, MutexGuard};
pub use rwlock::{ReadGuard, ReadLock, ReadWriteLock, WriteGuard, WriteLock};
pub use semaphore::{Lease, Semaphore};
pub use semaphore_mutex::{SemaphoreMutex, SemaphoreMutexGuard};
pub use simple_lock::{SimpleLock, SimpleLockGuard};

use crate::client::{Client, Session, SessionState};
use crate::error::{Error, Result};
use crate::node::{self, AttemptId, Contender, Kind, Protocol};
use crate::runtime::Outcome;
use crate::wait::CancelToken;

/// Whether a lock is held, as far as this process can know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldState {
    /// Held, and the session is connected.
    Held,
    /// Held when last connected; the connection is down and the session may or may not survive.
    Uncertain,
    /// It was held, but its session ended: another process may hold it now.
    Lost,
    /// Not held.
    NotHeld,
}

/// One contender in a lock's queue, as [`Mutex::participants`] reports it.
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
}

/// A node this process holds a lock with.
#[derive(Clone)]
pub(crate) struct HeldNode {
    pub(crate) session: Arc<Session>,
    pub(crate) node: String,
    pub(crate) token: i64,
    /// Alive while any copy of this hold exists: lock-lost callbacks of released holds lapse.
    alive: Arc<()>,
}

impl std::fmt::Debug for HeldNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldNode")
            .field("node", &self.node)
            .field("token", &self.token)
            .finish()
    }
}

impl HeldNode {
    pub(crate) fn new(session: Arc<Session>, node: String, token: i64) -> HeldNode {
        HeldNode {
            session,
            node,
            token,
            alive: Arc::new(()),
        }
    }

    pub(crate) fn state(&self) -> HoldState {
        match self.session.state() {
            SessionState::Connected => HoldState::Held,
            SessionState::Suspended => HoldState::Uncertain,
            SessionState::Expired | SessionState::Closed => HoldState::Lost,
        }
    }

    /// Deletes the node, retrying on connection loss until it is gone or the session ends.
    /// `Err(LockLost)` when the session ended before the release (the server already removed
    /// the node). On `Err(ConnectionLoss)` the node may still exist; calling again retries.
    pub(crate) fn release(&self) -> Result<()> {
        // After expiry the server has removed the node; after `Client::close` the session
        // still lives until its last lock is dropped, so the node is deleted now.
        match self.session.state() {
            SessionState::Expired => return Err(Error::LockLost),
            SessionState::Closed => {
                // Closing the client gave the lock up (is_held() says Lost); still take the
                // node away now rather than when the last handle lets go of the session.
                let _ = delete_node(&self.session, &self.node, self.session.call_deadline());
                return Err(Error::LockLost);
            }
            _ => {}
        }
        let budget = Instant::now() + self.session.zk.session_timeout();
        match delete_node(&self.session, &self.node, budget) {
            Ok(()) => Ok(()),
            Err(e) if e.is_session_end() => Err(Error::LockLost),
            Err(e) => Err(e),
        }
    }

    /// Release for `Drop`: like [`HeldNode::release`], but hands an unfinished delete to the
    /// background so the node never outlives the session's connection trouble.
    pub(crate) fn release_or_background(&self) {
        if let Err(e) = self.release() {
            if e.is_connection_loss() {
                background_delete(self.session.clone(), self.node.clone());
            }
        }
    }

    /// Blocks until the lock is lost (the session ended) or `timeout`; true if lost.
    pub(crate) fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.session
            .wait_terminal(timeout.and_then(after))
            .is_terminal()
    }

    /// Calls `f` once, on its own thread, if this hold's session ends while it is held (at
    /// once if it already has). Nothing is kept once the hold is released.
    pub(crate) fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.session.on_end(&self.alive, Box::new(f));
    }
}

/// The deadline `timeout` from now; `None` (wait forever) when it is too far to represent.
pub(crate) fn after(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// How an explicit acquire with `timeout` runs: `None` waits forever, zero tries once.
pub(crate) fn plan(timeout: Option<Duration>) -> (Option<Instant>, bool) {
    match timeout {
        None => (None, false),
        Some(t) if t.is_zero() => (None, true),
        Some(t) => (after(t), false),
    }
}

/// The holds of a lock that is reentrant per thread ([`Mutex`], the halves of a
/// [`ReadWriteLock`]): each thread is its own participant, with a count. Releases all on drop.
#[derive(Default)]
pub(crate) struct ThreadHolds(parking_lot::Mutex<HashMap<ThreadId, (HeldNode, usize)>>);

fn me() -> ThreadId {
    std::thread::current().id()
}

impl ThreadHolds {
    /// A reentrant re-acquire by the calling thread, if it already holds: its token, or
    /// `LockLost` if that hold was lost.
    pub(crate) fn reenter(&self) -> Option<Result<i64>> {
        let mut holds = self.0.lock();
        let (held, count) = holds.get_mut(&me())?;
        if held.state() == HoldState::Lost {
            return Some(Err(Error::LockLost));
        }
        *count += 1;
        Some(Ok(held.token))
    }

    /// Records the calling thread's new hold; returns its token.
    pub(crate) fn insert(&self, h: HeldNode) -> i64 {
        let t = h.token;
        self.0.lock().insert(me(), (h, 1));
        t
    }

    /// The calling thread's hold.
    pub(crate) fn held(&self) -> Option<HeldNode> {
        self.0.lock().get(&me()).map(|(h, _)| h.clone())
    }

    /// Releases one hold of the calling thread; on connection loss the hold stays.
    pub(crate) fn release(&self) -> Result<()> {
        let held = {
            let mut holds = self.0.lock();
            let Some((held, count)) = holds.get_mut(&me()) else {
                return Err(Error::NotHeld);
            };
            if *count > 1 {
                *count -= 1;
                return Ok(());
            }
            held.clone()
        };
        match held.release() {
            Err(e) if e.is_connection_loss() => Err(e),
            r => {
                self.0.lock().remove(&me());
                r
            }
        }
    }

    /// Releases one hold of the calling thread for a guard's `Drop`.
    pub(crate) fn release_for_drop(&self) {
        let mut holds = self.0.lock();
        let Some((held, count)) = holds.get_mut(&me()) else {
            return;
        };
        if *count > 1 {
            *count -= 1;
            return;
        }
        let held = held.clone();
        holds.remove(&me());
        drop(holds);
        held.release_or_background();
    }

    pub(crate) fn state(&self) -> HoldState {
        self.0
            .lock()
            .get(&me())
            .map_or(HoldState::NotHeld, |(h, _)| h.state())
    }

    pub(crate) fn token(&self) -> Option<i64> {
        self.0
            .lock()
            .get(&me())
            .filter(|(h, _)| h.state() != HoldState::Lost)
            .map(|(h, _)| h.token)
    }

    pub(crate) fn count(&self) -> usize {
        self.0.lock().get(&me()).map_or(0, |(_, n)| *n)
    }

    pub(crate) fn with_hold<R>(&self, f: impl FnOnce(&HeldNode) -> R) -> Option<R> {
        self.0.lock().get(&me()).map(|(h, _)| f(h))
    }
}

impl Drop for ThreadHolds {
    fn drop(&mut self) {
        for (_, (h, _)) in self.0.get_mut().drain() {
            h.release_or_background();
        }
    }
}

/// The hold of a handle that is not reentrant and that any thread may release
/// ([`SemaphoreMutex`], [`SimpleLock`]). Releases on drop.
#[derive(Default)]
pub(crate) struct HandleHold(parking_lot::Mutex<Option<HeldNode>>);

impl HandleHold {
    pub(crate) fn is_held_at_all(&self) -> bool {
        self.0.lock().is_some()
    }

    /// Records a new hold; returns its fencing token.
    pub(crate) fn set(&self, h: HeldNode) -> i64 {
        let t = h.token;
        *self.0.lock() = Some(h);
        t
    }

    /// Releases: `NotHeld` if nothing is held; on connection loss the hold stays (call again).
    pub(crate) fn release(&self) -> Result<()> {
        let Some(h) = self.0.lock().clone() else {
            return Err(Error::NotHeld);
        };
        match h.release() {
            Err(e) if e.is_connection_loss() => Err(e),
            r => {
                *self.0.lock() = None;
                r
            }
        }
    }

    /// Releases for a guard's or the handle's `Drop`.
    pub(crate) fn release_for_drop(&self) {
        let h = self.0.lock().take();
        if let Some(h) = h {
            h.release_or_background();
        }
    }

    pub(crate) fn state(&self) -> HoldState {
        self.0
            .lock()
            .as_ref()
            .map_or(HoldState::NotHeld, |h| h.state())
    }

    pub(crate) fn token(&self) -> Option<i64> {
        self.0
            .lock()
            .as_ref()
            .filter(|h| h.state() != HoldState::Lost)
            .map(|h| h.token)
    }

    pub(crate) fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        let h = self.0.lock().clone();
        h.map_or(true, |h| h.wait_lost(timeout))
    }

    pub(crate) fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        let h = self.0.lock().clone();
        match h {
            Some(h) => {
                h.on_lost(f);
            }
            None => f(),
        }
    }
}

impl Drop for HandleHold {
    fn drop(&mut self) {
        self.release_for_drop();
    }
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
    /// Whether the NodeDeleted of a sole blocker means "held" without listing again (see
    /// recipes.md: only where no node can appear with a lower number than ours).
    pub(crate) fast_handoff: bool,
}

fn ephemeral_sequential() -> zk::CreateOptions<'static> {
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all())
}

fn min_deadline(a: Option<Instant>, b: Instant) -> Instant {
    match a {
        Some(a) if a < b => a,
        _ => b,
    }
}

/// How one acquire attempt ended.
pub(crate) enum Acquired {
    Held(HeldNode),
    /// Not acquired (busy for try-once, or the deadline passed); nothing left behind.
    NotAcquired,
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
        id: &AttemptId,
        deadline: Option<Instant>,
    ) -> Result<(String, i64, Vec<String>)> {
        let prefix = id.prefix(self.protocol, self.kind);
        let full_prefix = self.child(&prefix);
        let data = self.client.holder_id().as_bytes();
        let opts = ephemeral_sequential();
        let mut parents_made = false;
        loop {
            let d = min_deadline(deadline, session.call_deadline());
            let create = session.zk.create(&full_prefix, data, &opts);
            let list = session.zk.list_children(&self.path);
            // Replies come in request order: wait for the listing's first, and the create's is
            // then already in (this thread is woken once per round trip, not twice).
            let listed = session.wait_raw(list, d);
            match session.wait_raw(create, d) {
                Ok((stat, seq)) => {
                    let name = format!("{prefix}{seq}");
                    let children = match listed {
                        Ok(c) => c,
                        Err(_) => match self.list(session, deadline) {
                            Ok(c) => c,
                            Err(e) => {
                                self.cleanup(session, &name);
                                return Err(e);
                            }
                        },
                    };
                    return Ok((name, stat.czxid, children));
                }
                Err(zk::Error::NoNode) if !parents_made => {
                    self.client
                        .create_parents(session, &self.path, d, self.protocol)?;
                    parents_made = true;
                }
                Err(e) if retriable(&e) => {
                    // The create may have been applied although its reply was lost: find our node
                    // by its unique id before creating again (never two nodes for one attempt).
                    match protected::recover(session, &self.path, &prefix, true, deadline)? {
                        Some((name, czxid)) => {
                            let children = match self.list(session, deadline) {
                                Ok(c) => c,
                                Err(e) => {
                                    self.cleanup(session, &name);
                                    return Err(e);
                                }
                            };
                            return Ok((name, czxid, children));
                        }
                        None => continue,
                    }
                }
                Err(e) => return Err(session.map_err(e)),
            }
        }
    }

    fn list(&self, session: &Session, deadline: Option<Instant>) -> Result<Vec<String>> {
        loop {
            let d = min_deadline(deadline, session.call_deadline());
            match session.wait_raw(session.zk.list_children(&self.path), d) {
                Ok(c) => return Ok(c),
                Err(zk::Error::NoNode) => return Ok(Vec::new()),
                Err(zk::Error::ConnectionLoss)
                    if deadline.map_or(true, |dl| Instant::now() < dl) =>
                {
                    if let Some(e) = session.ended_error() {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(session.map_err(e)),
            }
        }
    }

    /// The acquire loop. `deadline`: None waits forever; `try_once`: never waits.
    pub(crate) fn acquire(
        &self,
        deadline: Option<Instant>,
        try_once: bool,
        cancel: &CancelToken,
    ) -> Result<Acquired> {
        let session = self.client.session()?;
        let reg = cancel.register();
        let id = AttemptId::new();
        let (mut name, mut token, mut children) = self.create_and_list(&session, &id, deadline)?;
        loop {
            let queue = node::contenders(children);
            let Some(idx) = queue.iter().position(|c| c.name == name) else {
                // Our node is gone although the session lives (deleted by hand): queue again.
                if let Some(e) = session.ended_error() {
                    return Err(e);
                }
                log::warn!("lock node {name} vanished; queueing again");
                (name, token, children) = self.create_and_list(&session, &id, deadline)?;
                continue;
            };
            let Some((w, sole)) = (self.blocker)(&queue, idx) else {
                return Ok(Acquired::Held(HeldNode::new(
                    session.clone(),
                    self.child(&name),
                    token,
                )));
            };
            if try_once {
                self.cleanup(&session, &name);
                return Ok(Acquired::NotAcquired);
            }
            let target = self.child(&queue[w].name);
            // Keep nothing of the listing while we wait: it is O(queue length) per waiter, so
            // O(n²) memory for n waiters in one process.
            drop(queue);
            let d = min_deadline(deadline, session.call_deadline());
            let watched = match session.wait_raw(session.zk.check_and_watch_stat(&target), d) {
                Ok((Some(_), watcher)) => Some(watcher),
                Ok((None, _)) => None,
                Err(zk::Error::ConnectionLoss) => None,
                Err(e) => {
                    self.cleanup(&session, &name);
                    return Err(session.map_err(e));
                }
            };
            if let Some(watcher) = watched {
                match session.wait_watch(watcher, deadline, &reg.signal) {
                    Outcome::Ready(ev) => match ev.event_type {
                        zk::EventType::NodeDeleted if self.fast_handoff && sole => {
                            return Ok(Acquired::Held(HeldNode::new(
                                session.clone(),
                                self.child(&name),
                                token,
                            )));
                        }
                        zk::EventType::Session if ev.session_state.is_terminated() => {
                            return Err(session.ended_error().unwrap_or(Error::SessionExpired));
                        }
                        _ => {}
                    },
                    Outcome::TimedOut => {
                        self.cleanup(&session, &name);
                        return Ok(Acquired::NotAcquired);
                    }
                    Outcome::Cancelled => {
                        self.cleanup(&session, &name);
                        return Err(session.ended_error().unwrap_or(Error::Cancelled));
                    }
                }
            } else if deadline.is_some_and(|dl| Instant::now() >= dl) {
                self.cleanup(&session, &name);
                return Ok(Acquired::NotAcquired);
            }
            children = match self.list(&session, deadline) {
                Ok(c) => c,
                Err(e) => {
                    self.cleanup(&session, &name);
                    return Err(e);
                }
            };
        }
    }

    /// Deletes our node of a failed attempt: now if possible, else in the background until the
    /// session ends.
    fn cleanup(&self, session: &Arc<Session>, name: &str) {
        protected::cleanup(session, &self.child(name));
    }

    /// The queue: every contender with its holder id, in order; `holders` says how many of the
    /// first contenders hold (given the queue).
    pub(crate) fn participants(
        &self,
        holds: impl Fn(&[Contender], usize) -> bool,
    ) -> Result<Vec<Participant>> {
        let session = self.client.session()?;
        let queue = node::contenders(self.list(&session, None)?);
        let d = session.call_deadline();
        let futs: Vec<_> = queue
            .iter()
            .map(|c| session.zk.get_data(&self.child(&c.name)))
            .collect();
        let mut out = Vec::with_capacity(queue.len());
        for (i, (c, f)) in queue.iter().zip(futs).enumerate() {
            let holder_id = match session.wait_raw(f, d) {
                Ok((data, _)) => String::from_utf8(data).unwrap_or_default(),
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(session.map_err(e)),
            };
            out.push(Participant {
                node: c.name.clone(),
                sequence: c.seq,
                holder_id,
                is_holder: holds(&queue, i),
                is_reader: node::is_reader(&c.name),
            });
        }
        Ok(out)
    }
}

/// Deletes `node`, retrying on connection loss until `budget`; gone or session ended is success
/// of a kind (the node no longer exists): Ok / the session error.
pub(crate) fn delete_node(session: &Session, node: &str, budget: Instant) -> Result<()> {
    loop {
        match session.wait_raw(
            session.zk.delete(node, None),
            session.call_deadline().min(budget),
        ) {
            Ok(()) | Err(zk::Error::NoNode) => return Ok(()),
            Err(zk::Error::ConnectionLoss)
            | Err(zk::Error::UnexpectedError(_))
            | Err(zk::Error::Timeout) => {
                if let Some(e) = session.ended_error() {
                    return Err(e);
                }
                if Instant::now() >= budget {
                    return Err(Error::ConnectionLoss(format!(
                        "could not delete {node} in time"
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(session.map_err(e)),
        }
    }
}

fn retriable(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::ConnectionLoss | zk::Error::UnexpectedError(_) | zk::Error::Timeout
    )
}

/// Deletes `node` in the background, until it is gone or the session ends.
pub(crate) fn background_delete(session: Arc<Session>, node: String) {
    log::warn!("deleting {node} in the background");
    crate::runtime::spawn(async move {
        loop {
            match session.zk.delete(&node, None).await {
                Err(e) if retriable(&e) && !session.state().is_terminal() => {
                    async_io::Timer::after(Duration::from_millis(100)).await;
                }
                _ => return,
            }
        }
    });
}

/// Finds and deletes the node of attempt `needle` under `path` in the background, until done
/// or the session ends (a create whose outcome we could not learn in time).
fn background_delete_attempt(session: &Arc<Session>, path: String, needle: String) {
    let session = session.clone();
    crate::runtime::spawn(async move {
        loop {
            match session.zk.list_children(&path).await {
                Ok(children) => {
                    if let Some(n) = children.iter().find(|c| c.contains(&needle)) {
                        let node = format!("{path}/{n}");
                        loop {
                            match session.zk.delete(&node, None).await {
                                Err(e) if retriable(&e) && !session.state().is_terminal() => {
                                    async_io::Timer::after(Duration::from_millis(100)).await;
                                }
                                _ => return,
                            }
                        }
                    }
                    return;
                }
                Err(e) if retriable(&e) && !session.state().is_terminal() => {
                    async_io::Timer::after(Duration::from_millis(100)).await;
                }
                Err(_) => return,
            }
        }
    });
}
