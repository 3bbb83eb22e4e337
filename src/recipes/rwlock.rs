//! The fair, herd-free, reentrant read-write lock (Curator's `InterProcessReadWriteLock`
//! semantics, kazoo's `ReadLock`/`WriteLock` names in kazoo mode).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Acquired, HeldNode, HoldState, Participant, Queue, ThreadHolds};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::node::{self, AttemptId, Contender, Kind, Protocol};
use crate::wait::CancelToken;

/// Reader: blocked by the **nearest** earlier writer (any contender that is not a reader, with a
/// lower sequence number); it is the only blocker iff no other writer precedes it. A reader that
/// arrives behind a waiting writer therefore waits too (FIFO: writers never starve).
pub(crate) fn reader_blocker(queue: &[Contender], idx: usize) -> Option<(usize, bool)> {
    let seq = queue[idx].seq;
    let mut writers = queue[..idx]
        .iter()
        .enumerate()
        .filter(|(_, c)| c.seq < seq && !node::is_reader(&c.name))
        .map(|(i, _)| i);
    let nearest = writers.next_back()?;
    Some((nearest, writers.next().is_none()))
}

/// Writer: blocked by its immediate predecessor, reader or writer. Contenders with the *same*
/// number (a downgrade read node made by this writer's holder) do not block it.
pub(crate) fn writer_blocker(queue: &[Contender], idx: usize) -> Option<(usize, bool)> {
    let seq = queue[idx].seq;
    let pred = queue[..idx].iter().rposition(|c| c.seq < seq)?;
    Some((pred, pred == 0))
}

struct Core {
    path: String,
    protocol: Protocol,
    client: Client,
    read_q: Queue,
    write_q: Queue,
    reads: ThreadHolds,
    writes: ThreadHolds,
    read_cancel: CancelToken,
    write_cancel: CancelToken,
}

/// A fair (FIFO by sequence), herd-free, reentrant distributed read-write lock.
///
/// Readers share, writers exclude. A reader waits only for the nearest earlier writer, a writer
/// for its immediate predecessor, so each release wakes one waiter (or one batch of readers).
/// A reader that arrives behind a waiting writer waits for it: writers never starve.
///
/// Both halves are reentrant per thread. A thread that holds the write lock may take the read
/// lock (downgrade, as Curator allows): the read node gets the *writer's* sequence number, so
/// writers queued behind keep waiting until the read lock is released too. A thread that holds
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
            .field("path", &self.read.core.path)
            .finish()
    }
}

/// The shared half of a [`ReadWriteLock`]. Clones share the same holds (reentrancy counts).
#[derive(Clone)]
pub struct ReadLock {
    core: Arc<Core>,
}

/// The exclusive half of a [`ReadWriteLock`]. Clones share the same holds (reentrancy counts).
#[derive(Clone)]
pub struct WriteLock {
    core: Arc<Core>,
}

impl std::fmt::Debug for ReadLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadLock")
            .field("path", &self.core.path)
            .finish()
    }
}

impl std::fmt::Debug for WriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteLock")
            .field("path", &self.core.path)
            .finish()
    }
}

/// Holds the read lock; releases on drop (from the thread that acquired it).
#[must_use = "the lock is released when the guard is dropped"]
pub struct ReadGuard<'a> {
    lock: &'a ReadLock,
    token: i64,
    _not_send: PhantomData<*const ()>,
}

