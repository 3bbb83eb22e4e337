//! All-or-nothing over several locks of any kind, deadlock-free by canonical order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::front::{Guard, Guarded, Lockable};
use super::hold::HoldState;
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
    last_failure: parking_lot::Mutex<Option<MultiLockFailure>>,
    cancel: parking_lot::Mutex<Vec<Arc<AtomicUsize>>>,
    /// The multi-lock's own statistics (each lock keeps its own too), and when it was taken.
    stats: Stats,
    acquired: parking_lot::Mutex<Option<Instant>>,
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
    pub fn from_boxed(mut locks: Vec<Box<dyn Lockable + 'a>>) -> MultiLock<'a> {
        locks.sort_by(|a, b| {
            a.path()
                .cmp(b.path())
                .then(a.order_rank().cmp(&b.order_rank()))
        });
        MultiLock {
            locks,
            last_failure: parking_lot::Mutex::new(None),
            cancel: parking_lot::Mutex::new(Vec::new()),
            stats: Default::default(),
            acquired: parking_lot::Mutex::new(None),
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
}

impl MultiLock<'_> {
    fn acquire_all(&self, d: Deadline, progress: &AtomicUsize) -> Result<bool> {
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
                Ok(Some(_)) => continue,
                Ok(None) => None,
                Err(e) => Some(e),
            };
            let _ = self.release_taken(i);
            let f = MultiLockFailure {
                path: l.path().to_string(),
                position: i,
                error: failure.clone(),
            };
            log::info!("multi-lock: {f}; released the {i} lock(s) already taken");
            *self.last_failure.lock() = Some(f);
            return match failure {
                None => Ok(false),
                Some(e) => Err(with_path(e, l.path())),
            };
        }
        if progress.load(Ordering::SeqCst) & CANCELLED != 0 {
            // Cancelled while the last lock was being taken: cancel works at any time, so what
            // was taken is given back.
            log::debug!("multi-lock: cancel arrived as the last lock was taken; releasing all");
            let n = self.locks.len();
            let _ = self.release_taken(n);
            *self.last_failure.lock() = Some(MultiLockFailure {
                path: self.locks.last().map_or("", |l| l.path()).to_string(),
                position: n.saturating_sub(1),
                error: Some(Error::Cancelled),
            });
            return Err(Error::Cancelled);
        }
        *self.last_failure.lock() = None;
        Ok(true)
    }

    /// Releases the first `n` locks (in reverse order), each through the one release path.
    fn release_taken(&self, n: usize) -> Result<()> {
        let mut first = None;
        for l in self.locks[..n].iter().rev() {
            if let Err(e) = l.release() {
                log::warn!("multi-lock: releasing {} failed: {e}", l.path());
                first.get_or_insert_with(|| with_path(e, l.path()));
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Lockable for MultiLock<'_> {
    fn path(&self) -> &str {
        self.locks.first().map_or("", |l| l.path())
    }

    /// Takes every lock, or none. The token returned is the largest of the locks' tokens.
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        self.stats.attempt(|| {
            let progress = Arc::new(AtomicUsize::new(0));
            self.cancel.lock().push(progress.clone());
            let r = self.acquire_all(d, &progress);
            self.cancel.lock().retain(|a| !Arc::ptr_eq(a, &progress));
            let token = r?.then(|| {
                self.locks
                    .iter()
                    .filter_map(|l| l.fencing_token().ok())
                    .max()
                    .unwrap_or(0)
            });
            if token.is_some() {
                *self.acquired.lock() = Some(Instant::now());
            }
            Ok(token)
        })
    }

    fn stats(&self) -> LockStats {
        self.stats.snapshot()
    }

    /// Releases every lock, in reverse order. Tries them all (each through the one release
    /// path, so none keeps its node); returns the first error, with the lock's path.
    fn release(&self) -> Result<()> {
        let acquired = self.acquired.lock().take();
        let r = self.release_taken(self.locks.len());
        if let Some(at) = acquired {
            self.stats.hold_ended(at.elapsed(), &r);
        }
        r
    }

    /// `Held` only when every lock is held; otherwise the worst state among them.
    fn hold_state(&self) -> HoldState {
        let states: Vec<_> = self.locks.iter().map(|l| l.hold_state()).collect();
        [HoldState::Lost, HoldState::NotHeld, HoldState::Uncertain]
            .into_iter()
            .find(|s| states.contains(s))
            .unwrap_or(HoldState::Held)
    }

    /// The largest of the locks' tokens (what its acquire returned), while every lock is held.
    fn fencing_token(&self) -> Result<i64> {
        self.locks
            .iter()
            .map(|l| l.fencing_token())
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .max()
            .ok_or(Error::NotHeld)
    }

    /// The shortest of the locks' leases (`None` unless every lock is held).
    fn lease_remaining(&self) -> Option<Duration> {
        self.locks
            .iter()
            .map(|l| l.lease_remaining())
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .min()
    }

    /// Cancels the acquires of this multi-lock that are waiting now (the locks they took are
    /// released; they return [`Error::Cancelled`]). Calls `cancel` on the component lock being
    /// waited for, which also cancels other waits on that handle.
    fn cancel(&self) {
        let active: Vec<_> = self.cancel.lock().clone();
        for a in &active {
            a.fetch_or(CANCELLED, Ordering::SeqCst);
        }
        // The component's own cancel only reaches waits already registered: repeat until each
        // acquire has noticed (it removes itself from the list), for at most one second.
        let until = Instant::now() + Duration::from_secs(1);
        loop {
            let still: Vec<_> = {
                let list = self.cancel.lock();
                active
                    .iter()
                    .filter(|a| list.iter().any(|b| Arc::ptr_eq(a, b)))
                    .cloned()
                    .collect()
            };
            if still.is_empty() || Instant::now() >= until {
                return;
            }
            for a in still {
                let i = a.load(Ordering::SeqCst) & !CANCELLED;
                if let Some(l) = self.locks.get(i) {
                    l.cancel();
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Every lock's queue, in the canonical order.
    fn participants(&self) -> Result<Vec<Participant>> {
        let mut out = Vec::new();
        for l in &self.locks {
            out.extend(l.participants()?);
        }
        Ok(out)
    }

    /// Until any of the locks is lost.
    fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        if self.hold_state() == HoldState::Lost {
            return true;
        }
        let lost = Arc::new((parking_lot::Mutex::new(false), parking_lot::Condvar::new()));
        for l in &self.locks {
            let lost = lost.clone();
            l.on_lost(Box::new(move || {
                *lost.0.lock() = true;
                lost.1.notify_all();
            }));
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut flag = lost.0.lock();
        while !*flag {
            match deadline {
                Some(d) => {
                    if lost.1.wait_until(&mut flag, d).timed_out() {
                        break;
                    }
                }
                None => lost.1.wait(&mut flag),
            }
        }
        *flag
    }

    /// Once, when the first of the locks is lost.
    fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        let once = Arc::new(parking_lot::Mutex::new(Some(f)));
        for l in &self.locks {
            let once = once.clone();
            l.on_lost(Box::new(move || {
                if let Some(f) = once.lock().take() {
                    f()
                }
            }));
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
}

/// A multi-lock's guard answers for the multi-lock (it has one hold of all its locks).
impl Guarded for MultiLock<'_> {
    type GuardSend = *const ();
    fn release_hold(&self, _: i64) -> Result<()> {
        self.release()
    }
    fn hold_state_of(&self, _: i64) -> HoldState {
        self.hold_state()
    }
    fn lease_remaining_of(&self, _: i64) -> Option<Duration> {
        self.lease_remaining()
    }
    fn wait_lost_of(&self, _: i64, timeout: Option<Duration>) -> bool {
        self.wait_lost(timeout)
    }
    fn on_lost_of(&self, _: i64, f: Box<dyn FnOnce() + Send>) {
        self.on_lost(f)
    }
    fn node_of(&self, _: i64) -> Option<String> {
        None
    }
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
