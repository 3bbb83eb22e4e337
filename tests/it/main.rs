//! The integration tests, one binary (as cargo's own test suite): a module per subject, all
//! against real ZooKeeper servers. Tests that fault nothing share one server per target
//! directory (`common::hosts`); a test that kills, pauses or restarts a server starts its own.
//! `cargo nextest run --features testing,cli` runs them all; `.config/nextest.toml` says
//! which run alone or few at a time.

mod common;

mod acl;
mod async_acquire;
mod bench_drivers;
mod cancel;
#[cfg(feature = "cli")]
mod cli;
mod containers;
mod deadline;
mod election;
mod every_language;
mod exclusion;
mod faults;
mod ffi_contract;
mod ffi_examples;
mod ffi_guarded_writes;
mod ffi_listeners;
mod ffi_messages;
mod ffi_semaphore_many;
mod ffi_symbols;
mod fork;
mod guarded_writes;
mod harness;
mod hold_model;
mod interop;
mod kerberos;
mod lease;
mod multi_lock;
mod mutex;
mod packaging;
mod partition;
mod revoke;
mod rwlock;
mod secured;
mod secured_servers;
mod semaphore;
mod semaphore_many;
mod session;
mod simple_lock;
mod stats;
