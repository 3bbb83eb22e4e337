//! Who holds: a lock handle's participants and their holds, and the rules every recipe shares
//! (`docs/hold-model.md`): a second acquire while an attempt is under way is refused (never two
//! nodes for one participant), a reentrant acquire counts, a release removes only the hold it
//! releases. The front ([`Lock`](super::front::Lock)) keeps one table per handle.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::hold::{Hold, HoldState};
use super::revoke::Revocation;
use crate::error::{Error, Result};
use crate::stats::Stats;

/// Whose holds a table keeps apart: one participant per handle (C handles, the semaphore mutex,
/// the simple lock, the semaphore) or one per thread (the Rust `Mutex` and read-write halves,
/// as Curator's `InterProcessMutex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Handle,
    Thread,
}

/// One participant's key in a table: the handle, a thread, or one async acquire (its own
/// participant, whichever thread runs it: see [`as_participant`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Handle,
    Thread(ThreadId),
    Task(u64),
}

thread_local! {
    /// The async acquire this thread acts for (its participant, where the table is per thread).
    static TASK: Cell<Option<u64>> = const { Cell::new(None) };
}

/// A fresh participant for one async acquire and its hold.
pub(crate) fn new_task() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Runs `f` on this thread as participant `task` of every per-thread table (the Rust `Mutex`,
/// the read-write halves): an async acquire is its own participant, not the thread that runs
/// it, so its owned guard may answer for and release its hold from any thread. Per-handle
/// tables are not affected.
pub(crate) fn as_participant<T>(task: u64, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<u64>);
    impl Drop for Reset {
        fn drop(&mut self) {
            TASK.with(|t| t.set(self.0));
        }
    }
    let _reset = Reset(TASK.with(|t| t.replace(Some(task))));
    f()
}

/// How many holds one participant may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// One hold, taken again by counting (the mutex, the read-write halves).
    Reentrant,
    /// One hold; a second acquire is refused (the semaphore mutex, the simple lock).
    Once,
    /// Up to this many holds at once, each its own (the semaphore's leases): one more than that
    /// could only wait for the participant itself.
    Leases(usize),
}

/// One participant's holds (most recent last) and its attempts under way.
#[derive(Default)]
struct Entry {
    held: Vec<Hold>,
    /// The reentrant count of the one hold (`Policy::Reentrant`).
    depth: usize,
    acquiring: usize,
    /// Attempts of the participant whose caller has gone (a dropped async acquire), until they
    /// have ended and given back what they took: an acquire they would refuse waits for them.
    abandoned: usize,
}

impl Entry {
    /// Nothing held, under way or being given back: the entry may go.
    fn idle(&self) -> bool {
        self.held.is_empty() && self.acquiring == 0 && self.abandoned == 0
    }
}

/// The holds of one lock handle's participants.
pub(crate) struct Holds {
    owner: Owner,
    policy: Policy,
    /// The lock, in words, for errors ("the mutex at /locks/a").
    what: String,
    entries: parking_lot::Mutex<HashMap<Key, Entry>>,
    /// Signalled when an abandoned attempt has settled.
    settled: parking_lot::Condvar,
    /// The handle's statistics (counted by the front's acquire and by every release).
    pub(crate) stats: Stats,
    /// Whether its holds are revocable, and the requests seen.
    revocation: Arc<Revocation>,
}

/// How an acquire starts.
pub(crate) enum Begin<'a> {
    /// The participant already held it (reentrant): the count went up; this is the hold. Its
    /// lease is not proven yet: the count goes down again if it cannot be (a hold counted again
    /// is a success only if `Held` when the acquire returns, as a fresh one).
    Reentered(Hold),
    /// A fresh attempt: complete it with the hold it makes, or drop it.
    Fresh(Ticket<'a>),
}

/// A participant's attempt under way. Dropped without a hold, it lets the next attempt start.
pub(crate) struct Ticket<'a> {
    holds: &'a Holds,
    key: Key,
    started: Instant,
    done: bool,
}