/// Holds the write lock; releases on drop (from the thread that acquired it).
#[must_use = "the lock is released when the guard is dropped"]
pub struct WriteGuard<'a> {
    lock: &'a WriteLock,
    token: i64,
    _not_send: PhantomData<*const ()>,
}

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
        // Fast handoff (held on the watched node's deletion without listing again) is safe for a
        // reader whose watched writer was the only earlier writer: writers are always sequential,
        // so none can appear below us later. It is off for writers: a downgrade read node gets an
        // earlier writer's number, i.e. it can appear *below* a queued writer.
        let read_q = Queue::new(client, path, protocol, Kind::Read, reader_blocker, true)?;
        let write_q = Queue::new(client, path, protocol, Kind::Write, writer_blocker, false)?;
        let core = Arc::new(Core {
            path: path.to_string(),
            protocol,
            client: client.clone(),
            read_q,
            write_q,
            reads: ThreadHolds::default(),
            writes: ThreadHolds::default(),
            read_cancel: CancelToken::new(),
            write_cancel: CancelToken::new(),
        });
        Ok(ReadWriteLock {
            read: ReadLock { core: core.clone() },
            write: WriteLock { core },
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.read.core.path
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

    /// Cancels every waiting acquire of both halves now.
    pub fn cancel(&self) {
        self.read.core.read_cancel.cancel();
        self.read.core.write_cancel.cancel();
    }

    /// The queue, in order, with holder ids; `is_holder` marks the readers and the writer that
    /// hold the lock now, `is_reader` the shared participants.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        participants(&self.read.core)
    }
}

fn participants(core: &Core) -> Result<Vec<Participant>> {
    core.read_q.participants(|q, i| {
        if node::is_reader(&q[i].name) {
            reader_blocker(q, i).is_none()
        } else {
            writer_blocker(q, i).is_none()
        }
    })
}

impl Core {
    fn acquire_read(&self, deadline: Option<Instant>, try_once: bool) -> Result<Option<i64>> {
        if let Some(r) = self.reads.reenter() {
            return r.map(Some);
        }
        let write_hold = self.writes.held();
        if let Some(w) = write_hold {
            if w.state() == HoldState::Lost {
                return Err(Error::LockLost);
            }
            let h = self.downgrade(&w, deadline)?;
            let token = h.token;
            self.reads.insert(h);
            return Ok(Some(token));
        }
        match self.read_q.acquire(deadline, try_once, &self.read_cancel)? {
            Acquired::Held(h) => {
                let token = h.token;
                self.reads.insert(h);
                Ok(Some(token))
            }
            Acquired::NotAcquired => Ok(None),
        }
    }

    /// Write -> read downgrade: a non-sequential read node carrying the held write node's
    /// sequence number (as Curator 5.5+ does, CURATOR-621), held at once. Writers queued behind
    /// our write node count it (it has a lower number than theirs), readers ignore it.
    fn downgrade(&self, write: &HeldNode, deadline: Option<Instant>) -> Result<HeldNode> {
        let marker = match self.protocol {
            Protocol::Curator => "__WRIT__",
            Protocol::Kazoo => "__lock__",
        };
        let name = write.node.rsplit('/').next().unwrap_or_default();
        let seq = name
            .rfind(marker)
            .map(|i| &name[i + marker.len()..])
            .filter(|s| node::sequence(&format!("x{s}")).is_some())
            .ok_or_else(|| {
                Error::ZooKeeper(format!("write lock node {name} has no sequence number"))
            })?;
        let read_name = format!(
            "{}{seq}",
            AttemptId::new().prefix(self.protocol, Kind::Read)
        );
        let data = self.client.holder_id().as_bytes();
        let (made, token) = super::protected::create_ephemeral(
            &self.client,
            &write.session,
            &self.path,
            &read_name,
            data,
            false,
            deadline,
        )?;
        log::debug!("downgraded {} to the read node {made}", write.node);
        Ok(HeldNode::new(
            write.session.clone(),
            format!("{}/{made}", self.path),
            token,
        ))
    }

    fn acquire_write(&self, deadline: Option<Instant>, try_once: bool) -> Result<Option<i64>> {
        if let Some(r) = self.writes.reenter() {
            return r.map(Some);
        }
        if self.reads.count() > 0 {
            return Err(Error::WouldDeadlock(format!(
                "this thread holds the read lock of {}; a read lock cannot be upgraded to the write lock \
                 (the write lock would wait for this very read lock forever): release the read lock first",
                self.path
            )));
        }
        match self
            .write_q
            .acquire(deadline, try_once, &self.write_cancel)?
        {
            Acquired::Held(h) => {
                let token = h.token;
                self.writes.insert(h);
                Ok(Some(token))
            }
            Acquired::NotAcquired => Ok(None),
        }
    }
}

