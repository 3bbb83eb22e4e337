//! The counting semaphore: at most N leases at once, in Curator's layout
//! (`InterProcessSemaphoreV2`) or kazoo's (`Semaphore`), chosen by the protocol.
//!
//! Curator: `P/locks/` is a fair mutex guarding the count, leases are ephemeral-sequential
//! `P/leases/_c_<uuid>-lease-<seq>`; the mutex holder creates its lease node, then holds the lease
//! once the number of lease nodes is <= N (watching `P/leases` until it is). An acquirer that
//! found the mutex free sends its lease create, the listing and the mutex's delete in one round
//! trip (3 a cycle with the release, not 4); if the count is then over N it removes its lease
//! node and queues for the mutex again, to wait holding it as Curator does.
//!
//! kazoo: `P-__lock__` (a sibling of P) is a kazoo lock guarding the count, leases are ephemeral
//! `P/<uuid hex>`, and N is stored as P's data (checked against ours); the lock holder creates its
//! lease node only while fewer than N exist (watching P's children until then).
//!
//! In both, only the holder of the guarding mutex watches the leases, so a release wakes one
//! process, not all of them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::hold::remove_node;
use super::protected::create_ephemeral;
use super::{exclusive_blocker, Hold, HoldState, Participant, Queue};
use crate::client::{Client, Session};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{AttemptId, Kind, Protocol};
use crate::runtime::Outcome;
use crate::wait::{CancelToken, Registration};

/// How long [`Semaphore::try_acquire`] may wait for the mutex that guards the lease count (it
/// never waits for a lease to be returned).
const TRY_GUARD_WAIT: Duration = Duration::from_millis(500);

/// A distributed counting semaphore: at most `max_leases` holders at once, over every process
/// that uses the same path and protocol (Curator's `InterProcessSemaphoreV2` layout, or kazoo's
/// `Semaphore`). Leases belong to the handle, not to a thread (a [`Lease`] may be sent to and
/// dropped on another thread), and vanish with their session (ephemeral nodes).
///
/// A failed, timed-out or cancelled acquire leaves no lease node behind.
///
/// ```no_run
/// use zklock::{Client, Options, Semaphore};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let pool = Semaphore::new(&client, "/semaphores/db", 3)?;
/// let lease = pool.acquire()?; // one of at most 3
/// println!("lease node {} token {}", lease.node(), lease.fencing_token());
/// drop(lease); // returned
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct Semaphore {
    client: Client,
    path: String,
    protocol: Protocol,
    max_leases: u32,
    /// The fair mutex guarding the lease count (`P/locks` or `P-__lock__`).
    guard: Queue,
    /// Where the lease nodes live (`P/leases` or `P`).
    leases_dir: String,
    /// Leases taken through [`Lockable::acquire`](crate::Lockable::acquire), most recent last.
    explicit: parking_lot::Mutex<Vec<Hold>>,
    cancel: CancelToken,
    /// kazoo: P exists and its stored count was checked.
    root_checked: AtomicBool,
    /// The leases this handle keeps (as [`Lease`]s or through `Lockable::acquire`) plus its
    /// acquires under way: at `max_leases`, another acquire could only wait for this handle.
    own: AtomicUsize,
    stats: crate::stats::Stats,
}

/// What [`Semaphore::take_curator_at_once`] came to.
enum AtOnce {
    /// The lease is ours.
    Held(Hold),
    /// Every lease was taken (our node is gone again, and so is our hold of the mutex).
    Full,
    /// Not learned (parents missing, connection lost); nothing of ours is left.
    Again,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("path", &self.path)
            .field("max_leases", &self.max_leases)
            .field("protocol", &self.protocol)
            .finish()
    }
}

/// One lease of a [`Semaphore`]; returned (its node deleted) on drop. May be sent to and dropped
/// on another thread.
#[must_use = "the lease is returned when it is dropped"]
pub struct Lease<'a> {
    semaphore: &'a Semaphore,
    held: Option<Hold>,
}

impl std::fmt::Debug for Lease<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease").field("node", &self.node()).finish()
    }
}

