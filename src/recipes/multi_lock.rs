//! All-or-nothing over several locks of any kind, deadlock-free by canonical order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guard::{Guard, Guarded};
use super::hold::HoldState;
use super::lockable::Lockable;
use super::raw::Participant;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::stats::{LockStats, Stats};

/// Why a [`MultiLock`] acquire did not take every lock: which lock stopped it, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiLockFailure {
    /// The failing lock's path.
    pub path: String,
    /// Its position in the canonical (acquire) order.
    pub position: usize,
    /// The error it returned; `None` if it was busy (try-once) or the deadline passed.
    pub error: Option<Error>,
}

impl std::fmt::Display for MultiLockFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            Some(e) => write!(f, "lock {} failed: {e}", self.path),
            None => write!(f, "lock {} was not acquired in time", self.path),
        }
    }
}

/// All or nothing over several locks of any kinds ([`Lockable`]).
///
/// The locks are taken in a canonical order (by path, then write before read), so two
/// multi-locks over the same set, whatever order they were built in, cannot deadlock each
/// other. One deadline covers the whole acquire (it does not multiply with the number of locks).
/// If any lock cannot be taken, the ones already taken are released (in reverse order) and the
/// failing lock is reported: its path is added to the error's message where the error carries
/// one, and [`MultiLock::last_failure`] tells which lock failed and how.
///
/// ```no_run
/// use std::time::Duration;
/// use zklock::{Client, Lockable, Options, Mutex, MultiLock, ReadWriteLock, Semaphore};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let orders = Mutex::new(&client, "/locks/orders")?;
/// let catalog = ReadWriteLock::new(&client, "/locks/catalog")?;
/// let pool = Semaphore::new(&client, "/semaphores/db", 3)?;
/// let locks: Vec<&(dyn Lockable + Send + Sync)> = vec![&orders, catalog.read(), &pool];
/// let all = MultiLock::new(locks);
/// if let Some(_g) = all.try_lock_for(Duration::from_secs(5))? {
///     // holds all three
/// } else {
///     eprintln!("{}", all.last_failure().unwrap());
/// }
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct MultiLock<'a> {
    /// The locks, in the canonical order.
    locks: Vec<Box<dyn Lockable + 'a>>,
    /// For each lock in the order given, its place in the canonical order.
    given: Vec<usize>,
    /// Why it cannot be taken (two locks on one path would wait for each other), if so.
    refused: Option<MultiLockFailure>,
    last_failure: parking_lot::Mutex<Option<MultiLockFailure>>,
    /// Its acquires under way, and a cancel remembered for the next one.
    cancel: parking_lot::Mutex<Cancels>,
    /// The multi-lock's own statistics (each lock keeps its own too).
    stats: Stats,
    /// Its holds, most recent last (one, unless its locks let one participant hold again).
    holds: parking_lot::Mutex<Vec<Arc<MultiHold>>>,
}

/// The acquires of a multi-lock under way, and a cancel remembered for the next acquire (as a
/// [`CancelToken`](crate::CancelToken)'s).
#[derive(Default)]
struct Cancels {
    active: Vec<Underway>,
    pending: bool,
}

/// One acquire of a multi-lock under way.
struct Underway {
    /// Its progress word: the cancelled bit and the index of the lock being acquired.
    progress: Arc<AtomicUsize>,
    /// The locks a cancel of the multi-lock was passed to, while this acquire was under way.
    cancelled: Vec<usize>,
}

/// One hold of a multi-lock: each lock's own hold, named by the token its acquire returned.
struct MultiHold {
    /// Each lock's token, in the canonical order.
    tokens: Vec<i64>,
    acquired: Instant,
    /// Which locks' lost callbacks are registered and have not run (`wait_lost`).
    armed: parking_lot::Mutex<Vec<bool>>,
    lost: parking_lot::Condvar,
}

