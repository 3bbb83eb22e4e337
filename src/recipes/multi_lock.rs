//! All-or-nothing over several locks of any kind, deadlock-free by canonical order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Mutex, ReadLock, Semaphore, SemaphoreMutex, SimpleLock, WriteLock};
use crate::error::{Error, Result};

/// A lock that a [`MultiLock`] can take: every zklock lock kind implements it.
///
/// `acquire_until` and `release` follow each kind's own rules (thread-bound and reentrant for
/// [`Mutex`], [`ReadLock`] and [`WriteLock`]; handle-bound for [`SemaphoreMutex`],
/// [`SimpleLock`] and [`Semaphore`], where one call takes one lease).
pub trait Lockable {
    /// The lock path (the key of the canonical acquire order).
    fn path(&self) -> &str;

    /// Takes the lock: `deadline` None waits forever, `try_once` never waits. `Ok(false)` if
    /// not taken (busy, or the deadline passed); nothing is left behind then.
    fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool>;

    /// Releases one hold taken with [`Lockable::acquire_until`].
    fn release(&self) -> Result<()>;

    /// Cancels this lock's waiting acquires.
    fn cancel(&self);

    /// Whether it is held (by the calling thread for the per-thread kinds) with a live session.
    fn is_held(&self) -> bool;

    /// Tie-break of the canonical order between locks on the same path (a write lock is taken
    /// before the read lock of the same read-write lock: write -> read is a downgrade, the other
    /// order would deadlock).
    fn order_rank(&self) -> u8 {
        1
    }
}

fn forget<G>(g: Option<G>) -> bool {
    g.map(std::mem::forget).is_some()
}

/// `Lockable` for the recipes whose acquires return guards: the guard is forgotten, the hold
/// stays with the handle until [`Lockable::release`].
macro_rules! lockable_by_guard {
    ($($t:ident => $rank:expr),*) => {$(
        impl Lockable for $t {
            fn path(&self) -> &str {
                $t::path(self)
            }
            fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
                Ok(match (deadline, try_once) {
                    (_, true) => forget(self.try_lock()?),
                    (Some(d), false) => forget(self.try_lock_until(d)?),
                    (None, false) => forget(Some(self.lock()?)),
                })
            }
            fn release(&self) -> Result<()> {
                $t::release(self)
            }
            fn cancel(&self) {
                $t::cancel(self)
            }
            fn is_held(&self) -> bool {
                $t::is_held(self)
            }
            fn order_rank(&self) -> u8 {
                $rank
            }
        }
    )*};
}

// A write lock is taken before the read lock of the same read-write lock (a downgrade).
lockable_by_guard!(Mutex => 1, SemaphoreMutex => 1, SimpleLock => 1, WriteLock => 0, ReadLock => 2);

impl Lockable for Semaphore {
    fn path(&self) -> &str {
        Semaphore::path(self)
    }
    fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
        self.acquire_lease_until(deadline, try_once)
    }
    fn release(&self) -> Result<()> {
        self.release_lease()
    }
    fn cancel(&self) {
        Semaphore::cancel(self)
    }
    fn is_held(&self) -> bool {
        Semaphore::is_held(self)
    }
}

impl<T: Lockable + ?Sized> Lockable for &T {
    fn path(&self) -> &str {
        (**self).path()
    }
    fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
        (**self).acquire_until(deadline, try_once)
    }
    fn release(&self) -> Result<()> {
        (**self).release()
    }
    fn cancel(&self) {
        (**self).cancel()
    }
    fn is_held(&self) -> bool {
        (**self).is_held()
    }
    fn order_rank(&self) -> u8 {
        (**self).order_rank()
    }
}

impl<T: Lockable + ?Sized> Lockable for Arc<T> {
    fn path(&self) -> &str {
        (**self).path()
    }
    fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
        (**self).acquire_until(deadline, try_once)
    }
    fn release(&self) -> Result<()> {
        (**self).release()
    }
    fn cancel(&self) {
        (**self).cancel()
    }
    fn is_held(&self) -> bool {
        (**self).is_held()
    }
    fn order_rank(&self) -> u8 {
        (**self).order_rank()
    }
}

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
    locks: Vec<Box<dyn Lockable + Send + Sync + 'a>>,
    last_failure: parking_lot::Mutex<Option<MultiLockFailure>>,
    cancel: parking_lot::Mutex<Vec<Arc<AtomicUsize>>>,
}

