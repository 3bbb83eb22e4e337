//! The non-reentrant mutex that any thread may release (Curator's
//! `InterProcessSemaphoreMutex` semantics, on the fair queue protocol).

use std::time::{Duration, Instant};

use super::{exclusive_blocker, Acquired, HandleHold, HoldState, Participant, Queue};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::node::{Kind, Protocol};
use crate::wait::CancelToken;

/// A fair distributed mutex that is **not** reentrant and that **any** thread may release:
/// the hold belongs to the handle, not to a thread. A second acquire through a handle that
/// already holds fails with [`Error::WouldDeadlock`] instead of hanging.
///
/// ```no_run
/// use zklock::{Client, Options, SemaphoreMutex};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let m = std::sync::Arc::new(SemaphoreMutex::new(&client, "/locks/job")?);
/// m.acquire(None)?;
/// let m2 = m.clone();
/// std::thread::spawn(move || m2.release()).join().unwrap()?;
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct SemaphoreMutex {
    queue: Queue,
    hold: HandleHold,
    acquiring: parking_lot::Mutex<bool>,
    cancel: CancelToken,
}

/// Holds a [`SemaphoreMutex`]; releases on drop (may be sent to and dropped on another thread).
#[must_use = "the lock is released when the guard is dropped"]
pub struct SemaphoreMutexGuard<'a> {
    mutex: &'a SemaphoreMutex,
    token: i64,
}

impl SemaphoreMutex {
    /// A semaphore mutex at `path`, named with the client's protocol.
    pub fn new(client: &Client, path: &str) -> Result<SemaphoreMutex> {
        SemaphoreMutex::with_protocol(client, path, client.protocol())
    }

    /// A semaphore mutex at `path` named per `protocol`.
    pub fn with_protocol(
        client: &Client,
        path: &str,
        protocol: Protocol,
    ) -> Result<SemaphoreMutex> {
        Ok(SemaphoreMutex {
            queue: Queue::new(client, path, protocol, Kind::Lock, exclusive_blocker, true)?,
            hold: HandleHold::default(),
            acquiring: parking_lot::Mutex::new(false),
            cancel: CancelToken::new(),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.queue.path
    }

    /// Blocks until held.
    pub fn lock(&self) -> Result<SemaphoreMutexGuard<'_>> {
        self.acquire_inner(None, false)?
            .map(|t| self.guard(t))
            .ok_or(Error::Timeout)
    }

    /// One attempt that never waits.
    pub fn try_lock(&self) -> Result<Option<SemaphoreMutexGuard<'_>>> {
        Ok(self.acquire_inner(None, true)?.map(|t| self.guard(t)))
    }

    /// Waits at most `timeout` in all.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<SemaphoreMutexGuard<'_>>> {
        match super::after(timeout) {
            Some(d) => self.try_lock_until(d),
            None => self.lock().map(Some),
        }
    }

    /// Waits until `deadline` at most.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<SemaphoreMutexGuard<'_>>> {
        Ok(self
            .acquire_inner(Some(deadline), false)?
            .map(|t| self.guard(t)))
    }

    /// Explicit acquire: `None` waits forever, `Some(ZERO)` tries once. Returns whether held.
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
        let r = {
            let (deadline, try_once) = super::plan(timeout);
            self.acquire_inner(deadline, try_once)?
        };
        Ok(r.is_some())
    }

    fn acquire_inner(&self, deadline: Option<Instant>, try_once: bool) -> Result<Option<i64>> {
        {
            let mut acq = self.acquiring.lock();
            if self.hold.is_held_at_all() || *acq {
                return Err(Error::WouldDeadlock(
                    "this SemaphoreMutex handle already holds (or is acquiring) the lock; it is not reentrant".into(),
                ));
            }
            *acq = true;
        }
        let r = self.queue.acquire(deadline, try_once, &self.cancel);
        *self.acquiring.lock() = false;
        match r? {
            Acquired::Held(h) => Ok(Some(self.hold.set(h))),
            Acquired::NotAcquired => Ok(None),
        }
    }

    fn guard(&self, token: i64) -> SemaphoreMutexGuard<'_> {
        SemaphoreMutexGuard { mutex: self, token }
    }

    /// Releases, from any thread.
    ///
    /// # Errors
    /// [`Error::NotHeld`], [`Error::LockLost`], or [`Error::ConnectionLoss`] (still held: call again).
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

    /// A token that cancels this handle's waiting acquires from any thread.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// The queue with holder ids; the first holds.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.queue.participants(|_, i| i == 0)
    }
}

impl std::fmt::Debug for SemaphoreMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreMutex")
            .field("path", &self.queue.path)
            .field("state", &self.hold_state())
            .finish()
    }
}

impl SemaphoreMutexGuard<'_> {
    /// The fencing token.
    pub fn fencing_token(&self) -> i64 {
        self.token
    }
    /// Whether still held.
    pub fn is_held(&self) -> bool {
        self.mutex.is_held()
    }
    /// Held, uncertain (disconnected), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.mutex.hold_state()
    }
    /// Blocks until the lock is lost or `timeout` (None: forever); true if lost.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.mutex.hold.wait_lost(timeout)
    }
    /// Calls `f` once, on another thread, when the lock is lost.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.mutex.hold.on_lost(f)
    }
    /// Releases now and reports how it went.
    pub fn unlock(self) -> Result<()> {
        let r = self.mutex.release();
        std::mem::forget(self);
        r
    }
}

impl Drop for SemaphoreMutexGuard<'_> {
    fn drop(&mut self) {
        self.mutex.hold.release_for_drop();
    }
}
