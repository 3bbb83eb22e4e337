//! `zkl_options`: what a client is made with (timeouts, holder id, protocol, ACL, credentials,
//! TLS and SASL), set one setter at a time, then given to zkl_client_connect_with_options. The
//! setters only record; every check is the Rust library's, at connect. The TLS and SASL setters
//! are in `options_secure.rs`.

use std::ffi::c_char;
use std::time::Duration;

use parking_lot::Mutex;

use super::boundary::{
    arc_into_ptr, box_into_ptr, box_take, try_bytes, try_ref, try_str, BoxCastable, Castable,
    Failure, Out,
};
use super::client::{zkl_client, ClientHandle};
use super::status::{zkl_acl, zkl_protocol, zkl_status};
use crate::{Acl, Client, Options, Protocol, Sasl, Tls};

/// The options of a connect (zkl_client_connect_with_options): made by zkl_options_new, set
/// with the zkl_options_set_* calls, freed by zkl_options_free. Every string a setter gets is
/// copied during the call: the caller may free or reuse it as soon as the setter returns.
/// Connecting reads the options and keeps nothing of the object: one zkl_options may serve
/// any number of connects, and may be freed once they returned.
///
/// Threads: internally synchronised, so every call on a zkl_options, const or not, may run on any
/// thread beside any other (each sees the others' whole effect or none); zkl_options_free runs
/// alone.
pub struct zkl_options {
    _private: [u8; 0],
}

/// What a zkl_options points to.
pub(crate) struct OptionsHandle {
    settings: Mutex<Settings>,
}

impl Castable for zkl_options {
    type Rust = OptionsHandle;
}
impl BoxCastable for zkl_options {}

/// The values set so far; unset ones keep `Options::default()`'s.
#[derive(Default)]
pub(super) struct Settings {
    session_timeout: Option<Duration>,
    /// Some(ZERO): the session timeout.
    connect_timeout: Option<Duration>,
    holder_id: Option<String>,
    /// Some(ZERO): read from the servers (the default).
    server_tick: Option<Duration>,
    protocol: Option<Protocol>,
    acl: Option<Acl>,
    auth: Vec<(String, Vec<u8>)>,
    pub(super) tls: Option<Tls>,
    pub(super) sasl: Option<Sasl>,
}

impl Settings {
    /// The Rust options these settings make.
    fn options(&self) -> Options {
        let mut o = Options::default();
        if let Some(t) = self.session_timeout {
            o = o.session_timeout(t);
        }
        match self.connect_timeout {
            Some(Duration::ZERO) => {
                let session = self
                    .session_timeout
                    .unwrap_or_else(|| Options::default().session_timeout);
                o = o.connect_timeout(session);
            }
            Some(t) => o = o.connect_timeout(t),
            None => {}
        }
        if let Some(id) = &self.holder_id {
            o = o.holder_id(id.clone());
        }
        if let Some(t) = self.server_tick.filter(|t| !t.is_zero()) {
            o = o.server_tick_time(t);
        }
        if let Some(p) = self.protocol {
            o = o.protocol(p);
        }
        if let Some(a) = self.acl {
            o = o.acl(a);
        }
        for (scheme, auth) in &self.auth {
            o = o.auth(scheme.clone(), auth.clone());
        }
        if let Some(t) = &self.tls {
            o = o.tls(t.clone());
        }
        if let Some(s) = &self.sasl {
            o = o.sasl(s.clone());
        }
        o
    }

    /// Turns TLS on (the system's CAs, no client certificate) and changes it with `f`.
    pub(super) fn tls(&mut self, f: impl FnOnce(Tls) -> Tls) {
        self.tls = Some(f(self.tls.take().unwrap_or_default()));
    }
}

/// Runs `f` on the settings behind `o` (NULL: ZKL_INVALID_ARGUMENT naming `o`).
///
/// # Safety
/// `o` is NULL or a live zkl_options, not freed during the call.
pub(super) unsafe fn with_settings(
    o: *mut zkl_options,
    f: impl FnOnce(&mut Settings) -> Result<(), Failure>,
) -> Result<(), Failure> {
    // SAFETY: the caller's contract for `o`.
    let handle = unsafe { try_ref(o.cast_const(), "o") }?;
    f(&mut handle.settings.lock())
}

fn millis(ms: u32) -> Duration {
    Duration::from_millis(ms.into())
}

