//! `zkl_client`: one ZooKeeper session, as a reference-counted handle.

use std::collections::VecDeque;
use std::ffi::{c_char, CString};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::boundary::{
    arc_free, arc_into_ptr, try_bytes, try_ref, try_str, with_poison, ArcCastable, Castable,
    Failure, Out,
};
use super::status::{zkl_acl, zkl_protocol, zkl_session_state, zkl_status};
use crate::{Acl, Client, Options, SessionEvent};

/// One ZooKeeper session. Made by zkl_client_connect, freed by zkl_client_free; every lock made
/// from it keeps the session open until that lock is freed too.
///
/// Threads: internally synchronised, so every call on a zkl_client, const or not, may run on any
/// thread beside any other; zkl_client_free runs alone.
///
/// fork(): make clients after fork. A client belongs to the process that connected it: in a
/// forked child, every call on it (and on its locks) is ZKL_CLOSED with a message saying so,
/// sends nothing on the parent's session, and freeing it (or its locks) releases nothing.
pub struct zkl_client {
    _private: [u8; 0],
}

/// What a zkl_client points to.
pub(crate) struct ClientHandle {
    pub(crate) client: Client,
    pub(crate) poisoned: AtomicBool,
    /// The client's holder id, as C text (zkl_client_holder_id).
    holder_id: CString,
    /// The session events, for zkl_client_wait_session_event.
    events: Arc<EventLog>,
}

/// A change of the session's state, as zkl_client_wait_session_event hands it out.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct zkl_session_event {
    /// This event's number: 1 for the client's first event, +1 for each one after.
    pub seq: u64,
    /// The new state, a zkl_session_state value.
    pub state: u32,
    /// The id of the session the event is about.
    pub session_id: i64,
    /// Which session of the client: 0 for the first, +1 for each fresh session after an expiry.
    pub generation: u64,
}

/// How many events the client keeps for listeners that fall behind.
const EVENTS_KEPT: usize = 64;

/// The last session events of a client, numbered, for listeners that wait on their own threads.
/// Filled by a listener of the client's (on the client's dispatcher thread, never on I/O).
#[derive(Default)]
struct EventLog {
    events: Mutex<VecDeque<zkl_session_event>>,
    cv: Condvar,
}

impl EventLog {
    fn push(&self, e: &SessionEvent) {
        let mut events = self.events.lock();
        let seq = events.back().map_or(1, |l| l.seq + 1);
        if events.len() == EVENTS_KEPT {
            events.pop_front();
        }
        events.push_back(zkl_session_event {
            seq,
            state: zkl_session_state::from(e.state) as u32,
            session_id: e.session_id,
            generation: e.generation,
        });
        self.cv.notify_all();
    }

    /// The first event after `after`, waiting until `deadline` (None: forever).
    fn next(&self, after: u64, deadline: Option<Instant>) -> Result<zkl_session_event, Failure> {
        let closed = zkl_session_state::ZKL_SESSION_STATE_CLOSED as u32;
        let mut events = self.events.lock();
        loop {
            if let Some(e) = events.iter().find(|e| e.seq > after) {
                return Ok(*e);
            }
            if events.back().is_some_and(|e| e.state == closed) {
                return Err(Failure::new(
                    zkl_status::ZKL_CLOSED,
                    "the client is closed: its last session event (CLOSED) was handed out",
                ));
            }
            match deadline {
                None => self.cv.wait(&mut events),
                Some(d) => {
                    if self.cv.wait_until(&mut events, d).timed_out()
                        && !events.iter().any(|e| e.seq > after)
                    {
                        return Err(Failure::new(
                            zkl_status::ZKL_TIMEOUT,
                            "no session event within the timeout",
                        ));
                    }
                }
            }
        }
    }
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

    pub(crate) fn new(client: Client) -> Arc<ClientHandle> {
        let events = Arc::new(EventLog::default());
        let log = Arc::clone(&events);
        client.add_listener(move |e| log.push(e));
        Arc::new(ClientHandle {
            // A holder id is UTF-8 text from C (no NUL) or the default HOSTNAME:PID.
            holder_id: CString::new(client.holder_id().replace('\0', "")).unwrap_or_default(),
            client,
            poisoned: AtomicBool::new(false),
            events,
        })
    }
}

/// Connects to ZooKeeper and opens a session.
///
/// hosts: "host:port", more of them separated by commas, then optionally a /chroot path
/// (port 2181 if omitted). session_timeout_ms: the session timeout asked of the server (at
/// least 100), which also bounds how long this call waits for the first connection
/// (zkl_client_connect_with sets the two apart). The server caps what it grants between its
/// minSessionTimeout and maxSessionTimeout (2 and 20 ticks: 4 s to 40 s with the default
/// tickTime of 2 s); leases and waits use the granted timeout. On ZKL_OK, *out_client owns a new client: free it with
/// zkl_client_free; on any other status *out_client is left unchanged.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL or malformed argument, ZKL_CONNECTION_LOSS if no
/// server answered within session_timeout_ms, ZKL_AUTH_FAILED if a TLS handshake failed (hosts
/// written tcp+tls://: the message says what to fix; zkl_client_connect_with_options sets TLS
/// and SASL), ZKL_CLOSED in a forked child of a process that had made a client before the fork (its I/O
/// does not survive fork: make clients after fork, in processes that made none before).
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
        out.write(arc_into_ptr::<zkl_client>(ClientHandle::new(client)));
        Ok(())
    })
}

