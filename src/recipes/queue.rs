//! The queue engine of the mutex, the semaphore mutex, the read-write halves and the
//! semaphore's guarding mutex: a participant's ephemeral-sequential node in a lock's queue, and
//! the acquire loop (create, list, watch the one node that blocks us, wait). Which node blocks
//! which is a recipe's [`Rules`].

use std::marker::PhantomData;
use std::sync::Arc;

use zookeeper_client as zk;

use super::attempt::{Attempt, Created, Made};
use super::front::Lock;
use super::guard::GuardNoSend;
use super::hold::Hold;
use super::lockable::Revocable;
use super::raw::{read_node, Participant, Recipe, Revokes};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{self, AttemptId, Contender, Kind, Protocol};
use crate::session::{Client, SendTime, Session, Via};
use crate::wait::Signal;

/// The earlier contender a participant must wait for, if any, and whether it is the only
/// contender ahead that blocks it.
pub(crate) type Blocker = fn(&[Contender], usize) -> Option<(usize, bool)>;

/// How one kind of participant queues: its node kind, who blocks it, and whether the deletion
/// of a sole blocker may mean "held" without listing again (only where the listing proves that
/// no node can appear ahead of ours: hold-model.md). Public in name only (sealed).
pub struct Rules {
    pub(crate) kind: Kind,
    pub(crate) blocker: Blocker,
    pub(crate) fast_handoff: bool,
}

impl Rules {
    /// The mutex (and the semaphore's guarding mutex): first in sequence holds.
    pub(crate) const EXCLUSIVE: Rules = Rules {
        kind: Kind::Lock,
        blocker: exclusive_blocker,
        fast_handoff: true,
    };
    /// A reader: the fast handoff is safe when its watched writer was the only earlier writer
    /// (writers are always sequential, so none can appear below it later).
    pub(crate) const READ: Rules = Rules {
        kind: Kind::Read,
        blocker: reader_blocker,
        fast_handoff: true,
    };
    /// A participant of a leader election: first in sequence leads, as in the mutex.
    pub(crate) const LATCH: Rules = Rules {
        kind: Kind::Latch,
        blocker: exclusive_blocker,
        fast_handoff: true,
    };
    /// A writer: no fast handoff (a downgrade read node gets an earlier writer's number, i.e.
    /// it can appear below a queued writer).
    pub(crate) const WRITE: Rules = Rules {
        kind: Kind::Write,
        blocker: writer_blocker,
        fast_handoff: false,
    };
}

/// The rules of a queue's participants, as a type: what makes `Queue<K>` a recipe.
pub trait QueueKind {
    /// How this kind queues.
    #[doc(hidden)]
    const RULES: Rules;
    /// The front's type name, as `{:?}` shows it.
    #[doc(hidden)]
    const NAME: &'static str = "Queue";
}

/// An exclusive participant (the semaphore's guarding mutex).
pub enum Exclusive {}

/// A reader of a read-write lock.
pub enum Reader {}

/// A writer of a read-write lock.
pub enum Writer {}

/// A participant of a leader election.
pub enum Latch {}

impl QueueKind for Exclusive {
    const RULES: Rules = Rules::EXCLUSIVE;
}

impl QueueKind for Reader {
    const RULES: Rules = Rules::READ;
}

impl QueueKind for Writer {
    const RULES: Rules = Rules::WRITE;
}

impl QueueKind for Latch {
    const RULES: Rules = Rules::LATCH;
    const NAME: &'static str = "LeaderElection";
}

/// Exclusive: blocked by the immediate predecessor; it is the only blocker iff it is first.
fn exclusive_blocker(_: &[Contender], idx: usize) -> Option<(usize, bool)> {
    if idx == 0 {
        None
    } else {
        Some((idx - 1, idx == 1))
    }
}

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

/// A lock's queue at one path, for participants of kind `K`: where their nodes go and how they
/// are named. With the kind's rules it is a recipe (the mutex is `Queue` under the exclusive
/// rules).
pub struct Queue<K> {
    pub(crate) client: Client,
    pub(crate) path: String,
    pub(crate) protocol: Protocol,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Queue<K> {
    fn clone(&self) -> Self {
        Queue {
            client: self.client.clone(),
            path: self.path.clone(),
            protocol: self.protocol,
            _kind: PhantomData,
        }
    }
}

/// What one create of a participant's node and the listing of its queue came to
/// ([`Queue::enter_with`]).
pub(crate) enum Entry {
    /// Our node, and the queue as listed after its create (`None`: the listing was lost, take
    /// it again).
    Made(Made, Option<Vec<String>>),
    /// The queue's parents are missing: nothing was made.
    NoParents,
    /// The create's reply was lost and no node of it was found: a node with its id is removed
    /// when it appears, and the next create needs a fresh id.
    Unknown,
}

impl<K> Queue<K> {
    pub(crate) fn new(client: &Client, path: &str, protocol: Protocol) -> Result<Queue<K>> {
        crate::path::validate_path(path)?;
        Ok(Queue {
            client: client.clone(),
            path: path.to_string(),
            protocol,
            _kind: PhantomData,
        })
    }