/// Makes an options object with every option at its default: session and connect timeouts of
/// 10000 ms, the holder id "HOSTNAME:PID", the servers' tick read from them, the Curator
/// protocol, ZKL_ACL_OPEN, no credentials, no TLS, no SASL.
///
/// On ZKL_OK, *out owns a new zkl_options: free it with zkl_options_free (connecting does not
/// take it); on any other status *out is left unchanged. Returns ZKL_INVALID_ARGUMENT for a
/// NULL out. Never blocks. Any thread.
///
/// ```c
/// zkl_options *o;
/// zkl_client *c;
/// if (zkl_options_new(&o) != ZKL_OK) return 1;
/// zkl_options_set_tls_ca_file(o, "/etc/zookeeper/ca.pem");                // turns TLS on
/// zkl_options_set_tls_identity_files(o, "/etc/zookeeper/client.pem", "/etc/zookeeper/client.key");
/// zkl_options_set_holder_id(o, "billing-7");
/// zkl_status s = zkl_client_connect_with_options("zk1:2281,zk2:2281", o, &c);
/// zkl_options_free(o);                                                     // c does not need it
/// if (s != ZKL_OK)
///     fprintf(stderr, "%s: %s\n", zkl_status_name(s), zkl_last_error_message());
/// ```
///
/// Pointers: out is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_new(out: *mut *mut zkl_options) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let handle = Box::new(OptionsHandle {
            settings: Mutex::new(Settings::default()),
        });
        out.write(box_into_ptr::<zkl_options>(handle));
        Ok(())
    })
}

/// Frees an options object and the copies of every string given to it. NULL is a no-op; must
/// not be called twice for one object. Clients connected with it are not affected. Never
/// blocks. Any thread, once no other call on o is running.
///
/// Pointers: o is NULL or a live zkl_options not used by any other thread during or after the
/// call.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_free(o: *mut zkl_options) {
    ffi_boundary!(value {
        // SAFETY: the caller's contract: o is NULL or a live handle freed only now.
        drop(unsafe { box_take(o) })
    })
}

/// Sets the session timeout asked of the server, in milliseconds (default 10000). The server
/// caps what it grants between its minSessionTimeout and maxSessionTimeout (2 and 20 ticks: 4 s
/// to 40 s with the default tickTime of 2 s); leases and waits use the granted timeout. The
/// range (100 ms to one hour) is checked at connect: ZKL_INVALID_ARGUMENT then.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o. Never blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_session_timeout(
    o: *mut zkl_options,
    ms: u32,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.session_timeout = Some(millis(ms));
                Ok(())
            })
        }
    })
}

/// Sets how long zkl_client_connect_with_options waits for the first session, in milliseconds
/// (default 10000; 0: the session timeout). Within it a failed connect also finds out why (a
/// TLS handshake refused, a wrong password) and says so.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o. Never blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_connect_timeout(
    o: *mut zkl_options,
    ms: u32,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.connect_timeout = Some(millis(ms));
                Ok(())
            })
        }
    })
}

/// Sets the holder id stored in every lock node the client creates, which other participants
/// see (zkl_lock_participants, `zklock holders`); default "HOSTNAME:PID". id is copied.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or an id that is not UTF-8. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options; id is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_holder_id(
    o: *mut zkl_options,
    id: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `id`.
        let id = unsafe { try_str(id, "id") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.holder_id = Some(id);
                Ok(())
            })
        }
    })
}

/// Sets the servers' tickTime in milliseconds, which the lease of every hold reckons with
/// (docs/hold-model.md, "The server's tick"); 0 (the default): the longest tickTime the servers
/// report to the `conf` four-letter word at connect, else ZooKeeper's default of 2000. Saying a
/// longer tick than the servers use only shortens leases; a shorter one makes them unsound.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o. Never blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_server_tick(o: *mut zkl_options, ms: u32) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.server_tick = Some(millis(ms));
                Ok(())
            })
        }
    })
}

/// Sets the lock-node naming protocol (a zkl_protocol value, passed as uint32_t) of the locks
/// made from the client (default ZKL_PROTOCOL_CURATOR; zkl_client_set_protocol changes it
/// later).
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o or a value that is not a zkl_protocol. Never
/// blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_protocol(
    o: *mut zkl_options,
    protocol: u32,
) -> zkl_status {
    ffi_boundary!(status {
        let protocol = zkl_protocol::try_from(protocol).map_err(|v| {
            Failure::invalid(format!("`protocol` {v} is not a zkl_protocol (0: ZKL_PROTOCOL_CURATOR, 1: ZKL_PROTOCOL_KAZOO)"))
        })?;
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.protocol = Some(protocol.into());
                Ok(())
            })
        }
    })
}

/// Sets the ACL (a zkl_acl value, passed as uint32_t) of the lock nodes and parents the client
/// creates (default ZKL_ACL_OPEN). A creator-only ACL needs an identity the servers know: SASL
/// (zkl_options_set_sasl_digest_md5), a TLS client certificate, or zkl_options_add_auth;
/// without one the connect returns ZKL_INVALID_ARGUMENT.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o or a value that is not a zkl_acl. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_acl(o: *mut zkl_options, acl: u32) -> zkl_status {
    ffi_boundary!(status {
        let acl = zkl_acl::try_from(acl).map_err(|v| {
            Failure::invalid(format!("`acl` {v} is not a zkl_acl (0: ZKL_ACL_OPEN, 1: ZKL_ACL_CREATOR_ALL, 2: ZKL_ACL_CREATOR_ALL_READ_ALL)"))
        })?;
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.acl = Some(Acl::from(acl));
                Ok(())
            })
        }
    })
}

