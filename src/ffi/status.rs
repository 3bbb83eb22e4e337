//! `zkl_status`, `zkl_protocol`, the mapping of [`Error`] to statuses, and `zkl_status_name`.

use std::ffi::{c_char, CStr};

use crate::{Acl, Error, HoldState, Protocol, SessionState};

/// The result of every fallible call. Values are fixed: new statuses only ever get new numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum zkl_status {
    /// Success.
    ZKL_OK = 0,
    /// Not acquired before the timeout (timeout 0: the lock was busy).
    ZKL_TIMEOUT = 1,
    /// NULL pointer, malformed path or host list, non-UTF-8 text, bad count or enum value.
    ZKL_INVALID_ARGUMENT = 2,
    /// Release (or fencing token) of a lock this handle does not hold.
    ZKL_NOT_HELD = 3,
    /// ZooKeeper not reachable in time; nothing of this call is left on the server.
    ZKL_CONNECTION_LOSS = 4,
    /// The session expired: every lock it held is lost.
    ZKL_SESSION_EXPIRED = 5,
    /// Any other error the server returned (no auth, ACL, ...).
    ZKL_ZOOKEEPER_ERROR = 6,
    /// A bug caught at the boundary (a Rust panic never crosses it); the handle is unusable.
    ZKL_INTERNAL_ERROR = 7,
    /// An acquire was ended by zkl_lock_cancel (made during it, or before it began).
    ZKL_CANCELLED = 8,
    /// The hold was lost before its release: its session expired or someone else deleted its
    /// node (the handle holds nothing any more). Before 0.3: ZKL_SESSION_EXPIRED.
    ZKL_LOCK_LOST = 9,
    /// The client was closed (zkl_client_close): nothing can be acquired through it any more.
    /// Also every call, in the child of a fork(), on a client or lock made before the fork (the
    /// message says so). Before 0.3: ZKL_SESSION_EXPIRED.
    ZKL_CLOSED = 10,
    /// The acquire could only wait for this handle's own hold: a non-reentrant handle that
    /// holds the lock, a semaphore handle whose own leases fill max_leases, or the read half's
    /// holder taking the write half of the same participant. Before 0.3: ZKL_INVALID_ARGUMENT.
    ZKL_WOULD_DEADLOCK = 11,
    /// The servers would not take this client's credentials (SASL) or certificate, or the
    /// client would not take the servers' certificate (an untrusted CA, another name): the
    /// message says what to fix. Retrying does not help.
    ZKL_AUTH_FAILED = 12,
}

/// The setting that would fix the last error (zkl_last_error_hint, as a uint32_t): the message
/// names it in C's words at its end; a language binding names it its own way after
/// zkl_last_error_reason(). Values are fixed: new hints only ever get new numbers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum zkl_hint {
    /// The message names no setting.
    ZKL_HINT_NONE = 0,
    /// The CA file that signed the servers' certificates: zkl_options_set_tls_ca_file.
    ZKL_HINT_TLS_CA_FILE = 1,
    /// The client's certificate and key: zkl_options_set_tls_identity_files.
    ZKL_HINT_TLS_IDENTITY = 2,
    /// The password of the encrypted TLS key: zkl_options_set_tls_key_password.
    ZKL_HINT_TLS_KEY_PASSWORD = 3,
    /// TLS to the servers, asked for or not: zkl_options_use_tls.
    ZKL_HINT_TLS = 4,
    /// SASL credentials: zkl_options_set_sasl_digest_md5 or zkl_options_set_sasl_gssapi.
    ZKL_HINT_SASL = 5,
    /// An identity for creator-only ACLs: SASL, a TLS client certificate or auth data.
    ZKL_HINT_IDENTITY = 6,
    /// The connect timeout: zkl_options_set_connect_timeout.
    ZKL_HINT_CONNECT_TIMEOUT = 7,
}

