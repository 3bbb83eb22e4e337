//! The simple lock: one ephemeral node at the lock path itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::{HandleHold, HeldNode, HoldState};
use crate::client::{Client, Session};
use crate::error::{Error, Result};
use crate::runtime::Outcome;
use crate::wait::CancelToken;

/// The cheapest lock: one ephemeral node at the path itself, holding the holder id.
/// `try_lock` never waits; `lock` watches the node and retries when it is deleted (every
/// waiter wakes on each release, so prefer [`Mutex`](crate::Mutex) under contention).
///
/// ```no_run
/// use zklock::{Client, Options, SimpleLock};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let l = SimpleLock::new(&client, "/locks/cron")?;
/// if let Some(_g) = l.try_lock()? { /* run the job */ }
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct SimpleLock {
    client: Client,
    path: String,
    hold: HandleHold,
    cancel: CancelToken,
}

/// Holds a [`SimpleLock`]; releases on drop.
#[must_use = "the lock is released when the guard is dropped"]
pub struct SimpleLockGuard<'a> {
    lock: &'a SimpleLock,
    token: i64,
}

enum Try {
    Held(HeldNode),
    Busy,
}

impl SimpleLock {
    /// A simple lock at `path`.
    pub fn new(client: &Client, path: &str) -> Result<SimpleLock> {
        crate::path::validate_path(path)?;
        Ok(SimpleLock {
            client: client.clone(),
            path: path.to_string(),
            hold: HandleHold::default(),
            cancel: CancelToken::new(),
        })
    }

    fn try_once(&self, session: &Arc<Session>, deadline: Option<Instant>) -> Result<Try> {
        let opts = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let data = self.client.holder_id().as_bytes();
        let mut parents_made = false;
        loop {
            let d = super::min_deadline(deadline, session.call_deadline());
            match session.wait_raw(session.zk.create(&self.path, data, &opts), d) {
                Ok((stat, _)) => {
                    return Ok(Try::Held(HeldNode::new(
                        session.clone(),
                        self.path.clone(),
                        stat.czxid,
                    )))
                }
                Err(zk::Error::NodeExists) => {}
                Err(zk::Error::NoNode) if !parents_made => {
                    self.client
                        .create_parents(
                            session,
                            crate::path::parent(&self.path),
                            d,
                            self.client.protocol(),
                        )
                        .or_else(|e| {
                            if crate::path::parent(&self.path) == "/" {
                                Ok(())
                            } else {
                                Err(e)
                            }
                        })?;
                    parents_made = true;
                    continue;
                }
                Err(e) if super::retriable(&e) => {
                    if let Some(e) = session.ended_error() {
                        return Err(e);
                    }
                    if deadline.is_some_and(|dl| Instant::now() >= dl) {
                        return Err(Error::ConnectionLoss(
                            "no reply from ZooKeeper before the deadline".into(),
                        ));
                    }
                }
                Err(e) => return Err(session.map_err(e)),
            }
            // Exists, or unknown: whose node is it? Ours if its owner is our session.
            let d = super::min_deadline(deadline, session.call_deadline());
            match session.wait_raw(session.zk.check_stat(&self.path), d) {
                Ok(Some(stat)) if stat.ephemeral_owner == session.id => {
                    return Ok(Try::Held(HeldNode::new(
                        session.clone(),
                        self.path.clone(),
                        stat.czxid,
                    )))
                }
                Ok(Some(_)) => return Ok(Try::Busy),
                Ok(None) => continue,
                Err(e) if super::retriable(&e) => continue,
                Err(e) => return Err(session.map_err(e)),
            }
        }
    }

