//! All-or-nothing over several locks of any kind, deadlock-free by canonical order.//!
//! The face (the type, its acquire forms, the guard's token answers) and the canonical order
//! are here; taking and giving back the locks and the holds' answers are `engine`'s, the
//! [`Lockable`] implementation `lockable`'s.

mod engine;
mod lockable;

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guard::{Guard, GuardNoSend, Guarded};
use super::lockable::Lockable;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::stats::Stats;

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

/// A multi-lock's guard answers for its hold of all its locks (named by its token).
impl Guarded for MultiLock<'_> {
    type GuardMarker = GuardNoSend;
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