impl From<crate::Hint> for zkl_hint {
    fn from(h: crate::Hint) -> zkl_hint {
        use crate::Hint;
        match h {
            Hint::TlsCaFile => zkl_hint::ZKL_HINT_TLS_CA_FILE,
            Hint::TlsIdentity => zkl_hint::ZKL_HINT_TLS_IDENTITY,
            Hint::TlsKeyPassword => zkl_hint::ZKL_HINT_TLS_KEY_PASSWORD,
            Hint::Tls => zkl_hint::ZKL_HINT_TLS,
            Hint::Sasl => zkl_hint::ZKL_HINT_SASL,
            Hint::Identity => zkl_hint::ZKL_HINT_IDENTITY,
            Hint::ConnectTimeout => zkl_hint::ZKL_HINT_CONNECT_TIMEOUT,
        }
    }
}

impl zkl_hint {
    /// The setting in the C API's words, as the last error's message names it.
    pub(crate) fn c_setting(self) -> &'static str {
        match self {
            zkl_hint::ZKL_HINT_NONE => "",
            zkl_hint::ZKL_HINT_TLS_CA_FILE => "zkl_options_set_tls_ca_file",
            zkl_hint::ZKL_HINT_TLS_IDENTITY => "zkl_options_set_tls_identity_files",
            zkl_hint::ZKL_HINT_TLS_KEY_PASSWORD => "zkl_options_set_tls_key_password",
            zkl_hint::ZKL_HINT_TLS => "zkl_options_use_tls",
            zkl_hint::ZKL_HINT_SASL => {
                "zkl_options_set_sasl_digest_md5 or zkl_options_set_sasl_gssapi"
            }
            zkl_hint::ZKL_HINT_IDENTITY => {
                "zkl_options_set_sasl_digest_md5, zkl_options_set_tls_identity_files or \
                 zkl_options_add_auth"
            }
            zkl_hint::ZKL_HINT_CONNECT_TIMEOUT => "zkl_options_set_connect_timeout",
        }
    }
}

/// How lock nodes are named, so that other ZooKeeper clients can share the lock path.
/// Passed to zkl_client_set_protocol as a uint32_t.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum zkl_protocol {
    /// Apache Curator InterProcessMutex / InterProcessReadWriteLock compatible (the default).
    ZKL_PROTOCOL_CURATOR = 0,
    /// Python kazoo Lock / ReadLock / WriteLock compatible.
    ZKL_PROTOCOL_KAZOO = 1,
}

/// What a handle may believe about its hold (zkl_lock_hold_state writes it as a uint32_t).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum zkl_hold_state {
    /// Holds nothing.
    ZKL_HOLD_NONE = 0,
    /// Held, and the session is provably alive: the server cannot have freed it.
    ZKL_HOLD_HELD = 1,
    /// Held, but cut off from the server long enough that it may be gone: stop acting.
    ZKL_HOLD_UNCERTAIN = 2,
    /// The session ended: the lock is gone; release or free the handle.
    ZKL_HOLD_LOST = 3,
}

impl From<HoldState> for zkl_hold_state {
    fn from(s: HoldState) -> zkl_hold_state {
        match s {
            HoldState::NotHeld => zkl_hold_state::ZKL_HOLD_NONE,
            HoldState::Held => zkl_hold_state::ZKL_HOLD_HELD,
            HoldState::Uncertain => zkl_hold_state::ZKL_HOLD_UNCERTAIN,
            HoldState::Lost => zkl_hold_state::ZKL_HOLD_LOST,
        }
    }
}

/// The state of a client's session (zkl_client_session_state and zkl_session_event give it as a
/// uint32_t).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum zkl_session_state {
    /// Connected: locks held are held.
    ZKL_SESSION_STATE_CONNECTED = 0,
    /// Disconnected; the session may survive: holds stay HELD while their lease runs and no
    /// reconnect's answer is awaited, then turn UNCERTAIN until the session reconnects (and
    /// its lease runs again) or expires.
    ZKL_SESSION_STATE_SUSPENDED = 1,
    /// The session expired: every lock it held is lost. A fresh session follows on the next call.
    ZKL_SESSION_STATE_EXPIRED = 2,
    /// The client was closed (zkl_client_close, or its last handle freed).
    ZKL_SESSION_STATE_CLOSED = 3,
}

