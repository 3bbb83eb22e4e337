//! Several leases of a semaphore in one acquire, all or none ([`Semaphore::acquire_many`]), in
//! the layout and by the count rule of Curator's `InterProcessSemaphoreV2.acquire(qty)`.
//!
//! Curator takes `qty` leases one after another, each through the guarding mutex, and closes
//! the ones it got when its time runs out. Two acquirers of 2 leases of 2 may then each hold
//! one and wait for the other until their timeouts. Here the guarding mutex is taken once, the
//! `n` lease nodes are made while it is ours (each counted as Curator counts a lease node: made
//! by the mutex's holder), and all of them are held at once when the lease directory holds at
//! most N nodes, watched until it does with the mutex kept, as Curator's waiter keeps it. A
//! Curator participant sees `n` ordinary lease nodes; no Curator acquirer can add one while we
//! wait (it needs the mutex), so the count only falls until ours are held. kazoo's layout: with
//! the mutex, wait until the leases and our `n` fit in N, then make the `n`. Any failure, a
//! timeout or a cancel removes every node made so far.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::leases::{list_watch, wait, Leases};
use super::{Lease, RawSemaphore, Semaphore, TRY_GUARD_WAIT};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{lease_prefix, AttemptId, Protocol};
use crate::recipes::attempt::{Attempt, Made};
use crate::recipes::front::{vouch, Lock};
use crate::recipes::guard::Guard;
use crate::recipes::hold::Hold;
use crate::recipes::participants::Begin;
use crate::recipes::raw::Recipe;
use crate::wait::Signal;

/// `n` leases of one [`Semaphore`], taken together by [`Semaphore::acquire_many`] and its
/// `try_` forms: held together, each its own [`Lease`] with its own fencing token, and returned
/// together on drop (or by [`LeaseSet::unlock`]). `Send`, as a lease is.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, Options, Semaphore};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let pool = Semaphore::new(&client, "/semaphores/gpus", 8)?;
/// // 3 of the 8 leases, or none, within 5 s.
/// if let Some(leases) = pool.try_acquire_many_for(3, Duration::from_secs(5))? {
///     println!("tokens {:?}", leases.tokens());
///     leases.unlock()?; // all 3 returned
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
#[must_use = "the leases are returned when the set is dropped"]
pub struct LeaseSet<'a> {
    leases: Vec<Lease<'a>>,
}

impl<'a> LeaseSet<'a> {
    /// How many leases it holds (the `n` asked for).
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// Never empty (an acquire of 0 leases is refused): false.
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// The leases, oldest node first.
    pub fn leases(&self) -> &[Lease<'a>] {
        &self.leases
    }

    /// The fencing token of each lease, in the order of [`LeaseSet::leases`].
    pub fn tokens(&self) -> Vec<i64> {
        self.leases.iter().map(Guard::fencing_token).collect()
    }

    /// Whether every lease is still held and may be acted on (they share one session: all or
    /// none, but for one deleted by hand).
    pub fn is_held(&self) -> bool {
        self.leases.iter().all(Guard::is_held)
    }

    /// The leases as separate guards, each returned on its own drop.
    pub fn into_leases(self) -> Vec<Lease<'a>> {
        self.leases
    }

    /// Returns every lease now, and reports how it went: the first error of any (each lease
    /// is returned whatever the others' outcome; see [`Guard::unlock`]).
    pub fn unlock(self) -> Result<()> {
        let mut first = Ok(());
        for lease in self.leases {
            if let Err(e) = lease.unlock() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

impl std::fmt::Debug for LeaseSet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseSet")
            .field("tokens", &self.tokens())
            .finish()
    }
}

impl<'a> IntoIterator for LeaseSet<'a> {
    type Item = Lease<'a>;
    type IntoIter = std::vec::IntoIter<Lease<'a>>;

    fn into_iter(self) -> Self::IntoIter {
        self.leases.into_iter()
    }
}

