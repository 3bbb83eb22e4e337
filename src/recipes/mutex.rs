//! The fair, herd-free mutex (Curator's `InterProcessMutex`, reentrant) and the same protocol
//! with one participant per handle and no reentrancy (Curator's `InterProcessSemaphoreMutex`).

use super::front::Lock;
use super::guard::Guard;
use super::participants::{Owner, Policy};
use super::queue::{Queue, QueueKind, Rules};
use crate::error::Result;
use crate::node::Protocol;
use crate::session::Client;

/// Marks the reentrant mutex's type ([`Mutex`]).
pub enum Reentrant {}

/// Marks the semaphore mutex's type ([`SemaphoreMutex`]).
pub enum NonReentrant {}

/// Both mutexes queue under the exclusive rules: first in sequence holds, each waiter watches
/// only its immediate predecessor. Who may take it again is the front's policy.
impl QueueKind for Reentrant {
    const RULES: Rules = Rules::EXCLUSIVE;
    const NAME: &'static str = "Mutex";
}

impl QueueKind for NonReentrant {
    const RULES: Rules = Rules::EXCLUSIVE;
    const NAME: &'static str = "SemaphoreMutex";
}

/// The protocol of [`Mutex`] and [`SemaphoreMutex`]: the queue under the exclusive rules
/// (`P` tells the two fronts apart).
pub type RawMutex<P = Reentrant> = Queue<P>;

/// The protocol of [`SemaphoreMutex`].
pub type RawSemaphoreMutex = RawMutex<NonReentrant>;

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
pub type MutexGuard<'a> = Guard<'a, Mutex>;

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
        let raw = Queue::new(client, path, protocol)?;
        Ok(Lock::from_raw(
            raw,
            Owner::Thread,
            Policy::Reentrant,
            "mutex",
        ))
    }

    /// A mutex whose participant is this handle, not the calling thread: any thread may release
    /// what another acquired through it, and reentrancy counts per handle (the C API's rule).
    pub fn per_handle(client: &Client, path: &str) -> Result<Mutex> {
        let raw = Queue::new(client, path, client.protocol())?;
        Ok(Lock::from_raw(
            raw,
            Owner::Handle,
            Policy::Reentrant,
            "mutex",
        ))
    }
}

/// A fair distributed mutex that is **not** reentrant and that **any** thread may release:
/// the hold belongs to the handle, not to a thread. A second acquire through a handle that
/// already holds (or is acquiring) fails with [`Error::WouldDeadlock`](crate::Error::WouldDeadlock)
/// instead of hanging.
///
/// ```no_run
/// use zklock::{Client, Lockable, Options, SemaphoreMutex};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let m = std::sync::Arc::new(SemaphoreMutex::new(&client, "/locks/job")?);
/// std::mem::forget(m.lock()?); // keep the hold past the guard
/// let m2 = m.clone();
/// std::thread::spawn(move || m2.release()).join().unwrap()?;
/// # Ok::<(), zklock::Error>(())
/// ```
pub type SemaphoreMutex = Lock<RawSemaphoreMutex>;

/// Holds a [`SemaphoreMutex`]; releases on drop.
pub type SemaphoreMutexGuard<'a> = Guard<'a, SemaphoreMutex>;

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
        let raw = Queue::new(client, path, protocol)?;
        Ok(Lock::from_raw(
            raw,
            Owner::Handle,
            Policy::Once,
            "semaphore mutex",
        ))
    }
}
