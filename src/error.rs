//! The one error type of the library.

use std::fmt;

/// What went wrong. `Display` gives the words a C user sees from `zkl_last_error_message`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A bad argument: malformed path or host list, non-UTF-8 text, a bad count.
    InvalidArgument(String),
    /// A lock was not acquired before its deadline.
    Timeout,
    /// Release of a lock this handle (or thread) does not hold.
    NotHeld,
    /// ZooKeeper could not be reached in time. The operation may or may not have been applied;
    /// lock recipes clean up after themselves.
    ConnectionLoss(String),
    /// The session ended: every lock it held is lost.
    SessionExpired,
    /// The client was closed.
    Closed,
    /// A waiting acquire was cancelled.
    Cancelled,
    /// The lock was held but has been lost (session expired or node removed) before release.
    LockLost,
    /// The request would deadlock (e.g. upgrading a read lock to a write lock).
    WouldDeadlock(String),
    /// Any other error the server returned (no auth, bad ACL, node exists, ...).
    ZooKeeper(String),
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Timeout => f.write_str("not acquired before the timeout"),
            Error::NotHeld => f.write_str("the lock is not held by this handle"),
            Error::ConnectionLoss(m) => write!(f, "connection to ZooKeeper lost: {m}"),
            Error::SessionExpired => {
                f.write_str("the ZooKeeper session expired: every lock it held is lost")
            }
            Error::Closed => f.write_str("the client is closed"),
            Error::Cancelled => f.write_str("the acquire was cancelled"),
            Error::LockLost => {
                f.write_str("the lock was lost before release (session expired or node removed)")
            }
            Error::WouldDeadlock(m) => write!(f, "would deadlock: {m}"),
            Error::ZooKeeper(m) => write!(f, "ZooKeeper error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// Whether retrying the same call on the same session may succeed.
    pub fn is_connection_loss(&self) -> bool {
        matches!(self, Error::ConnectionLoss(_))
    }

    /// Whether the session is gone (expired or closed).
    pub fn is_session_end(&self) -> bool {
        matches!(self, Error::SessionExpired | Error::Closed)
    }

    pub(crate) fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }
}

impl From<zookeeper_client::Error> for Error {
    fn from(e: zookeeper_client::Error) -> Error {
        use zookeeper_client::Error as Z;
        match e {
            Z::SessionExpired | Z::AuthFailed => Error::SessionExpired,
            Z::ClientClosed => Error::Closed,
            Z::BadArguments(m) => Error::InvalidArgument((*m).to_string()),
            Z::NoChildrenForEphemerals => Error::ZooKeeper(
                "the lock path is an ephemeral node (a simple lock's): no other kind of lock can queue under it"
                    .into(),
            ),
            Z::NoNode
            | Z::NoAuth
            | Z::BadVersion
            | Z::NodeExists
            | Z::NotEmpty
            | Z::InvalidAcl
            | Z::SessionMoved
            | Z::NotReadOnly
            | Z::NoWatcher
            | Z::QuotaExceeded
            | Z::Throttled
            | Z::MarshallingError
            | Z::Unimplemented
            | Z::ReconfigDisabled
            | Z::UnexpectedErrorCode(_) => Error::ZooKeeper(e.to_string()),
            // Everything that is not a ZooKeeper error code ("no response from connection",
            // timeouts, I/O) means: we do not know, the connection is in doubt.
            other => Error::ConnectionLoss(other.to_string()),
        }
    }
}