impl Semaphore {
    /// Blocks until `n` leases are free, and takes them all at once: all `n` or none (as
    /// Curator's `acquire(qty)`, which zklock's and Curator's participants may mix on one path;
    /// kazoo's layout too). `Held` as it returns, as [`Lock::lock`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `n == 0` or `n` over `max_leases`;
    /// [`Error::WouldDeadlock`] when this handle's own leases leave fewer than `n` free (it could
    /// only wait for itself); [`Error::Timeout`] when the leases could not be proven held within
    /// one session timeout (they are given back); otherwise as
    /// [`Lockable::acquire`](crate::Lockable::acquire). On every error no lease of the attempt is left.
    pub fn acquire_many(&self, n: u32) -> Result<LeaseSet<'_>> {
        self.many(n, Deadline::Forever)?.ok_or(Error::Timeout)
    }

    /// One attempt at `n` leases that never waits for a lease to be returned: `Ok(None)` if
    /// fewer than `n` are free (nothing is left behind). It may wait up to half a second for the
    /// mutex that guards the count.
    pub fn try_acquire_many(&self, n: u32) -> Result<Option<LeaseSet<'_>>> {
        self.many(n, Deadline::TryOnce)
    }

    /// Waits at most `timeout` in all for `n` leases: `Ok(None)` if they were not all taken by
    /// then (every one taken meanwhile is given back).
    pub fn try_acquire_many_for(&self, n: u32, timeout: Duration) -> Result<Option<LeaseSet<'_>>> {
        self.many(n, Deadline::after(timeout))
    }

    /// Waits until `deadline` at most for `n` leases (one deadline for all of them).
    pub fn try_acquire_many_until(
        &self,
        n: u32,
        deadline: Instant,
    ) -> Result<Option<LeaseSet<'_>>> {
        self.many(n, Deadline::At(deadline))
    }

    fn many(&self, n: u32, d: Deadline) -> Result<Option<LeaseSet<'_>>> {
        Ok(self.acquire_many_in(n, d)?.map(|tokens| LeaseSet {
            leases: tokens.into_iter().map(|t| Guard::new(self, t)).collect(),
        }))
    }
}

impl<R: Recipe> Lock<R> {
    /// `n` holds at once, all or none (a recipe whose one acquire may take several: the
    /// semaphore): their fencing tokens, oldest first; `Ok(None)` not by `d`. Counted in the
    /// statistics as one acquire.
    pub(crate) fn acquire_many_in(&self, n: u32, d: Deadline) -> Result<Option<Vec<i64>>> {
        let Some(max) = self.raw.max_per_acquire() else {
            return Err(Error::invalid(format!(
                "the lock at {} takes one hold per acquire (only a semaphore takes several)",
                self.raw.path()
            )));
        };
        if n == 0 || n as usize > max {
            return Err(Error::invalid(format!(
                "cannot take {n} leases of the semaphore at {}: it has {max} (ask for 1 to {max})",
                self.raw.path()
            )));
        }
        let started = Instant::now();
        let reg = self.cancel.register();
        let r = if reg.signal.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            self.many_registered(n as usize, d, &reg.signal)
        };
        drop(reg);
        self.holds.stats.acquire_ended(started, &r);
        r
    }

    fn many_registered(
        &self,
        n: usize,
        d: Deadline,
        signal: &Arc<Signal>,
    ) -> Result<Option<Vec<i64>>> {
        let (_, proof) = d.pinned(self.raw.client().session_timeout());
        // One place of the handle's per lease: refused at once if its own leases leave too few.
        let mut tickets = Vec::with_capacity(n);
        for _ in 0..n {
            match self.holds.begin()? {
                Begin::Fresh(t) => tickets.push(t),
                Begin::Reentered(h) => {
                    // Not a policy of a recipe that takes several: undone.
                    let _ = self.holds.release(Some(h.token));
                    return Err(Error::invalid(
                        "a reentrant lock takes one hold per acquire",
                    ));
                }
            }
        }
        let holds = match self.raw.attempt_many(n, d, signal) {
            Ok(Some(holds)) => holds,
            Ok(None) | Err(Error::Timeout) => return Ok(None),
            Err(e) => return Err(e),
        };
        debug_assert_eq!(holds.len(), n);
        // They share one session: one proof of its lease is every hold's.
        if let Err(e) = vouch(&holds[0], proof, signal) {
            let bound = proof.instant().filter(|_| d.is_try_once());
            for h in holds {
                let _ = h.release_by(bound);
            }
            return match e {
                Error::Timeout => Ok(None),
                e => Err(e),
            };
        }
        Ok(Some(
            tickets
                .into_iter()
                .zip(holds)
                .map(|(t, h)| t.complete(h))
                .collect(),
        ))
    }
}

