//! One front for every recipe, as `lock_api` is for parking_lot: each recipe implements the
//! crate's raw [`Recipe`] (its protocol only: one attempt, who is queued), and [`Lock`] owns the
//! rest: who holds and reentrancy, cancel, statistics, revocation, the four acquire forms and the
//! one [`Guard`]. [`Lockable`], the public "any lock" trait, is implemented once for [`Lock`]
//! (and once for the multi-lock, which takes several locks, not one hold).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::hold::HoldState;
use super::holds::{Begin, Holds, Owner, Policy};
use super::raw::{Participant, Recipe};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::stats::LockStats;
use crate::wait::{CancelToken, Signal};

/// Any lock, as one participant sees it: what the multi-lock, the C layer and the command
/// drive, whatever the recipe (`Box<dyn Lockable>` holds any of them).
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

    /// Takes one hold for the calling participant: `Ok(Some(fencing token))` when held,
    /// `Ok(None)` when not acquired before `deadline` (busy, for [`Deadline::TryOnce`]), also
    /// when the deadline runs out inside a request to a connected server (a deadline is a
    /// timeout, however short); nothing of the attempt is left on the server then, nor on any
    /// error (a create whose reply had not come is undone in the background).
    ///
    /// # Errors
    /// [`Error::Cancelled`] after [`Lockable::cancel`], [`Error::SessionExpired`] or
    /// [`Error::ConnectionLoss`] when the session failed, [`Error::WouldDeadlock`] where the
    /// recipe refuses (a second acquire of a non-reentrant handle, a read -> write upgrade, a
    /// semaphore handle whose own leases fill it).
    fn acquire(&self, deadline: Deadline) -> Result<Option<i64>>;

    /// Releases one hold of the calling participant (its most recent).
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
    /// of the lock to the next. A multi-lock's is the largest of its locks' tokens: it fences
    /// only what holders of that whole set write; each lock's own is in
    /// [`MultiLock::tokens`](crate::MultiLock::tokens).
    ///
    /// # Errors
    /// [`Error::NotHeld`] if not held or lost.
    fn fencing_token(&self) -> Result<i64>;

    /// How long the calling participant's hold stays provably valid if the server went silent
    /// now (the lease: an instant at which the leader provably heard of the session, plus the
    /// session timeout, less a tenth of it); `None` if it holds nothing.
    fn lease_remaining(&self) -> Option<Duration>;

    /// Ends the acquires under way on this handle with [`Error::Cancelled`] (any thread, at any
    /// time); if none is under way, the handle remembers the cancel and its next acquire
    /// returns `Cancelled` at once, forgetting it. Sticky, as kazoo's `cancel()` and Java's
    /// interrupt: a cancel that lands just before an acquire begins is not lost. A cancel never
    /// outlives the one acquire it ends; several with no acquire between are one.
    fn cancel(&self);

    /// Forgets a cancel this handle remembers for its next acquire ([`Lockable::cancel`] with
    /// no acquire under way); true if there was one. For a cancel that came too late for the
    /// acquire it was meant for (that acquire had returned).
    fn reset_cancel(&self) -> bool {
        false
    }

    /// The queue, in order, with each participant's holder id; `is_holder` marks the holders.
    fn participants(&self) -> Result<Vec<Participant>>;

    /// The holder id of a current holder, if any.
    fn holder(&self) -> Result<Option<String>> {
        Ok(self
            .participants()?
            .into_iter()
            .find(|p| p.is_holder)
            .map(|p| p.holder_id))
    }

    /// Blocks until the calling participant's hold is lost, or `timeout` (None: forever); true
    /// if lost (or nothing is held).
    fn wait_lost(&self, timeout: Option<Duration>) -> bool;

    /// Calls `f` once, on a thread of its own, when the calling participant's hold is lost (at
    /// once if it is not held). Nothing is kept once the hold is released.
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>);

    /// This handle's statistics: acquires by outcome, holds ended by release or loss, and the
    /// wait and hold times of recent ones ([`LockStats`]).
    fn stats(&self) -> LockStats;

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
    fn make_revocable(&self, on_request: Box<dyn Fn() + Send + Sync>) -> Result<()>;

    /// Blocks until someone asks the calling participant to give up its hold (after
    /// [`Lockable::make_revocable`]): `Ok(true)` when asked, `Ok(false)` at the timeout (None:
    /// forever); [`Error::NotHeld`] if it holds nothing or lets go meanwhile.
    fn wait_revoke_request(&self, timeout: Option<Duration>) -> Result<bool>;

    /// Asks every current holder of this lock to let go (cooperative revocation: only holders
    /// that made their locks revocable hear it, zklock's or Curator's). Returns the holders'
    /// nodes asked.
    fn revoke_holders(&self) -> Result<Vec<String>>;

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

    /// Which lock this is, whatever the handle: the two halves of one read-write lock (and
    /// clones of one handle) answer the same; `None` if unknown. The multi-lock takes two
    /// locks on one path only as the write and read halves of one read-write lock.
    #[doc(hidden)]
    fn lock_id(&self) -> Option<usize> {
        None
    }

    /// Releases the calling participant's hold with this fencing token (what a guard and a
    /// multi-lock release: their own hold, not the handle's most recent). A lock that keeps
    /// one hold per participant may release its hold whatever the token.
    #[doc(hidden)]
    fn release_hold(&self, token: i64) -> Result<()> {
        let _ = token;
        self.release()
    }

    /// The state of the calling participant's hold with this fencing token.
    #[doc(hidden)]
    fn hold_state_of(&self, token: i64) -> HoldState {
        let _ = token;
        self.hold_state()
    }

    /// How long the hold with this fencing token stays provably valid.
    #[doc(hidden)]
    fn lease_remaining_of(&self, token: i64) -> Option<Duration> {
        let _ = token;
        self.lease_remaining()
    }

    /// Waits until the hold with this fencing token is lost.
    #[doc(hidden)]
    fn wait_lost_of(&self, token: i64, timeout: Option<Duration>) -> bool {
        let _ = token;
        self.wait_lost(timeout)
    }

    /// Calls `f` when the hold with this fencing token is lost.
    #[doc(hidden)]
    fn on_lost_of(&self, token: i64, f: Box<dyn FnOnce() + Send>) {
        let _ = token;
        self.on_lost(f)
    }

    /// The node of the hold with this fencing token.
    #[doc(hidden)]
    fn node_of(&self, token: i64) -> Option<String> {
        let _ = token;
        None
    }
}

