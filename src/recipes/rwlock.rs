//! The fair, herd-free, reentrant read-write lock (Curator's `InterProcessReadWriteLock`
//! semantics, kazoo's `ReadLock`/`WriteLock` names in kazoo mode): one queue, two halves, each
//! a [`Lock`] with its own holds; each half looks at the other's holds only to downgrade
//! (write -> read) or to refuse an upgrade.

use std::sync::{Arc, Weak};

use super::attempt::Attempt;
use super::front::Lock;
use super::guard::{Guard, GuardNoSend};
use super::hold::{Hold, HoldState};
use super::lockable::Lockable;
use super::lockable::Revocable;
use super::participants::{Holds, Owner, Policy};
use super::queue::{Queue, Reader, Writer};
use super::raw::{Participant, Recipe, Revokes};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{self, Protocol};
use crate::session::Client;
use crate::wait::{CancelToken, Signal};

/// The queue both halves join, as each half queues in it.
struct Core {
    read: Queue<Reader>,
    write: Queue<Writer>,
}

/// The protocol of [`ReadLock`]: the shared half (readers wait for the nearest earlier writer).
#[derive(Clone)]
pub struct RawReadLock {
    core: Arc<Core>,
    /// The write half's holds: a participant holding the write lock reads by downgrading.
    write: Weak<Holds>,
}

/// The protocol of [`WriteLock`]: the exclusive half (writers wait for their predecessor).
#[derive(Clone)]
pub struct RawWriteLock {
    core: Arc<Core>,
    /// The read half's holds: a participant holding only the read lock cannot upgrade.
    read: Weak<Holds>,
}

/// A fair (FIFO by sequence), herd-free, reentrant distributed read-write lock.
///
/// Readers share, writers exclude. A reader waits only for the nearest earlier writer, a writer
/// for its immediate predecessor, so each release wakes one waiter (or one batch of readers).
/// A reader that arrives behind a waiting writer waits for it: writers never starve.
///
/// Both halves are reentrant per participant (per thread for a lock made with
/// [`ReadWriteLock::new`]). A participant that holds the write lock may take the read lock
/// (downgrade, as Curator allows): the read node gets the *writer's* sequence number, so
/// writers queued behind keep waiting until the read lock is released too, and the read hold
/// keeps the write hold's fencing token (tokens never go backwards). A participant that holds
/// only the read lock and asks for the write lock gets [`Error::WouldDeadlock`] at once (the
/// write lock would wait for that very read lock forever).
///
/// The downgrade read node is a non-sequential `_c_<uuid>-__READ__<writer's number>` in Curator
/// mode (what Curator 5.5+ creates; Curator 5.4 and older create a sequential read node there,
/// which lets a queued writer in early, CURATOR-621) and `<hex>__rlock__<writer's number>` in
/// kazoo mode (kazoo itself has no downgrade: its `ReadLock` waits for the thread's own
/// `WriteLock`; kazoo's writers do count this node, so they keep waiting for it).
///
/// Nodes are named per protocol: Curator `_c_<uuid>-__WRIT__<seq>` / `_c_<uuid>-__READ__<seq>`,
/// kazoo `<hex>__lock__<seq>` / `<hex>__rlock__<seq>`, so Curator's
/// `InterProcessReadWriteLock` or kazoo's `WriteLock`/`ReadLock` can share the path.
///
/// ```no_run
/// use zklock::{Client, Options, ReadWriteLock};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let rw = ReadWriteLock::new(&client, "/locks/catalog")?;
/// {
///     let _r = rw.read().lock()?; // shared with other readers
/// }
/// let w = rw.write().lock()?; // exclusive
/// let r = rw.read().lock()?; // downgrade: allowed while holding the write lock
/// drop(w); // now only reading; writers still wait for `r`
/// drop(r);
/// # Ok::<(), zklock::Error>(())
/// ```
pub struct ReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("path", &self.path())
            .finish()
    }
}

/// The shared half of a [`ReadWriteLock`]. Clones share the same holds (reentrancy counts).
pub type ReadLock = Lock<RawReadLock>;

/// The exclusive half of a [`ReadWriteLock`]. Clones share the same holds (reentrancy counts).
pub type WriteLock = Lock<RawWriteLock>;

/// Holds the read lock; releases on drop (on the thread that acquired it).
pub type ReadGuard<'a> = Guard<'a, ReadLock>;

/// Holds the write lock; releases on drop (on the thread that acquired it).
pub type WriteGuard<'a> = Guard<'a, WriteLock>;

impl ReadWriteLock {
    /// A read-write lock at `path`, named with the client's protocol. Holds nothing yet.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed path.
    pub fn new(client: &Client, path: &str) -> Result<ReadWriteLock> {
        ReadWriteLock::with_protocol(client, path, client.protocol())
    }

    /// A read-write lock at `path` whose nodes are named per `protocol`.
    pub fn with_protocol(client: &Client, path: &str, protocol: Protocol) -> Result<ReadWriteLock> {
        ReadWriteLock::make(client, path, protocol, Owner::Thread)
    }

    /// A read-write lock whose participant is this lock (both halves), not the calling thread:
    /// any thread may release what another acquired, and reentrancy counts per lock (the C
    /// API's rule).
    pub fn per_handle(client: &Client, path: &str) -> Result<ReadWriteLock> {
        ReadWriteLock::make(client, path, client.protocol(), Owner::Handle)
    }

