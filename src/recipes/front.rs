//! One front for every recipe, as `lock_api` is for parking_lot: each recipe implements the
//! small, object-safe [`Lockable`] (its protocol only), and [`Lock`] gives all of them the same
//! `lock` / `try_lock` / `try_lock_for` / `try_lock_until` and the one [`Guard`].

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use super::{HoldState, Participant};
use crate::deadline::Deadline;
use crate::error::{Error, Result};

/// A lock recipe as one participant sees it: what the front, the multi-lock, the C layer and the
/// command drive, whatever the recipe (`Box<dyn Lockable>` holds any of them).
///
/// Implemented by every zklock lock ([`Mutex`](crate::Mutex), [`SemaphoreMutex`](crate::SemaphoreMutex),
/// [`SimpleLock`](crate::SimpleLock), [`ReadLock`](crate::ReadLock), [`WriteLock`](crate::WriteLock),
/// [`Semaphore`](crate::Semaphore) (one lease per acquire) and [`MultiLock`](crate::MultiLock)).
///
/// ```no_run
/// use zklock::{Client, Deadline, Lockable, Mutex, Options, SimpleLock};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let locks: Vec<Box<dyn Lockable>> = vec![
///     Box::new(Mutex::new(&client, "/locks/a")?),
///     Box::new(SimpleLock::new(&client, "/locks/b")?),
/// ];
/// for l in &locks {
///     if let Some(token) = l.acquire(Deadline::TryOnce)? {
///         println!("{} held with token {token}", l.path());
///         l.release()?;
///     }
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
pub trait Lockable: Send + Sync {
    /// The lock path.
    fn path(&self) -> &str;

    /// This handle's statistics: acquires by outcome, holds ended by release or loss, and the
    /// wait and hold times of recent ones ([`LockStats`](crate::LockStats)).
    fn stats(&self) -> crate::LockStats;

    /// Makes this handle's holds revocable, as Curator's `makeRevocable`: from now on (the
    /// current hold too) a request to let go (`__REVOKE__` written into the hold's node, by
    /// [`Lockable::revoke_holders`], `zklock revoke`, `zkl_client_request_revoke` or Curator's
    /// `Revoker.attemptRevoke`) calls `on_request` on a thread of its own, and ends
    /// [`Lockable::wait_revoke_request`]. Revocation is cooperative: nothing is released unless
    /// the holder does it. The mutex, the semaphore mutex, the read-write halves and the simple
    /// lock are revocable; the others return [`Error::InvalidArgument`]. Only waiting? Pass
    /// `Box::new(|| {})`.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use zklock::{Client, Lockable, Options, SemaphoreMutex};
    /// let client = Client::connect("127.0.0.1:2181", Options::default())?;
    /// let job = Arc::new(SemaphoreMutex::new(&client, "/locks/job")?);
    /// let j = job.clone();
    /// job.make_revocable(Box::new(move || {
    ///     let _ = j.release(); // let go when asked
    /// }))?;
    /// # Ok::<(), zklock::Error>(())
    /// ```
    fn make_revocable(&self, on_request: Box<dyn Fn() + Send + Sync>) -> Result<()> {
        let _ = on_request;
        Err(Error::InvalidArgument(format!(
            "the lock at {} is not revocable (the mutex, semaphore mutex, read-write halves and simple lock are)",
            self.path()
        )))
    }

    /// Blocks until someone asks the calling participant to give up its hold (after
    /// [`Lockable::make_revocable`]): `Ok(true)` when asked, `Ok(false)` at the timeout (None:
    /// forever); [`Error::NotHeld`] if it holds nothing or lets go meanwhile.
    fn wait_revoke_request(&self, timeout: Option<Duration>) -> Result<bool> {
        let _ = timeout;
        Err(Error::InvalidArgument(format!(
            "the lock at {} was not made revocable",
            self.path()
        )))
    }

    /// Asks every current holder of this lock to let go (cooperative revocation: only holders
    /// that made their locks revocable hear it, zklock's or Curator's). Returns the holders'
    /// nodes asked.
    fn revoke_holders(&self) -> Result<Vec<String>> {
        let holders: Vec<Participant> = self
            .participants()?
            .into_iter()
            .filter(|p| p.is_holder && !p.node.is_empty())
            .collect();
        let mut asked = Vec::new();
        for p in holders {
            let node = if p.node.starts_with('/') {
                p.node
            } else {
                format!("{}/{}", self.queue_path(), p.node)
            };
            if self.request_revoke(&node)? {
                asked.push(node);
            }
        }
        Ok(asked)
    }