macro_rules! forward_lockable {
    ($($t:ty),*) => {$(
        impl<L: Lockable + ?Sized> Lockable for $t {
            fn path(&self) -> &str { (**self).path() }
            fn acquire(&self, d: Deadline) -> Result<Option<i64>> { (**self).acquire(d) }
            fn release(&self) -> Result<()> { (**self).release() }
            fn hold_state(&self) -> HoldState { (**self).hold_state() }
            fn fencing_token(&self) -> Result<i64> { (**self).fencing_token() }
            fn lease_remaining(&self) -> Option<Duration> { (**self).lease_remaining() }
            fn cancel(&self) { (**self).cancel() }
            fn reset_cancel(&self) -> bool { (**self).reset_cancel() }
            fn participants(&self) -> Result<Vec<Participant>> { (**self).participants() }
            fn wait_lost(&self, t: Option<Duration>) -> bool { (**self).wait_lost(t) }
            fn on_lost(&self, f: Box<dyn FnOnce() + Send>) { (**self).on_lost(f) }
            fn stats(&self) -> LockStats { (**self).stats() }
            fn make_revocable(&self, f: Box<dyn Fn() + Send + Sync>) -> Result<()> { (**self).make_revocable(f) }
            fn wait_revoke_request(&self, t: Option<Duration>) -> Result<bool> { (**self).wait_revoke_request(t) }
            fn revoke_holders(&self) -> Result<Vec<String>> { (**self).revoke_holders() }
            fn queue_path(&self) -> String { (**self).queue_path() }
            fn order_rank(&self) -> u8 { (**self).order_rank() }
            fn lock_id(&self) -> Option<usize> { (**self).lock_id() }
            fn release_hold(&self, t: i64) -> Result<()> { (**self).release_hold(t) }
            fn hold_state_of(&self, t: i64) -> HoldState { (**self).hold_state_of(t) }
            fn lease_remaining_of(&self, t: i64) -> Option<Duration> { (**self).lease_remaining_of(t) }
            fn wait_lost_of(&self, t: i64, to: Option<Duration>) -> bool { (**self).wait_lost_of(t, to) }
            fn on_lost_of(&self, t: i64, f: Box<dyn FnOnce() + Send>) { (**self).on_lost_of(t, f) }
            fn node_of(&self, t: i64) -> Option<String> { (**self).node_of(t) }
        }
    )*};
}
forward_lockable!(&L, Box<L>, Arc<L>);

