//! The one [`Guard`] of every lock, and [`Guarded`], what it needs of its lock.

use std::marker::PhantomData;
use std::time::Duration;

use super::hold::HoldState;
use super::lockable::Lockable;
use crate::error::{Error, Result};

/// What a [`Guard`] needs of its lock: the answers about one hold, named by its fencing token
/// (the `*_of` methods of [`Lockable`]), and whether the guard may go to another thread.
/// Sealed: implemented by [`Lock`](crate::Lock) and [`MultiLock`](crate::MultiLock) only.
pub trait Guarded: Lockable {
    /// [`GuardSend`] if the guard may go to another thread, [`GuardNoSend`] if not.
    #[doc(hidden)]
    type GuardMarker;
}

/// Marker of a lock whose guards may go to another thread (its participant is the handle), as
/// `lock_api::GuardSend`.
#[doc(hidden)]
pub struct GuardSend(());

/// Marker of a lock whose guards stay on the thread that took them (its participant may be the
/// thread), as `lock_api::GuardNoSend`; unlike lock_api's, it is not `Sync` either (the guard
/// never was).
#[doc(hidden)]
pub struct GuardNoSend(PhantomData<*const ()>);

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
    _send: PhantomData<L::GuardMarker>,
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
