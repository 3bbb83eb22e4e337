//! [`Lockable`], the public "any lock" trait: what every lock can do, whatever the recipe,
//! and what the multi-lock, the C layer and the command drive; [`Revocable`], the capability
//! of the locks whose holders can be asked to let go (known at compile time: a semaphore is
//! none); and [`sealed::Core`], what the guards, the multi-lock and the C layer ask of a lock
//! beside it (one hold by its token, how locks on one path order), which no user sees or
//! implements. Implemented once for [`Lock`](super::front::Lock) (and once for the
//! multi-lock), and forwarded through references, boxes and `Arc`s.

use std::sync::Arc;
use std::time::Duration;

use super::hold::HoldState;
use super::raw::Participant;
use crate::deadline::Deadline;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::stats::LockStats;

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
pub trait Lockable: sealed::Core {
    /// The lock path.
    fn path(&self) -> &str;

    /// Takes one hold for the calling participant: `Ok(Some(fencing token))` when held, and
    /// `Held` as it returns (its lease's end read against the clock as the last step: a reentrant
    /// acquire too); `Ok(None)` when not acquired before `deadline` (busy, for
    /// [`Deadline::TryOnce`]), also when the deadline runs out inside a request to a connected
    /// server (a deadline is a timeout, however short) and when the hold's lease could not be
    /// proven by then ([`Deadline::TryOnce`] and [`Deadline::Forever`] prove for one session
    /// timeout at most); nothing of the attempt is left on the server then, nor on any error (a
    /// create whose reply had not come is undone in the background).
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
    /// [`Error::NotHeld`] if not held or lost; [`Error::Forked`] in a forked child (the hold
    /// is the parent's).
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

    /// Blocks until the calling participant's hold is lost, or `timeout` (None: forever); true
    /// if lost (or nothing is held).
    fn wait_lost(&self, timeout: Option<Duration>) -> bool;

    /// Calls `f` once, on a thread of its own, when the calling participant's hold is lost (at
    /// once if it is not held). Nothing is kept once the hold is released.
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>);

    /// This lock as [`Revocable`], if its holders can be asked to let go (the mutex, the
    /// semaphore mutex, the read-write halves, the simple lock, the election): for code that
    /// holds any lock (`Box<dyn Lockable>`); a known lock's type says it at compile time.
    fn as_revocable(&self) -> Option<&dyn Revocable>;

    /// The node whose children change when this lock's queue or holders change (the lock path;
    /// the semaphore's lease directory; the simple lock's parent): what
    /// [`Client::watch_children`](crate::Client::watch_children) watches to follow the queue.
    fn queue_path(&self) -> String {
        self.path().to_string()
    }
}

/// The locks whose holders can be asked to let go (Curator's revocation): the mutex, the
/// semaphore mutex, the read-write halves, the simple lock and the election. A semaphore is not
/// one (Curator's has no revocation), nor a multi-lock (make its locks revocable one by one):
/// asking either is a compile error, and [`Lockable::as_revocable`] says it of any lock.
pub trait Revocable: Lockable {
    /// Makes this handle's holds revocable, as Curator's `makeRevocable`: from now on (the
    /// current hold too) a request to let go (`__REVOKE__` written into the hold's node, by
    /// [`Revocable::revoke_holders`], `zklock revoke`, `zkl_client_request_revoke` or Curator's
    /// `Revoker.attemptRevoke`) calls `on_request` on a thread of its own, and ends
    /// [`Revocable::wait_revoke_request`]. Revocation is cooperative: nothing is released unless
    /// the holder does it. Only waiting? Pass `Box::new(|| {})`.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use zklock::{Client, Lockable, Options, Revocable, SemaphoreMutex};
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
    /// [`Revocable::make_revocable`]): `Ok(true)` when asked, `Ok(false)` at the timeout (None:
    /// forever); [`Error::NotHeld`] if it holds nothing or lets go meanwhile.
    fn wait_revoke_request(&self, timeout: Option<Duration>) -> Result<bool>;

    /// Asks every current holder of this lock to let go (cooperative revocation: only holders
    /// that made their locks revocable hear it, zklock's or Curator's). Returns the holders'
    /// nodes asked.
    fn revoke_holders(&self) -> Result<Vec<String>>;
}

/// `lock` as [`Revocable`], or the error that says it is not one: for callers that hold any
/// lock (the C layer).
pub(crate) fn revocable(lock: &dyn Lockable) -> Result<&dyn Revocable> {
    lock.as_revocable().ok_or_else(|| {
        crate::error::Error::invalid(format!(
            "the lock at {} is not revocable (the mutex, semaphore mutex, read-write halves, \
             simple lock and election are; a semaphore and a multi-lock are not)",
            lock.path()
        ))
    })
}