/// The front of a recipe `R`: the four acquire forms returning a [`Guard`], and (through
/// [`Lockable`]) the questions every lock answers. [`Mutex`](crate::Mutex),
/// [`SemaphoreMutex`](crate::SemaphoreMutex), [`SimpleLock`](crate::SimpleLock),
/// [`ReadLock`](crate::ReadLock), [`WriteLock`](crate::WriteLock) and
/// [`Semaphore`](crate::Semaphore) are `Lock`s of their recipes.
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
pub struct Lock<R> {
    pub(crate) raw: R,
    /// Who holds (shared by clones, and by the other half of a read-write lock).
    pub(crate) holds: Arc<Holds>,
    pub(crate) cancel: CancelToken,
}

impl<R: Clone> Clone for Lock<R> {
    /// Another handle on the same participants and holds.
    fn clone(&self) -> Self {
        Lock {
            raw: self.raw.clone(),
            holds: self.holds.clone(),
            cancel: self.cancel.clone(),
        }
    }
}

impl<R: Recipe> std::fmt::Debug for Lock<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(R::NAME)
            .field("path", &self.raw.path())
            .field("state", &self.hold_state())
            .finish()
    }
}

impl<R: Recipe> Lock<R> {
    /// A front over `raw` whose participants are per `owner`, holding per `policy`; `what` names
    /// the lock in errors ("mutex").
    pub(crate) fn from_raw(raw: R, owner: Owner, policy: Policy, what: &str) -> Lock<R> {
        let holds = Holds::new(owner, policy, format!("the {what} at {}", raw.path()));
        Lock::with_holds(raw, Arc::new(holds))
    }

    /// A front over `raw` keeping its holds in `holds` (a read-write half, whose other half
    /// looks at them).
    pub(crate) fn with_holds(raw: R, holds: Arc<Holds>) -> Lock<R> {
        Lock {
            raw,
            holds,
            cancel: CancelToken::new(),
        }
    }

    /// Blocks until held.
    ///
    /// # Errors
    /// As [`Lockable::acquire`].
    pub fn lock(&self) -> Result<Guard<'_, Self>> {
        let token = self.acquire(Deadline::Forever)?.ok_or(Error::Timeout)?;
        Ok(Guard::new(self, token))
    }

    /// One attempt that never waits for another holder: `Ok(None)` if the lock is busy (no node
    /// is left behind).
    pub fn try_lock(&self) -> Result<Option<Guard<'_, Self>>> {
        Ok(self
            .acquire(Deadline::TryOnce)?
            .map(|t| Guard::new(self, t)))
    }

    /// Waits at most `timeout` in all: `Ok(None)` if not acquired by then (no node is left).
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<Guard<'_, Self>>> {
        Ok(self
            .acquire(Deadline::after(timeout))?
            .map(|t| Guard::new(self, t)))
    }

    /// Waits until `deadline` at most (one total deadline, however many predecessors leave).
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<Guard<'_, Self>>> {
        Ok(self
            .acquire(Deadline::At(deadline))?
            .map(|t| Guard::new(self, t)))
    }

    /// How many times the calling participant holds it: the reentrant count of a mutex or a
    /// read-write half, the leases a semaphore handle keeps, 0 or 1 otherwise.
    pub fn hold_count(&self) -> usize {
        self.holds.count()
    }

    /// This handle's [`CancelToken`] (shared with its clones): its `cancel` is
    /// [`Lockable::cancel`], its `reset` [`Lockable::reset_cancel`].
    pub fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// [`Lockable::acquire`] once registered as under way, cancelled by `signal`.
    fn acquire_registered(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<i64>> {
        self.holds.begin().and_then(|begin| match begin {
            Begin::Reentered(token) => Ok(Some(token)),
            Begin::Fresh(ticket) => match not_acquired_at_timeout(self.raw.attempt(d, signal))? {
                // The client closed (or the session expired) while the attempt was under way,
                // say with its create in flight: nothing was acquired, and the node goes now
                // (the session may live on while the client's handles do).
                Some(hold) => match hold.session.ended_error() {
                    Some(e) => {
                        let _ = hold.release();
                        Err(e)
                    }
                    None => Ok(Some(ticket.complete(hold))),
                },
                None => Ok(None),
            },
        })
    }
}

