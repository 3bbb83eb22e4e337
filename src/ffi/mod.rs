//! The C API of zklock: the contract of `docs/c-api.md`, declared in the generated
//! header `include/zklock.h`.
//!
//! This module only translates between C and the Rust library; it never decides anything a
//! recipe decides. What follows is `docs/c-conventions.md`, the one text of the C API's
//! conventions: the header's banner is the same text.
//!
#![doc = include_str!("../../docs/c-conventions.md")]
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
