//! The fair, herd-free, reentrant read-write lock (Curator's `InterProcessReadWriteLock`
//! semantics, kazoo's `ReadLock`/`WriteLock` names in kazoo mode).

use std::sync::Arc;

use super::{
    queue_lockable, Begin, Guard, Hold, HoldState, Lock, Owner, Participant, Queue, QueueLock,
};
use crate::client::Client;
use crate::deadline::Deadline;
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
        .filter(|(_, c)| node::seq_before(c.seq, seq) && !node::is_reader(&c.name))
        .map(|(i, _)| i);
    let nearest = writers.next_back()?;
    Some((nearest, writers.next().is_none()))
}

/// Writer: blocked by its immediate predecessor, reader or writer. Contenders with the *same*
/// number (a downgrade read node made by this writer's holder) do not block it.
pub(crate) fn writer_blocker(queue: &[Contender], idx: usize) -> Option<(usize, bool)> {
    let seq = queue[idx].seq;
    let pred = queue[..idx]
        .iter()
        .rposition(|c| node::seq_before(c.seq, seq))?;
    Some((pred, pred == 0))
}

struct Core {
    path: String,
    protocol: Protocol,
    client: Client,
    read: QueueLock,
    write: QueueLock,
}

/// The recipe of [`ReadLock`]: the shared half (readers wait for the nearest earlier writer).
#[derive(Clone)]
pub struct RawReadLock {
    core: Arc<Core>,
}

/// The recipe of [`WriteLock`]: the exclusive half (writers wait for their predecessor).
#[derive(Clone)]
pub struct RawWriteLock {
    core: Arc<Core>,
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
pub type ReadGuard<'a> = Guard<'a, RawReadLock>;

/// Holds the write lock; releases on drop (on the thread that acquired it).
pub type WriteGuard<'a> = Guard<'a, RawWriteLock>;

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
            read: QueueLock::new(read_q, owner, true, "read lock"),
            write: QueueLock::new(write_q, owner, true, "write lock"),
        });
        Ok(ReadWriteLock {
            read: Lock::from_raw(RawReadLock { core: core.clone() }),
            write: Lock::from_raw(RawWriteLock { core }),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.read.raw.core.path
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
        self.read.cancel();
        self.write.cancel();
    }

    /// The queue, in order, with holder ids; `is_holder` marks the readers and the writer that
    /// hold the lock now, `is_reader` the shared participants.
    pub fn participants(&self) -> Result<Vec<Participant>> {
        self.read.participants()
    }
}

impl RawReadLock {
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        let core = &self.core;
        let ticket = match core.read.begin()? {
            Begin::Reentered(token) => return Ok(Some(token)),
            Begin::Fresh(t) => t,
        };
        if let Some(w) = core.write.holds.current() {
            if w.state() == HoldState::Lost {
                return Err(Error::LockLost);
            }
            return Ok(Some(ticket.complete(core.downgrade(&w, d)?)));
        }
        Ok(core
            .read
            .queue
            .acquire(d, &core.read.cancel)?
            .map(|h| ticket.complete(h)))
    }
}

impl RawWriteLock {
    fn acquire(&self, d: Deadline) -> Result<Option<i64>> {
        let core = &self.core;
        let ticket = match core.write.begin()? {
            Begin::Reentered(token) => return Ok(Some(token)),
            Begin::Fresh(t) => t,
        };
        if core.read.holds.count() > 0 {
            return Err(Error::WouldDeadlock(format!(
                "this participant holds the read lock of {}; a read lock cannot be upgraded to the write lock \
                 (the write lock would wait for this very read lock forever): release the read lock first",
                core.path
            )));
        }
        Ok(core
            .write
            .queue
            .acquire(d, &core.write.cancel)?
            .map(|h| ticket.complete(h)))
    }
}

queue_lockable!(RawReadLock, core.read, acquire, 2);
queue_lockable!(RawWriteLock, core.write, acquire, 0);

impl Core {
    /// Write -> read downgrade: a non-sequential read node carrying the held write node's
    /// sequence number (as Curator 5.5+ does, CURATOR-621), held at once. Writers queued behind
    /// our write node count it (it has a lower number than theirs), readers ignore it. The read
    /// hold keeps the write hold's fencing token: the read node's own czxid is newer than writers
    /// queued behind, who must get larger tokens than this holder.
    fn downgrade(&self, write: &Hold, d: Deadline) -> Result<Hold> {
        let marker = match self.protocol {
            Protocol::Curator => "__WRIT__",
            Protocol::Kazoo => "__lock__",
        };
        let name = crate::path::name(&write.node);
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
        let (made, _) = super::protected::create_ephemeral(
            &self.client,
            &write.session,
            &self.path,
            &read_name,
            data,
            false,
            d,
        )?;
        log::debug!("downgraded {} to the read node {made}", write.node);
        Ok(Hold::new(
            write.session.clone(),
            format!("{}/{made}", self.path),
            write.token,
        ))
    }
}

macro_rules! half_extras {
    ($lock:ident, $half:ident) => {
        impl $lock {
            /// How many times the calling participant holds this half (reentrancy count).
            pub fn hold_count(&self) -> usize {
                self.raw.core.$half.holds.count()
            }

            /// A token that cancels this half's waiting acquires from any thread.
            pub fn cancel_token(&self) -> CancelToken {
                self.raw.core.$half.cancel.clone()
            }
        }
    };
}
half_extras!(ReadLock, read);
half_extras!(WriteLock, write);

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
