//! The C API of zklock: the contract of `docs/c-api.md`, declared in the generated
//! header `include/zklock.h`.
//!
//! This module only translates between C and the Rust library; it never decides anything a
//! recipe decides. What follows is `src/ffi/conventions.md`, the one text of the C API's
//! conventions: the header's banner is the same text.
//!
#![doc = include_str!("conventions.md")]
//!
//! Beside the modules, the C wing's header files: `conventions.md` (the text above),
//! `cbindgen.toml`, and `header.rs`, which makes `include/zklock.h` from them (for `build.rs` and
//! `tests/it/ffi_symbols.rs`; not a module of the crate). The C++ layer is `include/zklock.hpp`.
#![allow(non_camel_case_types)]
// The header generated from these doc comments is C documentation: each function's safety rules
// are its "Pointers:" paragraph, in words a C programmer reads, not a Rust "# Safety" heading.
#![allow(clippy::missing_safety_doc)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

#[macro_use]
mod boundary;

// cbindgen writes the header in the order of these modules: the client, then the lock (its
// constructors, its calls, what it reports), then the rest.
mod cancel_scope;
mod client;
mod last_error;

mod constructors;
mod fenced;
mod lock;
mod semaphore;

mod participants;
mod stats;

mod log;
mod options;
mod options_secure;
mod status;
mod version;

// Every C item, for `testing::ffi` (tests call the entry points as a C program does): whole
// modules, so a new entry point needs no list kept by hand. Each module's Rust-only helpers are
// at most `pub(crate)`, which a glob does not make public.
pub use cancel_scope::*;
pub use client::*;
pub use constructors::*;
pub use fenced::*;
pub use last_error::*;
pub use lock::*;
pub use log::*;
pub use options::*;
pub use options_secure::*;
pub use participants::*;
pub use semaphore::*;
pub use stats::*;
pub use status::*;
pub use version::*;