impl RawSemaphore {
    /// One attempt at `n` leases: the guarding mutex, then the `n` lease nodes by the protocol's
    /// layout; the mutex is given back either way, every node of a failed attempt removed.
    pub(super) fn attempt_many_leases(
        &self,
        n: usize,
        d: Deadline,
        signal: &Arc<Signal>,
    ) -> Result<Option<Vec<Hold>>> {
        // This thread waits for every request it sends here (`session::waiting_caller`).
        let _caller = crate::session::waiting_caller();
        let a = Attempt::begin(&self.leases.client, self.leases.protocol, d, signal)?;
        if self.leases.protocol == Protocol::Kazoo
            && !self
                .leases
                .root_checked
                .load(std::sync::atomic::Ordering::Acquire)
        {
            self.leases.ensure_kazoo_root(&a)?;
        }
        let guarded = a.within(if a.try_once {
            Deadline::At(a.d.capped(TRY_GUARD_WAIT))
        } else {
            a.d
        });
        let Some(guard) = self.guard.attempt_in(&guarded)? else {
            return Ok(None);
        };
        let r = if signal.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            match self.leases.protocol {
                Protocol::Curator => self.leases.take_many_curator(&a, n),
                Protocol::Kazoo => self.leases.take_many_kazoo(&a, n),
            }
        };
        let r = match r {
            // Cancel works at any time: what was taken is given back.
            Ok(Some(holds)) if signal.is_cancelled() => {
                for h in holds {
                    let _ = h.release_by(a.bound());
                }
                Err(Error::Cancelled)
            }
            r => r,
        };
        if let Err(e) = guard.release_by(a.bound()) {
            log::warn!(
                "releasing the mutex of the semaphore {}: {e}",
                self.leases.path
            );
        }
        r
    }
}

impl Leases {
    /// Curator, holding the guarding mutex: make our `n` lease nodes, then hold them all once
    /// the directory has at most N nodes (a try-once attempt never waits for that). A node of
    /// ours that vanished (deleted by hand) is made again.
    fn take_many_curator(&self, a: &Attempt, n: usize) -> Result<Option<Vec<Hold>>> {
        let (session, d) = (&a.session, a.d);
        let data = self.client.holder_id().as_bytes();
        let mut mine: Vec<Made> = Vec::with_capacity(n);
        loop {
            while mine.len() < n {
                mine.push(a.create(&self.dir, &lease_prefix(), data, true, d)?);
            }
            let (children, watcher) = match list_watch(session, &self.dir, d)? {
                Some((c, w)) => (c, Some(w)),
                None => (Vec::new(), None),
            };
            let (kept, vanished): (Vec<Made>, Vec<Made>) = mine
                .into_iter()
                .partition(|m| children.iter().any(|c| c == m.name()));
            mine = kept;
            if !vanished.is_empty() {
                for m in vanished {
                    log::warn!("lease node {} vanished; creating it again", m.name());
                    m.gone();
                }
                if let Some(e) = session.ended_error() {
                    return Err(e);
                }
                continue;
            }
            if children.len() <= self.max_leases as usize {
                return Ok(Some(mine.into_iter().map(Made::into_hold).collect()));
            }
            if a.try_once {
                return Ok(None);
            }
            if let Some(watcher) = watcher {
                if !wait(session, watcher, d, &a.signal)? {
                    return Ok(None);
                }
            }
        }
    }

    /// kazoo, holding the guarding lock: once the lease nodes and our `n` fit in N (a try-once
    /// attempt never waits for that), make the `n`.
    fn take_many_kazoo(&self, a: &Attempt, n: usize) -> Result<Option<Vec<Hold>>> {
        let (session, d) = (&a.session, a.d);
        let data = self.client.holder_id().as_bytes();
        loop {
            let Some((children, watcher)) = list_watch(session, &self.dir, d)? else {
                // P was deleted meanwhile: lay it out again.
                self.ensure_kazoo_root(a)?;
                continue;
            };
            if children.len() + n <= self.max_leases as usize {
                let mut made = Vec::with_capacity(n);
                for _ in 0..n {
                    let name = AttemptId::new().text(Protocol::Kazoo);
                    made.push(a.create(&self.dir, &name, data, false, d)?);
                }
                return Ok(Some(made.into_iter().map(Made::into_hold).collect()));
            }
            if a.try_once {
                return Ok(None);
            }
            if !wait(session, watcher, d, &a.signal)? {
                return Ok(None);
            }
        }
    }
}
