//! The async front: an acquire as a future ([`AcquireFuture`]) and the owned guard it gives
//! ([`OwnedGuard`]). No async runtime is needed: the acquire is the blocking one, run on a
//! thread of the library's own (`pool`), which wakes the future through its `Waker` when it
//! ends. Dropping the future cancels that acquire (its own cancel scope, not the handle's
//! token: the handle's other acquires go on) and gives back a hold that arrives all the same,
//! in the background; an acquire of the same participant started meanwhile waits for that,
//! rather than being refused for it.

use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::channel::oneshot;
use parking_lot::Mutex;

use super::front::Lock;
use super::hold::HoldState;
use super::lockable::Lockable;
use super::participants::{as_participant, new_task, Holds};
use super::raw::Recipe;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::wait::AcquireScope;

// The sealed-trait pattern: `Handle` is nameable by no user, so its crate-private types are.
#[allow(private_interfaces)]
pub(crate) mod sealed {
    /// What the async front needs of a handle: its table of holds.
    pub trait Handle {
        fn holds(&self) -> &std::sync::Arc<crate::recipes::participants::Holds>;
    }
}

/// A lock handle that can be acquired from async code ([`Lock::acquire_async`]): every
/// [`Lock`] ([`Mutex`](crate::Mutex), [`SemaphoreMutex`](crate::SemaphoreMutex),
/// [`SimpleLock`](crate::SimpleLock), [`ReadLock`](crate::ReadLock),
/// [`WriteLock`](crate::WriteLock), [`Semaphore`](crate::Semaphore)). Sealed. A clone of a
/// handle shares its participants and holds: the future and its [`OwnedGuard`] keep one.
pub trait AsyncLock: Lockable + Clone + sealed::Handle + 'static {}

#[allow(private_interfaces)]
impl<R: Recipe + Clone + 'static> sealed::Handle for Lock<R> {
    fn holds(&self) -> &Arc<Holds> {
        &self.holds
    }
}

impl<R: Recipe + Clone + 'static> AsyncLock for Lock<R> {}

impl<R: Recipe + Clone + 'static> Lock<R> {
    /// The acquire as a future: `Ok(Some(guard))` when held, `Ok(None)` when not acquired
    /// before `deadline`, errors as [`Lockable::acquire`]. It needs no async runtime (tokio,
    /// async-std, smol or a plain `block_on` all do): the acquire runs on a thread of the
    /// library's own from the first poll, and wakes the future when it ends; the runtime's
    /// threads never block.
    ///
    /// **Cancellation-safe.** Dropping the future (`tokio::time::timeout` giving up, the other
    /// branch of a `select!` winning, an aborted task) cancels this acquire (only this one: the
    /// handle's other acquires go on), and a hold that arrives all the same is released in the
    /// background: a dropped acquire never leaves the lock held, and its node goes within a
    /// round trip. An acquire of the same handle started right after waits for that rather
    /// than being refused for it.
    ///
    /// **Who holds.** The guard is an [`OwnedGuard`]: `Send`, `Sync` and `'static`, it may be
    /// held across `.await`, moved to another task and dropped anywhere. With a per-handle lock
    /// ([`SemaphoreMutex`](crate::SemaphoreMutex), [`SimpleLock`](crate::SimpleLock),
    /// [`Semaphore`](crate::Semaphore), [`Mutex::per_handle`](crate::Mutex::per_handle)) the
    /// participant is the handle, as for the blocking calls. With a per-thread one (the
    /// [`Mutex`](crate::Mutex), the read-write halves) each async acquire is a participant of
    /// its own, whatever threads run it: two tasks exclude each other even on one handle, and a
    /// task that acquires again while it holds waits for itself (not reentrant).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use zklock::{Client, Deadline, Options, SemaphoreMutex};
    ///
    /// # async fn job() -> zklock::Result<()> {
    /// let client = Client::connect("127.0.0.1:2181", Options::default())?;
    /// let lock = SemaphoreMutex::new(&client, "/locks/report")?;
    ///
    /// // Wait at most 2 s; Ok(None) if another holder kept it that long.
    /// if let Some(guard) = lock.acquire_async(Deadline::after(Duration::from_secs(2))).await? {
    ///     println!("held, fencing token {}", guard.fencing_token());
    ///     // ... async work, the guard held across .await ...
    /// } // released here, in the background (or `guard.unlock_async().await?`)
    ///
    /// // Any runtime's timeout or select! may drop the acquire: nothing is left held.
    /// // (With tokio: tokio::time::timeout(Duration::from_millis(500), lock.lock_async()).await)
    /// let guard = lock.lock_async().await?;
    /// guard.unlock_async().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn acquire_async(&self, deadline: Deadline) -> AcquireFuture<Self> {
        AcquireFuture {
            state: State::Start {
                lock: self.clone(),
                deadline,
            },
        }
    }

    /// Waits until held, as a future ([`Lock::acquire_async`] with [`Deadline::Forever`]); put
    /// a bound on it with the runtime's timeout or `select!` (cancellation-safe).
    ///
    /// # Errors
    /// As [`Lockable::acquire`].
    pub fn lock_async(&self) -> impl Future<Output = Result<OwnedGuard<Self>>> + Send + 'static {
        let acquire = self.acquire_async(Deadline::Forever);
        async move { acquire.await?.ok_or(Error::Timeout) }
    }
}

