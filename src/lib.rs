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
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod error;
mod node;
mod path;
pub mod recipes;
mod runtime;
#[allow(unsafe_code)]
mod sys;
mod wait;

#[allow(unsafe_code)]
pub mod ffi;

#[cfg(feature = "testing")]
pub mod testing;

pub use client::{Client, Options, SessionEvent, SessionState};
pub use error::{Error, Result};
pub use node::Protocol;
pub use path::validate_path;
pub use recipes::{
    HoldState, Mutex, MutexGuard, Participant, SemaphoreMutex, SemaphoreMutexGuard, SimpleLock,
    SimpleLockGuard,
};
pub use recipes::{
    Lease, Lockable, MultiLock, MultiLockFailure, MultiLockGuard, ReadGuard, ReadLock,
    ReadWriteLock, Semaphore, WriteGuard, WriteLock,
};
pub use wait::CancelToken;
