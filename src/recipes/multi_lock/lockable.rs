//! The multi-lock as [`Lockable`]: one participant holding several locks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{MultiHold, MultiLock, Underway, CANCELLED};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::recipes::hold::HoldState;
use crate::recipes::lockable::sealed::Core;
use crate::recipes::lockable::{Lockable, Revocable};
use crate::recipes::raw::Participant;
use crate::stats::LockStats;

impl Lockable for MultiLock<'_> {
    fn path(&self) -> &str {
        self.locks.first().map_or("", |l| l.path())
    }

    /// Takes every lock, or none. The token returned is the largest of the locks' tokens
    /// (see [`Lockable::fencing_token`]); each lock's own is in [`MultiLock::tokens`].
    ///
    /// [`Error::InvalidArgument`] at once if two of its locks are on one path (see
    /// [`MultiLock::from_boxed`]).
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        if let Some(f) = &self.refused {
            *self.last_failure.lock() = Some(f.clone());
            return Err(f.error.clone().unwrap_or(Error::NotHeld));
        }
        self.stats.attempt(|| {
            // Under way from here until it returns; a cancel remembered from before (none was
            // under way then) ends it at once.
            let progress = Arc::new(AtomicUsize::new(0));
            {
                let mut c = self.cancel.lock();
                if std::mem::take(&mut c.pending) {
                    progress.fetch_or(CANCELLED, Ordering::SeqCst);
                }
                c.active.push(Underway {
                    progress: progress.clone(),
                    cancelled: Vec::new(),
                });
            }
            let r = self.acquire_all(d, &progress);
            let cancelled = {
                let mut c = self.cancel.lock();
                let i = c
                    .active
                    .iter()
                    .position(|u| Arc::ptr_eq(&u.progress, &progress));
                i.map(|i| c.active.swap_remove(i).cancelled)
                    .unwrap_or_default()
            };
            // A cancel passed to a lock whose acquire had already returned (or never began) is
            // remembered by that lock: it was meant for this acquire, which is over.
            for i in cancelled {
                self.locks[i].reset_cancel();
            }
            let Some(tokens) = r? else {
                return Ok(None);
            };
            let hold = MultiHold {
                armed: parking_lot::Mutex::new(vec![false; tokens.len()]),
                tokens,
                acquired: Instant::now(),
                lost: parking_lot::Condvar::new(),
            };
            let token = hold.token();
            self.holds.lock().push(Arc::new(hold));
            Ok(Some(token))
        })
    }

    fn release(&self) -> Result<()> {
        self.release_one(None)
    }

    /// `Held` only when every lock is held; otherwise the worst state among them.
    fn hold_state(&self) -> HoldState {
        self.current()
            .map_or(HoldState::NotHeld, |h| self.state_of(&h))
    }

    /// The largest of the locks' tokens (what its acquire returned), while every lock is held.
    ///
    /// It increases from one holder of this same set of exclusive locks to the next, and fences
    /// a resource that only holders of the whole set write. It is no lock's own token: on one of
    /// the locks, a holder of that lock alone (or in another set) may get a smaller token than
    /// this. A resource that one of the locks guards is fenced with that lock's own token
    /// ([`MultiLock::tokens`], [`MultiLock::token_of`]).
    fn fencing_token(&self) -> Result<i64> {
        Ok(self.current_held()?.token())
    }

    /// The shortest of the locks' leases (`None` unless every lock is held).
    fn lease_remaining(&self) -> Option<Duration> {
        self.lease_of(&*self.current()?)
    }

    /// Ends the acquires of this multi-lock under way (the locks they took are released; they
    /// return [`Error::Cancelled`]); if none is, the next acquire returns `Cancelled` at once.
    /// Calls `cancel` on the lock being acquired, which also cancels other acquires on that
    /// handle; a cancel that reached that lock too late is forgotten when the multi-lock's
    /// acquire ends.
    fn cancel(&self) {
        let mut c = self.cancel.lock();
        if c.active.is_empty() {
            c.pending = true;
            return;
        }
        for u in &mut c.active {
            let i = u.progress.fetch_or(CANCELLED, Ordering::SeqCst) & !CANCELLED;
            // Sticky: the lock's acquire ends whether it is under way or about to begin.
            if let Some(l) = self.locks.get(i) {
                l.cancel();
                u.cancelled.push(i);
            }
        }
    }

    fn reset_cancel(&self) -> bool {
        std::mem::take(&mut self.cancel.lock().pending)
    }

    /// Every lock's queue, in the canonical order.
    fn participants(&self) -> Result<Vec<Participant>> {
        let mut out = Vec::new();
        for l in &self.locks {
            out.extend(l.participants()?);
        }
        Ok(out)
    }

    /// Until any of the locks is lost (true at once if nothing is held). Polling keeps nothing:
    /// each lock's lost callback is registered once per hold.
    fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.current()
            .is_none_or(|h| self.wait_lost_hold(&h, timeout))
    }

    /// Once, when the first of the locks is lost.
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        match self.current() {
            Some(h) => self.on_lost_hold(&h, f),
            None => f(),
        }
    }

    /// Not revocable as one (make its locks revocable one by one).
    fn as_revocable(&self) -> Option<&dyn Revocable> {
        None
    }
}

impl Core for MultiLock<'_> {
    fn stats(&self) -> LockStats {
        self.stats.snapshot()
    }

    /// Releases every lock's hold of the most recent multi-lock hold, in reverse order. Tries
    /// them all (each through the one release path, so none keeps its node); returns the first
    /// error, with the lock's path.
    fn release_hold(&self, token: i64) -> Result<()> {
        self.release_one(Some(token))
    }

    fn hold_state_of(&self, token: i64) -> HoldState {
        self.hold(token)
            .map_or(HoldState::NotHeld, |h| self.state_of(&h))
    }

    fn lease_remaining_of(&self, token: i64) -> Option<Duration> {
        self.lease_of(&*self.hold(token)?)
    }

    fn wait_lost_of(&self, token: i64, timeout: Option<Duration>) -> bool {
        self.hold(token)
            .is_none_or(|h| self.wait_lost_hold(&h, timeout))
    }

    fn on_lost_of(&self, token: i64, f: Box<dyn FnOnce() + Send>) {
        match self.hold(token) {
            Some(h) => self.on_lost_hold(&h, f),
            None => f(),
        }
    }
}

impl MultiLock<'_> {
    /// This multi-lock's statistics: its acquires by outcome and its holds' times.
    pub fn stats(&self) -> LockStats {
        Core::stats(self)
    }

    /// Asks the holders of every one of its locks that can be asked to let go (cooperative
    /// revocation: see [`Revocable`]). Returns the holders' nodes asked.
    pub fn revoke_holders(&self) -> Result<Vec<String>> {
        let mut asked = Vec::new();
        for l in self.locks.iter().filter_map(|l| l.as_revocable()) {
            asked.extend(l.revoke_holders()?);
        }
        Ok(asked)
    }
}