/// An acquire under way for async code ([`Lock::acquire_async`]): `Ok(Some(guard))` when
/// held, `Ok(None)` at the deadline. Dropping it cancels the acquire and gives back a hold
/// that arrives all the same. `Send`, `'static`, `Unpin`.
#[must_use = "a future does nothing unless polled; dropping it cancels the acquire"]
pub struct AcquireFuture<L: AsyncLock> {
    state: State<L>,
}

enum State<L> {
    /// Not polled yet: nothing started.
    Start { lock: L, deadline: Deadline },
    /// Running on a pool thread as participant `task`; `scope` cancels it.
    Running {
        lock: L,
        task: u64,
        scope: Arc<AcquireScope>,
        slot: Arc<Mutex<Slot>>,
    },
    /// Its output was taken.
    Done,
}

/// Where the pool thread leaves the acquire's outcome (a panic's payload, to go on in the
/// task), unless the future has gone (`abandoned`: then the thread gives back what it got).
#[derive(Default)]
struct Slot {
    outcome: Option<std::thread::Result<Result<Option<i64>>>>,
    abandoned: bool,
    waker: Option<Waker>,
}

// Nothing of it is pinned in place (the lock is moved out when done).
impl<L: AsyncLock> Unpin for AcquireFuture<L> {}

impl<L: AsyncLock> Future for AcquireFuture<L> {
    type Output = Result<Option<OwnedGuard<L>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let State::Start { .. } = this.state {
            let State::Start { lock, deadline } = std::mem::replace(&mut this.state, State::Done)
            else {
                unreachable!()
            };
            this.state = start(lock, deadline);
        }
        let State::Running { slot, .. } = &mut this.state else {
            panic!("AcquireFuture polled after it completed");
        };
        let r = {
            let mut s = slot.lock();
            match s.outcome.take() {
                Some(r) => r,
                None => {
                    if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        s.waker = Some(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
            }
        };
        let State::Running { lock, task, .. } = std::mem::replace(&mut this.state, State::Done)
        else {
            unreachable!()
        };
        let r = r.unwrap_or_else(|panic| resume_unwind(panic));
        Poll::Ready(r.map(|t| {
            t.map(|token| OwnedGuard {
                lock,
                token,
                task,
                released: false,
            })
        }))
    }
}

/// Starts the acquire on a pool thread, in a cancel scope of its own, as a participant of its
/// own; the thread sends the outcome, or gives back the hold if the future has gone.
fn start<L: AsyncLock>(lock: L, deadline: Deadline) -> State<L> {
    let task = new_task();
    let scope = AcquireScope::new();
    let slot = Arc::new(Mutex::new(Slot::default()));
    let (l, sc, sl) = (lock.clone(), scope.clone(), slot.clone());
    crate::pool::run(move || {
        let r = catch_unwind(AssertUnwindSafe(|| {
            as_participant(task, || {
                sc.run(|| match sc.is_cancelled() {
                    true => Err(Error::Cancelled),
                    false => l.acquire(deadline),
                })
            })
        }));
        let mut s = sl.lock();
        if s.abandoned {
            // The future was dropped first (it counted this attempt as abandoned).
            drop(s);
            give_back(&l, task, r.unwrap_or(Err(Error::Cancelled)));
        } else {
            s.outcome = Some(r);
            let waker = s.waker.take();
            drop(s);
            if let Some(w) = waker {
                w.wake();
            }
        }
    });
    State::Running {
        lock,
        task,
        scope,
        slot,
    }
}

/// What an abandoned acquire got: its hold is released; then the attempt is settled.
fn give_back<L: AsyncLock>(lock: &L, task: u64, r: Result<Option<i64>>) {
    as_participant(task, || {
        if let Ok(Some(token)) = r {
            log::debug!(
                "an async acquire of {} was dropped as it got the lock: releasing it",
                lock.path()
            );
            if let Err(e) = lock.release_hold(token) {
                log::warn!("releasing {} after a dropped acquire: {e}", lock.path());
            }
        }
        lock.holds().settle_abandoned();
    })
}

impl<L: AsyncLock> Drop for AcquireFuture<L> {
    fn drop(&mut self) {
        let State::Running {
            lock,
            task,
            scope,
            slot,
        } = &mut self.state
        else {
            return;
        };
        let task = *task;
        // Abandoned before anything is known: an acquire of the same participant waits for
        // this one to settle.
        as_participant(task, || lock.holds().abandon());
        scope.cancel();
        let arrived = {
            let mut s = slot.lock();
            s.abandoned = true;
            s.outcome.take()
        };
        match arrived {
            // Still under way: the thread finds the future gone and gives back what it gets.
            None => {}
            // The outcome arrived, never taken: a hold is given back off this thread.
            Some(Ok(Ok(Some(token)))) => {
                let l = lock.clone();
                crate::pool::run(move || give_back(&l, task, Ok(Some(token))));
            }
            Some(_) => as_participant(task, || lock.holds().settle_abandoned()),
        }
    }
}

impl<L: AsyncLock> std::fmt::Debug for AcquireFuture<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (path, state) = match &self.state {
            State::Start { lock, .. } => (lock.path(), "not started"),
            State::Running { lock, .. } => (lock.path(), "waiting"),
            State::Done => ("", "done"),
        };
        f.debug_struct("AcquireFuture")
            .field("path", &path)
            .field("state", &state)
            .finish()
    }
}