/// Holds every lock of a [`MultiLock`]; releases them (in reverse order) on drop.
#[must_use = "the locks are released when the guard is dropped"]
pub struct MultiLockGuard<'m, 'a> {
    multi: &'m MultiLock<'a>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl std::fmt::Debug for MultiLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLock")
            .field("paths", &self.paths())
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
                .map(|l| Box::new(l) as Box<dyn Lockable + Send + Sync + 'a>)
                .collect(),
        )
    }

    /// A multi-lock over owned (boxed) locks, e.g. `Box::new(Arc::new(mutex))`.
    pub fn from_boxed(mut locks: Vec<Box<dyn Lockable + Send + Sync + 'a>>) -> MultiLock<'a> {
        locks.sort_by(|a, b| {
            a.path()
                .cmp(b.path())
                .then(a.order_rank().cmp(&b.order_rank()))
        });
        MultiLock {
            locks,
            last_failure: parking_lot::Mutex::new(None),
            cancel: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// The paths, in the canonical order the locks are taken.
    pub fn paths(&self) -> Vec<&str> {
        self.locks.iter().map(|l| l.path()).collect()
    }

    /// Blocks until every lock is held.
    pub fn lock(&self) -> Result<MultiLockGuard<'_, 'a>> {
        if self.acquire_inner(None, false)? {
            Ok(self.guard())
        } else {
            Err(Error::Timeout)
        }
    }

    /// One attempt on each lock that never waits: `Ok(None)` if any is busy (all released).
    pub fn try_lock(&self) -> Result<Option<MultiLockGuard<'_, 'a>>> {
        Ok(self.acquire_inner(None, true)?.then(|| self.guard()))
    }

    /// Waits at most `timeout` in all: `Ok(None)` if not every lock was taken by then.
    pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<MultiLockGuard<'_, 'a>>> {
        match super::after(timeout) {
            Some(d) => self.try_lock_until(d),
            None => self.lock().map(Some),
        }
    }

    /// Waits until `deadline` at most, for all the locks together.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiLockGuard<'_, 'a>>> {
        Ok(self
            .acquire_inner(Some(deadline), false)?
            .then(|| self.guard()))
    }

    /// Explicit acquire (for the C layer): `timeout` None waits forever, `Some(ZERO)` tries
    /// once. Returns whether every lock is held; release with [`MultiLock::release`].
    pub fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
        {
            let (deadline, try_once) = super::plan(timeout);
            self.acquire_inner(deadline, try_once)
        }
    }

    /// Releases every lock, in reverse order. Tries them all; returns the first error (with
    /// the lock's path where the error carries a message).
    pub fn release(&self) -> Result<()> {
        let mut first = None;
        for l in self.locks.iter().rev() {
            if let Err(e) = l.release() {
                log::warn!("multi-lock: releasing {} failed: {e}", l.path());
                first.get_or_insert_with(|| with_path(e, l.path()));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Which lock stopped the most recent failed acquire, and how (cleared by a success).
    pub fn last_failure(&self) -> Option<MultiLockFailure> {
        self.last_failure.lock().clone()
    }

    /// Whether every lock of it is held (with a live session).
    pub fn is_held(&self) -> bool {
        self.locks.iter().all(|l| l.is_held())
    }

    /// Cancels the acquires of this multi-lock that are waiting now (the locks they took are
    /// released; they return [`Error::Cancelled`]). Calls `cancel` on the component lock being
    /// waited for, which also cancels other waits on that handle.
    pub fn cancel(&self) {
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

    fn guard(&self) -> MultiLockGuard<'_, 'a> {
        MultiLockGuard {
            multi: self,
            _not_send: std::marker::PhantomData,
        }
    }

    fn acquire_inner(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
        let progress = Arc::new(AtomicUsize::new(0));
        self.cancel.lock().push(progress.clone());
        let r = self.acquire_all(deadline, try_once, &progress);
        self.cancel.lock().retain(|a| !Arc::ptr_eq(a, &progress));
        r
    }

    fn acquire_all(
        &self,
        deadline: Option<Instant>,
        try_once: bool,
        progress: &AtomicUsize,
    ) -> Result<bool> {
        for (i, l) in self.locks.iter().enumerate() {
            let cancelled = progress.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |p| {
                Some((p & CANCELLED) | i)
            });
            let r = if cancelled.is_ok_and(|p| p & CANCELLED != 0) {
                Err(Error::Cancelled)
            } else {
                l.acquire_until(deadline, try_once)
            };
            let failure = match r {
                Ok(true) => continue,
                Ok(false) => None,
                Err(e) => Some(e),
            };
            self.release_taken(i);
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
            // Cancelled after the last lock was taken: the acquire completed; keep it.
            log::debug!("multi-lock: cancel arrived after every lock was taken");
        }
        *self.last_failure.lock() = None;
        Ok(true)
    }

    fn release_taken(&self, n: usize) {
        for l in self.locks[..n].iter().rev() {
            if let Err(e) = l.release() {
                log::warn!(
                    "multi-lock: releasing {} after a failed acquire failed: {e}",
                    l.path()
                );
            }
        }
    }
}

/// The error, with the lock's path added where the error carries a message.
fn with_path(e: Error, path: &str) -> Error {
    match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("lock {path}: {m}")),
        Error::ConnectionLoss(m) => Error::ConnectionLoss(format!("lock {path}: {m}")),
        Error::WouldDeadlock(m) => Error::WouldDeadlock(format!("lock {path}: {m}")),
        Error::ZooKeeper(m) => Error::ZooKeeper(format!("lock {path}: {m}")),
        other => other,
    }
}

impl MultiLockGuard<'_, '_> {
    /// Releases every lock now and reports how it went.
    pub fn unlock(self) -> Result<()> {
        let r = self.multi.release();
        std::mem::forget(self);
        r
    }
}

impl Drop for MultiLockGuard<'_, '_> {
    fn drop(&mut self) {
        let _ = self.multi.release();
    }
}
