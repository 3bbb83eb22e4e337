//! The one error type of the library.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

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
    /// lock recipes clean up after themselves. [`std::error::Error::source`] gives the client's
    /// own error where there was one.
    ConnectionLoss(ErrorDetail),
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
    /// [`std::error::Error::source`] gives the client's own error where there was one.
    ZooKeeper(ErrorDetail),
    /// A call in a forked child on a client (or a lock, a guard) made before the `fork()`: the
    /// session is the parent's, and the child can use nothing of it (the message says which
    /// process made it). Make clients after fork, in the process that uses them.
    Forked(String),
    /// The servers would not take this client's credentials or certificate, or this client
    /// would not take the servers' certificate: SASL authentication failed, a TLS handshake
    /// failed (a CA this client does not trust, a certificate for another name, a client
    /// certificate refused). Retrying does not help; the message says what to fix.
    AuthFailed(ErrorDetail),
}

/// What an [`Error::ConnectionLoss`] or [`Error::ZooKeeper`] says: a message (it reads as a
/// `&str`) and, where the ZooKeeper client reported one, the underlying error as its
/// [`source`](std::error::Error::source). Two details are equal when their messages are.
///
/// ```
/// use std::time::Duration;
/// use zklock::{Client, Error, Options};
///
/// let options = Options::default().connect_timeout(Duration::from_millis(200));
/// match Client::connect("127.0.0.1:1", options) {
///     Err(Error::ConnectionLoss(detail)) => {
///         assert!(detail.contains("127.0.0.1:1"), "{detail}");
///         // The error chain: zklock's words first, then the client's, when it had some.
///         let _cause = detail.source();
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
#[derive(Clone)]
pub struct ErrorDetail {
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ErrorDetail {
    /// A detail with this message and no source.
    pub fn new(message: impl Into<String>) -> ErrorDetail {
        ErrorDetail {
            message: message.into(),
            source: None,
        }
    }

    /// A detail whose message is `message` and whose source is `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> ErrorDetail {
        ErrorDetail {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying error, if the ZooKeeper client reported one.
    pub fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }

    /// The same detail with `prefix: ` before its message (the source is kept).
    pub(crate) fn context(self, prefix: impl fmt::Display) -> ErrorDetail {
        ErrorDetail {
            message: format!("{prefix}: {}", self.message),
            source: self.source,
        }
    }
}

impl Deref for ErrorDetail {
    type Target = str;
    fn deref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for ErrorDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            None => fmt::Debug::fmt(&self.message, f),
            Some(s) => f
                .debug_struct("ErrorDetail")
                .field("message", &self.message)
                .field("source", s)
                .finish(),
        }
    }
}

impl PartialEq for ErrorDetail {
    fn eq(&self, other: &ErrorDetail) -> bool {
        self.message == other.message
    }
}

impl Eq for ErrorDetail {}

impl From<String> for ErrorDetail {
    fn from(message: String) -> ErrorDetail {
        ErrorDetail::new(message)
    }
}

impl From<&str> for ErrorDetail {
    fn from(message: &str) -> ErrorDetail {
        ErrorDetail::new(message)
    }
}

/// The setting that would fix an error, named in the last words of its message: "give its
/// password (Tls::key_password)". [`Error::hint`] gives it as a value, so that each door
/// names the setting its own way: the C API `zkl_options_set_tls_key_password`, the Python
/// package `keyfile_password=`, the command `--tls-key-password-file`
/// ([`Error::to_string_naming`]); [`Display`](fmt::Display) names it as the Rust API does
/// ([`Hint::rust_name`]). The words before it (the reason) are the same in every door.
///
/// ```
/// use zklock::{Error, Hint};
///
/// // An encrypted TLS key without its password, say:
/// let e = Error::InvalidArgument(
///     "key.pem is encrypted: give its password (Tls::key_password)".into(),
/// );
/// assert_eq!(e.hint(), Some(Hint::TlsKeyPassword));
/// assert!(e.to_string().ends_with("(Tls::key_password)"));
/// let for_python = e.to_string_naming(|h| match h {
///     Hint::TlsKeyPassword => "keyfile_password=",
///     other => other.rust_name(),
/// });
/// assert!(for_python.ends_with("(keyfile_password=)"), "{for_python}");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Hint {
    /// The CA file that signed the servers' certificates ([`Tls::ca_file`](crate::Tls::ca_file)).
    TlsCaFile,
    /// The client's certificate and key, for servers that require one
    /// ([`Tls::identity_files`](crate::Tls::identity_files)).
    TlsIdentity,
    /// The password of the encrypted TLS key
    /// ([`Tls::key_password`](crate::Tls::key_password)).
    TlsKeyPassword,
    /// TLS to the servers, asked for or not ([`Options::tls`](crate::Options::tls)).
    Tls,
    /// SASL credentials ([`Options::sasl`](crate::Options::sasl)).
    Sasl,
    /// An identity for creator-only ACLs: SASL, a TLS client certificate or auth data
    /// ([`Options::sasl`](crate::Options::sasl), [`Tls::identity_files`](crate::Tls::identity_files),
    /// [`Options::auth`](crate::Options::auth)).
    Identity,
    /// The connect timeout ([`Options::connect_timeout`](crate::Options::connect_timeout)).
    ConnectTimeout,
}