impl<R: Recipe> Lockable for Lock<R> {
    fn path(&self) -> &str {
        self.raw.path()
    }

    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        let started = Instant::now();
        // Under way from here until it returns: a cancel meanwhile ends it; one remembered
        // from before (none was under way then) ends it at once.
        let reg = self.cancel.register();
        let r = if reg.signal.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            self.acquire_registered(d, &reg.signal)
        };
        drop(reg);
        self.holds.stats.acquire_ended(started, &r);
        r
    }

    fn release(&self) -> Result<()> {
        self.holds.release(None)
    }

    fn hold_state(&self) -> HoldState {
        self.holds
            .hold(None)
            .map_or(HoldState::NotHeld, |h| h.state())
    }

    fn fencing_token(&self) -> Result<i64> {
        self.holds
            .hold(None)
            .filter(|h| h.state() != HoldState::Lost)
            .map(|h| h.token)
            .ok_or(Error::NotHeld)
    }

    fn lease_remaining(&self) -> Option<Duration> {
        self.holds.hold(None).map(|h| h.session.lease_remaining())
    }

    fn cancel(&self) {
        self.cancel.cancel()
    }

    fn reset_cancel(&self) -> bool {
        self.cancel.reset()
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        self.raw.participants()
    }

    fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.holds.hold(None).map_or(true, |h| h.wait_lost(timeout))
    }

    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        match self.holds.hold(None) {
            Some(h) => h.on_lost(f),
            None => f(),
        }
    }

    fn stats(&self) -> LockStats {
        self.holds.stats.snapshot()
    }

    fn make_revocable(&self, on_request: Box<dyn Fn() + Send + Sync>) -> Result<()> {
        if !self.raw.revocable() {
            return Err(Error::invalid(format!(
                "the lock at {} is not revocable (the mutex, semaphore mutex, read-write halves and simple lock are)",
                self.path()
            )));
        }
        self.holds.make_revocable(on_request);
        Ok(())
    }

    fn wait_revoke_request(&self, timeout: Option<Duration>) -> Result<bool> {
        self.holds.wait_revoke_request(timeout)
    }

    fn revoke_holders(&self) -> Result<Vec<String>> {
        let mut asked = Vec::new();
        for p in self.participants()? {
            if !p.is_holder || p.node.is_empty() {
                continue;
            }
            let node = format!("{}/{}", self.queue_path(), p.node);
            if self.raw.client().request_revoke(&node)? {
                asked.push(node);
            }
        }
        Ok(asked)
    }

    fn queue_path(&self) -> String {
        self.raw.queue_path()
    }

    fn order_rank(&self) -> u8 {
        self.raw.order_rank()
    }

    fn lock_id(&self) -> Option<usize> {
        Some(
            self.raw
                .lock_id()
                .unwrap_or(Arc::as_ptr(&self.holds) as usize),
        )
    }

    fn release_hold(&self, token: i64) -> Result<()> {
        self.holds.release(Some(token))
    }

    fn hold_state_of(&self, token: i64) -> HoldState {
        self.holds
            .hold(Some(token))
            .map_or(HoldState::NotHeld, |h| h.state())
    }

    fn lease_remaining_of(&self, token: i64) -> Option<Duration> {
        self.holds
            .hold(Some(token))
            .map(|h| h.session.lease_remaining())
    }

    fn wait_lost_of(&self, token: i64, timeout: Option<Duration>) -> bool {
        self.holds
            .hold(Some(token))
            .map_or(true, |h| h.wait_lost(timeout))
    }

    fn on_lost_of(&self, token: i64, f: Box<dyn FnOnce() + Send>) {
        match self.holds.hold(Some(token)) {
            Some(h) => h.on_lost(f),
            None => f(),
        }
    }

    fn node_of(&self, token: i64) -> Option<String> {
        self.holds.hold(Some(token)).map(|h| h.node)
    }
}