macro_rules! half_api {
    ($lock:ident, $guard:ident, $holds:ident, $cancel:ident, $acq:ident, $what:literal) => {
        impl $lock {
            /// The lock path.
            pub fn path(&self) -> &str {
                &self.core.path
            }

            #[doc = concat!("Blocks until the ", $what, " lock is held.")]
            pub fn lock(&self) -> Result<$guard<'_>> {
                self.core.$acq(None, false)?.map(|t| self.guard(t)).ok_or(Error::Timeout)
            }

            /// One attempt that never waits: `Ok(None)` if it is not free now (no node is left).
            pub fn try_lock(&self) -> Result<Option<$guard<'_>>> {
                Ok(self.core.$acq(None, true)?.map(|t| self.guard(t)))
            }

            /// Waits at most `timeout` in all: `Ok(None)` if not acquired by then (no node is left).
            pub fn try_lock_for(&self, timeout: Duration) -> Result<Option<$guard<'_>>> {
                match super::after(timeout) {
                    Some(d) => self.try_lock_until(d),
                    None => self.lock().map(Some),
                }
            }

            /// Waits until `deadline` at most (one total deadline, however many predecessors leave).
            pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<$guard<'_>>> {
                Ok(self.core.$acq(Some(deadline), false)?.map(|t| self.guard(t)))
            }

            /// Explicit acquire (for the C layer): `timeout` None waits forever, `Some(ZERO)`
            /// tries once. Returns whether it is held; release with `release` on the same thread.
            pub fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
                let (deadline, try_once) = super::plan(timeout);
                Ok(self.core.$acq(deadline, try_once)?.is_some())
            }

            /// Explicit acquire with an absolute deadline (None: forever); `try_once` never waits.
            pub fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
                Ok(self.core.$acq(deadline, try_once)?.is_some())
            }

            fn guard(&self, token: i64) -> $guard<'_> {
                $guard { lock: self, token, _not_send: PhantomData }
            }

            /// Releases one hold of the calling thread.
            ///
            /// # Errors
            /// [`Error::NotHeld`] if this thread does not hold it; [`Error::LockLost`] if the
            /// session ended while it was held (the hold is dropped); [`Error::ConnectionLoss`]
            /// if the node could not be deleted in time (still held: call again).
            pub fn release(&self) -> Result<()> {
                self.core.$holds.release()
            }

            /// Whether the calling thread holds it and its session is alive.
            pub fn is_held(&self) -> bool {
                self.hold_state() == HoldState::Held
            }

            /// The calling thread's hold, as far as can be known.
            pub fn hold_state(&self) -> HoldState {
                self.core.$holds.state()
            }

            /// The calling thread's fencing token (its node's creation zxid), if it holds.
            pub fn fencing_token(&self) -> Option<i64> {
                self.core.$holds.token()
            }

            /// How many times the calling thread holds it (reentrancy count).
            pub fn hold_count(&self) -> usize {
                self.core.$holds.count()
            }

            #[doc = concat!("Cancels the ", $what, " acquires waiting on this lock now.")]
            pub fn cancel(&self) {
                self.core.$cancel.cancel()
            }

            #[doc = concat!("A token that cancels this lock's waiting ", $what, " acquires from any thread.")]
            pub fn cancel_token(&self) -> CancelToken {
                self.core.$cancel.clone()
            }

            /// The whole queue (readers and writers), in order, with holder ids.
            pub fn participants(&self) -> Result<Vec<Participant>> {
                participants(&self.core)
            }
        }

        impl $guard<'_> {
            /// The fencing token: this hold's node creation zxid.
            pub fn fencing_token(&self) -> i64 {
                self.token
            }

            /// Whether the lock is still held (false once the session is known to have expired).
            pub fn is_held(&self) -> bool {
                self.lock.is_held()
            }

            /// Held, uncertain (disconnected), or lost.
            pub fn hold_state(&self) -> HoldState {
                self.lock.hold_state()
            }

            /// Blocks until the lock is lost or `timeout` (None: forever); true if lost.
            pub fn wait_lost(&self, timeout: Option<Duration>) -> bool {
                self.lock.core.$holds.with_hold(|h| h.wait_lost(timeout)).unwrap_or(true)
            }

            /// Calls `f` once, on another thread, when the lock is lost.
            pub fn on_lost(&self, f: impl FnOnce() + Send + 'static) {
                self.lock.core.$holds.with_hold(|h| h.on_lost(f));
            }

            /// Releases now and reports how it went (`Err(LockLost)` if it was lost meanwhile).
            pub fn unlock(self) -> Result<()> {
                let r = self.lock.release();
                std::mem::forget(self);
                r
            }
        }

        impl Drop for $guard<'_> {
            fn drop(&mut self) {
                self.lock.core.$holds.release_for_drop();
            }
        }
    };
}