impl Ticket<'_> {
    /// Records the attempt's hold; returns its fencing token.
    pub(crate) fn complete(mut self, hold: Hold) -> i64 {
        let token = hold.token;
        log::debug!(
            "acquired {} after waiting {:?} (fencing token {token})",
            hold.node,
            self.started.elapsed()
        );
        let watch = self.holds.revocation.enabled().then(|| hold.clone());
        {
            let mut entries = self.holds.entries.lock();
            let e = entries.entry(self.key).or_default();
            e.acquiring -= 1;
            e.held.push(hold);
            e.depth = 1;
        }
        self.done = true;
        if let Some(h) = watch {
            self.holds.revocation.watch(&h);
        }
        token
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut entries = self.holds.entries.lock();
            if let Some(e) = entries.get_mut(&self.key) {
                e.acquiring -= 1;
                if e.idle() {
                    entries.remove(&self.key);
                }
            }
        }
    }
}

impl Holds {
    pub(crate) fn new(owner: Owner, policy: Policy, what: String) -> Holds {
        Holds {
            owner,
            policy,
            what,
            entries: parking_lot::Mutex::new(HashMap::new()),
            settled: parking_lot::Condvar::new(),
            stats: Default::default(),
            revocation: Default::default(),
        }
    }

    fn key(&self) -> Key {
        match (self.owner, TASK.with(Cell::get)) {
            (Owner::Handle, _) => Key::Handle,
            (Owner::Thread, Some(task)) => Key::Task(task),
            (Owner::Thread, None) => Key::Thread(std::thread::current().id()),
        }
    }

    /// The calling participant's attempt under way was abandoned by its caller (a dropped
    /// async acquire): until [`Holds::settle_abandoned`], an acquire of the participant that
    /// would be refused for it waits instead (a retry right after a cancel is not refused).
    pub(crate) fn abandon(&self) {
        self.entries.lock().entry(self.key()).or_default().abandoned += 1;
    }

    /// An abandoned attempt of the calling participant has ended and given back what it took.
    pub(crate) fn settle_abandoned(&self) {
        let key = self.key();
        let mut entries = self.entries.lock();
        if let Some(e) = entries.get_mut(&key) {
            e.abandoned -= 1;
            if e.idle() {
                entries.remove(&key);
            }
        }
        self.settled.notify_all();
    }

