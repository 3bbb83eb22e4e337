//! The wait primitives: how a blocking wait ends ([`Outcome`]), the signal that cancels one
//! ([`Signal`]), and cancellation of acquires from any thread ([`CancelToken`]). The
//! executor (`runtime.rs`) waits by these rules; the session and the recipes wait through it.

use std::cell::RefCell;
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;

/// Cancels the acquires of a lock handle, from any thread. Cheap to clone (clones are one
/// token). A cancelled acquire deletes its node, gives back a hold that arrived meanwhile, and
/// returns [`Error::Cancelled`](crate::Error::Cancelled).
///
/// A cancel is sticky, as kazoo's `cancel()` and Java's interrupt: [`CancelToken::cancel`]
/// ends every acquire under way under the token; if none is under way, it is remembered and
/// the next acquire ends at once with `Cancelled`, which forgets it. One cancel ends at most
/// the acquires under way, or the one next acquire: it never outlives that acquire, and
/// several cancels with no acquire between them are remembered as one.
/// [`CancelToken::reset`] forgets a remembered cancel (say, one that arrived just after the
/// acquire it was meant for had returned).
///
/// ```no_run
/// # use zklock::{Client, Error, Options, Mutex};
/// # let client = Client::connect("127.0.0.1:2181", Options::default()).unwrap();
/// let mutex = Mutex::new(&client, "/locks/a").unwrap();
/// let cancel = mutex.cancel_token();
/// std::thread::spawn(move || cancel.cancel());
/// // Err(Cancelled) unless it got the lock first, whether the cancel lands before the acquire
/// // begins or while it waits (then the next acquire would end with Err(Cancelled)).
/// let r = mutex.lock();
/// # let _ = r;
/// ```
#[derive(Clone, Default)]
pub struct CancelToken {
    state: Arc<Mutex<TokenState>>,
}

#[derive(Default)]
struct TokenState {
    /// The signals of the acquires under way.
    active: Vec<Arc<Signal>>,
    /// A cancel arrived with no acquire under way: the next acquire ends at once.
    pending: bool,
}

impl CancelToken {
    /// A token with no acquire under way and no cancel remembered.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Ends every acquire under way under this token now (they return `Cancelled`); if none
    /// is under way, the next acquire returns `Cancelled` at once instead.
    pub fn cancel(&self) {
        // An acquire stays under way (and registered) until it returns, cancelled or not: a
        // second cancel while the first one's acquire is still giving back its node reaches
        // that acquire, not the next one.
        let active = {
            let mut st = self.state.lock();
            if st.active.is_empty() {
                st.pending = true;
            }
            st.active.clone()
        };
        for s in active {
            s.cancel();
        }
    }

    /// Cancels as one token the acquires of `a` and `b` (the two halves of a read-write lock):
    /// those under way under either; with none under way, each remembers the cancel.
    pub(crate) fn cancel_pair(a: &CancelToken, b: &CancelToken) {
        let active = {
            let (mut sa, mut sb) = (a.state.lock(), b.state.lock());
            if sa.active.is_empty() && sb.active.is_empty() {
                sa.pending = true;
                sb.pending = true;
            }
            sa.active
                .iter()
                .chain(&sb.active)
                .cloned()
                .collect::<Vec<_>>()
        };
        for s in active {
            s.cancel();
        }
    }

    /// Forgets a cancel remembered for the next acquire; true if there was one. Acquires under
    /// way that a cancel already reached stay cancelled.
    pub fn reset(&self) -> bool {
        std::mem::take(&mut self.state.lock().pending)
    }

    /// Whether a cancel is remembered for the next acquire.
    pub fn is_pending(&self) -> bool {
        self.state.lock().pending
    }

    /// Registers an acquire under way until the registration drops: a [`CancelToken::cancel`]
    /// meanwhile cancels its signal, which starts cancelled (and the remembered cancel is
    /// forgotten) if one was remembered. The [`AcquireScope`] this thread runs in, if any,
    /// cancels it too.
    pub(crate) fn register(&self) -> Registration<'_> {
        let signal = Signal::new();
        {
            let mut st = self.state.lock();
            if std::mem::take(&mut st.pending) {
                signal.cancel();
            }
            st.active.push(signal.clone());
        }
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

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("CancelToken")
            .field("acquires", &st.active.len())
            .field("pending", &st.pending)
            .finish()
    }
}

/// An acquire under way under a [`CancelToken`].
pub(crate) struct Registration<'a> {
    token: &'a CancelToken,
    pub(crate) signal: Arc<Signal>,
    scope: Option<Arc<AcquireScope>>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.token
            .state
            .lock()
            .active
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

/// The cancel of one acquire, whatever handle's token it is registered under: an async
/// acquire's (dropping its future cancels that acquire only, not the handle's other acquires,
/// and leaves the handle's token as it was: nothing is remembered for its next acquire).
/// Sticky: an acquire registered after [`AcquireScope::cancel`] starts cancelled.
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

    /// Cancels the scope's acquires, now and from now on.
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

    /// Runs `f` on this thread inside the scope: every acquire it registers is cancelled by
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

/// A cancel flag and the waker of the wait it cancels (public in name only: the sealed
/// `Recipe` trait names it).
#[derive(Default)]
pub struct Signal {
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