half_api!(
    ReadLock,
    ReadGuard,
    reads,
    read_cancel,
    acquire_read,
    "read"
);
half_api!(
    WriteLock,
    WriteGuard,
    writes,
    write_cancel,
    acquire_write,
    "write"
);

#[cfg(test)]
mod tests {
    use super::*;

    fn q(names: &[&str]) -> Vec<Contender> {
        node::contenders(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn readers_wait_for_the_nearest_earlier_writer_only() {
        let queue = q(&[
            "_c_a-__READ__0000000001",
            "_c_b-__WRIT__0000000002",
            "_c_c-__READ__0000000003",
            "_c_d-__WRIT__0000000004",
            "_c_e-__READ__0000000005",
        ]);
        assert_eq!(reader_blocker(&queue, 0), None);
        assert_eq!(reader_blocker(&queue, 2), Some((1, true)));
        // Nearest writer (4), not the first (2); not the sole one.
        assert_eq!(reader_blocker(&queue, 4), Some((3, false)));
        // A kazoo writer or a plain mutex node blocks readers too (superset rule).
        let mixed = q(&["k__lock__0000000007", "x__rlock__0000000008"]);
        assert_eq!(reader_blocker(&mixed, 1), Some((0, true)));
    }

    #[test]
    fn writers_wait_for_the_immediate_predecessor() {
        let queue = q(&[
            "_c_a-__READ__0000000001",
            "_c_b-__READ__0000000002",
            "_c_c-__WRIT__0000000003",
        ]);
        assert_eq!(writer_blocker(&queue, 0), None);
        assert_eq!(writer_blocker(&queue, 2), Some((1, false)));
        assert_eq!(writer_blocker(&queue, 1), Some((0, true)));
    }

    #[test]
    fn a_downgrade_node_blocks_later_writers_but_not_its_writer_or_readers() {
        // Writer 5 holds and downgraded (read node with number 5); writer 6 queued; reader 7.
        let queue = q(&[
            "_c_w-__WRIT__0000000005",
            "_c_r-__READ__0000000005",
            "_c_v-__WRIT__0000000006",
            "_c_s-__READ__0000000007",
        ]);
        let w = queue
            .iter()
            .position(|c| c.name.starts_with("_c_w"))
            .unwrap();
        let r = queue
            .iter()
            .position(|c| c.name.starts_with("_c_r"))
            .unwrap();
        assert_eq!(writer_blocker(&queue, w), None);
        assert_eq!(reader_blocker(&queue, r), None);
        assert_eq!(writer_blocker(&queue, 2).map(|b| b.0), Some(1));
        assert_eq!(reader_blocker(&queue, 3), Some((2, false)));
        // Once the writer released, the downgrade node still holds and blocks writer 6.
        let after = q(&["_c_r-__READ__0000000005", "_c_v-__WRIT__0000000006"]);
        assert_eq!(reader_blocker(&after, 0), None);
        assert_eq!(writer_blocker(&after, 1), Some((0, true)));
    }
}
