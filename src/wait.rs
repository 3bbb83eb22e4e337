//! Cancellation of waiting acquires, from any thread.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::runtime::Signal;

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

    /// Registers a wait; the returned registration unregisters on drop.
    pub(crate) fn register(&self) -> Registration<'_> {
        let signal = Signal::new();
        self.active.lock().push(signal.clone());
        Registration {
            token: self,
            signal,
        }
    }
}

pub(crate) struct Registration<'a> {
    token: &'a CancelToken,
    pub(crate) signal: Arc<Signal>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        self.token
            .active
            .lock()
            .retain(|s| !Arc::ptr_eq(s, &self.signal));
    }
}