    fn make(
        client: &Client,
        path: &str,
        protocol: Protocol,
        owner: Owner,
    ) -> Result<ReadWriteLock> {
        let core = Arc::new(Core {
            read: Queue::new(client, path, protocol)?,
            write: Queue::new(client, path, protocol)?,
        });
        let holds = |what| {
            Arc::new(Holds::new(
                owner,
                Policy::Reentrant,
                format!("the {what} at {path}"),
            ))
        };
        let (read_holds, write_holds) = (holds("read lock"), holds("write lock"));
        let read = RawReadLock {
            core: core.clone(),
            write: Arc::downgrade(&write_holds),
        };
        let write = RawWriteLock {
            core,
            read: Arc::downgrade(&read_holds),
        };
        Ok(ReadWriteLock {
            read: Lock::with_holds(read, read_holds),
            write: Lock::with_holds(write, write_holds),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.read.raw.core.read.path
    }

    /// The shared (read) half.
    pub fn read(&self) -> &ReadLock {
        &self.read
    }

    /// The exclusive (write) half.
    pub fn write(&self) -> &WriteLock {
        &self.write
    }

    /// An owned handle on the read half (shares holds with this lock).
    pub fn read_lock(&self) -> ReadLock {
        self.read.clone()
    }

    /// An owned handle on the write half (shares holds with this lock).
    pub fn write_lock(&self) -> WriteLock {
        self.write.clone()
    }

    /// Ends the acquires under way on either half with [`Error::Cancelled`]; if neither half
    /// has one under way, both remember the cancel (each half's next acquire returns
    /// `Cancelled` at once; [`ReadWriteLock::reset_cancel`] forgets it).
    pub fn cancel(&self) {
        CancelToken::cancel_pair(&self.read.cancel, &self.write.cancel);
    }

    /// [`Lockable::reset_cancel`] on both halves; true if either remembered a cancel.
    pub fn reset_cancel(&self) -> bool {
        let r = self.read.reset_cancel();
        self.write.reset_cancel() | r
    }

    /// The queue, in order, with holder ids; `is_holder` marks the readers and the writer that
    /// hold the lock now, `is_reader` the shared participants.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.read.participants()
    }
}

impl Revokes for RawReadLock {}

impl Recipe for RawReadLock {
    fn revocable_front(lock: &Lock<Self>) -> Option<&dyn Revocable> {
        Some(lock)
    }

    type GuardMarker = GuardNoSend;
    const NAME: &'static str = "ReadLock";

    fn path(&self) -> &str {
        &self.core.read.path
    }

    fn client(&self) -> &Client {
        &self.core.read.client
    }

    /// A participant holding the write lock downgrades; any other queues as a reader.
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>> {
        if let Some(w) = self.write.upgrade().and_then(|h| h.hold(None)) {
            if w.state() == HoldState::Lost {
                return Err(Error::LockLost);
            }
            return self.core.downgrade(&w, d).map(Some);
        }
        self.core.read.attempt(d, signal)
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        self.core.read.participants()
    }

    fn order_rank(&self) -> u8 {
        2
    }

    fn lock_id(&self) -> Option<usize> {
        Some(Arc::as_ptr(&self.core) as usize)
    }
}

impl Revokes for RawWriteLock {}

impl Recipe for RawWriteLock {
    fn revocable_front(lock: &Lock<Self>) -> Option<&dyn Revocable> {
        Some(lock)
    }

    type GuardMarker = GuardNoSend;
    const NAME: &'static str = "WriteLock";

    fn path(&self) -> &str {
        &self.core.read.path
    }

    fn client(&self) -> &Client {
        &self.core.read.client
    }

    /// Refuses an upgrade (the write lock would wait for the participant's own read lock);
    /// queues as a writer otherwise.
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>> {
        if self.read.upgrade().is_some_and(|h| h.count() > 0) {
            return Err(Error::WouldDeadlock(format!(
                "this participant holds the read lock of {}; a read lock cannot be upgraded to the write lock \
                 (the write lock would wait for this very read lock forever): release the read lock first",
                self.core.read.path
            )));
        }
        self.core.write.attempt(d, signal)
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        self.core.read.participants()
    }

    fn order_rank(&self) -> u8 {
        0
    }

    fn lock_id(&self) -> Option<usize> {
        Some(Arc::as_ptr(&self.core) as usize)
    }
}

impl Core {
    /// Write -> read downgrade: a non-sequential read node carrying the held write node's
    /// sequence number (as Curator 5.5+ does, CURATOR-621), held at once. Writers queued behind
    /// our write node count it (it has a lower number than theirs), readers ignore it. The read
    /// hold keeps the write hold's fencing token: the read node's own czxid is newer than writers
    /// queued behind, who must get larger tokens than this holder.
    fn downgrade(&self, write: &Hold, d: Deadline) -> Result<Hold> {
        let q = &self.read;
        let name = crate::path::name(&write.node);
        let read_name = node::downgrade_name(name, q.protocol).ok_or_else(|| {
            Error::ZooKeeper(format!("write lock node {name} has no sequence number").into())
        })?;
        let data = q.client.holder_id().as_bytes();
        let a = Attempt::on(&q.client, q.protocol, &write.session, d);
        let made = a.create(&q.path, &read_name, data, false, d)?;
        log::debug!("downgraded {} to the read node {}", write.node, made.name());
        // The read hold keeps the write hold's token.
        Ok(made.into_hold_with_token(write.token))
    }
}
