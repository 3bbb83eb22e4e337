//! The non-reentrant mutex that any thread may release (Curator's
//! `InterProcessSemaphoreMutex` semantics, on the fair queue protocol).

use super::{exclusive_blocker, queue_lockable, Guard, Lock, Owner, Queue, QueueLock};
use crate::client::Client;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::{Kind, Protocol};
use crate::wait::CancelToken;

/// The recipe of [`SemaphoreMutex`]: the fair queue, one participant per handle, no reentrancy.
pub struct RawSemaphoreMutex {
    q: QueueLock,
}

impl RawSemaphoreMutex {
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        self.q.acquire(d)
    }
}

queue_lockable!(RawSemaphoreMutex, q, acquire, 1);

/// A fair distributed mutex that is **not** reentrant and that **any** thread may release:
/// the hold belongs to the handle, not to a thread. A second acquire through a handle that
/// already holds (or is acquiring) fails with [`Error::WouldDeadlock`](crate::Error::WouldDeadlock)
/// instead of hanging.
///
/// ```no_run
/// use zklock::{Client, Options, SemaphoreMutex};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let m = std::sync::Arc::new(SemaphoreMutex::new(&client, "/locks/job")?);
/// std::mem::forget(m.lock()?); // keep the hold past the guard
/// let m2 = m.clone();
/// std::thread::spawn(move || m2.release()).join().unwrap()?;
/// # Ok::<(), zklock::Error>(())
/// ```
pub type SemaphoreMutex = Lock<RawSemaphoreMutex>;

/// Holds a [`SemaphoreMutex`]; releases on drop.
pub type SemaphoreMutexGuard<'a> = Guard<'a, RawSemaphoreMutex>;

impl SemaphoreMutex {
    /// A semaphore mutex at `path`, named with the client's protocol.
    pub fn new(client: &Client, path: &str) -> Result<SemaphoreMutex> {
        SemaphoreMutex::with_protocol(client, path, client.protocol())
    }

    /// A semaphore mutex at `path` named per `protocol`.
    pub fn with_protocol(
        client: &Client,
        path: &str,
        protocol: Protocol,
    ) -> Result<SemaphoreMutex> {
        let queue = Queue::new(client, path, protocol, Kind::Lock, exclusive_blocker, true)?;
        Ok(Lock::from_raw(RawSemaphoreMutex {
            q: QueueLock::new(queue, Owner::Handle, false, "semaphore mutex"),
        }))
    }

    /// A token that cancels this handle's waiting acquires from any thread.
    pub fn cancel_token(&self) -> CancelToken {
        self.raw.q.cancel.clone()
    }
}
