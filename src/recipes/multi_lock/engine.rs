//! Taking the locks in order and giving them back, and the answers about one hold.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{with_path, MultiHold, MultiLock, MultiLockFailure, CANCELLED};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::recipes::hold::HoldState;

impl MultiLock<'_> {
    /// Takes the locks in order: their tokens (in the canonical order) when all are held.
    pub(super) fn acquire_all(
        &self,
        d: Deadline,
        progress: &AtomicUsize,
    ) -> Result<Option<Vec<i64>>> {
        let mut tokens = Vec::with_capacity(self.locks.len());
        for (i, l) in self.locks.iter().enumerate() {
            let cancelled = progress.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |p| {
                Some((p & CANCELLED) | i)
            });
            let r = if cancelled.is_ok_and(|p| p & CANCELLED != 0) {
                Err(Error::Cancelled)
            } else {
                l.acquire(d)
            };
            let failure = match r {
                Ok(Some(token)) => {
                    tokens.push(token);
                    continue;
                }
                Ok(None) => None,
                Err(e) => Some(e),
            };
            let _ = self.release_taken(&tokens);
            let f = MultiLockFailure {
                path: l.path().to_string(),
                position: i,
                error: failure.clone(),
            };
            log::info!("multi-lock: {f}; released the {i} lock(s) already taken");
            *self.last_failure.lock() = Some(f);
            return match failure {
                None => Ok(None),
                Some(e) => Err(with_path(e, l.path())),
            };
        }
        if progress.load(Ordering::SeqCst) & CANCELLED != 0 {
            // Cancelled while the last lock was being taken: cancel works at any time, so what
            // was taken is given back.
            log::debug!("multi-lock: cancel arrived as the last lock was taken; releasing all");
            let n = self.locks.len();
            let _ = self.release_taken(&tokens);
            *self.last_failure.lock() = Some(MultiLockFailure {
                path: self.locks.last().map_or("", |l| l.path()).to_string(),
                position: n.saturating_sub(1),
                error: Some(Error::Cancelled),
            });
            return Err(Error::Cancelled);
        }
        *self.last_failure.lock() = None;
        Ok(Some(tokens))
    }

    /// Releases the holds of the first `tokens.len()` locks, each the hold with its token (not
    /// the handle's most recent: a semaphore handle shared with other threads keeps their
    /// leases), in reverse order, each through the one release path.
    pub(super) fn release_taken(&self, tokens: &[i64]) -> Result<()> {
        let mut first = None;
        for (l, &token) in self.locks.iter().zip(tokens).rev() {
            if let Err(e) = l.release_hold(token) {
                log::warn!("multi-lock: releasing {} failed: {e}", l.path());
                first.get_or_insert_with(|| with_path(e, l.path()));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The most recent hold whose token is `token`.
    pub(super) fn hold(&self, token: i64) -> Option<Arc<MultiHold>> {
        self.holds
            .lock()
            .iter()
            .rev()
            .find(|h| h.token() == token)
            .cloned()
    }

    /// The most recent hold.
    pub(super) fn current(&self) -> Option<Arc<MultiHold>> {
        self.holds.lock().last().cloned()
    }

    /// The most recent hold, unless one of its locks' holds was lost (or released apart).
    pub(super) fn current_held(&self) -> Result<Arc<MultiHold>> {
        let hold = self.current().ok_or(Error::NotHeld)?;
        match self.state_of(&hold) {
            HoldState::Lost | HoldState::NotHeld => Err(Error::NotHeld),
            _ => Ok(hold),
        }
    }

    /// The canonical place of the lock at `path`.
    pub(super) fn place_of(&self, path: &str) -> Result<usize> {
        self.locks
            .iter()
            .position(|l| l.path() == path)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "no lock of this multi-lock is at {path} (its locks: {})",
                    self.paths().join(", ")
                ))
            })
    }

    /// `Held` only when every lock's hold is; otherwise the worst state among them.
    pub(super) fn state_of(&self, hold: &MultiHold) -> HoldState {
        let states: Vec<_> = self
            .locks
            .iter()
            .zip(&hold.tokens)
            .map(|(l, &t)| l.hold_state_of(t))
            .collect();
        [HoldState::Lost, HoldState::NotHeld, HoldState::Uncertain]
            .into_iter()
            .find(|s| states.contains(s))
            .unwrap_or(HoldState::Held)
    }

    /// The shortest of the locks' leases in `hold` (`None` unless every lock is held).
    pub(super) fn lease_of(&self, hold: &MultiHold) -> Option<Duration> {
        self.locks
            .iter()
            .zip(&hold.tokens)
            .map(|(l, &t)| l.lease_remaining_of(t))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .min()
    }

    /// Releases one hold (the one with `token`, or the most recent): every lock's, in reverse
    /// order.
    pub(super) fn release_one(&self, token: Option<i64>) -> Result<()> {
        let hold = {
            let mut holds = self.holds.lock();
            let i = match token {
                None => holds.len().checked_sub(1),
                Some(t) => holds.iter().rposition(|h| h.token() == t),
            };
            holds.remove(i.ok_or(Error::NotHeld)?)
        };
        let r = self.release_taken(&hold.tokens);
        self.stats.hold_ended(hold.acquired.elapsed(), &r);
        r
    }

    /// Until any lock of `hold` is lost. A lock's lost callback is registered once per hold and
    /// again only after it ran (its lease lapsed, then was renewed): a watcher polling a held
    /// multi-lock (the C and Python `wait_lost` wait in slices) adds nothing per call.
    pub(super) fn wait_lost_hold(&self, hold: &Arc<MultiHold>, timeout: Option<Duration>) -> bool {
        if self.state_of(hold) != HoldState::Held {
            return true;
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let unarmed: Vec<usize> = {
            let mut armed = hold.armed.lock();
            let unarmed = (0..armed.len()).filter(|&i| !armed[i]).collect();
            armed.iter_mut().for_each(|a| *a = true);
            unarmed
        };
        for i in unarmed {
            let watch = Arc::downgrade(hold);
            self.locks[i].on_lost_of(
                hold.tokens[i],
                Box::new(move || {
                    if let Some(hold) = watch.upgrade() {
                        hold.armed.lock()[i] = false;
                        hold.lost.notify_all();
                    }
                }),
            );
        }
        let mut armed = hold.armed.lock();
        while armed.iter().all(|a| *a) {
            match deadline {
                Some(d) => {
                    if hold.lost.wait_until(&mut armed, d).timed_out() {
                        return !armed.iter().all(|a| *a);
                    }
                }
                None => hold.lost.wait(&mut armed),
            }
        }
        true
    }

    /// Calls `f` once, when the first lock of `hold` is lost.
    pub(super) fn on_lost_hold(&self, hold: &MultiHold, f: Box<dyn FnOnce() + Send>) {
        let once = Arc::new(parking_lot::Mutex::new(Some(f)));
        for (l, &token) in self.locks.iter().zip(&hold.tokens) {
            let once = once.clone();
            l.on_lost_of(
                token,
                Box::new(move || {
                    // Taken out first: the callback runs with no lock held.
                    let f = once.lock().take();
                    if let Some(f) = f {
                        f()
                    }
                }),
            );
        }
    }
}