impl From<SessionState> for zkl_session_state {
    fn from(s: SessionState) -> zkl_session_state {
        match s {
            SessionState::Connected => zkl_session_state::ZKL_SESSION_STATE_CONNECTED,
            SessionState::Suspended => zkl_session_state::ZKL_SESSION_STATE_SUSPENDED,
            SessionState::Expired => zkl_session_state::ZKL_SESSION_STATE_EXPIRED,
            SessionState::Closed => zkl_session_state::ZKL_SESSION_STATE_CLOSED,
        }
    }
}

/// The ACL of the lock nodes and parents a client creates (zkl_client_set_acl takes it as a
/// uint32_t).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum zkl_acl {
    /// World: all (ZooKeeper's OPEN_ACL_UNSAFE; the default, as Curator and kazoo).
    ZKL_ACL_OPEN = 0,
    /// Only the authenticated identity that created a node (needs zkl_client_add_auth).
    ZKL_ACL_CREATOR_ALL = 1,
    /// Creator: all; everyone: read (the queue can be inspected, not touched).
    ZKL_ACL_CREATOR_ALL_READ_ALL = 2,
}

impl TryFrom<u32> for zkl_acl {
    type Error = u32;
    fn try_from(v: u32) -> Result<zkl_acl, u32> {
        match v {
            0 => Ok(zkl_acl::ZKL_ACL_OPEN),
            1 => Ok(zkl_acl::ZKL_ACL_CREATOR_ALL),
            2 => Ok(zkl_acl::ZKL_ACL_CREATOR_ALL_READ_ALL),
            other => Err(other),
        }
    }
}

impl From<zkl_acl> for Acl {
    fn from(a: zkl_acl) -> Acl {
        match a {
            zkl_acl::ZKL_ACL_OPEN => Acl::Open,
            zkl_acl::ZKL_ACL_CREATOR_ALL => Acl::CreatorAll,
            zkl_acl::ZKL_ACL_CREATOR_ALL_READ_ALL => Acl::CreatorAllReadAll,
        }
    }
}

impl From<&Error> for zkl_status {
    fn from(e: &Error) -> zkl_status {
        match e {
            Error::Timeout => zkl_status::ZKL_TIMEOUT,
            Error::InvalidArgument(_) => zkl_status::ZKL_INVALID_ARGUMENT,
            Error::WouldDeadlock(_) => zkl_status::ZKL_WOULD_DEADLOCK,
            Error::NotHeld => zkl_status::ZKL_NOT_HELD,
            Error::ConnectionLoss(_) => zkl_status::ZKL_CONNECTION_LOSS,
            Error::SessionExpired => zkl_status::ZKL_SESSION_EXPIRED,
            Error::LockLost => zkl_status::ZKL_LOCK_LOST,
            // The child of a fork() can use nothing of what its parent made: for it the client is
            // closed (the message says why).
            Error::Closed | Error::Forked(_) => zkl_status::ZKL_CLOSED,
            Error::Cancelled => zkl_status::ZKL_CANCELLED,
            Error::ZooKeeper(_) => zkl_status::ZKL_ZOOKEEPER_ERROR,
            Error::AuthFailed(_) => zkl_status::ZKL_AUTH_FAILED,
        }
    }
}

impl TryFrom<u32> for zkl_status {
    type Error = u32;
    fn try_from(v: u32) -> Result<zkl_status, u32> {
        use zkl_status::*;
        Ok(match v {
            0 => ZKL_OK,
            1 => ZKL_TIMEOUT,
            2 => ZKL_INVALID_ARGUMENT,
            3 => ZKL_NOT_HELD,
            4 => ZKL_CONNECTION_LOSS,
            5 => ZKL_SESSION_EXPIRED,
            6 => ZKL_ZOOKEEPER_ERROR,
            7 => ZKL_INTERNAL_ERROR,
            8 => ZKL_CANCELLED,
            9 => ZKL_LOCK_LOST,
            10 => ZKL_CLOSED,
            11 => ZKL_WOULD_DEADLOCK,
            12 => ZKL_AUTH_FAILED,
            other => return Err(other),
        })
    }
}