    fn acquire_inner(&self, deadline: Option<Instant>, try_once: bool) -> Result<Option<i64>> {
        if self.hold.is_held_at_all() {
            return Err(Error::WouldDeadlock(
                "this SimpleLock handle already holds the lock".into(),
            ));
        }
        let session = self.client.session()?;
        let reg = self.cancel.register();
        loop {
            if let Try::Held(h) = self.try_once(&session, deadline)? {
                return Ok(Some(self.hold.set(h)));
            }
            if try_once {
                return Ok(None);
            }
            let d = super::min_deadline(deadline, session.call_deadline());
            let watcher = match session.wait_raw(session.zk.check_and_watch_stat(&self.path), d) {
                Ok((Some(_), w)) => w,
                Ok((None, _)) => continue,
                Err(e) if super::retriable(&e) => continue,
                Err(e) => return Err(session.map_err(e)),
            };
            match session.wait_watch(watcher, deadline, &reg.signal) {
                Outcome::Ready(ev)
                    if ev.event_type == zk::EventType::Session
                        && ev.session_state.is_terminated() =>
                {
                    return Err(session.ended_error().unwrap_or(Error::SessionExpired))
                }
                Outcome::Ready(_) => {}
                Outcome::TimedOut => return Ok(None),
                Outcome::Cancelled => {
                    return Err(session.ended_error().unwrap_or(Error::Cancelled))
                }
            }
        }
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Blocks until held.
    pub fn lock(&self) -> Result<SimpleLockGuard<'_>> {
        let t = self.acquire_inner(None, false)?.ok_or(Error::Timeout)?;
        Ok(SimpleLockGuard {
            lock: self,
            token: t,
        })
    }

    /// One create: never waits.
    pub fn try_lock(&self) -> Result<Option<SimpleLockGuard<'_>>> {
        Ok(self.acquire_inner(None, true)?.map(|t| SimpleLockGuard {
            lock: self,
            token: t,
        }))
    }

    /// Waits at most `timeout` in all.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<SimpleLockGuard<'_>>> {
        match super::after(timeout) {
            Some(d) => self.try_lock_until(d),
            None => self.lock().map(Some),
        }
    }

    /// Waits until `deadline` at most.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<SimpleLockGuard<'_>>> {
        Ok(self
            .acquire_inner(Some(deadline), false)?
            .map(|t| SimpleLockGuard {
                lock: self,
                token: t,
            }))
    }

    /// Explicit acquire: `None` waits forever, `Some(ZERO)` tries once. Returns whether held.
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
        let r = {
            let (deadline, try_once) = super::plan(timeout);
            self.acquire_inner(deadline, try_once)?
        };
        Ok(r.is_some())
    }

    /// Releases (from any thread).
    pub fn release(&self) -> Result<()> {
        self.hold.release()
    }

    /// Whether held with a live session.
    pub fn is_held(&self) -> bool {
        self.hold_state() == HoldState::Held
    }

    /// Held, uncertain, lost or not held.
    pub fn hold_state(&self) -> HoldState {
        self.hold.state()
    }

    /// The fencing token while held.
    pub fn fencing_token(&self) -> Option<i64> {
        self.hold.token()
    }

    /// Blocks until the hold is lost or `timeout`; true if lost (or not held).
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.hold.wait_lost(timeout)
    }

    /// Cancels waiting acquires now.
    pub fn cancel(&self) {
        self.cancel.cancel()
    }

    /// The holder id in the node, if the lock is held by anyone.
    pub fn holder(&self) -> Result<Option<String>> {
        let s = self.client.session()?;
        match s.wait_raw(s.zk.get_data(&self.path), s.call_deadline()) {
            Ok((d, _)) => Ok(Some(String::from_utf8_lossy(&d).into_owned())),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(s.map_err(e)),
        }
    }
}

impl std::fmt::Debug for SimpleLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleLock")
            .field("path", &self.path)
            .field("state", &self.hold_state())
            .finish()
    }
}

impl SimpleLockGuard<'_> {
    /// The fencing token (the node's creation zxid).
    pub fn fencing_token(&self) -> i64 {
        self.token
    }
    /// Whether still held.
    pub fn is_held(&self) -> bool {
        self.lock.is_held()
    }
    /// Held, uncertain (disconnected), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.lock.hold_state()
    }
    /// Blocks until the lock is lost or `timeout` (None: forever); true if lost.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.lock.hold.wait_lost(timeout)
    }
    /// Calls `f` once, on another thread, when the lock is lost.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.lock.hold.on_lost(f)
    }
    /// Releases now and reports how it went.
    pub fn unlock(self) -> Result<()> {
        let r = self.lock.release();
        std::mem::forget(self);
        r
    }
}

impl Drop for SimpleLockGuard<'_> {
    fn drop(&mut self) {
        self.lock.hold.release_for_drop();
    }
}