/// Adds ZooKeeper authentication (addAuth) made at every (re)connect, e.g. scheme "digest"
/// with auth "user:password"; several may be added. Both are copied. `digest` sends the
/// password in clear at every connect: over plaintext prefer SASL
/// (zkl_options_set_sasl_digest_md5) or TLS. A credential the servers refuse fails the connect;
/// the scheme "sasl" fails it at once with ZKL_INVALID_ARGUMENT (SASL is a handshake when the
/// session opens: zkl_options_set_sasl_digest_md5).
///
/// scheme is UTF-8 text; auth is passed to the server as the bytes before its NUL. Returns
/// ZKL_INVALID_ARGUMENT for a NULL argument or a scheme that is not UTF-8. Never blocks. Any
/// thread.
///
/// Pointers: o is NULL or a live zkl_options; scheme and auth are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_add_auth(
    o: *mut zkl_options,
    scheme: *const c_char,
    auth: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `scheme`.
        let scheme = unsafe { try_str(scheme, "scheme") }?.to_owned();
        // SAFETY: the caller's contract for `auth`.
        let auth = unsafe { try_bytes(auth, "auth") }?.to_vec();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.auth.push((scheme, auth));
                Ok(())
            })
        }
    })
}

/// Connects to ZooKeeper with the options of o and opens a session.
///
/// hosts: "host:port", more of them separated by commas, then optionally a /chroot path (port
/// 2181 if omitted); a host may be written "tcp://host:port" (plaintext even with TLS on) or
/// "tcp+tls://host:port" (TLS, with the system's CAs unless o sets TLS). o is only read: it may
/// be freed, changed or used for other connects once this call returns. On ZKL_OK, *out owns a
/// new client: free it with zkl_client_free; on any other status *out is left unchanged.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL or malformed argument, an option out of range, or a
/// TLS file that cannot be read or is not PEM (the message names it); ZKL_AUTH_FAILED when the
/// servers refuse the credentials (a wrong SASL password: the message names the user) or the
/// client's certificate (none given to a server that needs one, or one it does not trust), or the
/// client does not trust the servers' certificate (an unknown CA, another name): the message says
/// what to fix, and retrying does not help; ZKL_CONNECTION_LOSS if no server answered within the
/// connect timeout (the message says why: refused, unresolvable host, no answer, a TLS port
/// reached in plaintext); ZKL_CLOSED in a forked child of a process that had made a client.
/// Blocks at most the connect timeout. Any thread.
///
/// ```c
/// zkl_options *o;
/// zkl_client *c;
/// zkl_options_new(&o);
/// zkl_options_set_sasl_digest_md5(o, "bob", password);
/// zkl_status s = zkl_client_connect_with_options("zk1:2181,zk2:2181/app", o, &c);
/// zkl_options_free(o);
/// if (s == ZKL_AUTH_FAILED)        // the message names the user
///     fprintf(stderr, "%s\n", zkl_last_error_message());
/// ```
///
/// Pointers: hosts is NULL or a NUL-terminated string; o is NULL or a live zkl_options, not
/// freed during the call; out is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_client_connect_with_options(
    hosts: *const c_char,
    o: *const zkl_options,
    out: *mut *mut zkl_client,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `hosts`.
        let hosts = unsafe { try_str(hosts, "hosts") }?;
        // SAFETY: the caller's contract for `o`.
        let handle = unsafe { try_ref(o, "o") }?;
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let options = handle.settings.lock().options();
        let client = Client::connect(hosts, options)?;
        out.write(arc_into_ptr::<zkl_client>(ClientHandle::new(client)));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_make_the_options() {
        let mut s = Settings::default();
        let d = s.options();
        assert_eq!(d.session_timeout, Options::default().session_timeout);
        assert!(d.tls.is_none() && d.sasl.is_none());
        s.session_timeout = Some(Duration::from_secs(3));
        s.connect_timeout = Some(Duration::ZERO);
        s.server_tick = Some(Duration::ZERO);
        s.tls(|t| t);
        let o = s.options();
        assert_eq!(o.connect_timeout, Duration::from_secs(3));
        assert_eq!(o.server_tick_time, None);
        assert!(o.tls.is_some());
        s.connect_timeout = Some(Duration::from_millis(1500));
        s.server_tick = Some(Duration::from_millis(500));
        s.acl = Some(Acl::CreatorAll);
        s.sasl = Some(Sasl::digest_md5("bob", "pw"));
        let o = s.options();
        assert_eq!(o.connect_timeout, Duration::from_millis(1500));
        assert_eq!(o.server_tick_time, Some(Duration::from_millis(500)));
        assert_eq!(o.acl, Acl::CreatorAll);
        assert!(!format!("{o:?}").contains("pw\""), "{o:?}");
    }
}