impl Semaphore {
    /// A semaphore of `max_leases` leases at `path`, laid out per the client's protocol.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed path or `max_leases == 0`.
    pub fn new(client: &Client, path: &str, max_leases: u32) -> Result<Semaphore> {
        Semaphore::with_protocol(client, path, max_leases, client.protocol())
    }

    /// A semaphore at `path` laid out per `protocol` (Curator: `P/locks` + `P/leases`; kazoo:
    /// `P-__lock__` + `P/<hex>`, N stored in P).
    pub fn with_protocol(
        client: &Client,
        path: &str,
        max_leases: u32,
        protocol: Protocol,
    ) -> Result<Semaphore> {
        crate::path::validate_path(path)?;
        if max_leases == 0 {
            return Err(Error::invalid(
                "a semaphore needs at least one lease (max_leases = 0)",
            ));
        }
        let (guard_path, leases_dir) = match protocol {
            Protocol::Curator => (format!("{path}/locks"), format!("{path}/leases")),
            Protocol::Kazoo => (format!("{path}-__lock__"), path.to_string()),
        };
        Ok(Semaphore {
            client: client.clone(),
            path: path.to_string(),
            protocol,
            max_leases,
            guard: Queue::new(
                client,
                &guard_path,
                protocol,
                Kind::Lock,
                exclusive_blocker,
                true,
            )?,
            leases_dir,
            explicit: parking_lot::Mutex::new(Vec::new()),
            cancel: CancelToken::new(),
            root_checked: AtomicBool::new(false),
            own: AtomicUsize::new(0),
            stats: Default::default(),
        })
    }

    /// The semaphore's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The number of leases.
    pub fn max_leases(&self) -> u32 {
        self.max_leases
    }

