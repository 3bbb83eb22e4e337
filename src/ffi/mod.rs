//! The C API of zklock: the contract of `docs/c-api.md`, declared in the generated
//! header `include/zklock.h`.
//!
//! This module only translates between C and the Rust library; it never decides anything a
//! recipe decides. Its conventions (the header repeats them where they matter):
//!
//! - **Status and out-parameters.** Every fallible function returns a `zkl_status`. Other
//!   results go through `out_*` pointers that are written **only** when the status is
//!   `ZKL_OK`; on any other status they are left untouched. There are no partial successes.
//! - **NULL.** Every pointer argument may be NULL: the call returns `ZKL_INVALID_ARGUMENT`
//!   (functions without a status return 0 or do nothing), it never crashes.
//! - **Text.** Strings passed in are NUL-terminated UTF-8 (non-UTF-8 is
//!   `ZKL_INVALID_ARGUMENT`, except the opaque bytes of an auth credential). Strings returned by
//!   the library are owned by it: never free them.
//! - **Enums from C** arrive as `uint32_t` and are range-checked, because an out-of-range
//!   value in a Rust enum would be undefined behaviour.
//! - **Ownership.** `zkl_client` is reference counted: every lock made from it keeps the session
//!   alive, and the session closes when the client and all its locks are freed. `zkl_lock` is
//!   owned by the caller until `zkl_lock_free` (or until `zkl_multi_lock_new` takes it).
//! - **Errors in words.** Every non-OK status sets this thread's last error message, read with
//!   `zkl_last_error_message()`.
//! - **Panics** never cross the boundary: a Rust panic becomes `ZKL_INTERNAL_ERROR` (never an
//!   abort), and the handle involved is poisoned: later calls on it return `ZKL_INTERNAL_ERROR`.
//! - **Threads, and `const`.** `zkl_client` may be used by any number of threads at once. A call
//!   that takes a `const zkl_lock *` only reads or signals (is_held, hold_state, fencing_token,
//!   lease_remaining_ms, cancel, wait_lost, participants, stats, wait_revoke_request,
//!   revoke_holders) and may run on any thread while another thread uses the handle; a call that
//!   takes a non-const `zkl_lock *` changes what the handle holds and is one at a time per
//!   handle.
//!   A `zkl_lock` is one participant: its holds belong to the handle, not to the calling OS
//!   thread, so any thread may release what another acquired through it.
//! - **Blocking.** No call blocks longer than its timeout plus the session timeout.
//! - **fork().** Make clients after fork. In a forked child, a client and the locks made
//!   before the fork are inert: calls return `ZKL_CLOSED` (the message says fork), nothing is
//!   sent on the parent's session, and `zkl_lock_free` / `zkl_client_free` free the child's
//!   memory only, releasing nothing of the parent's. A child of a process that had made a
//!   client cannot make one (`ZKL_CLOSED`): the library's I/O does not survive fork.
//! - **Host code.** The library runs no code of the host's on a thread that does ZooKeeper
//!   I/O, inside a zkl_ call of another thread, or under a lock of its own: log lines are
//!   queued and reach the host on a thread of its own (`zkl_log_next`) or on the library's
//!   `zklock-log` thread (`zkl_set_log_callback`).
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
mod client;
mod last_error;

mod constructors;
mod lock;

mod participants;
mod stats;

mod log;
mod options;
mod options_secure;
mod status;
mod version;

pub use client::{
    zkl_client, zkl_client_add_auth, zkl_client_close, zkl_client_connect, zkl_client_connect_with,
    zkl_client_connect_with_tick, zkl_client_free, zkl_client_holder_id, zkl_client_request_revoke,
    zkl_client_session_state, zkl_client_set_acl, zkl_client_set_protocol,
    zkl_client_wait_session_event, zkl_session_event,
};
pub use constructors::{
    zkl_multi_lock_new, zkl_mutex_new, zkl_read_lock_new, zkl_rwlock_new, zkl_semaphore_mutex_new,
    zkl_semaphore_new, zkl_simple_lock_new, zkl_write_lock_new,
};
pub use last_error::zkl_last_error_message;
pub use lock::{
    zkl_lock, zkl_lock_acquire, zkl_lock_cancel, zkl_lock_fencing_token, zkl_lock_free,
    zkl_lock_hold_state, zkl_lock_is_held, zkl_lock_lease_remaining_ms, zkl_lock_make_revocable,
    zkl_lock_release, zkl_lock_reset_cancel, zkl_lock_revoke_holders, zkl_lock_wait_lost,
    zkl_lock_wait_revoke_request, zkl_multi_lock_token_at, zkl_multi_lock_token_of,
};
pub use log::{
    zkl_log_callback, zkl_log_level, zkl_log_next, zkl_log_start, zkl_log_stop,
    zkl_set_log_callback,
};
pub use options::{
    zkl_client_connect_with_options, zkl_options, zkl_options_add_auth, zkl_options_free,
    zkl_options_new, zkl_options_set_acl, zkl_options_set_connect_timeout,
    zkl_options_set_holder_id, zkl_options_set_protocol, zkl_options_set_server_tick,
    zkl_options_set_session_timeout,
};
pub use options_secure::{
    zkl_options_set_sasl_digest_md5, zkl_options_set_tls_ca_file, zkl_options_set_tls_ca_pem,
    zkl_options_set_tls_identity_files, zkl_options_set_tls_identity_pem,
    zkl_options_set_tls_key_password, zkl_options_tls_danger_accept_any_server_name,
    zkl_options_use_tls,
};
pub use participants::{
    zkl_lock_participants, zkl_participant, zkl_participants, zkl_participants_count,
    zkl_participants_created_ms, zkl_participants_free, zkl_participants_get,
};
pub use stats::{zkl_lock_stats, zkl_percentiles, zkl_stats};
pub use status::{
    zkl_acl, zkl_hold_state, zkl_protocol, zkl_session_state, zkl_status, zkl_status_name,
};
pub use version::zkl_version;