impl Hint {
    /// Every hint, in the order of their C values (`ZKL_HINT_TLS_CA_FILE` = 1, ...).
    pub const ALL: [Hint; 7] = [
        Hint::TlsCaFile,
        Hint::TlsIdentity,
        Hint::TlsKeyPassword,
        Hint::Tls,
        Hint::Sasl,
        Hint::Identity,
        Hint::ConnectTimeout,
    ];

    /// The setting as the Rust API names it: `Tls::key_password`.
    pub fn rust_name(self) -> &'static str {
        match self {
            Hint::TlsCaFile => "Tls::ca_file",
            Hint::TlsIdentity => "Tls::identity_files",
            Hint::TlsKeyPassword => "Tls::key_password",
            Hint::Tls => "Options::tls",
            Hint::Sasl => "Options::sasl",
            Hint::Identity => "Options::sasl, Tls::identity_files or Options::auth",
            Hint::ConnectTimeout => "Options::connect_timeout",
        }
    }

    /// `reason` followed by this hint in the Rust API's words: `"{reason} (Tls::ca_file)"`, the
    /// one form [`Error::hint`] reads back.
    pub(crate) fn after(self, reason: impl fmt::Display) -> String {
        format!("{reason} ({})", self.rust_name())
    }

    /// The hint that `message` ends with, and the message before it.
    fn split(message: &str) -> (&str, Option<Hint>) {
        for h in Hint::ALL {
            if let Some(reason) = message
                .strip_suffix(')')
                .and_then(|m| m.strip_suffix(h.rust_name()))
                .and_then(|m| m.strip_suffix(" ("))
            {
                return (reason, Some(h));
            }
        }
        (message, None)
    }
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
            Error::Forked(m) => f.write_str(m),
            Error::AuthFailed(m) => write!(f, "authentication failed: {m}"),
        }
    }
}

impl std::error::Error for Error {
    /// The ZooKeeper client's own error behind a connection loss or a server error, where it
    /// reported one.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::ConnectionLoss(d) | Error::ZooKeeper(d) | Error::AuthFailed(d) => d.source(),
            _ => None,
        }
    }
}

impl Error {
    /// The setting that would fix this error, named at the end of its message (see [`Hint`]).
    pub fn hint(&self) -> Option<Hint> {
        self.detail().and_then(|m| Hint::split(m).1)
    }

    /// The message ([`Display`](fmt::Display)) with its hint named by `name` instead of by
    /// [`Hint::rust_name`]: how a door other than the Rust API words this error.
    pub fn to_string_naming<'a>(&self, name: impl FnOnce(Hint) -> &'a str) -> String {
        match self.hint() {
            Some(h) => format!("{} ({})", self.without_hint(), name(h)),
            None => self.to_string(),
        }
    }

    /// The message without its hint (see [`Hint`]): the words that every door shares.
    pub(crate) fn without_hint(&self) -> String {
        let text = self.to_string();
        match self.hint() {
            Some(h) => text
                .strip_suffix(&format!(" ({})", h.rust_name()))
                .map(str::to_string)
                .unwrap_or(text),
            None => text,
        }
    }

    /// The words this error carries, where it carries some.
    fn detail(&self) -> Option<&str> {
        match self {
            Error::InvalidArgument(m) | Error::WouldDeadlock(m) | Error::Forked(m) => Some(m),
            Error::ConnectionLoss(d) | Error::ZooKeeper(d) | Error::AuthFailed(d) => Some(d),
            _ => None,
        }
    }

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

    /// [`Error::Forked`] for a call in this process on something that process `made_in` made
    /// before it forked.
    pub(crate) fn forked(made_in: u32) -> Error {
        Error::Forked(format!(
            "this client was made before fork(), in process {made_in} (this is process {}): \
             a forked child can use nothing of it, and freeing it here releases nothing; \
             make clients after fork",
            std::process::id()
        ))
    }
}

impl From<zookeeper_client::Error> for Error {
    fn from(e: zookeeper_client::Error) -> Error {
        use zookeeper_client::Error as Z;
        match e {
            Z::SessionExpired | Z::AuthFailed => Error::SessionExpired,
            Z::ClientClosed => Error::Closed,
            Z::BadArguments(m) => Error::InvalidArgument((*m).to_string()),
            Z::NoChildrenForEphemerals => Error::ZooKeeper(ErrorDetail::with_source(
                "the lock path is an ephemeral node (a simple lock's): no other kind of lock can \
                 queue under it",
                e,
            )),
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
            | Z::UnexpectedErrorCode(_) => {
                Error::ZooKeeper(ErrorDetail::with_source(e.to_string(), e))
            }
            // Everything that is not a ZooKeeper error code ("no response from connection",
            // timeouts, I/O) means: we do not know, the connection is in doubt.
            other => Error::ConnectionLoss(ErrorDetail::with_source(other.to_string(), other)),
        }
    }
}