    fn take(&self, d: Deadline) -> Result<Option<Lease<'_>>> {
        Ok(self.acquire_inner(d)?.map(|h| Lease {
            semaphore: self,
            held: Some(h),
        }))
    }

    /// Blocks until a lease is available, and takes it.
    pub fn acquire(&self) -> Result<Lease<'_>> {
        self.take(Deadline::Forever)?.ok_or(Error::Timeout)
    }

    /// Takes a lease if one is free now: never waits for a lease to be returned (it may wait up
    /// to half a second for the mutex that guards the count, held briefly by other acquirers).
    /// `Ok(None)` if none is free; no node is left behind.
    pub fn try_acquire(&self) -> Result<Option<Lease<'_>>> {
        self.take(Deadline::TryOnce)
    }

    /// Waits at most `timeout` in all for a lease: `Ok(None)` if none by then (no node is left).
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<Lease<'_>>> {
        self.take(Deadline::after(timeout))
    }

    /// Waits until `deadline` at most for a lease (one deadline for the guarding mutex and the
    /// lease together).
    pub fn try_acquire_until(&self, deadline: Instant) -> Result<Option<Lease<'_>>> {
        self.take(Deadline::At(deadline))
    }

    /// How many leases this handle keeps through [`Lockable::acquire`](crate::Lockable::acquire).
    pub fn held_leases(&self) -> usize {
        self.explicit.lock().len()
    }

    /// Whether the handle keeps a lease taken through [`Lockable::acquire`](crate::Lockable::acquire)
    /// and may act on it.
    pub fn is_held(&self) -> bool {
        crate::Lockable::is_held(self)
    }

    /// The state of the most recent lease taken through [`Lockable::acquire`](crate::Lockable::acquire).
    pub fn hold_state(&self) -> HoldState {
        crate::Lockable::hold_state(self)
    }

    /// The fencing token of the most recent lease taken through
    /// [`Lockable::acquire`](crate::Lockable::acquire) (its node's creation zxid).
    pub fn fencing_token(&self) -> Option<i64> {
        crate::Lockable::fencing_token(self).ok()
    }

    /// Cancels this handle's waiting acquires now (they delete their nodes and return
    /// [`Error::Cancelled`]).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// The holder ids stored in the current lease nodes (oldest lease first; empty text for a
    /// holder without UTF-8 data), like kazoo's `lease_holders()`.
    pub fn lease_holders(&self) -> Result<Vec<String>> {
        Ok(self.leases()?.into_iter().map(|(_, id, _)| id).collect())
    }

    /// The lease nodes: (name, holder id, creation time in ms), oldest first.
    fn leases(&self) -> Result<Vec<(String, String, i64)>> {
        let session = self.client.session()?;
        let d = session.call_deadline();
        let children = match session.retry(Deadline::Forever, || {
            session.zk.list_children(&self.leases_dir)
        }) {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(session.map_err(e)),
        };
        // kazoo keeps its count in P's data and its guard beside P; every child of the lease
        // directory is a lease.
        let futs: Vec<_> = children
            .iter()
            .map(|c| session.zk.get_data(&self.child(c)))
            .collect();
        let mut out = Vec::with_capacity(children.len());
        for (name, f) in children.into_iter().zip(futs) {
            match session.wait_raw(f, d) {
                Ok((data, stat)) => out.push((
                    name,
                    String::from_utf8(data).unwrap_or_default(),
                    stat.ctime,
                )),
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(session.map_err(e)),
            }
        }
        out.sort_by_key(|(_, _, created)| *created);
        Ok(out)
    }

    fn child(&self, name: &str) -> String {
        format!("{}/{}", self.leases_dir, name)
    }

    /// One more lease for this handle, unless its own leases (and acquires under way) fill
    /// `max_leases`: then it could only wait for itself (`WouldDeadlock`, at once).
    fn acquire_inner(&self, d: Deadline) -> Result<Option<Hold>> {
        self.stats.attempt(|| self.acquire_own(d))
    }

    fn acquire_own(&self, d: Deadline) -> Result<Option<Hold>> {
        let max = self.max_leases as usize;
        if self
            .own
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(Error::WouldDeadlock(format!(
                "this handle's own leases (and acquires under way) already fill all {max} of \
                 the semaphore {}: the acquire could only wait for itself",
                self.path
            )));
        }
        let r = self.acquire_counted(d);
        if !matches!(r, Ok(Some(_))) {
            self.own.fetch_sub(1, Ordering::AcqRel);
        }
        r
    }

    /// Gives a lease back: it no longer counts as one of this handle's own.
    fn give_back(&self, h: Hold) -> Result<()> {
        self.own.fetch_sub(1, Ordering::AcqRel);
        let acquired = h.acquired;
        let r = h.release();
        self.stats.hold_ended(acquired.elapsed(), &r);
        r
    }

    /// This handle's statistics ([`Lockable::stats`](crate::Lockable::stats)): its acquires by
    /// outcome and its leases' wait and hold times.
    pub fn stats(&self) -> crate::LockStats {
        self.stats.snapshot()
    }

    fn acquire_counted(&self, d: Deadline) -> Result<Option<Hold>> {
        // This thread waits for every request it sends here (see `runtime::Caller`).
        let _caller = crate::runtime::Caller::enter();
        // Registered first (before a fresh session opens, the guarding mutex's wait and the
        // lease wait) and kept until the lease wait ends, so no cancel in between is lost.
        let reg = self.cancel.register();
        let session = self.client.session_for(d, Some(&reg.signal))?;
        if self.protocol == Protocol::Kazoo && !self.root_checked.load(Ordering::Acquire) {
            self.ensure_kazoo_root(&session, d)?;
        }
        let guard_d = if d.is_try_once() {
            Deadline::At(d.capped(TRY_GUARD_WAIT))
        } else {
            d
        };
        let mut at_once = self.protocol == Protocol::Curator;
        let guard = loop {
            let Some((guard, waited)) = self.guard.acquire_noting_wait(guard_d, &self.cancel)?
            else {
                return Ok(None);
            };
            // Only an acquirer that found the mutex free tries the short way: one that queued
            // for it has company, and would mostly find the leases taken too.
            if !at_once || waited || reg.signal.is_cancelled() {
                break guard;
            }
            at_once = false;
            match self.take_curator_at_once(&guard.session.clone(), guard, d)? {
                AtOnce::Held(hold) if reg.signal.is_cancelled() => {
                    // Cancel works at any time: what was taken is given back.
                    let _ = hold.release();
                    return Err(Error::Cancelled);
                }
                AtOnce::Held(hold) => return Ok(Some(hold)),
                // Every lease is taken (a try ends here; an acquire queues for the mutex again).
                AtOnce::Full if d.is_try_once() => return Ok(None),
                AtOnce::Full | AtOnce::Again => {}
            }
        };
        let r = if reg.signal.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            match self.protocol {
                Protocol::Curator => self.take_curator(&guard.session, d, &reg),
                Protocol::Kazoo => self.take_kazoo(&guard.session, d, &reg),
            }
        };
        let r = match r {
            // Cancel works at any time: what was taken is given back.
            Ok(Some(hold)) if reg.signal.is_cancelled() => {
                let _ = hold.release();
                Err(Error::Cancelled)
            }
            r => r,
        };
        // Waited for, not sent and forgotten: a process that exits right after a failed acquire
        // would otherwise leave the guard's node, blocking every acquirer until its session
        // expires.
        if let Err(e) = guard.release() {
            log::warn!("releasing the mutex of the semaphore {}: {e}", self.path);
        }
        r
    }

    /// Curator: create our lease node, then hold once there are at most N lease nodes.
    fn take_curator(
        &self,
        session: &Arc<Session>,
        d: Deadline,
        reg: &Registration<'_>,
    ) -> Result<Option<Hold>> {
        let prefix = lease_prefix();
        let data = self.client.holder_id().as_bytes();
        // First try: create our lease node and list the leases in one round trip.
        let (mut made, mut listed) = self.create_and_list(session, &prefix, data, d, None)?;
        loop {
            let (name, token) = match &made {
                Some(m) => m.clone(),
                None => {
                    let m = create_ephemeral(
                        &self.client,
                        session,
                        &self.leases_dir,
                        &prefix,
                        data,
                        true,
                        d,
                    )?;
                    made = Some(m.clone());
                    m
                }
            };
            let listing = match listed.take() {
                Some(c) => Ok(Some((c, None))),
                None => {
                    list_watch(session, &self.leases_dir, d).map(|l| l.map(|(c, w)| (c, Some(w))))
                }
            };
            let (children, watcher) = match listing {
                Ok(Some((c, w))) => (c, w),
                Ok(None) => (Vec::new(), None),
                Err(e) => {
                    let _ = remove_node(session, &self.child(&name), false);
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
            if d.is_try_once() {
                let _ = remove_node(session, &self.child(&name), false);
                return Ok(None);
            }
            // Listed without a watch (the first time): list again, with one.
            let Some(watcher) = watcher else { continue };
            match wait(session, watcher, d, reg) {
                Ok(true) => {}
                Ok(false) => {
                    let _ = remove_node(session, &self.child(&name), false);
                    return Ok(None);
                }
                Err(e) => {
                    let _ = remove_node(session, &self.child(&name), false);
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
    fn take_curator_at_once(
        &self,
        session: &Arc<Session>,
        guard: Hold,
        d: Deadline,
    ) -> Result<AtOnce> {
        let prefix = lease_prefix();
        let data = self.client.holder_id().as_bytes();
        let (made, listed) = self.create_and_list(session, &prefix, data, d, Some(guard))?;
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
                remove_node(session, &self.child(&name), false)?;
                Ok(match listed {
                    Some(c) if c.contains(&name) => AtOnce::Full,
                    _ => AtOnce::Again,
                })
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
        release: Option<Hold>,
    ) -> Result<(Option<(String, i64)>, Option<Vec<String>>)> {
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        let full = self.child(prefix);
        let create = session.zk.create(&full, data, &opts);
        // No watch yet: mostly there is a lease free, and a watch set and dropped unfired
        // costs the server one more request (the crate removes it); a wait lists again with one.
        let list = session.zk.list_children(&self.leases_dir);
        let released = release.map(Hold::release_sent);
        // Replies come in request order: the listing's after the create's, the delete's last.
        let listed = session.call(list, d).ok();
        let created = session.call(create, d);
        if let Some(Err(e)) = released.map(|r| r.finish()) {
            log::warn!("releasing the mutex of the semaphore {}: {e}", self.path);
        }
        match created {
            Ok((stat, seq)) => Ok((Some((format!("{prefix}{seq}"), stat.czxid)), listed)),
            // The parents are missing: the protected create makes them.
            Err(zk::Error::NoNode) => Ok((None, None)),
            Err(e) if crate::client::is_retriable(&e) => Ok((
                super::protected::recover(session, &self.leases_dir, prefix, true, d)?,
                None,
            )),
            Err(e) => Err(session.map_err(e)),
        }
    }

    /// kazoo: create our lease node only while fewer than N exist.
    fn take_kazoo(
        &self,
        session: &Arc<Session>,
        d: Deadline,
        reg: &Registration<'_>,
    ) -> Result<Option<Hold>> {
        let name = AttemptId::new().text(Protocol::Kazoo);
        let data = self.client.holder_id().as_bytes();
        loop {
            let Some((children, watcher)) = list_watch(session, &self.leases_dir, d)? else {
                // P was deleted meanwhile: lay it out again.
                self.ensure_kazoo_root(session, d)?;
                continue;
            };
            if children.len() < self.max_leases as usize {
                let (name, token) = create_ephemeral(
                    &self.client,
                    session,
                    &self.leases_dir,
                    &name,
                    data,
                    false,
                    d,
                )?;
                return Ok(Some(Hold::new(session.clone(), self.child(&name), token)));
            }
            if d.is_try_once() {
                return Ok(None);
            }
            if !wait(session, watcher, d, reg)? {
                return Ok(None);
            }
        }
    }

    /// kazoo keeps N as P's data: create P (persistent, as kazoo does) holding N, or check the N
    /// stored there.
    fn ensure_kazoo_root(&self, session: &Arc<Session>, d: Deadline) -> Result<()> {
        let opts = self.client.create_options(zk::CreateMode::Persistent);
        let n = self.max_leases.to_string();
        let mut parents_made = false;
        loop {
            if let Some(e) = session.ended_error() {
                return Err(e);
            }
            // Creating P again after a lost reply is harmless: NodeExists then checks its data.
            match session.retry(d, || session.zk.create(&self.path, n.as_bytes(), &opts)) {
                Ok(_) => break,
                Err(zk::Error::NoNode) if !parents_made => {
                    self.client.create_parents_of(
                        session,
                        &self.path,
                        session.cap(d),
                        self.protocol,
                    )?;
                    parents_made = true;
                }
                Err(zk::Error::NodeExists) => {
                    match session.retry(d, || session.zk.get_data(&self.path)) {
                        Ok((data, _)) => {
                            // Like kazoo: non-numeric data is ignored (the node may serve other uses).
                            if let Some(stored) = std::str::from_utf8(&data)
                                .ok()
                                .and_then(|s| s.trim().parse::<i64>().ok())
                            {
                                if stored != i64::from(self.max_leases) {
                                    return Err(Error::invalid(format!(
                                        "inconsistent max leases at {}: {stored} stored, {} expected",
                                        self.path, self.max_leases
                                    )));
                                }
                            }
                            break;
                        }
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => return Err(session.map_err(e)),
                    }
                }
                Err(e) => return Err(session.map_err(e)),
            }
        }
        self.root_checked.store(true, Ordering::Release);
        Ok(())
    }
}

impl crate::Lockable for Semaphore {
    fn path(&self) -> &str {
        &self.path
    }
    /// Takes one more lease for this handle (a handle may keep several).
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        Ok(self.acquire_inner(d)?.map(|h| {
            let token = h.token;
            self.explicit.lock().push(h);
            token
        }))
    }
    /// Returns the most recent lease this handle keeps (from any thread).
    fn release(&self) -> Result<()> {
        let h = self.explicit.lock().pop().ok_or(Error::NotHeld)?;
        self.give_back(h)
    }
    fn stats(&self) -> crate::LockStats {
        self.stats.snapshot()
    }
    /// The state of the most recent lease this handle keeps.
    fn hold_state(&self) -> HoldState {
        self.explicit
            .lock()
            .last()
            .map_or(HoldState::NotHeld, |h| h.state())
    }
    fn fencing_token(&self) -> Result<i64> {
        self.explicit
            .lock()
            .last()
            .filter(|h| h.state() != HoldState::Lost)
            .map(|h| h.token)
            .ok_or(Error::NotHeld)
    }
    /// The lease directory.
    fn queue_path(&self) -> String {
        self.leases_dir.clone()
    }
    fn lease_remaining(&self) -> Option<Duration> {
        let last = self.explicit.lock().last().cloned();
        last.map(|h| h.session.lease_remaining())
    }
    fn cancel(&self) {
        self.cancel.cancel();
    }
    /// The lease holders, oldest lease first, each a holder (nodes of the lease directory).
    fn participants(&self) -> Result<Vec<Participant>> {
        Ok(self
            .leases()?
            .into_iter()
            .map(|(node, holder_id, created_ms)| Participant {
                sequence: crate::node::sequence(&node).unwrap_or(0),
                node,
                holder_id,
                is_holder: true,
                is_reader: false,
                created_ms,
            })
            .collect())
    }
    fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        let last = self.explicit.lock().last().cloned();
        last.map_or(true, |h| h.wait_lost(timeout))
    }
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        let last = self.explicit.lock().last().cloned();
        match last {
            Some(h) => h.on_lost(f),
            None => f(),
        }
    }
}

impl Drop for Semaphore {
    fn drop(&mut self) {
        for h in self.explicit.get_mut().drain(..) {
            let _ = h.release();
        }
    }
}

impl Lease<'_> {
    /// The lease node's path.
    pub fn node(&self) -> &str {
        self.held.as_ref().map_or("", |h| h.node.as_str())
    }

    /// The fencing token: the lease node's creation zxid.
    pub fn fencing_token(&self) -> i64 {
        self.held.as_ref().map_or(0, |h| h.token)
    }

    /// Whether the lease is still held (false once its session is known to have ended).
    pub fn is_held(&self) -> bool {
        self.hold_state() == HoldState::Held
    }

    /// Held, uncertain (disconnected), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.held.as_ref().map_or(HoldState::NotHeld, |h| h.state())
    }

    /// Blocks until the lease is lost or `timeout` (None: forever); true if lost.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.held.as_ref().map_or(true, |h| h.wait_lost(timeout))
    }

    /// Calls `f` once, on another thread, when the lease is lost.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        match &self.held {
            Some(h) => h.on_lost(Box::new(f)),
            None => f(),
        }
    }

    /// Returns the lease now and reports how it went (`Err(LockLost)` if it was lost meanwhile;
    /// on `Err(ConnectionLoss)` the node is deleted in the background).
    pub fn release(mut self) -> Result<()> {
        let h = self.held.take().ok_or(Error::NotHeld)?;
        self.semaphore.give_back(h)
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.held.take() {
            let node = h.node.clone();
            if let Err(e) = self.semaphore.give_back(h) {
                log::warn!("returning the lease {node}: {e}");
            }
        }
    }
}