impl MultiHold {
    /// The multi-lock's token: the largest of its locks' tokens.
    fn token(&self) -> i64 {
        self.tokens.iter().copied().max().unwrap_or(0)
    }
}

/// Holds every lock of a [`MultiLock`]; releases them (in reverse order) on drop.
pub type MultiLockGuard<'m, 'a> = Guard<'m, MultiLock<'a>>;

/// The multi-lock's former raw half: the multi-lock itself now.
#[deprecated(since = "0.3.0", note = "use `MultiLock`")]
pub type RawMultiLock<'a> = MultiLock<'a>;

impl std::fmt::Debug for MultiLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("paths", &self.paths())
            .field("state", &self.hold_state())
            .finish()
    }
}

/// In the acquire-progress word: this bit says cancelled, the rest is the index of the lock
/// being acquired.
const CANCELLED: usize = 1 << (usize::BITS - 1);

impl<'a> MultiLock<'a> {
    /// A multi-lock over `locks` (borrowed handles of any kinds).
    pub fn new(locks: Vec<&'a (dyn Lockable + Send + Sync)>) -> MultiLock<'a> {
        MultiLock::from_boxed(
            locks
                .into_iter()
                .map(|l| Box::new(l) as Box<dyn Lockable + 'a>)
                .collect(),
        )
    }

    /// A multi-lock over owned locks, e.g. `Box::new(mutex)`.
    ///
    /// Two locks on one path are refused (every acquire returns [`Error::InvalidArgument`]):
    /// the second would wait for the first, held by this very multi-lock. The one exception is
    /// the write and read halves of one read-write lock (a downgrade).
    pub fn from_boxed(locks: Vec<Box<dyn Lockable + 'a>>) -> MultiLock<'a> {
        let refused = same_path_conflict(&locks.iter().map(|l| &**l as _).collect::<Vec<_>>());
        let mut order: Vec<usize> = (0..locks.len()).collect();
        order.sort_by(|&a, &b| canonical(&*locks[a], &*locks[b]));
        let mut given = vec![0; locks.len()];
        for (place, &i) in order.iter().enumerate() {
            given[i] = place;
        }
        let mut slots: Vec<Option<Box<dyn Lockable + 'a>>> = locks.into_iter().map(Some).collect();
        let locks = order.iter().filter_map(|&i| slots[i].take()).collect();
        MultiLock {
            locks,
            given,
            refused,
            last_failure: parking_lot::Mutex::new(None),
            cancel: parking_lot::Mutex::new(Cancels::default()),
            stats: Default::default(),
            holds: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Blocks until every lock is held.
    ///
    /// # Errors
    /// As [`Lockable::acquire`]; [`MultiLock::last_failure`] says which lock failed.
    pub fn lock(&self) -> Result<MultiLockGuard<'_, 'a>> {
        let token = self.acquire(Deadline::Forever)?.ok_or(Error::Timeout)?;
        Ok(Guard::new(self, token))
    }

    /// Takes every lock if each is free now: `Ok(None)` otherwise (none is kept).
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard<'_, 'a>>> {
        Ok(self
            .acquire(Deadline::TryOnce)?
            .map(|t| Guard::new(self, t)))
    }

    /// Waits at most `timeout` in all for every lock.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MultiLockGuard<'_, 'a>>> {
        Ok(self
            .acquire(Deadline::after(timeout))?
            .map(|t| Guard::new(self, t)))
    }

    /// Waits until `deadline` at most for every lock (one deadline for all).
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiLockGuard<'_, 'a>>> {
        Ok(self
            .acquire(Deadline::At(deadline))?
            .map(|t| Guard::new(self, t)))
    }

    /// The paths, in the canonical order the locks are taken.
    pub fn paths(&self) -> Vec<&str> {
        self.locks.iter().map(|l| l.path()).collect()
    }

    /// Which lock stopped the most recent failed acquire, and how (cleared by a success).
    pub fn last_failure(&self) -> Option<MultiLockFailure> {
        self.last_failure.lock().clone()
    }

    /// Each lock's own fencing token in the current hold, in the order the locks were given:
    /// the token to fence a resource that one of the locks guards (a lock's tokens increase
    /// from one holder of that lock to the next, whether it was held alone or in a multi-lock;
    /// the multi-lock's single token does not, see [`MultiLock::fencing_token`]).
    ///
    /// # Errors
    /// [`Error::NotHeld`] if not held, or if any lock's hold was lost.
    ///
    /// [`MultiLock::fencing_token`]: Lockable::fencing_token
    pub fn tokens(&self) -> Result<Vec<i64>> {
        let hold = self.current_held()?;
        Ok(self.given.iter().map(|&place| hold.tokens[place]).collect())
    }

    /// The fencing token of the lock at `path` in the current hold (of its write half, for
    /// both halves of one read-write lock: the read half keeps the write half's token).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if none of the locks is at `path`; [`Error::NotHeld`] if not
    /// held, or if any lock's hold was lost.
    pub fn token_of(&self, path: &str) -> Result<i64> {
        let place = self.place_of(path)?;
        Ok(self.current_held()?.tokens[place])
    }
}

/// Each lock's own token, as the multi-lock's are ([`MultiLock::tokens`]).
impl MultiLockGuard<'_, '_> {
    /// Each lock's own fencing token in this hold, in the order the locks were given (empty
    /// once the hold is released). Fence a resource that one lock guards with that lock's
    /// token: the guard's [`fencing_token`](Guard::fencing_token), the largest of them, goes
    /// backwards on a lock that is next held alone.
    pub fn tokens(&self) -> Vec<i64> {
        let multi = self.lockable();
        multi.hold(self.fencing_token()).map_or_else(Vec::new, |h| {
            multi.given.iter().map(|&place| h.tokens[place]).collect()
        })
    }

    /// The fencing token of the lock at `path` in this hold (`None` if no lock is at `path`, or
    /// the hold was released).
    pub fn token_of(&self, path: &str) -> Option<i64> {
        let multi = self.lockable();
        let place = multi.place_of(path).ok()?;
        Some(multi.hold(self.fencing_token())?.tokens[place])
    }
}

impl MultiLock<'_> {
    /// Takes the locks in order: their tokens (in the canonical order) when all are held.
    fn acquire_all(&self, d: Deadline, progress: &AtomicUsize) -> Result<Option<Vec<i64>>> {
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
    fn release_taken(&self, tokens: &[i64]) -> Result<()> {
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
    fn hold(&self, token: i64) -> Option<Arc<MultiHold>> {
        self.holds
            .lock()
            .iter()
            .rev()
            .find(|h| h.token() == token)
            .cloned()
    }

    /// The most recent hold.
    fn current(&self) -> Option<Arc<MultiHold>> {
        self.holds.lock().last().cloned()
    }

    /// The most recent hold, unless one of its locks' holds was lost (or released apart).
    fn current_held(&self) -> Result<Arc<MultiHold>> {
        let hold = self.current().ok_or(Error::NotHeld)?;
        match self.state_of(&hold) {
            HoldState::Lost | HoldState::NotHeld => Err(Error::NotHeld),
            _ => Ok(hold),
        }
    }

    /// The canonical place of the lock at `path`.
    fn place_of(&self, path: &str) -> Result<usize> {
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
    fn state_of(&self, hold: &MultiHold) -> HoldState {
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
    fn lease_of(&self, hold: &MultiHold) -> Option<Duration> {
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
    fn release_one(&self, token: Option<i64>) -> Result<()> {
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
    fn wait_lost_hold(&self, hold: &Arc<MultiHold>, timeout: Option<Duration>) -> bool {
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
    fn on_lost_hold(&self, hold: &MultiHold, f: Box<dyn FnOnce() + Send>) {
        let once = Arc::new(parking_lot::Mutex::new(Some(f)));
        for (l, &token) in self.locks.iter().zip(&hold.tokens) {
            let once = once.clone();
            l.on_lost_of(
                token,
                Box::new(move || {
                    if let Some(f) = once.lock().take() {
                        f()
                    }
                }),
            );
        }
    }
}

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

    fn stats(&self) -> LockStats {
        self.stats.snapshot()
    }

    /// Releases every lock's hold of the most recent multi-lock hold, in reverse order. Tries
    /// them all (each through the one release path, so none keeps its node); returns the first
    /// error, with the lock's path.
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
            .map_or(true, |h| self.wait_lost_hold(&h, timeout))
    }

    /// Once, when the first of the locks is lost.
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        match self.current() {
            Some(h) => self.on_lost_hold(&h, f),
            None => f(),
        }
    }

    /// Not revocable as one (make its locks revocable one by one).
    fn make_revocable(&self, _: Box<dyn Fn() + Send + Sync>) -> Result<()> {
        Err(Error::invalid(
            "a multi-lock is not revocable as one (make each of its locks revocable)",
        ))
    }

    fn wait_revoke_request(&self, _: Option<Duration>) -> Result<bool> {
        Err(Error::invalid("a multi-lock was not made revocable"))
    }

    /// Asks the holders of every lock to let go.
    fn revoke_holders(&self) -> Result<Vec<String>> {
        let mut asked = Vec::new();
        for l in &self.locks {
            asked.extend(l.revoke_holders()?);
        }
        Ok(asked)
    }

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
            .map_or(true, |h| self.wait_lost_hold(&h, timeout))
    }

    fn on_lost_of(&self, token: i64, f: Box<dyn FnOnce() + Send>) {
        match self.hold(token) {
            Some(h) => self.on_lost_hold(&h, f),
            None => f(),
        }
    }
}

/// A multi-lock's guard answers for its hold of all its locks (named by its token).
impl Guarded for MultiLock<'_> {
    type GuardSend = *const ();
}

/// The canonical order: by path, then write before read.
fn canonical(a: &dyn Lockable, b: &dyn Lockable) -> std::cmp::Ordering {
    a.path()
        .cmp(b.path())
        .then(a.order_rank().cmp(&b.order_rank()))
}

/// Why locks cannot be taken together: two on one path (the second would wait for the first,
/// held by the same multi-lock), unless they are the write and read halves of one read-write
/// lock. The failure names the second lock and its canonical place.
pub(crate) fn same_path_conflict(locks: &[&dyn Lockable]) -> Option<MultiLockFailure> {
    let mut sorted = locks.to_vec();
    sorted.sort_by(|a, b| canonical(*a, *b));
    let downgrade = |w: &dyn Lockable, r: &dyn Lockable| {
        w.order_rank() == 0
            && r.order_rank() == 2
            && w.lock_id().is_some()
            && w.lock_id() == r.lock_id()
    };
    for (i, pair) in sorted.windows(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        if a.path() != b.path() {
            continue;
        }
        let third = sorted.get(i + 2).is_some_and(|c| c.path() == a.path());
        if downgrade(a, b) && !third {
            continue;
        }
        let path = a.path();
        return Some(MultiLockFailure {
            path: path.to_string(),
            position: i + 1,
            error: Some(Error::InvalidArgument(format!(
                "two locks of the multi-lock are at {path}: the second would wait for the first, \
                 held by the multi-lock itself (only the write and read halves of one read-write \
                 lock may share a path)"
            ))),
        });
    }
    None
}

/// The error, with the lock's path added where the error carries a message.
fn with_path(e: Error, path: &str) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("lock {path}: {m}")),
        Error::ConnectionLoss(m) => Error::ConnectionLoss(m.context(format_args!("lock {path}"))),
        Error::WouldDeadlock(m) => Error::WouldDeadlock(format!("lock {path}: {m}")),
        Error::ZooKeeper(m) => Error::ZooKeeper(m.context(format_args!("lock {path}"))),
        other => other,
    }
}
