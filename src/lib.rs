//! # zklock
//!
//! Distributed locks on Apache ZooKeeper, as blocking Rust calls and through a C ABI.
//!
//! ```no_run
//! use std::time::Duration;
//! use zklock::{Client, Options, Mutex};
//!
//! let client = Client::connect("127.0.0.1:2181", Options::default()).unwrap();
//! let mutex = Mutex::new(&client, "/locks/orders").unwrap();
//! {
//!     let guard = mutex.lock().unwrap();
//!     println!("holding with fencing token {}", guard.fencing_token());
//! } // released here
//! if let Some(_guard) = mutex.try_lock_for(Duration::from_secs(2)).unwrap() {
//!     // held
//! };
//! ```
//!
//! Every recipe ([`Mutex`], [`SemaphoreMutex`], [`SimpleLock`], [`ReadWriteLock`]'s halves,
//! [`Semaphore`], [`MultiLock`]) is one front, [`Lock`], over the recipe's protocol, with one
//! [`Guard`]; all of them implement the object-safe [`Lockable`], so any of them can be held as a
//! `Box<dyn Lockable>`.
//!
//! **Who holds.** A lock is held by a participant: a `SemaphoreMutex`, a `SimpleLock`, a
//! `Semaphore` handle, or each thread using a `Mutex` or a read-write half (Curator's rule;
//! [`Mutex::per_handle`] gives the handle rule). A node is a participant's only if its own
//! attempt created it, so two handles never hold one exclusive lock, even on one [`Client`].
//!
//! **For how long.** A hold is a lease ([`HoldState`]): `Held` only while the leader cannot have
//! expired the session (an instant at which the leader provably heard of it, plus the session
//! timeout, less a tenth: `docs/hold-model.md`), `Uncertain` from then until the lease is renewed
//! or the session expires, `Lost` after.
//! Attach [`Guard::fencing_token`] to the writes the lock protects.
//!
//! **From async code.** [`Lock::acquire_async`] and [`Lock::lock_async`] are the acquire as a
//! future, for any runtime (the library depends on none): the wait runs on a thread of the
//! library's own, and dropping the future (a timeout, `select!`, an aborted task) cancels the
//! acquire and gives back a hold that arrived anyway. The guard, an [`OwnedGuard`], is `Send`
//! and `'static`: it may be held across `.await`.
//!
//! ## Cargo features
//!
//! None is on by default: a crate that depends on zklock asks for what it uses. The API is the
//! same with every feature set, so a missing feature shows at run time: [`Client::connect`]
//! with TLS options (or a `tcp+tls://` host) in a build without `tls` fails with
//! [`Error::InvalidArgument`] naming the feature to turn on.
//!
//! | Feature | Turns on |
//! |---|---|
//! | `tls` | TLS to the servers: [`Options::tls`], [`Tls`], `tcp+tls://` hosts (rustls). |
//! | `sasl` | SASL DIGEST-MD5 authentication: [`Options::sasl`], [`Sasl::digest_md5`]. |
//! | `sasl-gssapi` | SASL GSSAPI (Kerberos): [`Sasl::gssapi`]; builds with the Kerberos headers and libclang (Debian: `libkrb5-dev`, `libclang-dev`). |
//! | `testing` | Real ZooKeeper servers for tests (`zklock::testing`: `TestingServer`, clusters, TLS, SASL and Kerberos servers); implies `tls`, `sasl`, `sasl-gssapi`. |
//! | `cli` | The `zklock` command (`cargo install zklock --features cli`); implies `tls`, `sasl`. |
//! | `capi` | What the C library is built with by `cargo cinstall` (cargo-c): `tls`, `sasl`. |
//! | `header` | Regenerates `include/zklock.h` with cbindgen at build time (the project's own builds). |
//!
//! The C library, the Python package and the command are built with `tls` and `sasl`; docs.rs
//! documents the crate with `testing`, so with every feature the library's API depends on.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]
#![warn(missing_docs)]
// A lock guard in a `match`/`if let` scrutinee lives through every arm: a call in an arm that
// takes the same lock deadlocks (the soak found one in `Session::confirm_lease`).
#![warn(clippy::significant_drop_in_scrutinee)]

// The executor waits on eventfd and ppoll, the lease clock is CLOCK_BOOTTIME, and the command
// reads /proc: Linux only, said at build time rather than found at run time.
#[cfg(not(target_os = "linux"))]
compile_error!("zklock runs on Linux only (eventfd, ppoll, CLOCK_BOOTTIME, /proc)");

mod deadline;
mod error;
mod grants;
mod node;
mod path;
mod pool;
mod recipes;
mod runtime;
mod session;
mod stats;
#[allow(unsafe_code)]
mod sys;
mod wait;

// The C API (`include/zklock.h`): the cdylib's and staticlib's exports. Not part of the Rust
// API: `testing::ffi` re-exports the entry points so that the crate's own tests and benchmark
// call them as a C program does. (One declaration: cbindgen reads every `mod` line, whatever
// its `cfg`, and a second one would write the header twice.)
#[allow(unsafe_code)]
// Its re-exports of the entry points serve `testing::ffi` only.
#[cfg_attr(not(feature = "testing"), allow(unused_imports))]
mod ffi;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

/// The `zklock` command's process rules (its signals, the child that dies with it, process
/// groups), from the one OS-facing module: the command's, not part of the Rust API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod command_process {
    pub use crate::sys::process::{
        die_with_parent, in_my_process_group, send_signal, AtExec, CaughtSignals, GroupWitness,
        SignalOrigin,
    };
}

pub use deadline::Deadline;
pub use error::{Error, ErrorDetail, Hint, Result};
pub use node::{LockKind, Protocol};
pub use path::validate_path;
#[allow(deprecated)]
pub use recipes::RawMultiLock;
pub use recipes::{
    AcquireFuture, AsyncLock, CreateMode, Guard, HoldState, LeaderElection, Leadership, Lease,
    LeaseSet, Lock, Lockable, MultiLock, MultiLockFailure, MultiLockGuard, Mutex, MutexGuard, Op,
    OpResult, OwnedGuard, Participant, RawLeaderElection, RawMutex, RawReadLock, RawSemaphore,
    RawSemaphoreMutex, RawSimpleLock, RawWriteLock, ReadGuard, ReadLock, ReadWriteLock, Revocable,
    Semaphore, SemaphoreMutex, SemaphoreMutexGuard, SimpleLock, SimpleLockGuard, WriteGuard,
    WriteLock,
};
pub use session::{
    Acl, ChildrenWatch, Client, Gssapi, Options, Sasl, SessionEvent, SessionState, Tls,
};
pub use stats::{LockStats, Percentiles};
pub use wait::CancelToken;
