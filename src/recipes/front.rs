//! One front for every recipe, as `lock_api` is for parking_lot: each recipe implements the
//! crate's raw [`Recipe`] (its protocol only: one attempt, who is queued), and [`Lock`] owns the
//! rest: who holds and reentrancy, cancel, statistics, revocation, the four acquire forms and the
//! one [`Guard`]. [`Lockable`], the public "any lock" trait, is implemented once for [`Lock`]
//! (and once for the multi-lock, which takes several locks, not one hold).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guard::{Guard, Guarded};
use super::hold::HoldState;
use super::lockable::sealed::Core;
use super::lockable::{Lockable, Revocable};
use super::participants::{Begin, Holds, Owner, Policy};
use super::raw::{Participant, Recipe, Revokes};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::stats::LockStats;
use crate::wait::{CancelToken, Signal};

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
    /// This handle's statistics: acquires by outcome, holds ended by release or loss, and the
    /// wait and hold times of recent ones ([`LockStats`]).
    pub fn stats(&self) -> LockStats {
        self.holds.stats.snapshot()
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

    /// Blocks until held: `Held` as it returns (docs/hold-model.md, "Success is Held"). A hold
    /// whose lease cannot be proven within one session timeout (the servers may have expired its
    /// session) is given back, and the call fails with [`Error::Timeout`].
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
        // A try-once acquire proves its hold by the one instant its attempt's steps share (one
        // session timeout from its start), not by one of its own after them.
        let (_, proof) = d.pinned(self.raw.client().session_timeout());
        match self.holds.begin()? {
            Begin::Reentered(hold) => match vouch(&hold, proof, signal) {
                Ok(()) => Ok(Some(hold.token)),
                Err(e) => {
                    // The count goes down again (the hold stays, with its other counts).
                    let _ = self.holds.release(Some(hold.token));
                    match e {
                        Error::Timeout => Ok(None),
                        Error::Cancelled => Err(e),
                        _ => Err(Error::LockLost),
                    }
                }
            },
            Begin::Fresh(ticket) => match not_acquired_at_timeout(self.raw.attempt(d, signal))? {
                // Held from the first look, or nothing: a session that held nothing for longer
                // than its lease proves it again first (two round trips). The client closed
                // (or the session expired) while the attempt was under way, say with its create
                // in flight, or the lease could not be proven by the deadline: nothing was
                // acquired, and the node goes now (the session may live on while the client's
                // handles do).
                Some(hold) => match vouch(&hold, proof, signal) {
                    Ok(()) => Ok(Some(ticket.complete(hold))),
                    Err(e) => {
                        // A try-once acquire waits for the give-back until its instant at most
                        // (the delete goes on in the background past it), as its attempt does.
                        let _ = hold.release_by(proof.instant().filter(|_| d.is_try_once()));
                        not_acquired_at_timeout(Err(e))
                    }
                },
                None => Ok(None),
            },
        }
    }
}

/// Proves the lease of `hold`, an acquire's, by `d` (docs/hold-model.md, "Success is Held"):
/// `Ok` only if the hold is `Held` as the last step, the lease's end read against the clock
/// after every wait. `Timeout` when `d` passed first, `Cancelled`, or the session's end. A
/// session that is not connected is waited for, to the deadline. An acquire with no deadline
/// proves for one session timeout at most (in practice two round trips to the leader; a
/// try-once acquire's `d` is its attempt's pinned instant): a session that cannot prove its
/// lease in that long may already have been expired by the leader, and waiting longer would
/// only keep the node from the next in line.
pub(crate) fn vouch(hold: &super::hold::Hold, d: Deadline, signal: &Signal) -> Result<()> {
    let d = match d {
        Deadline::Forever => Deadline::At(hold.session.cap(d)),
        d => d,
    };
    loop {
        if let Some(e) = hold.session.ended_error() {
            return Err(e);
        }
        if hold.state() == HoldState::Held {
            return Ok(());
        }
        if signal.is_cancelled() {
            return Err(Error::Cancelled);
        }
        if d.passed() {
            return Err(Error::Timeout);
        }
        hold.session.confirm_lease(d, signal);
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
        let hold = self.holds.hold(None).ok_or(Error::NotHeld)?;
        if let Some(forked) = hold.session.forked() {
            // The parent's token: nothing in a forked child may fence with it.
            return Err(forked);
        }
        match hold.state() {
            HoldState::Lost => Err(Error::NotHeld),
            _ => Ok(hold.token),
        }
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
        self.holds.hold(None).is_none_or(|h| h.wait_lost(timeout))
    }

    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        match self.holds.hold(None) {
            Some(h) => h.on_lost(f),
            None => f(),
        }
    }

    fn as_revocable(&self) -> Option<&dyn Revocable> {
        R::revocable_front(self)
    }

    fn queue_path(&self) -> String {
        self.raw.queue_path()
    }
}

impl<R: Recipe> Core for Lock<R> {
    fn acquire_holds(&self, n: u32, d: Deadline) -> Result<Option<Vec<i64>>> {
        self.acquire_many_in(n, d)
    }

    fn stats(&self) -> LockStats {
        Lock::stats(self)
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
            .is_none_or(|h| h.wait_lost(timeout))
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

    fn fence_of(&self, token: i64) -> Option<super::fenced::Fence> {
        self.holds
            .hold(Some(token))
            .map(|hold| super::fenced::Fence {
                hold,
                client: self.raw.client().clone(),
            })
    }
}

/// The recipes whose holders can be asked to let go (Recipe::Revokes): checked at compile time.
impl<R: Recipe + Revokes> Revocable for Lock<R> {
    fn make_revocable(&self, on_request: Box<dyn Fn() + Send + Sync>) -> Result<()> {
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

impl<R: Recipe> Guarded for Lock<R> {
    type GuardMarker = R::GuardMarker;
}