    #[doc(hidden)]
    /// Writes the revocation request into `node` (through this lock's session).
    fn request_revoke(&self, node: &str) -> Result<bool> {
        let _ = node;
        Err(Error::InvalidArgument(format!(
            "the lock at {} cannot ask for revocation",
            self.path()
        )))
    }

    /// Takes one hold for the calling participant: `Ok(Some(fencing token))` when held,
    /// `Ok(None)` when not acquired before `deadline` (busy, for [`Deadline::TryOnce`]); nothing
    /// of the attempt is left on the server then, nor on any error.
    fn acquire(&self, deadline: Deadline) -> Result<Option<i64>>;

    /// Releases one hold of the calling participant.
    ///
    /// # Errors
    /// [`Error::NotHeld`] if it holds nothing; [`Error::LockLost`] if the hold had been lost
    /// (its session ended, or its node was deleted by someone else); [`Error::ConnectionLoss`]
    /// if the server could not be told within one session timeout: the node is then deleted in
    /// the background, and the hold is gone either way.
    fn release(&self) -> Result<()>;

    /// What the calling participant may believe about its hold.
    fn hold_state(&self) -> HoldState;

    /// Whether the calling participant holds it and may act on it (`hold_state() == Held`).
    fn is_held(&self) -> bool {
        self.hold_state() == HoldState::Held
    }

    /// The fencing token of the calling participant's hold: strictly increasing from one holder
    /// of the lock to the next.
    ///
    /// # Errors
    /// [`Error::NotHeld`] if not held or lost; [`Error::InvalidArgument`] for a multi-lock
    /// (each of its locks has its own token).
    fn fencing_token(&self) -> Result<i64>;

    /// How long the calling participant's hold stays provably valid if the server went silent
    /// now (the lease: an instant at which the leader provably heard of the session, plus the
    /// session timeout, less a tenth of it); `None` if it holds nothing.
    fn lease_remaining(&self) -> Option<Duration>;

    /// Makes the acquires waiting on this handle return [`Error::Cancelled`] now (any thread).
    fn cancel(&self);

    /// The queue, in order, with each participant's holder id.
    fn participants(&self) -> Result<Vec<Participant>>;

    /// Blocks until the calling participant's hold is lost, or `timeout` (None: forever); true
    /// if lost (or nothing is held).
    fn wait_lost(&self, timeout: Option<Duration>) -> bool;

    /// Calls `f` once, on a thread of its own, when the calling participant's hold is lost (at
    /// once if it is not held). Nothing is kept once the hold is released.
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>);

    /// The node whose children change when this lock's queue or holders change (the lock path;
    /// the semaphore's lease directory; the simple lock's parent): what
    /// [`Client::watch_children`](crate::Client::watch_children) watches to follow the queue.
    fn queue_path(&self) -> String {
        self.path().to_string()
    }

    /// Tie-break of the multi-lock's canonical order between locks on the same path (a write
    /// lock is taken before the read lock of the same read-write lock: write -> read is a
    /// downgrade, the other order would deadlock).
    fn order_rank(&self) -> u8 {
        1
    }
}

macro_rules! forward_lockable {
    ($($t:ty),*) => {$(
        impl<L: Lockable + ?Sized> Lockable for $t {
            fn path(&self) -> &str { (**self).path() }
            fn stats(&self) -> crate::LockStats { (**self).stats() }
            fn make_revocable(&self, f: Box<dyn Fn() + Send + Sync>) -> Result<()> { (**self).make_revocable(f) }
            fn wait_revoke_request(&self, t: Option<Duration>) -> Result<bool> { (**self).wait_revoke_request(t) }
            fn request_revoke(&self, node: &str) -> Result<bool> { (**self).request_revoke(node) }
            fn acquire(&self, d: Deadline) -> Result<Option<i64>> { (**self).acquire(d) }
            fn release(&self) -> Result<()> { (**self).release() }
            fn hold_state(&self) -> HoldState { (**self).hold_state() }
            fn fencing_token(&self) -> Result<i64> { (**self).fencing_token() }
            fn lease_remaining(&self) -> Option<Duration> { (**self).lease_remaining() }
            fn cancel(&self) { (**self).cancel() }
            fn participants(&self) -> Result<Vec<Participant>> { (**self).participants() }
            fn wait_lost(&self, t: Option<Duration>) -> bool { (**self).wait_lost(t) }
            fn on_lost(&self, f: Box<dyn FnOnce() + Send>) { (**self).on_lost(f) }
            fn order_rank(&self) -> u8 { (**self).order_rank() }
            fn queue_path(&self) -> String { (**self).queue_path() }
        }
    )*};
}
forward_lockable!(&L, Box<L>, std::sync::Arc<L>);

