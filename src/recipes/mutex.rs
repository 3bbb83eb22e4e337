//! The fair, herd-free, reentrant mutex (Curator's `InterProcessMutex` semantics).

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use super::{exclusive_blocker, Acquired, HoldState, Participant, Queue, ThreadHolds};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::node::{Kind, Protocol};
use crate::wait::CancelToken;

/// A fair (FIFO), herd-free, reentrant distributed mutex.
///
/// Each acquire creates an ephemeral-sequential node under the lock path; the first in
/// sequence holds the lock, every other waiter watches only its immediate predecessor.
/// Reentrant per thread: `n` acquires by one thread need `n` releases; another thread using
/// the same `Mutex` queues behind like any other process.
///
/// ```no_run
/// use zklock::{Client, Options, Mutex};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let m = Mutex::new(&client, "/locks/report")?;
/// let guard = m.lock()?;
/// println!("fencing token {}", guard.fencing_token());
/// drop(guard);
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct Mutex {
    queue: Queue,
    holds: ThreadHolds,
    cancel: CancelToken,
}

impl std::fmt::Debug for Mutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("path", &self.queue.path)
            .finish()
    }
}

/// Holds a [`Mutex`]; releases on drop (from the thread that acquired it).
#[must_use = "the lock is released when the guard is dropped"]
pub struct MutexGuard<'a> {
    mutex: &'a Mutex,
    token: i64,
    _not_send: PhantomData<*const ()>,
}

impl Mutex {
    /// A mutex at `path`, named with the client's protocol. Holds nothing yet.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed path.
    pub fn new(client: &Client, path: &str) -> Result<Mutex> {
        Mutex::with_protocol(client, path, client.protocol())
    }

    /// A mutex at `path` whose nodes are named per `protocol`.
    pub fn with_protocol(client: &Client, path: &str, protocol: Protocol) -> Result<Mutex> {
        Ok(Mutex {
            queue: Queue::new(client, path, protocol, Kind::Lock, exclusive_blocker, true)?,
            holds: ThreadHolds::default(),
            cancel: CancelToken::new(),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.queue.path
    }

    /// Blocks until held.
    pub fn lock(&self) -> Result<MutexGuard<'_>> {
        self.acquire_inner(None, false)?.ok_or(Error::Timeout)
    }

    /// One attempt that never waits: `Ok(None)` if another participant holds it (no node is
    /// left behind).
    pub fn try_lock(&self) -> Result<Option<MutexGuard<'_>>> {
        self.acquire_inner(None, true)
    }

    /// Waits at most `timeout` in all: `Ok(None)` if not acquired by then (no node is left).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MutexGuard<'_>>> {
        self.acquire_inner(super::after(timeout), false)
    }

    /// Waits until `deadline` at most (one total deadline, however many predecessors leave).
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MutexGuard<'_>>> {
        self.acquire_inner(Some(deadline), false)
    }

    /// Explicit acquire (for the C layer): `timeout` None waits forever, `Some(ZERO)` tries
    /// once. Returns whether it is held; release with [`Mutex::release`] on the same thread.
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
        let r = {
            let (deadline, try_once) = super::plan(timeout);
            self.acquire_inner(deadline, try_once)?
        };
        Ok(r.map(std::mem::forget).is_some())
    }

    fn acquire_inner(
        &self,
        deadline: Option<Instant>,
        try_once: bool,
    ) -> Result<Option<MutexGuard<'_>>> {
        if let Some(token) = self.holds.reenter() {
            return Ok(Some(self.guard(token?)));
        }
        match self.queue.acquire(deadline, try_once, &self.cancel)? {
            Acquired::Held(h) => Ok(Some(self.guard(self.holds.insert(h)))),
            Acquired::NotAcquired => Ok(None),
        }
    }

    fn guard(&self, token: i64) -> MutexGuard<'_> {
        MutexGuard {
            mutex: self,
            token,
            _not_send: PhantomData,
        }
    }

    /// Releases one hold of the calling thread.
    ///
    /// # Errors
    /// [`Error::NotHeld`] if this thread does not hold it; [`Error::LockLost`] if the session
    /// ended while it was held (the hold is dropped); [`Error::ConnectionLoss`] if the node
    /// could not be deleted in time (still held: call again).
    pub fn release(&self) -> Result<()> {
        self.holds.release()
    }

    /// Whether the calling thread holds it and its session is alive.
    pub fn is_held(&self) -> bool {
        self.hold_state() == HoldState::Held
    }

    /// The calling thread's hold, as far as can be known.
    pub fn hold_state(&self) -> HoldState {
        self.holds.state()
    }

    /// The calling thread's fencing token, if it holds the lock.
    pub fn fencing_token(&self) -> Option<i64> {
        self.holds.token()
    }

    /// How many times the calling thread holds it (reentrancy count).
    pub fn hold_count(&self) -> usize {
        self.holds.count()
    }

    /// A token that cancels this mutex's waiting acquires from any thread.
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Cancels the acquires waiting on this mutex now.
    pub fn cancel(&self) {
        self.cancel.cancel()
    }

    /// The queue, in order, with each participant's holder id; the first holds the lock.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.queue.participants(|_, i| i == 0)
    }

    /// The holder id of the current holder, if any.
    pub fn holder(&self) -> Result<Option<String>> {
        Ok(self
            .participants()?
            .into_iter()
            .find(|p| p.is_holder)
            .map(|p| p.holder_id))
    }
}

impl MutexGuard<'_> {
    /// The fencing token: the lock node's creation zxid, strictly increasing from one holder
    /// to the next.
    pub fn fencing_token(&self) -> i64 {
        self.token
    }

    /// Whether the lock is still held (false once the session is known to have expired).
    pub fn is_held(&self) -> bool {
        self.mutex.is_held()
    }

    /// Held, uncertain (disconnected), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.mutex.hold_state()
    }

    /// Blocks until the lock is lost or `timeout` (None: forever); true if lost.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.mutex
            .holds
            .with_hold(|h| h.wait_lost(timeout))
            .unwrap_or(true)
    }

    /// Calls `f` once, on another thread, when the lock is lost.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.mutex.holds.with_hold(|h| h.on_lost(f));
    }

    /// Releases now and reports how it went (`Err(LockLost)` if it was lost meanwhile).
    pub fn unlock(self) -> Result<()> {
        let r = self.mutex.release();
        std::mem::forget(self);
        r
    }
}

impl Drop for MutexGuard<'_> {
    fn drop(&mut self) {
        self.mutex.holds.release_for_drop();
    }
}
