//! `zkl_client`: one ZooKeeper session, as a reference-counted handle.

use std::ffi::c_char;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::boundary::{
    arc_free, arc_into_ptr, try_bytes, try_ref, try_str, with_poison, ArcCastable, Castable,
    Failure, Out,
};
use super::status::{zkl_acl, zkl_protocol, zkl_status};
use crate::{Acl, Client, Options};

/// One ZooKeeper session. Thread-safe: any number of threads may use one zkl_client at once.
/// Made by zkl_client_connect, freed by zkl_client_free; every lock made from it keeps the
/// session open until that lock is freed too.
pub struct zkl_client {
    _private: [u8; 0],
}

/// What a zkl_client points to.
pub(crate) struct ClientHandle {
    pub(crate) client: Client,
    pub(crate) poisoned: AtomicBool,
}

impl Castable for zkl_client {
    type Rust = ClientHandle;
}
impl ArcCastable for zkl_client {}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        // The last reference (the client handle and every lock made from it) is gone: close
        // the session now, so the server deletes its nodes at once instead of at expiry.
        self.client.close();
    }
}

impl ClientHandle {
    /// Runs f on the client unless it is poisoned; a panic in f poisons it.
    pub(crate) fn run<T>(
        &self,
        f: impl FnOnce(&Client) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        with_poison(&self.poisoned, "zkl_client", || f(&self.client))
    }
}

/// Connects to ZooKeeper and opens a session.
///
/// hosts: "host:port", more of them separated by commas, then optionally a /chroot path
/// (port 2181 if omitted). session_timeout_ms: the
/// session timeout asked of the server (at least 100), which also bounds how long this call
/// waits for the first connection. On ZKL_OK, *out_client owns a new client: free it with
/// zkl_client_free; on any other status *out_client is left unchanged.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL or malformed argument, ZKL_CONNECTION_LOSS if no
/// server answered within session_timeout_ms, ZKL_ZOOKEEPER_ERROR if authentication failed.
/// Blocks at most session_timeout_ms. Any thread.
///
/// Pointers: hosts is NULL or a NUL-terminated string; out_client is NULL or valid for
/// writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_connect(
    hosts: *const c_char,
    session_timeout_ms: u32,
    out_client: *mut *mut zkl_client,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `hosts`.
        let hosts = unsafe { try_str(hosts, "hosts") }?;
        // SAFETY: the caller's contract for `out_client`.
        let out = unsafe { Out::new(out_client, "out_client") }?;
        let timeout = Duration::from_millis(session_timeout_ms.into());
        let client = Client::connect(hosts, Options::default().session_timeout(timeout).connect_timeout(timeout))?;
        let handle = Arc::new(ClientHandle { client, poisoned: AtomicBool::new(false) });
        out.write(arc_into_ptr::<zkl_client>(handle));
        Ok(())
    })
}

/// Sets the lock-node naming protocol (a zkl_protocol value, passed as uint32_t) of the locks
/// made from this client after the call; locks made before keep theirs.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL client or a value that is not a zkl_protocol.
/// Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_set_protocol(
    client: *mut zkl_client,
    protocol: u32,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client.cast_const(), "client") }?;
        let protocol = zkl_protocol::try_from(protocol).map_err(|v| {
            Failure::invalid(format!("`protocol` {v} is not a zkl_protocol (0: ZKL_PROTOCOL_CURATOR, 1: ZKL_PROTOCOL_KAZOO)"))
        })?;
        handle.run(|c| {
            c.set_protocol(protocol.into());
            Ok(())
        })
    })
}

/// Adds authentication to the session, e.g. scheme "digest" with auth "user:password".
///
/// scheme is UTF-8 text; auth is passed to the server as the bytes before its NUL. Returns
/// ZKL_INVALID_ARGUMENT for a NULL argument, ZKL_SESSION_EXPIRED if the server rejected the
/// credentials (the session ends), ZKL_CONNECTION_LOSS if no reply came in time. Blocks at
/// most the session timeout. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; scheme and auth are NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_add_auth(
    client: *mut zkl_client,
    scheme: *const c_char,
    auth: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client.cast_const(), "client") }?;
        // SAFETY: the caller's contract for `scheme`.
        let scheme = unsafe { try_str(scheme, "scheme") }?;
        // SAFETY: the caller's contract for `auth`.
        let auth = unsafe { try_bytes(auth, "auth") }?;
        handle.run(|c| Ok(c.add_auth(scheme, auth)?))
    })
}

/// Sets the ACL (a zkl_acl value, passed as uint32_t) of the lock nodes and parents this
/// client creates after the call: ZKL_ACL_OPEN (the default), ZKL_ACL_CREATOR_ALL or
/// ZKL_ACL_CREATOR_ALL_READ_ALL. The creator-only values need authentication first
/// (zkl_client_add_auth).
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL client, a value that is not a zkl_acl, or a
/// creator-only ACL on a client without authentication. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_set_acl(client: *mut zkl_client, acl: u32) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client.cast_const(), "client") }?;
        let acl = zkl_acl::try_from(acl).map_err(|v| {
            Failure::invalid(format!("`acl` {v} is not a zkl_acl (0: ZKL_ACL_OPEN, 1: ZKL_ACL_CREATOR_ALL, 2: ZKL_ACL_CREATOR_ALL_READ_ALL)"))
        })?;
        handle.run(|c| Ok(c.set_acl(Acl::from(acl))?))
    })
}

/// Frees a client. NULL is a no-op; must not be called twice for one client.
///
/// The session stays open while locks made from this client exist, and closes once the client
/// and every lock made from it are freed: closing deletes its lock nodes at once, so waiters
/// elsewhere proceed without waiting for the session to expire. The pointer is unusable after
/// this call. Does not block. Any thread, once no other thread uses this client.
///
/// Pointers: client is NULL or a live zkl_client not used by any other thread during or after
/// the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_free(client: *mut zkl_client) {
    ffi_boundary!(value {
        // SAFETY: the caller's contract: client is NULL or a live handle freed only now.
        unsafe { arc_free(client.cast_const()) }
    })
}