/// One hold taken by [`Lock::acquire_async`] or [`Lock::lock_async`]: owned (it keeps a clone
/// of the handle), so `Send`, `Sync` and `'static`: hold it across `.await`, move it to another
/// task, drop it anywhere. Dropped, it is released without blocking: it is the handle's no more
/// at once, and its node is deleted in the background; [`OwnedGuard::unlock_async`] waits for
/// that and says how it went.
#[must_use = "the lock is released when the guard is dropped"]
pub struct OwnedGuard<L: AsyncLock> {
    lock: L,
    token: i64,
    /// The async acquire's participant (per-thread locks).
    task: u64,
    /// Released by [`OwnedGuard::unlock`]: nothing left to do on drop.
    released: bool,
}

impl<L: AsyncLock> OwnedGuard<L> {
    /// The fencing token of this hold: strictly increasing from one holder to the next.
    pub fn fencing_token(&self) -> i64 {
        self.token
    }

    /// The handle this guard holds.
    pub fn lock(&self) -> &L {
        &self.lock
    }

    /// The path of this hold's node.
    pub fn node(&self) -> String {
        self.as_holder(|l, t| l.node_of(t)).unwrap_or_default()
    }

    /// Whether this hold is still held and may be acted on.
    pub fn is_held(&self) -> bool {
        self.hold_state() == HoldState::Held
    }

    /// Held, uncertain (cut off from the server), or lost.
    pub fn hold_state(&self) -> HoldState {
        self.as_holder(|l, t| l.hold_state_of(t))
    }

    /// How long this hold stays provably valid if the server went silent now; `None` once it
    /// is not held.
    pub fn lease_remaining(&self) -> Option<Duration> {
        self.as_holder(|l, t| l.lease_remaining_of(t))
    }

    /// Blocks the calling thread until this hold is lost, or `timeout`; true if lost. (From
    /// async code, prefer [`OwnedGuard::on_lost`].)
    pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.as_holder(|l, t| l.wait_lost_of(t, timeout))
    }

    /// Calls `f` once, on another thread, when this hold is lost (wake a task from it).
    pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.as_holder(|l, t| l.on_lost_of(t, Box::new(f)))
    }

    /// Releases now, blocking the calling thread for the round trip, and says how it went
    /// (`Err(LockLost)` if it was lost meanwhile). From async code use
    /// [`OwnedGuard::unlock_async`].
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.as_holder(|l, t| l.release_hold(t))
    }

    /// Releases on a thread of the library's and says how it went, without blocking the
    /// caller's thread. Dropping the future does not stop the release.
    pub fn unlock_async(self) -> impl Future<Output = Result<()>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        crate::pool::run(move || {
            let _ = tx.send(self.unlock());
        });
        async move {
            rx.await
                .unwrap_or_else(|_| panic!("a release panicked on its thread"))
        }
    }

    /// `f(lock, token)` as this hold's participant (and for its guarded writes, `fenced.rs`).
    pub(super) fn as_holder<T>(&self, f: impl FnOnce(&L, i64) -> T) -> T {
        as_participant(self.task, || f(&self.lock, self.token))
    }
}

impl<L: AsyncLock> std::fmt::Debug for OwnedGuard<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedGuard")
            .field("path", &self.lock.path())
            .field("token", &self.token)
            .finish()
    }
}

impl<L: AsyncLock> Drop for OwnedGuard<L> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let holds = self.lock.holds().clone();
        // Out of the table now (the handle may acquire again at once); the node goes on a
        // pool thread (a round trip, a session timeout in an outage: never on the caller's).
        match as_participant(self.task, || holds.take(Some(self.token))) {
            Ok(Some(hold)) => {
                let path = self.lock.path().to_string();
                crate::pool::run(move || match holds.finish_release(hold) {
                    Ok(()) => {}
                    Err(e) => log::warn!("releasing {path} on drop: {e}"),
                });
            }
            // A reentrant count went down; or a guard dropped in a forked child (the hold is
            // the parent's and stays so).
            Ok(None) | Err(Error::Forked(_)) => {}
            Err(e) => log::warn!("releasing {} on drop: {e}", self.lock.path()),
        }
    }
}