/// The front of a recipe `R`: the four acquire forms returning a [`Guard`], and the questions
/// every lock answers. [`Mutex`](crate::Mutex), [`SemaphoreMutex`](crate::SemaphoreMutex),
/// [`SimpleLock`](crate::SimpleLock), [`ReadLock`](crate::ReadLock), [`WriteLock`](crate::WriteLock)
/// and [`MultiLock`](crate::MultiLock) are `Lock`s of their recipes.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, Options, SemaphoreMutex};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let job = SemaphoreMutex::new(&client, "/locks/job")?;
/// match job.try_lock_for(Duration::from_secs(1))? {
///     Some(guard) => println!("running, token {}", guard.fencing_token()),
///     None => println!("someone else is running it"),
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Clone)]
pub struct Lock<R> {
    pub(crate) raw: R,
}

impl<R: Lockable> std::fmt::Debug for Lock<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(
            std::any::type_name::<R>()
                .rsplit("::")
                .next()
                .unwrap_or("Lock"),
        )
        .field("path", &self.raw.path())
        .field("state", &self.raw.hold_state())
        .finish()
    }
}

impl<R: Lockable> Lock<R> {
    pub(crate) fn from_raw(raw: R) -> Lock<R> {
        Lock { raw }
    }

    /// The recipe underneath.
    pub fn raw(&self) -> &R {
        &self.raw
    }

    fn take(&self, d: Deadline) -> Result<Option<Guard<'_, R>>> {
        Ok(self
            .raw
            .acquire(d)?
            .map(|token| Guard::new(&self.raw, token)))
    }

    /// Blocks until held.
    ///
    /// # Errors
    /// [`Error::Cancelled`] after [`Lock::cancel`], [`Error::SessionExpired`] or
    /// [`Error::ConnectionLoss`] when the session failed, [`Error::WouldDeadlock`] where the
    /// recipe refuses (a second acquire of a non-reentrant handle, a read -> write upgrade).
    pub fn lock(&self) -> Result<Guard<'_, R>> {
        self.take(Deadline::Forever)?.ok_or(Error::Timeout)
    }

    /// One attempt that never waits for another holder: `Ok(None)` if the lock is busy (no node
    /// is left behind).
    pub fn try_lock(&self) -> Result<Option<Guard<'_, R>>> {
        self.take(Deadline::TryOnce)
    }

    /// Waits at most `timeout` in all: `Ok(None)` if not acquired by then (no node is left).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<Guard<'_, R>>> {
        self.take(Deadline::after(timeout))
    }

    /// Waits until `deadline` at most (one total deadline, however many predecessors leave).
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<Guard<'_, R>>> {
        self.take(Deadline::At(deadline))
    }

    /// Releases one hold of the calling participant (for holds whose guard was forgotten, or
    /// taken through [`Lockable::acquire`]); see [`Lockable::release`].
    pub fn release(&self) -> Result<()> {
        self.raw.release()
    }

    /// Whether the calling participant holds it and may act on it.
    pub fn is_held(&self) -> bool {
        self.raw.is_held()
    }

    /// What the calling participant may believe about its hold.
    pub fn hold_state(&self) -> HoldState {
        self.raw.hold_state()
    }

    /// The calling participant's fencing token, if it holds the lock.
    pub fn fencing_token(&self) -> Option<i64> {
        self.raw.fencing_token().ok()
    }

    /// How long the calling participant's hold stays provably valid if the server went silent
    /// now; `None` if it holds nothing. See [`Lockable::lease_remaining`].
    pub fn lease_remaining(&self) -> Option<Duration> {
        self.raw.lease_remaining()
    }

    /// Cancels the acquires waiting on this lock now (from any thread).
    pub fn cancel(&self) {
        self.raw.cancel()
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        self.raw.path()
    }

    /// This handle's statistics ([`Lockable::stats`]).
    pub fn stats(&self) -> crate::LockStats {
        self.raw.stats()
    }

    /// The queue, in order, with each participant's holder id; `is_holder` marks the holders.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.raw.participants()
    }

    /// The holder id of a current holder, if any.
    pub fn holder(&self) -> Result<Option<String>> {
        Ok(self
            .raw
            .participants()?
            .into_iter()
            .find(|p| p.is_holder)
            .map(|p| p.holder_id))
    }
}