/// An attempt whose deadline ran out inside a request, on a connected session
/// (`Error::Timeout`), was not acquired in time: `Ok(None)`, as one that ran out waiting for
/// another holder. Its recipe gave back what it took, as on every error (a create whose reply
/// did not come in time is forgotten in the background: hold-model.md).
fn not_acquired_at_timeout<T>(r: Result<Option<T>>) -> Result<Option<T>> {
    match r {
        Err(Error::Timeout) => Ok(None),
        r => r,
    }
}

/// What a [`Guard`] needs of its lock: the answers about one hold, named by its fencing token
/// (the `*_of` methods of [`Lockable`]), and whether the guard may go to another thread.
/// Sealed: implemented by [`Lock`] and [`MultiLock`](crate::MultiLock) only.
pub trait Guarded: Lockable {
    /// `()` if the guard may go to another thread, `*const ()` if not.
    #[doc(hidden)]
    type GuardSend;
}

impl<R: Recipe> Guarded for Lock<R> {
    type GuardSend = R::GuardSend;
}

/// One hold of a lock; released on drop. The guard knows *its* hold (by its fencing token): with
/// several holds on one handle (a semaphore's leases) it answers for, and releases, its own.
/// A guard of a lock whose participant may be the thread (the Rust `Mutex`, the read-write
/// halves) is not `Send`; a semaphore's lease is. To release from another thread, forget the
/// guard and call `release` on a handle whose participant is the handle
/// ([`SemaphoreMutex`](crate::SemaphoreMutex), [`SimpleLock`](crate::SimpleLock)).
#[must_use = "the lock is released when the guard is dropped"]
pub struct Guard<'a, L: Guarded + ?Sized> {
    lock: &'a L,
    token: i64,
    _send: PhantomData<L::GuardSend>,
}

impl<'a, L: Guarded + ?Sized> Guard<'a, L> {
    pub(crate) fn new(lock: &'a L, token: i64) -> Guard<'a, L> {
        Guard {
            lock,
            token,
            _send: PhantomData,
        }
    }

    /// The fencing token of this hold: strictly increasing from one holder to the next.
    pub fn fencing_token(&self) -> i64 {
        self.token
    }

    /// The lock this guard holds.
    pub(crate) fn lockable(&self) -> &'a L {
        self.lock
    }

    /// The path of this hold's node (a multi-lock's: none, empty).
    pub fn node(&self) -> String {
        self.lock.node_of(self.token).unwrap_or_default()
    }

    /// Whether this hold is still held and may be acted on.
    pub fn is_held(&self) -> bool {
        self.hold_state() == HoldState::Held
    }

    /// Held, uncertain (cut off from the server), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.lock.hold_state_of(self.token)
    }

    /// Blocks until this hold is no longer believed (its lease ran out or its session ended)
    /// or `timeout` (None: forever); true if so.
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.lock.wait_lost_of(self.token, timeout)
    }

    /// How long this hold stays provably valid if the server went silent now; `None` once it
    /// is not held.
    pub fn lease_remaining(&self) -> Option<Duration> {
        self.lock.lease_remaining_of(self.token)
    }

    /// Calls `f` once, on another thread, when this hold is lost.
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.lock.on_lost_of(self.token, Box::new(f))
    }

    /// Releases now and reports how it went (`Err(LockLost)` if it was lost meanwhile; on
    /// `Err(ConnectionLoss)` the node is deleted in the background).
    pub fn unlock(self) -> Result<()> {
        let r = self.lock.release_hold(self.token);
        std::mem::forget(self);
        r
    }
}

impl<L: Guarded + ?Sized> std::fmt::Debug for Guard<'_, L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("path", &self.lock.path())
            .field("token", &self.token)
            .finish()
    }
}

impl<L: Guarded + ?Sized> Drop for Guard<'_, L> {
    fn drop(&mut self) {
        match self.lock.release_hold(self.token) {
            // A guard dropped in a forked child: the hold is the parent's and stays so.
            Ok(()) | Err(Error::Forked(_)) => {}
            Err(e) => log::warn!("releasing {} on drop: {e}", self.lock.path()),
        }
    }
}