/// The name prefix of a new lease node in Curator's layout (`_c_<uuid>-lease-`).
fn lease_prefix() -> String {
    format!("_c_{}-lease-", AttemptId::new().text(Protocol::Curator))
}

/// Waits for a watch of an acquire: Ok(true) woken (look again), Ok(false) deadline passed.
pub(super) fn wait(
    session: &Session,
    watcher: zk::OneshotWatcher,
    d: Deadline,
    reg: &Registration<'_>,
) -> Result<bool> {
    match session.wait_watch(watcher, d.instant(), &reg.signal) {
        Outcome::Ready(ev) => {
            if ev.event_type == zk::EventType::Session && ev.session_state.is_terminated() {
                return Err(session.ended_error().unwrap_or(Error::SessionExpired));
            }
            Ok(true)
        }
        Outcome::TimedOut => Ok(false),
        Outcome::Cancelled => Err(session.ended_error().unwrap_or(Error::Cancelled)),
    }
}

/// Lists `dir`'s children and watches them, retrying on connection loss until `d` or the
/// session ends. `None` if `dir` does not exist.
fn list_watch(
    session: &Session,
    dir: &str,
    d: Deadline,
) -> Result<Option<(Vec<String>, zk::OneshotWatcher)>> {
    match session.retry(d, || session.zk.list_and_watch_children(dir)) {
        Ok(x) => Ok(Some(x)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(session.map_err(e)),
    }
}
