//! The fair, herd-free, reentrant mutex (Curator's `InterProcessMutex` semantics).

use super::{exclusive_blocker, queue_lockable, Guard, Lock, Owner, Queue, QueueLock};
use crate::client::Client;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::{Kind, Protocol};
use crate::wait::CancelToken;

/// The recipe of [`Mutex`]: ephemeral-sequential nodes, first in sequence holds, each waiter
/// watches only its immediate predecessor.
pub struct RawMutex {
    q: QueueLock,
}

impl RawMutex {
    pub(crate) fn new(
        client: &Client,
        path: &str,
        protocol: Protocol,
        owner: Owner,
    ) -> Result<RawMutex> {
        let queue = Queue::new(client, path, protocol, Kind::Lock, exclusive_blocker, true)?;
        Ok(RawMutex {
            q: QueueLock::new(queue, owner, true, "mutex"),
        })
    }

    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        self.q.acquire(d)
    }
}

queue_lockable!(RawMutex, q, acquire, 1);

/// A fair (FIFO), herd-free, reentrant distributed mutex.
///
/// Each acquire creates an ephemeral-sequential node under the lock path; the first in
/// sequence holds the lock, every other waiter watches only its immediate predecessor.
/// Reentrant per thread, as Curator's `InterProcessMutex`: each thread using a `Mutex` is its
/// own participant, and `n` acquires by one thread need `n` releases; another thread using the
/// same `Mutex` queues behind like any other process.
///
/// ```no_run
/// use zklock::{Client, Options, Mutex};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let m = Mutex::new(&client, "/locks/report")?;
/// let guard = m.lock()?;
/// println!("fencing token {}", guard.fencing_token());
/// drop(guard);
/// # Ok::<(), zklock::Error>(())
/// ```
pub type Mutex = Lock<RawMutex>;

/// Holds a [`Mutex`]; releases on drop (on the thread that acquired it).
pub type MutexGuard<'a> = Guard<'a, RawMutex>;

impl Mutex {
    /// A mutex at `path`, named with the client's protocol. Holds nothing yet.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a malformed path.
    pub fn new(client: &Client, path: &str) -> Result<Mutex> {
        Mutex::with_protocol(client, path, client.protocol())
    }

    /// A mutex at `path` whose nodes are named per `protocol`.
    pub fn with_protocol(client: &Client, path: &str, protocol: Protocol) -> Result<Mutex> {
        Ok(Lock::from_raw(RawMutex::new(
            client,
            path,
            protocol,
            Owner::Thread,
        )?))
    }

    /// A mutex whose participant is this handle, not the calling thread: any thread may release
    /// what another acquired through it, and reentrancy counts per handle (the C API's rule).
    pub fn per_handle(client: &Client, path: &str) -> Result<Mutex> {
        Ok(Lock::from_raw(RawMutex::new(
            client,
            path,
            client.protocol(),
            Owner::Handle,
        )?))
    }

    /// How many times the calling participant holds it (reentrancy count).
    pub fn hold_count(&self) -> usize {
        self.raw.q.holds.count()
    }

    /// A token that cancels this mutex's waiting acquires from any thread.
    pub fn cancel_token(&self) -> CancelToken {
        self.raw.q.cancel.clone()
    }
}
