//! What a recipe is to the front: its protocol only (as `lock_api::RawMutex` is to
//! `lock_api::Mutex`). Who holds, reentrancy, cancel, statistics, revocation and the guard are
//! the front's ([`Lock`](super::front::Lock)); a recipe makes one attempt and answers who is
//! queued. The trait is sealed: public in name (the front's bounds name it), reachable by no
//! user.
//!
//! # Adding a recipe
//!
//! The Rust half is lock_api's three steps: a raw type, its protocol ([`Recipe`]), and the
//! front as a type alias over [`Lock`](super::front::Lock). A toy, a lock that never waits
//! (a queue node, held if it is first; a real recipe waits until its deadline: see the
//! mutex's [`Queue`](super::queue::Queue), or [`RawSimpleLock`](super::simple_lock::RawSimpleLock)
//! for one node at the path). Its one create is the [`Attempt`](super::attempt::Attempt)'s:
//! parents, a lost reply found again by the create's id, and the node removed on every way out
//! but the hold are written there once. This is `src/recipes/naive_lock.rs`, which the tests
//! compile and run against a real server:
//!
#![doc = concat!("```ignore\n", include_str!("naive_lock.rs"), "```\n")]
//! Then the other doors, each a few lines copied from the simple lock's (grep for
//! `simple_lock` / `SimpleLock` / `Simple`):
//!
//! 1. **Rust names.** `mod naive_lock;` and `pub use naive_lock::{NaiveLock, NaiveLockGuard,
//!    RawNaiveLock};` in `src/recipes/mod.rs`, and the same names in `src/lib.rs`'s
//!    `pub use recipes::{..}`. Doc comment and a `no_run` example on the type alias.
//! 2. **C constructor.** `zkl_naive_lock_new` in `src/ffi/constructors.rs`: one line,
//!    `new_lock(client, path, out_lock, NaiveLock::new)`, under a doc comment of the house form
//!    (what it makes; "On ZKL_OK, *out_lock owns..."; "Never blocks. Any thread."; a
//!    "Pointers:" paragraph). `src/ffi/mod.rs` re-exports whole modules: no list to update.
//!    Build once with `--features header` and commit the regenerated `include/zklock.h`.
//! 3. **The C contract.** Its declaration, with the version mark, in `docs/c-api.md`'s list of
//!    constructors: `tests/it/ffi_symbols.rs` checks that the document, the header and the
//!    library's symbols name the same functions.
//! 4. **The command.** A `Kind` and its flag in `src/bin/zklock/cli.rs` (and the flag in the
//!    list of kinds `quiet` is given), the constructor in the `match` that makes the lock in
//!    `src/bin/zklock/main.rs`; then `zklock --man > man/zklock.1` (`tests/it/cli.rs` checks it).
//! 5. **Python.** The signature in `_SIGNATURES` (`"zkl_naive_lock_new": (_status, [_client_p,
//!    c_char_p, POINTER(_lock_p)])`) and a `Client.naive_lock(path)` method
//!    (`self._make("naive_lock", _lib.zkl_naive_lock_new, path)`) in
//!    `bindings/python/src/zklock/`.
//! 6. **C++.** `Lock naive_lock(const std::string& path) { return make(zkl_naive_lock_new,
//!    path); }` in `zklock::Client` (`include/zklock.hpp`).
//! 7. **A C example.** `ffi-examples/c/naive_lock.c` (as `simple_lock.c`: connect, make,
//!    acquire, release, free), and its name in `C_EXAMPLES` of `tests/it/ffi_examples.rs` (built
//!    with warnings as errors, run against a real server, and once under valgrind).
//! 8. **Tests**, against real servers (`tests/it/common`: `server()`, `connect()`,
//!    `unique_path()`; never a mock): `tests/naive_lock.rs` for the protocol (exclusion, a
//!    failed attempt leaves no node, loss on expiry); the recipe's row in
//!    `tests/it/exclusion.rs`'s and `tests/it/deadline.rs`'s tables; a Python test in
//!    `bindings/python/tests/test_zklock.py`; a command test in `tests/it/cli.rs`.
//! 9. **The words.** README's list of recipes, `CHANGELOG.md`, and `docs/hold-model.md` if the
//!    participant is not the handle.

use std::sync::Arc;

use super::front::Lock;
use super::hold::Hold;
use super::lockable::Revocable;
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
    /// revocable ([`make_revocable`](crate::Revocable::make_revocable), `zklock --revocable`)
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

    /// The front as [`Revocable`] if this recipe [`Revokes`] (each such recipe says
    /// `Some(lock)`): what `Lockable::as_revocable` answers.
    #[doc(hidden)]
    fn revocable_front(lock: &Lock<Self>) -> Option<&dyn Revocable>
    where
        Self: Sized,
    {
        let _ = lock;
        None
    }

    /// The most holds one acquire may take at once (the semaphore's leases: its N); `None`
    /// for a recipe that takes one per acquire.
    fn max_per_acquire(&self) -> Option<usize> {
        None
    }

    /// One attempt at `n` holds at once, all or none, as [`Recipe::attempt`] (only a recipe
    /// with [`Recipe::max_per_acquire`] has one).
    fn attempt_many(
        &self,
        n: usize,
        d: Deadline,
        signal: &Arc<Signal>,
    ) -> Result<Option<Vec<Hold>>> {
        let _ = (n, d, signal);
        Err(crate::error::Error::invalid(format!(
            "the lock at {} takes one hold per acquire",
            self.path()
        )))
    }
}

/// A recipe whose holders can be asked to let go (Curator's revocation): its front is
/// [`Revocable`]. Sealed, as [`Recipe`].
pub trait Revokes: Recipe {}