pub(crate) mod sealed {
    use std::time::Duration;

    use super::super::hold::HoldState;
    use crate::deadline::Deadline;
    use crate::error::Result;
    use crate::stats::LockStats;

    /// What the guards, the multi-lock and the C layer ask of a lock beside [`Lockable`]
    /// (`super::Lockable`): one hold, named by its fencing token; how locks on one path order;
    /// several holds at once; the statistics. Implemented by `Lock` and `MultiLock` only.
    pub trait Core: Send + Sync {
        /// Takes `n` holds at once for the calling participant, all or none (a semaphore's leases:
        /// [`Semaphore::acquire_many`](crate::Semaphore::acquire_many)); their fencing tokens,
        /// `Ok(None)` as [`Lockable::acquire`]. Other locks: [`Error::InvalidArgument`].
        fn acquire_holds(&self, n: u32, deadline: Deadline) -> Result<Option<Vec<i64>>> {
            let _ = (n, deadline);
            Err(crate::error::Error::invalid(
                "this lock takes one hold per acquire (only a semaphore takes several)",
            ))
        }

        /// This handle's statistics (`Lock::stats`).
        fn stats(&self) -> LockStats;

        /// Tie-break of the multi-lock's canonical order between locks on the same path (a
        /// write lock is taken before the read lock of the same read-write lock: write -> read
        /// is a downgrade, the other order would deadlock).
        fn order_rank(&self) -> u8 {
            1
        }

        /// Which lock this is, whatever the handle: the two halves of one read-write lock (and
        /// clones of one handle) answer the same; `None` if unknown. The multi-lock takes two
        /// locks on one path only as the write and read halves of one read-write lock.
        fn lock_id(&self) -> Option<usize> {
            None
        }

        /// Releases the calling participant's hold with this fencing token (what a guard and a
        /// multi-lock release: their own hold, not the handle's most recent).
        fn release_hold(&self, token: i64) -> Result<()>;

        /// The state of the calling participant's hold with this fencing token.
        fn hold_state_of(&self, token: i64) -> HoldState;

        /// How long the hold with this fencing token stays provably valid.
        fn lease_remaining_of(&self, token: i64) -> Option<Duration>;

        /// Waits until the hold with this fencing token is lost.
        fn wait_lost_of(&self, token: i64, timeout: Option<Duration>) -> bool;

        /// Calls `f` when the hold with this fencing token is lost.
        fn on_lost_of(&self, token: i64, f: Box<dyn FnOnce() + Send>);

        /// What a guarded write of the hold with this fencing token checks (`fenced.rs`);
        /// `None` if there is no such hold, or no one node proves it (a multi-lock's).
        fn fence_of(&self, token: i64) -> Option<super::super::fenced::Fence> {
            let _ = token;
            None
        }

        /// The node of the hold with this fencing token.
        fn node_of(&self, token: i64) -> Option<String> {
            let _ = token;
            None
        }
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
            fn as_revocable(&self) -> Option<&dyn Revocable> { (**self).as_revocable() }
            fn queue_path(&self) -> String { (**self).queue_path() }
        }
        impl<L: Lockable + ?Sized> sealed::Core for $t {
            fn acquire_holds(&self, n: u32, d: Deadline) -> Result<Option<Vec<i64>>> { (**self).acquire_holds(n, d) }
            fn stats(&self) -> LockStats { (**self).stats() }
            fn order_rank(&self) -> u8 { (**self).order_rank() }
            fn lock_id(&self) -> Option<usize> { (**self).lock_id() }
            fn release_hold(&self, t: i64) -> Result<()> { (**self).release_hold(t) }
            fn hold_state_of(&self, t: i64) -> HoldState { (**self).hold_state_of(t) }
            fn lease_remaining_of(&self, t: i64) -> Option<Duration> { (**self).lease_remaining_of(t) }
            fn wait_lost_of(&self, t: i64, to: Option<Duration>) -> bool { (**self).wait_lost_of(t, to) }
            fn on_lost_of(&self, t: i64, f: Box<dyn FnOnce() + Send>) { (**self).on_lost_of(t, f) }
            fn node_of(&self, t: i64) -> Option<String> { (**self).node_of(t) }
            fn fence_of(&self, t: i64) -> Option<super::fenced::Fence> { (**self).fence_of(t) }
        }
    )*};
}
forward_lockable!(&L, Box<L>, Arc<L>);