impl TryFrom<u32> for zkl_protocol {
    type Error = u32;
    fn try_from(v: u32) -> Result<zkl_protocol, u32> {
        match v {
            0 => Ok(zkl_protocol::ZKL_PROTOCOL_CURATOR),
            1 => Ok(zkl_protocol::ZKL_PROTOCOL_KAZOO),
            other => Err(other),
        }
    }
}

impl From<zkl_protocol> for Protocol {
    fn from(p: zkl_protocol) -> Protocol {
        match p {
            zkl_protocol::ZKL_PROTOCOL_CURATOR => Protocol::Curator,
            zkl_protocol::ZKL_PROTOCOL_KAZOO => Protocol::Kazoo,
        }
    }
}

impl zkl_status {
    /// The status's C name.
    pub fn name(self) -> &'static CStr {
        use zkl_status::*;
        match self {
            ZKL_OK => c"ZKL_OK",
            ZKL_TIMEOUT => c"ZKL_TIMEOUT",
            ZKL_INVALID_ARGUMENT => c"ZKL_INVALID_ARGUMENT",
            ZKL_NOT_HELD => c"ZKL_NOT_HELD",
            ZKL_CONNECTION_LOSS => c"ZKL_CONNECTION_LOSS",
            ZKL_SESSION_EXPIRED => c"ZKL_SESSION_EXPIRED",
            ZKL_ZOOKEEPER_ERROR => c"ZKL_ZOOKEEPER_ERROR",
            ZKL_INTERNAL_ERROR => c"ZKL_INTERNAL_ERROR",
            ZKL_CANCELLED => c"ZKL_CANCELLED",
            ZKL_LOCK_LOST => c"ZKL_LOCK_LOST",
            ZKL_CLOSED => c"ZKL_CLOSED",
            ZKL_WOULD_DEADLOCK => c"ZKL_WOULD_DEADLOCK",
            ZKL_AUTH_FAILED => c"ZKL_AUTH_FAILED",
        }
    }
}

/// The name of a zkl_status value, e.g. "ZKL_TIMEOUT"; "ZKL_UNKNOWN_STATUS" for any other
/// number. Never NULL; the string is static and owned by the library (never free it).
/// Never blocks; any thread.
#[no_mangle]
pub extern "C" fn zkl_status_name(status: u32) -> *const c_char {
    ffi_boundary!(value {
        match zkl_status::try_from(status) {
            Ok(s) => s.name().as_ptr(),
            Err(_) => c"ZKL_UNKNOWN_STATUS".as_ptr(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_status() {
        use zkl_status::*;
        let cases = [
            (Error::Timeout, ZKL_TIMEOUT),
            (Error::InvalidArgument("x".into()), ZKL_INVALID_ARGUMENT),
            (Error::WouldDeadlock("x".into()), ZKL_WOULD_DEADLOCK),
            (Error::AuthFailed("x".into()), ZKL_AUTH_FAILED),
            (Error::NotHeld, ZKL_NOT_HELD),
            (Error::ConnectionLoss("x".into()), ZKL_CONNECTION_LOSS),
            (Error::SessionExpired, ZKL_SESSION_EXPIRED),
            (Error::LockLost, ZKL_LOCK_LOST),
            (Error::Closed, ZKL_CLOSED),
            (Error::Forked("x".into()), ZKL_CLOSED),
            (Error::Cancelled, ZKL_CANCELLED),
            (Error::ZooKeeper("x".into()), ZKL_ZOOKEEPER_ERROR),
        ];
        for (e, s) in cases {
            assert_eq!(zkl_status::from(&e), s, "{e:?}");
        }
    }

    #[test]
    fn u32_round_trip() {
        for v in 0..=12u32 {
            let s = zkl_status::try_from(v).unwrap();
            assert_eq!(s as u32, v);
            assert!(s.name().to_str().unwrap().starts_with("ZKL_"));
        }
        assert_eq!(zkl_status::try_from(13), Err(13));
        assert_eq!(
            zkl_protocol::try_from(1),
            Ok(zkl_protocol::ZKL_PROTOCOL_KAZOO)
        );
        assert_eq!(zkl_protocol::try_from(2), Err(2));
        assert_eq!(
            Protocol::from(zkl_protocol::ZKL_PROTOCOL_CURATOR),
            Protocol::Curator
        );
    }
}