    /// Starts an acquire of the calling participant, by the table's policy.
    pub(crate) fn begin(&self) -> Result<Begin<'_>> {
        let what = &self.what;
        let key = self.key();
        let mut entries = self.entries.lock();
        // An attempt its caller abandoned may still be under way, or giving back what it took:
        // wait for it rather than refuse for it (it ends promptly: it was cancelled).
        while entries.get(&key).is_some_and(|e| {
            e.abandoned > 0
                && match self.policy {
                    Policy::Leases(max) => e.held.len() + e.acquiring >= max,
                    Policy::Once => e.acquiring > 0 || !e.held.is_empty(),
                    Policy::Reentrant => e.acquiring > 0,
                }
        }) {
            self.settled.wait(&mut entries);
        }
        let e = entries.entry(key).or_default();
        if let Some(forked) = e.held.first().and_then(|h| h.session.forked()) {
            // A forked child: its holds are the parent's, and so is any answer about them.
            return Err(forked);
        }
        match self.policy {
            Policy::Leases(max) if e.held.len() + e.acquiring >= max => {
                return Err(Error::WouldDeadlock(format!(
                    "this handle's own leases (and acquires under way) already fill all {max} of \
                     {what}: the acquire could only wait for itself"
                )));
            }
            Policy::Leases(_) => {}
            _ if e.acquiring > 0 => {
                return Err(Error::WouldDeadlock(format!(
                    "an acquire of {what} is already under way for this participant"
                )));
            }
            Policy::Once if !e.held.is_empty() => {
                return Err(Error::WouldDeadlock(format!(
                    "{what} is already held by this handle and is not reentrant"
                )));
            }
            Policy::Reentrant if !e.held.is_empty() => {
                let hold = &e.held[0];
                if hold.state() == HoldState::Lost {
                    return Err(Error::LockLost);
                }
                e.depth += 1;
                return Ok(Begin::Reentered(hold.clone()));
            }
            _ => {}
        }
        e.acquiring += 1;
        Ok(Begin::Fresh(Ticket {
            holds: self,
            key,
            started: Instant::now(),
            done: false,
        }))
    }

    /// Releases one hold of the calling participant: the one with fencing token `token`, or
    /// its most recent (None). The last of a reentrant count deletes the node through the one
    /// release path. `NotHeld` if there is no such hold.
    pub(crate) fn release(&self, token: Option<i64>) -> Result<()> {
        match self.take(token)? {
            Some(hold) => self.finish_release(hold),
            None => Ok(()),
        }
    }

    /// [`Holds::release`] in two steps: takes the hold out of the table now (`Ok(None)` when
    /// only a reentrant count went down), for [`Holds::finish_release`] to delete its node,
    /// here or on another thread (an owned guard dropped in async code never blocks).
    pub(crate) fn take(&self, token: Option<i64>) -> Result<Option<Hold>> {
        let key = self.key();
        let mut entries = self.entries.lock();
        let Some(e) = entries.get_mut(&key) else {
            return Err(Error::NotHeld);
        };
        let Some(i) = (match token {
            None => e.held.len().checked_sub(1),
            Some(t) => e.held.iter().rposition(|h| h.token == t),
        }) else {
            return Err(Error::NotHeld);
        };
        if let Some(forked) = e.held[i].session.forked() {
            // A forked child: the hold is the parent's, nothing of it is released here.
            return Err(forked);
        }
        if self.policy == Policy::Reentrant && e.depth > 1 {
            e.depth -= 1;
            return Ok(None);
        }
        let hold = e.held.remove(i);
        if e.idle() {
            entries.remove(&key);
        }
        Ok(Some(hold))
    }

    /// Deletes the node of a hold taken out of the table, and counts it.
    pub(crate) fn finish_release(&self, hold: Hold) -> Result<()> {
        let acquired = hold.acquired;
        let r = hold.release();
        self.stats.hold_ended(acquired.elapsed(), &r);
        self.revocation.notify();
        r
    }

    /// Makes the participants' holds revocable from now on (the current holds too); `f` is
    /// called on each request, on a thread of its own.
    pub(crate) fn make_revocable(&self, f: Box<dyn Fn() + Send + Sync>) {
        let first = !self.revocation.enabled();
        self.revocation.enable(Arc::from(f));
        if first {
            let held: Vec<Hold> = self
                .entries
                .lock()
                .values()
                .flat_map(|e| e.held.iter().cloned())
                .collect();
            for h in held {
                self.revocation.watch(&h);
            }
        }
    }

    /// Waits until someone asks the calling participant's hold to be given up: `Ok(true)` if
    /// asked, `Ok(false)` at the timeout; `NotHeld` if it holds nothing (or let go meanwhile).
    pub(crate) fn wait_revoke_request(&self, timeout: Option<Duration>) -> Result<bool> {
        if !self.revocation.enabled() {
            return Err(Error::invalid(format!(
                "{} was not made revocable: nobody can ask it to let go",
                self.what
            )));
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        match self
            .revocation
            .wait(|| self.hold(None).map(|h| (h.node, h.token)), deadline)
        {
            Some(true) => Ok(true),
            Some(false) => Err(Error::NotHeld),
            None => Ok(false),
        }
    }

    /// The calling participant's hold with fencing token `token`, or its most recent (a copy:
    /// never wait while holding the table).
    pub(crate) fn hold(&self, token: Option<i64>) -> Option<Hold> {
        let entries = self.entries.lock();
        let held = &entries.get(&self.key())?.held;
        match token {
            None => held.last().cloned(),
            Some(t) => held.iter().rev().find(|h| h.token == t).cloned(),
        }
    }

    /// How many times the calling participant holds it: the reentrant count, or its holds.
    pub(crate) fn count(&self) -> usize {
        match self.entries.lock().get(&self.key()) {
            Some(e) if e.held.is_empty() => 0,
            Some(e) if self.policy == Policy::Reentrant => e.depth,
            Some(e) => e.held.len(),
            None => 0,
        }
    }
}

impl Drop for Holds {
    fn drop(&mut self) {
        for (_, e) in self.entries.get_mut().drain() {
            // In a forked child the holds are the parent's: forgotten, not released.
            for hold in e.held.into_iter().rev() {
                if hold.session.forked().is_none() {
                    let _ = hold.release();
                }
            }
        }
    }
}