    pub(crate) fn child(&self, name: &str) -> String {
        format!("{}/{}", self.path, name)
    }

    /// Creates our node and lists the queue, pipelined: both requests leave before we wait for
    /// either, so this costs one round trip. Returns our node and the queue.
    fn create_and_list(&self, a: &Attempt, kind: Kind, d: Deadline) -> Result<(Made, Vec<String>)> {
        a.with_parents(&[&self.path], d, || loop {
            let (entry, ()) = self.enter_with(a, kind, d, || ());
            match entry? {
                Entry::Made(made, Some(children)) => return Ok(Some((made, children))),
                Entry::Made(made, None) => return Ok(Some((made, self.list(&a.session, d)?))),
                Entry::NoParents => return Ok(None),
                // The next create gets a fresh id.
                Entry::Unknown => {}
            }
        })
    }

    /// One try of [`Queue::create_and_list`], with more requests riding in its round trip:
    /// `ride` sends them right after our create and listing (a session's requests are applied
    /// in the order they are sent: after ours), and what it returns takes their replies once
    /// ours are in.
    pub(crate) fn enter_with<R>(
        &self,
        a: &Attempt,
        kind: Kind,
        d: Deadline,
        ride: impl FnOnce() -> R,
    ) -> (Result<Entry>, R) {
        let session = &a.session;
        // The create's id, fresh for every create whose earlier try may still be applied.
        let prefix = AttemptId::new().prefix(self.protocol, kind);
        let data = self.client.holder_id().as_bytes();
        let opts = self
            .client
            .create_options(zk::CreateMode::EphemeralSequential);
        let full_prefix = self.child(&prefix);
        let sent = SendTime::now();
        let create = session.zk.create(&full_prefix, data, &opts);
        let list = session.zk.list_children(&self.path);
        let riding = ride();
        // Replies come in request order: wait for the listing's first, and the create's is
        // then already in (this thread is woken once per round trip, not twice).
        let listed = session.call_sent(sent, Via::Server, list, d);
        let created = session.call_sent(sent, Via::Leader, create, d);
        // A listing is of the queue after our node only when the create was answered.
        let answered = created.is_ok();
        let entry = a
            .settle(&self.path, &prefix, true, created, d)
            .map(|c| match c {
                Created::Made(made) => Entry::Made(made, listed.ok().filter(|_| answered)),
                Created::NoParents => Entry::NoParents,
                Created::Unknown(_) => Entry::Unknown,
            });
        (entry, riding)
    }

    pub(crate) fn list(&self, session: &Session, d: Deadline) -> Result<Vec<String>> {
        match session.retry(d, || session.zk.list_children(&self.path)) {
            Ok(c) => Ok(c),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(session.record_end_and_map(e)),
        }
    }

    /// The queue: every contender with its holder id, in order.
    fn all_participants(&self) -> Result<Vec<Participant>> {
        let session = self.client.session()?;
        let d = session.one_call();
        let queue = node::contenders(self.list(&session, d)?);
        let futs: Vec<_> = queue
            .iter()
            .map(|c| session.zk.get_data(&self.child(&c.name)))
            .collect();
        let mut out = Vec::with_capacity(queue.len());
        for (i, (c, f)) in queue.iter().zip(futs).enumerate() {
            let read = session.call(f, d);
            let Some((data, created_ms, hidden)) =
                read_node(&session, &self.child(&c.name), read, d)?
            else {
                continue;
            };
            let (holder_id, revocable) = node::holder_parts(&data);
            let is_reader = node::is_reader(&c.name);
            let is_holder = if is_reader {
                reader_blocker(&queue, i).is_none()
            } else {
                writer_blocker(&queue, i).is_none()
            };
            out.push(Participant {
                node: c.name.clone(),
                sequence: c.seq,
                holder_id,
                hidden,
                is_holder,
                is_reader,
                created_ms,
                revocable,
            });
        }
        Ok(out)
    }
}

impl<K: QueueKind> Revokes for Queue<K> {}

impl<K: QueueKind> Recipe for Queue<K> {
    fn revocable_front(lock: &Lock<Self>) -> Option<&dyn Revocable> {
        Some(lock)
    }

