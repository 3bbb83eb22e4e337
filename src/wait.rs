//! The wait primitives: how a blocking wait ends ([`Outcome`]), the signal that cancels one
//! ([`Signal`]), and cancellation of waiting acquires from any thread ([`CancelToken`]). The
//! executor (`runtime.rs`) waits by these rules; the session and the recipes wait through it.

use std::cell::RefCell;
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;

/// Cancels the acquires that are waiting on a lock handle. Cheap to clone; any thread may call
/// [`CancelToken::cancel`]. A cancelled acquire deletes its node and returns
/// [`Error::Cancelled`](crate::Error::Cancelled).
///
/// ```no_run
/// # use zklock::{Client, Options, Mutex};
/// # let client = Client::connect("127.0.0.1:2181", Options::default()).unwrap();
/// let mutex = Mutex::new(&client, "/locks/a").unwrap();
/// let cancel = mutex.cancel_token();
/// std::thread::spawn(move || cancel.cancel());
/// let r = mutex.lock(); // Err(Cancelled) unless it got the lock first
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    active: Arc<Mutex<Vec<Arc<Signal>>>>,
}

impl CancelToken {
    /// A token with no waiting acquire.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels every acquire waiting under this token now. Acquires that start later are
    /// not affected.
    pub fn cancel(&self) {
        for s in self.active.lock().drain(..) {
            s.cancel();
        }
    }

    /// Registers a wait; the returned registration unregisters on drop. The wait is also
    /// cancelled by the [`AcquireScope`] this thread runs in, if any.
    pub(crate) fn register(&self) -> Registration<'_> {
        let signal = Signal::new();
        self.active.lock().push(signal.clone());
        let scope = SCOPE.with(|s| s.borrow().clone());
        if let Some(scope) = &scope {
            scope.enlist(&signal);
        }
        Registration {
            token: self,
            signal,
            scope,
        }
    }
}

pub(crate) struct Registration<'a> {
    token: &'a CancelToken,
    pub(crate) signal: Arc<Signal>,
    scope: Option<Arc<AcquireScope>>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.token
            .active
            .lock()
            .retain(|s| !Arc::ptr_eq(s, &self.signal));
        if let Some(scope) = &self.scope {
            scope.delist(&self.signal);
        }
    }
}

thread_local! {
    /// The acquire this thread runs for an async caller, whose drop cancels its waits.
    static SCOPE: RefCell<Option<Arc<AcquireScope>>> = const { RefCell::new(None) };
}

/// The cancel of one acquire, whatever handle's token its waits are registered under: an async
/// acquire's (dropping its future cancels that acquire only, not the handle's other acquires).
/// Sticky: a wait registered after [`AcquireScope::cancel`] starts cancelled.
#[derive(Default)]
pub(crate) struct AcquireScope {
    state: Mutex<ScopeState>,
}

#[derive(Default)]
struct ScopeState {
    cancelled: bool,
    waits: Vec<Arc<Signal>>,
}

impl AcquireScope {
    pub(crate) fn new() -> Arc<AcquireScope> {
        Arc::new(AcquireScope::default())
    }

    /// Cancels the scope's waits, now and from now on.
    pub(crate) fn cancel(&self) {
        let waits = {
            let mut st = self.state.lock();
            st.cancelled = true;
            std::mem::take(&mut st.waits)
        };
        for s in waits {
            s.cancel();
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.lock().cancelled
    }

    /// Runs `f` on this thread inside the scope: every wait it registers is cancelled by
    /// [`AcquireScope::cancel`].
    pub(crate) fn run<T>(self: &Arc<Self>, f: impl FnOnce() -> T) -> T {
        struct Reset(Option<Arc<AcquireScope>>);
        impl Drop for Reset {
            fn drop(&mut self) {
                let prev = self.0.take();
                SCOPE.with(|s| *s.borrow_mut() = prev);
            }
        }
        let _reset = Reset(SCOPE.with(|s| s.borrow_mut().replace(self.clone())));
        f()
    }

    fn enlist(&self, signal: &Arc<Signal>) {
        let mut st = self.state.lock();
        if st.cancelled {
            drop(st);
            signal.cancel();
        } else {
            st.waits.push(signal.clone());
        }
    }

    fn delist(&self, signal: &Arc<Signal>) {
        self.state.lock().waits.retain(|s| !Arc::ptr_eq(s, signal));
    }
}

/// A cancel flag and the waker of the wait it cancels.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
}

#[derive(Default)]
struct SignalState {
    cancelled: bool,
    waker: Option<Waker>,
}

impl Signal {
    pub(crate) fn new() -> Arc<Signal> {
        Arc::new(Signal::default())
    }

    pub(crate) fn cancel(&self) {
        let waker = {
            let mut st = self.state.lock();
            st.cancelled = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.lock().cancelled
    }

    /// True if cancelled; else remembers `waker` for [`Signal::cancel`].
    pub(crate) fn check(&self, waker: &Waker) -> bool {
        let mut st = self.state.lock();
        if st.cancelled {
            return true;
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            st.waker = Some(waker.clone());
        }
        false
    }
}

/// How a blocking wait ended.
pub(crate) enum Outcome<T> {
    Ready(T),
    TimedOut,
    Cancelled,
}