/// The front is itself a lock of its recipe (so a `Mutex` goes into a multi-lock or a
/// `Box<dyn Lockable>`).
impl<R: Lockable> Lockable for Lock<R> {
    fn path(&self) -> &str {
        self.raw.path()
    }
    fn stats(&self) -> crate::LockStats {
        self.raw.stats()
    }
    fn make_revocable(&self, f: Box<dyn Fn() + Send + Sync>) -> Result<()> {
        self.raw.make_revocable(f)
    }
    fn wait_revoke_request(&self, t: Option<Duration>) -> Result<bool> {
        self.raw.wait_revoke_request(t)
    }
    fn request_revoke(&self, node: &str) -> Result<bool> {
        self.raw.request_revoke(node)
    }
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        self.raw.acquire(d)
    }
    fn release(&self) -> Result<()> {
        self.raw.release()
    }
    fn hold_state(&self) -> HoldState {
        self.raw.hold_state()
    }
    fn fencing_token(&self) -> Result<i64> {
        self.raw.fencing_token()
    }
    fn lease_remaining(&self) -> Option<Duration> {
        self.raw.lease_remaining()
    }
    fn cancel(&self) {
        self.raw.cancel()
    }
    fn participants(&self) -> Result<Vec<Participant>> {
        self.raw.participants()
    }
    fn wait_lost(&self, t: Option<Duration>) -> bool {
        self.raw.wait_lost(t)
    }
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        self.raw.on_lost(f)
    }
    fn order_rank(&self) -> u8 {
        self.raw.order_rank()
    }
    fn queue_path(&self) -> String {
        self.raw.queue_path()
    }
}

/// One hold of a lock; released on drop (on the thread that took it: a guard is not `Send`,
/// since the Rust `Mutex` and read-write halves keep one participant per thread). To release
/// from another thread, forget the guard and call `release` on a handle whose participant is
/// the handle ([`SemaphoreMutex`](crate::SemaphoreMutex), [`SimpleLock`](crate::SimpleLock)).
#[must_use = "the lock is released when the guard is dropped"]
pub struct Guard<'a, R: Lockable + ?Sized> {
    lock: &'a R,
    token: i64,
    _not_send: PhantomData<*const ()>,
}

impl<'a, R: Lockable + ?Sized> Guard<'a, R> {
    pub(crate) fn new(lock: &'a R, token: i64) -> Guard<'a, R> {
        Guard {
            lock,
            token,
            _not_send: PhantomData,
        }
    }

    /// The fencing token of this hold: strictly increasing from one holder to the next.
    pub fn fencing_token(&self) -> i64 {
        self.token
    }

    /// Whether the lock is still held and may be acted on.
    pub fn is_held(&self) -> bool {
        self.lock.is_held()
    }

    /// Held, uncertain (cut off from the server), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.lock.hold_state()
    }

    /// Blocks until the lock is no longer believed (its lease ran out or its session ended) or
    /// `timeout` (None: forever); true if so.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.lock.wait_lost(timeout)
    }

    /// How long this hold stays provably valid if the server went silent now.
    pub fn lease_remaining(&self) -> Duration {
        self.lock.lease_remaining().unwrap_or_default()
    }

    /// Calls `f` once, on another thread, when the lock is lost.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.lock.on_lost(Box::new(f))
    }

    /// Releases now and reports how it went (`Err(LockLost)` if it was lost meanwhile).
    pub fn unlock(self) -> Result<()> {
        let r = self.lock.release();
        std::mem::forget(self);
        r
    }
}

impl<R: Lockable + ?Sized> std::fmt::Debug for Guard<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("path", &self.lock.path())
            .field("token", &self.token)
            .finish()
    }
}

impl<R: Lockable + ?Sized> Drop for Guard<'_, R> {
    fn drop(&mut self) {
        if let Err(e) = self.lock.release() {
            log::warn!("releasing {} on drop: {e}", self.lock.path());
        }
    }
}