    type GuardMarker = GuardNoSend;
    const NAME: &'static str = K::NAME;

    fn path(&self) -> &str {
        &self.path
    }

    fn client(&self) -> &Client {
        &self.client
    }

    /// The acquire loop: create our node, list, watch the one node that blocks us (by the
    /// kind's rules), wait, look again.
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>> {
        // This thread waits for every request it sends here (`session::waiting_caller`).
        let _caller = crate::session::waiting_caller();
        let a = Attempt::begin(&self.client, self.protocol, d, signal)?;
        self.attempt_in(&a)
    }

    fn participants(&self) -> Result<Vec<Participant>> {
        self.all_participants()
    }
}

impl<K: QueueKind> Queue<K> {
    /// [`Recipe::attempt`] within `a` (the semaphore's guarding mutex is a step of the
    /// semaphore's attempt).
    pub(crate) fn attempt_in(&self, a: &Attempt) -> Result<Option<Hold>> {
        // The first round trip runs to its answer even past a short deadline: a lock found
        // free in it is held (`Deadline::first_round`).
        let entered = self.create_and_list(a, K::RULES.kind, a.first_round())?;
        self.queue_from(a, entered)
    }

    /// Whether our node `name` holds by the kind's rules in `children` (a listing taken after its
    /// create): it is in the queue and nothing ahead of it blocks it.
    pub(crate) fn holds_in(&self, name: &str, children: Vec<String>) -> bool {
        let queue = node::contenders(children);
        queue
            .iter()
            .position(|c| c.name == name)
            .is_some_and(|idx| (K::RULES.blocker)(&queue, idx).is_none())
    }

    /// The rest of an attempt whose node is made and whose queue was listed after it
    /// (`entered`): held if nothing blocks it, else watch the one node that blocks it, wait,
    /// look again. Our node goes on every way out but the hold.
    pub(crate) fn queue_from(
        &self,
        a: &Attempt,
        entered: (Made, Vec<String>),
    ) -> Result<Option<Hold>> {
        let rules = &K::RULES;
        let (session, d) = (&a.session, a.d);
        let (mut mine, mut children) = entered;
        loop {
            let queue = node::contenders(children);
            let Some(idx) = queue.iter().position(|c| c.name == mine.name()) else {
                // Our node is gone although the session lives (deleted by hand): queue again.
                if let Some(e) = session.ended_error() {
                    return Err(e);
                }
                log::warn!("lock node {} vanished; queueing again", mine.name());
                mine.gone();
                (mine, children) = self.create_and_list(a, rules.kind, d)?;
                continue;
            };
            let Some((w, sole)) = (rules.blocker)(&queue, idx) else {
                return self.held(a, mine);
            };
            if a.try_once {
                return Ok(None);
            }
            // The no-relist handoff is safe only if nothing can appear ahead of us: a downgrade
            // read node (non-sequential, carrying an earlier writer's number) can, so it is off
            // when a node ahead could be a writer that downgrades. Readers are not blocked by
            // read nodes, so for them it always holds.
            let fast = rules.fast_handoff
                && sole
                && (rules.kind == Kind::Read
                    || !queue[..idx].iter().any(|c| node::may_downgrade(&c.name)));
            let target = self.child(&queue[w].name);
            // Keep nothing of the listing while we wait: it is O(queue length) per waiter, so
            // O(n²) memory for n waiters in one process.
            drop(queue);
            let watched = match session.call(session.zk.check_and_watch_stat(&target), d) {
                Ok((Some(_), watcher)) => Some(watcher),
                // Any connection trouble (the crate fails a request on a reset socket with the
                // socket's error, not ConnectionLoss): look again once reconnected.
                Ok((None, _)) => None,
                Err(e) if crate::session::is_retriable(&e) => None,
                Err(e) => return Err(session.record_end_and_map(e)),
            };
            if let Some(watcher) = watched {
                match session.wait_watch(watcher, d.instant(), &a.signal)? {
                    Some(zk::EventType::NodeDeleted) if fast => return self.held(a, mine),
                    Some(_) => {}
                    None => return Ok(None),
                }
            } else if d.passed() {
                return Ok(None);
            }
            children = self.list(session, d)?;
        }
    }

    /// Our node holds: the hold, unless a cancel came meanwhile (then the node goes: cancel
    /// works at any time).
    fn held(&self, a: &Attempt, mine: Made) -> Result<Option<Hold>> {
        if a.signal.is_cancelled() {
            return Err(a.session.ended_error().unwrap_or(Error::Cancelled));
        }
        Ok(Some(mine.into_hold()))
    }
}

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