/// Connects as zkl_client_connect does, with a connect timeout of its own and a holder id.
///
/// session_timeout_ms: the session timeout asked of the server (at least 100; the server may
/// lower it to its maxSessionTimeout, 20 ticks by default, or raise it to 2 ticks).
/// connect_timeout_ms: how long this call waits for the first connection (0: the session
/// timeout). holder_id: the id stored in every lock node this client creates, which other
/// participants see (zkl_lock_participants, `zklock holders`); NULL gives the default
/// "HOSTNAME:PID". On ZKL_OK, *out_client owns a new client: free it with zkl_client_free; on
/// any other status *out_client is left unchanged.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL or malformed argument (holder_id may be NULL),
/// ZKL_CONNECTION_LOSS if no server answered within the connect timeout (the message says why:
/// refused, unresolvable host, no answer), ZKL_AUTH_FAILED if a TLS handshake failed (hosts
/// written tcp+tls://). Blocks at most the connect timeout. Any thread.
///
/// ```c
/// zkl_client *c;
/// if (zkl_client_connect_with("zk1:2181,zk2:2181", 10000, 2000, "billing-7", &c) != ZKL_OK)
///     fprintf(stderr, "%s\n", zkl_last_error_message());
/// ```
///
/// Pointers: hosts is NULL or a NUL-terminated string; holder_id is NULL or a NUL-terminated
/// string; out_client is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_connect_with(
    hosts: *const c_char,
    session_timeout_ms: u32,
    connect_timeout_ms: u32,
    holder_id: *const c_char,
    out_client: *mut *mut zkl_client,
) -> zkl_status {
    // SAFETY: the caller's contract, passed on unchanged.
    unsafe {
        zkl_client_connect_with_tick(
            hosts,
            session_timeout_ms,
            connect_timeout_ms,
            holder_id,
            0,
            out_client,
        )
    }
}

/// Connects as zkl_client_connect_with does, and says the servers' tickTime.
///
/// server_tick_ms: the servers' tickTime in milliseconds, which the lease of every hold
/// reckons with (docs/hold-model.md, "The server's tick"); 0: the longest tickTime the servers
/// in hosts report to the `conf` four-letter word at connect, else ZooKeeper's default of
/// 2000. Saying a longer tick than the servers use only shortens leases; a shorter one makes
/// them unsound. A session timeout under about two ticks leaves holds believed little or not at
/// all (a warning is logged). Other arguments, statuses and blocking as zkl_client_connect_with.
///
/// ```c
/// zkl_client *c;
/// // servers with tickTime=500 that do not run `conf`
/// if (zkl_client_connect_with_tick("zk1:2181", 1000, 0, NULL, 500, &c) != ZKL_OK)
///     fprintf(stderr, "%s\n", zkl_last_error_message());
/// ```
///
/// Pointers: as zkl_client_connect_with.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_connect_with_tick(
    hosts: *const c_char,
    session_timeout_ms: u32,
    connect_timeout_ms: u32,
    holder_id: *const c_char,
    server_tick_ms: u32,
    out_client: *mut *mut zkl_client,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `hosts`.
        let hosts = unsafe { try_str(hosts, "hosts") }?;
        let holder_id = if holder_id.is_null() {
            None
        } else {
            // SAFETY: the caller's contract for `holder_id` (not NULL here).
            Some(unsafe { try_str(holder_id, "holder_id") }?)
        };
        // SAFETY: the caller's contract for `out_client`.
        let out = unsafe { Out::new(out_client, "out_client") }?;
        let session = Duration::from_millis(session_timeout_ms.into());
        let connect = match connect_timeout_ms {
            0 => session,
            ms => Duration::from_millis(ms.into()),
        };
        let mut options = Options::default().session_timeout(session).connect_timeout(connect);
        if let Some(id) = holder_id {
            options = options.holder_id(id);
        }
        if server_tick_ms != 0 {
            options = options.server_tick_time(Duration::from_millis(server_tick_ms.into()));
        }
        let client = Client::connect(hosts, options)?;
        out.write(arc_into_ptr::<zkl_client>(ClientHandle::new(client)));
        Ok(())
    })
}

