//! What a recipe is to the front: its protocol only (as `lock_api::RawMutex` is to
//! `lock_api::Mutex`). Who holds, reentrancy, cancel, statistics, revocation and the guard are
//! the front's ([`Lock`](super::front::Lock)); a recipe makes one attempt and answers who is
//! queued. The trait is sealed: public in name (the front's bounds name it), reachable by no
//! user.

use std::sync::Arc;

use super::hold::Hold;
use crate::deadline::Deadline;
use crate::error::Result;
use crate::session::Client;
use crate::wait::Signal;

/// One contender in a lock's queue, as `participants()` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participant {
    /// The node's name (a child of the lock path).
    pub node: String,
    /// The sequence number the server gave it (queue order).
    pub sequence: i64,
    /// The holder id stored in the node (empty if the node had no UTF-8 data, or if its ACL
    /// hides it: see `hidden`).
    pub holder_id: String,
    /// Whether the node's ACL does not let this client read it (a creator-only ACL of another
    /// identity): its place in the queue is known, its holder id is not (empty).
    pub hidden: bool,
    /// Whether this participant holds the lock now.
    pub is_holder: bool,
    /// Whether it is a reader (shared) node of a read-write lock.
    pub is_reader: bool,
    /// When its node was created, by the server's clock, in milliseconds since the Unix epoch
    /// (how long it has been queued or holding: `zklock holders --watch` shows it).
    pub created_ms: i64,
    /// Whether its holder listens for revocation requests: a zklock holder that made its lock
    /// revocable ([`make_revocable`](crate::Lockable::make_revocable), `zklock --revocable`)
    /// marks its node so. A Curator holder's `makeRevocable` leaves no mark: false does not
    /// prove that one will not hear.
    pub revocable: bool,
}

/// A node's data and creation time (ms) from `read` (its `get_data`), `hidden` when its ACL
/// refuses this client a read (then the data is empty: the stat, which needs no permission,
/// gives the time), None when the node is gone.
pub(crate) fn read_node(
    session: &crate::session::Session,
    path: &str,
    read: std::result::Result<(Vec<u8>, zookeeper_client::Stat), zookeeper_client::Error>,
    d: Deadline,
) -> Result<Option<(Vec<u8>, i64, bool)>> {
    use zookeeper_client::Error as Z;
    match read {
        Ok((data, stat)) => Ok(Some((data, stat.ctime, false))),
        Err(Z::NoNode) => Ok(None),
        Err(Z::NoAuth) => match session.call(session.zk.check_stat(path), d) {
            Ok(stat) => Ok(stat.map(|s| (Vec::new(), s.ctime, true))),
            Err(e) => Err(session.record_end_and_map(e)),
        },
        Err(e) => Err(session.record_end_and_map(e)),
    }
}

/// A lock protocol: the raw half of a [`Lock`](super::front::Lock).
pub trait Recipe: Send + Sync {
    /// Whether a guard of this recipe may go to another thread: [`GuardSend`] if its
    /// participant is the handle whatever it was made with (the semaphore), [`GuardNoSend`] if
    /// it may be the thread.
    ///
    /// [`GuardSend`]: super::guard::GuardSend
    /// [`GuardNoSend`]: super::guard::GuardNoSend
    #[doc(hidden)]
    type GuardMarker;

    /// The front's type name, as `{:?}` shows it ("Mutex").
    #[doc(hidden)]
    const NAME: &'static str;

    /// The lock path.
    fn path(&self) -> &str;

    /// The client its sessions come from.
    fn client(&self) -> &Client;

    /// One attempt of a participant that holds nothing yet: `Ok(Some(hold))` held, `Ok(None)`
    /// not by `d` (nothing of the attempt is left on the server then, nor on any error). A
    /// cancel of `signal` ends it with `Error::Cancelled` at any time.
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>>;

    /// The queue, in order, with each participant's holder id.
    fn participants(&self) -> Result<Vec<Participant>>;

    /// The node whose children change with the queue (the lock path unless said otherwise).
    fn queue_path(&self) -> String {
        self.path().to_string()
    }

    /// The multi-lock's tie-break between locks on one path (write 0, others 1, read 2).
    fn order_rank(&self) -> u8 {
        1
    }

    /// What tells this lock from another on the same path, if not its handle's holds (the two
    /// halves of one read-write lock: their shared core).
    fn lock_id(&self) -> Option<usize> {
        None
    }

    /// Whether holders may be asked to let go (Curator's revocation).
    fn revocable(&self) -> bool {
        true
    }
}
