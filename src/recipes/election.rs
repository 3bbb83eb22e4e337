//! The leader election: Curator's `LeaderLatch` layout (kazoo's `Election`, a kazoo lock, under
//! the kazoo protocol), led by the first in sequence, with the lease of every hold. Only its
//! rules are here: the queue is the mutex's engine under [`Latch`]'s naming, the participant
//! the handle, and the leadership a hold.

use std::time::Duration;

use super::front::Lock;
use super::guard::Guard;
use super::lockable::Lockable;
use super::participants::{Owner, Policy};
use super::queue::{Latch, Queue};
use super::raw::Participant;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::Protocol;
use crate::session::Client;

/// The protocol of [`LeaderElection`]: the mutex's queue, its nodes named as Curator's
/// `LeaderLatch` names them (`_c_<id>-latch-<n>`; kazoo's lock nodes under the kazoo protocol).
pub type RawLeaderElection = Queue<Latch>;

/// A leader election that cannot have two leaders at once: one participant per handle, the
/// first in the queue leads, and it is the leader ([`is_leader`](LeaderElection::is_leader))
/// only while its lease is provably alive (`docs/hold-model.md`): false before the servers
/// could hand the leadership on, whatever the network does. Each leadership has a **term**,
/// its node's creation zxid: strictly greater than every earlier leader's, so a leader's writes
/// elsewhere can carry it and be refused once a later leader wrote.
///
/// Laid out as Curator's `LeaderLatch`: Curator participants on the same path wait behind a
/// zklock leader and report it through their own API (`getLeader()`), and the other way round.
/// Under the kazoo protocol it is a kazoo lock, which kazoo's `Election` is.
///
/// ```no_run
/// use zklock::{Client, Deadline, LeaderElection, Options};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let election = LeaderElection::new(&client, "/elections/scheduler")?;
/// let term = election.await_leadership(Deadline::Forever)?.expect("no deadline");
/// while election.is_leader() {
///     // lead, writing `term` beside every write the leadership protects
///     # break;
/// }
/// election.relinquish()?;
/// # let _ = term;
/// # Ok::<(), zklock::Error>(())
/// ```
pub type LeaderElection = Lock<RawLeaderElection>;

/// A leadership of a [`LeaderElection`] as a guard; relinquished on drop.
pub type Leadership<'a> = Guard<'a, LeaderElection>;

impl LeaderElection {
    /// A participant of the election at `path`, laid out per the client's protocol. It joins
    /// when it first waits for leadership.
    pub fn new(client: &Client, path: &str) -> Result<LeaderElection> {
        LeaderElection::with_protocol(client, path, client.protocol())
    }

    /// A participant of the election at `path` whose node is named per `protocol`.
    pub fn with_protocol(
        client: &Client,
        path: &str,
        protocol: Protocol,
    ) -> Result<LeaderElection> {
        Ok(Lock::from_raw(
            Queue::new(client, path, protocol)?,
            Owner::Handle,
            Policy::Once,
            "leader election",
        ))
    }

    /// Joins the election and waits until this participant leads, or `deadline`: the term
    /// (`Ok(None)` when the deadline passed: it left the queue again). A leadership is
    /// returned only while it is provably alive, as every acquire's hold.
    pub fn await_leadership(&self, deadline: Deadline) -> Result<Option<i64>> {
        self.acquire(deadline)
    }

    /// Whether this participant leads now: its leadership's lease is provably alive. False as
    /// soon as it is not (cut off from the servers, its session reconnecting or expired), before
    /// the servers could let another participant lead.
    pub fn is_leader(&self) -> bool {
        self.is_held()
    }

    /// The term of this participant's leadership, if it leads or led and has not relinquished
    /// (see [`is_leader`](LeaderElection::is_leader) for whether it still does).
    pub fn term(&self) -> Option<i64> {
        self.fencing_token().ok()
    }

    /// Calls `f` once, on another thread, when this leadership stops being believed.
    pub fn on_leadership_lost(&self, f: impl FnOnce() + Send + 'static) {
        self.on_lost(Box::new(f))
    }

    /// Gives the leadership up (or leaves the queue): the next participant leads.
    pub fn relinquish(&self) -> Result<()> {
        self.release()
    }

    /// Every participant in queue order; the leader is the one with `is_holder`.
    pub fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants()?.into_iter().find(|p| p.is_holder))
    }

    /// How long the leadership stays provably alive if the servers went silent now.
    pub fn leadership_remaining(&self) -> Option<Duration> {
        self.lease_remaining()
    }
}