/// Writes to *out_id the client's holder id: the text stored in every lock node it creates
/// (given to zkl_client_connect_with, else "HOSTNAME:PID"). The string is owned by the client
/// and stays valid until zkl_client_free; never free it.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument (then *out_id is left unchanged). Never blocks.
/// Any thread.
///
/// Pointers: client is NULL or a live zkl_client; out_id is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_holder_id(
    client: *const zkl_client,
    out_id: *mut *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client, "client") }?;
        // SAFETY: the caller's contract for `out_id`.
        let out = unsafe { Out::new(out_id, "out_id") }?;
        out.write(handle.holder_id.as_ptr());
        Ok(())
    })
}

/// Writes the state of the client's session to *out_state, as a zkl_session_state value.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument (then *out_state is left unchanged). Never blocks.
/// Any thread.
///
/// Pointers: client is NULL or a live zkl_client; out_state is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_session_state(
    client: *const zkl_client,
    out_state: *mut u32,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client, "client") }?;
        // SAFETY: the caller's contract for `out_state`.
        let out = unsafe { Out::new(out_state, "out_state") }?;
        let state = handle.run(|c| Ok(zkl_session_state::from(c.state())))?;
        out.write(state as u32);
        Ok(())
    })
}

/// The session-state listener: writes to *out_event the first session event numbered after
/// after_seq (numbers start at 1: pass 0 first, then the seq of the last event you got).
/// timeout_ms < 0 waits forever, 0 only looks.
///
/// The client keeps its last 64 events: a listener further behind gets the oldest kept one (the
/// gap in seq shows how many it missed). Returns ZKL_TIMEOUT if no such event came in time,
/// ZKL_CLOSED (at once) once the CLOSED event has been handed out: no event follows it.
/// Events are recorded by the library's own dispatcher thread; this call runs on yours. Any
/// thread, concurrently with any other call on the client.
///
/// ```c
/// zkl_session_event e = {0};
/// while (zkl_client_wait_session_event(c, e.seq, -1, &e) == ZKL_OK)
///     if (e.state == ZKL_SESSION_STATE_EXPIRED) alert("every lock of the session is lost");
/// ```
///
/// Pointers: client is NULL or a live zkl_client, not freed during the call; out_event is NULL
/// or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_wait_session_event(
    client: *const zkl_client,
    after_seq: u64,
    timeout_ms: i64,
    out_event: *mut zkl_session_event,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client, "client") }?;
        // SAFETY: the caller's contract for `out_event`.
        let out = unsafe { Out::new(out_event, "out_event") }?;
        let deadline = u64::try_from(timeout_ms)
            .ok()
            .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)));
        let event = handle.events.next(after_seq, deadline)?;
        out.write(event);
        Ok(())
    })
}

/// Asks the holder of the lock node node_path (a full path, e.g. the lock path plus a
/// participant's node from zkl_lock_participants) to let go, as Curator's Revoker.attemptRevoke:
/// writes "__REVOKE__" into the node. Holders that made their lock revocable are told; others
/// are not affected.
///
/// Returns ZKL_NOT_HELD if there is no such node, ZKL_INVALID_ARGUMENT for a NULL argument or a
/// malformed path, ZKL_CONNECTION_LOSS or ZKL_SESSION_EXPIRED when the server could not be told.
/// Blocks at most the session timeout. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; node_path is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_request_revoke(
    client: *const zkl_client,
    node_path: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client, "client") }?;
        // SAFETY: the caller's contract for `node_path`.
        let node = unsafe { try_str(node_path, "node_path") }?;
        if handle.run(|c| Ok(c.request_revoke(node)?))? {
            Ok(())
        } else {
            Err(Failure::new(zkl_status::ZKL_NOT_HELD, format!("no lock node {node}: nobody to ask")))
        }
    })
}

/// Closes the client now: every hold made through it is ZKL_HOLD_LOST at once (stop acting on
/// it), waiting acquires return ZKL_CLOSED, later acquires return ZKL_CLOSED and releases
/// ZKL_LOCK_LOST. The session itself, and with it the lock nodes, ends once the locks made from
/// the client are freed too (zkl_lock_free deletes a hold's node at once): free them to let
/// waiters elsewhere in without waiting for the session timeout. The handle must still be
/// freed. Closing twice is a no-op.
///
/// ZKL_INVALID_ARGUMENT for a NULL client. Blocks at most the session timeout (the close
/// request). Any thread.
///
/// Pointers: client is NULL or a live zkl_client.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_close(client: *mut zkl_client) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let handle = unsafe { try_ref(client.cast_const(), "client") }?;
        handle.run(|c| {
            c.close();
            Ok(())
        })
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
/// ZKL_INVALID_ARGUMENT for a NULL argument, and at once for the scheme "sasl" (SASL
/// authenticates when the session opens: zkl_options_set_sasl_digest_md5); ZKL_AUTH_FAILED if
/// the servers rejected it (a scheme they have no provider for, or data its provider refuses:
/// they close the connection, and the session ends with every lock it held);
/// ZKL_CONNECTION_LOSS if no reply came in time. Blocks at most the session timeout. Any
/// thread.
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
/// In a forked child of the process that made the client: frees the child's copy of the
/// memory only; the session (the parent's) is neither closed nor touched.
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
