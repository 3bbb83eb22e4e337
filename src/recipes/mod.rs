//! The lock recipes. This file is only their face: every public name, once. The front is
//! `front`'s, the guard `guard`'s, the "any lock" trait `lockable`'s, the raw protocol trait
//! `raw`'s, who holds `participants`'s, what a hold is and how a node goes away `hold`'s, one
//! try at a lock and the nodes it makes `attempt`'s; the queue engine is `queue`; then one file
//! (or folder) per recipe.

mod attempt;
mod election;
mod fenced;
mod front;
mod guard;
mod hold;
mod lockable;
mod multi_lock;
mod mutex;
// The add-a-recipe example (src/recipes/raw.rs): compiled and run by the tests.
#[cfg(test)]
mod naive_lock;
mod owned;
mod participants;
mod queue;
mod raw;
mod revoke;
mod rwlock;
mod semaphore;
mod simple_lock;

pub use election::{LeaderElection, Leadership, RawLeaderElection};
pub(crate) use fenced::guarded_multi;
pub use fenced::{CreateMode, Op, OpResult};
pub use front::Lock;
pub use guard::Guard;
pub use hold::HoldState;
pub(crate) use lockable::revocable;
pub use lockable::{Lockable, Revocable};
pub(crate) use multi_lock::same_path_conflict;
#[allow(deprecated)]
pub use multi_lock::RawMultiLock;
pub use multi_lock::{MultiLock, MultiLockFailure, MultiLockGuard};
pub use mutex::{
    Mutex, MutexGuard, RawMutex, RawSemaphoreMutex, SemaphoreMutex, SemaphoreMutexGuard,
};
pub use owned::{AcquireFuture, AsyncLock, OwnedGuard};
pub use raw::Participant;
pub use rwlock::{
    RawReadLock, RawWriteLock, ReadGuard, ReadLock, ReadWriteLock, WriteGuard, WriteLock,
};
pub use semaphore::{Lease, LeaseSet, RawSemaphore, Semaphore};
pub use simple_lock::{RawSimpleLock, SimpleLock, SimpleLockGuard};
