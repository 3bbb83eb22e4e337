//! What a client is made with: its options and the ACL of the nodes it creates.

use std::time::Duration;

use zookeeper_client as zk;

use super::sasl::Sasl;
use super::tls::Tls;
use crate::node::Protocol;

/// The ACL of the lock nodes and parents a client creates.
///
/// ```
/// let opts = zklock::Options::default()
///     .auth("digest", "app:secret")
///     .acl(zklock::Acl::CreatorAllReadAll);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Acl {
    /// Anyone may do anything (ZooKeeper's `OPEN_ACL_UNSAFE`; the default, as Curator's and
    /// kazoo's).
    #[default]
    Open,
    /// Only the authenticated identity that created a node (needs authentication).
    CreatorAll,
    /// The creator may do anything, everyone may read: the queue can be inspected, not touched.
    CreatorAllReadAll,
}

static CREATOR_ALL_READ_ALL: [zk::Acl; 2] = [
    zk::Acl::new_const(zk::Permission::ALL, "auth", ""),
    zk::Acl::new_const(zk::Permission::READ, "world", "anyone"),
];

impl Acl {
    pub(super) fn acls(self) -> zk::Acls<'static> {
        match self {
            Acl::Open => zk::Acls::anyone_all(),
            Acl::CreatorAll => zk::Acls::creator_all(),
            Acl::CreatorAllReadAll => zk::Acls::new(&CREATOR_ALL_READ_ALL),
        }
    }
}

/// Options of a [`Client`](crate::Client).
///
/// ```
/// use std::time::Duration;
/// let opts = zklock::Options::default()
///     .session_timeout(Duration::from_secs(6))
///     .holder_id("worker-7");
/// ```
#[derive(Clone)]
pub struct Options {
    pub(crate) session_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) holder_id: Option<String>,
    pub(crate) protocol: Protocol,
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    pub(crate) reconnect_on_expiry: bool,
    pub(crate) tcp_nodelay: bool,
    pub(crate) acl: Acl,
    pub(crate) server_tick_time: Option<Duration>,
    pub(crate) tls: Option<Tls>,
    pub(crate) sasl: Option<Sasl>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials are never printed.
        let auth: Vec<_> = self
            .auth
            .iter()
            .map(|(scheme, _)| format!("{scheme}:<redacted>"))
            .collect();
        f.debug_struct("Options")
            .field("session_timeout", &self.session_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("holder_id", &self.holder_id)
            .field("protocol", &self.protocol)
            .field("auth", &auth)
            .field("reconnect_on_expiry", &self.reconnect_on_expiry)
            .field("acl", &self.acl)
            .field("server_tick_time", &self.server_tick_time)
            .field("tls", &self.tls)
            .field("sasl", &self.sasl)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            session_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            holder_id: None,
            protocol: Protocol::Curator,
            auth: Vec::new(),
            reconnect_on_expiry: true,
            tcp_nodelay: true,
            acl: Acl::Open,
            server_tick_time: None,
            tls: None,
            sasl: None,
        }
    }
}

impl Options {
    /// The session timeout asked of the server (default 10 s). Locks of a dead client are
    /// released by the server after about this long. From 100 ms to one hour: anything else
    /// (`Duration::MAX` too) is refused at connect
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }
    /// How long [`Client::connect`](crate::Client::connect) waits for a session (default 10 s).
    ///
    /// `Duration::MAX` waits as long as it takes; zero is refused at connect
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)). A connect that every
    /// server refuses fails at once, whatever the timeout.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
    /// The text stored in this client's lock nodes (default `<hostname>:<pid>`).
    pub fn holder_id(mut self, id: impl Into<String>) -> Self {
        self.holder_id = Some(id.into());
        self
    }
    /// The node-naming protocol of locks made from this client (default Curator).
    pub fn protocol(mut self, p: Protocol) -> Self {
        self.protocol = p;
        self
    }
    /// TLS to every server of the host list (ZooKeeper's `secureClientPort`); a host written
    /// `tcp://host:port` stays plaintext. Without this option, hosts written
    /// `tcp+tls://host:port` use TLS with the system's certificate authorities. See [`Tls`].
    ///
    /// ```
    /// let opts = zklock::Options::default()
    ///     .tls(zklock::Tls::new().ca_file("ca.pem").identity_files("client.pem", "client.key"));
    /// ```
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = Some(tls);
        self
    }
    /// SASL authentication at every (re)connect (servers with `SASLAuthenticationProvider`,
    /// e.g. `enforce.auth.schemes=sasl`). See [`Sasl`].
    ///
    /// ```
    /// let opts = zklock::Options::default().sasl(zklock::Sasl::digest_md5("bob", "secret"));
    /// ```
    pub fn sasl(mut self, sasl: impl Into<Sasl>) -> Self {
        self.sasl = Some(sasl.into());
        self
    }
    /// Whether the client proves an identity the servers can name in an ACL: `auth`, SASL or
    /// a TLS client certificate.
    pub(crate) fn has_identity(&self) -> bool {
        !self.auth.is_empty()
            || self.sasl.is_some()
            || self.tls.as_ref().is_some_and(Tls::has_identity)
    }
    /// Adds authentication, e.g. `("digest", "user:password")`; replayed on every reconnect.
    /// `digest` sends the password in clear at every connect: over plaintext, prefer
    /// [`Options::sasl`] or TLS. The scheme `sasl` is refused at connect
    /// ([`Error::InvalidArgument`](crate::Error::InvalidArgument)): SASL is a handshake when
    /// the session opens, [`Options::sasl`].
    pub fn auth(mut self, scheme: impl Into<String>, auth: impl Into<Vec<u8>>) -> Self {
        self.auth.push((scheme.into(), auth.into()));
        self
    }
    /// The ACL of the nodes this client creates (default [`Acl::Open`]). A creator-only ACL
    /// needs an identity ([`Options::auth`], [`Options::sasl`] or a TLS client certificate):
    /// [`Client::connect`](crate::Client::connect) refuses it otherwise.
    pub fn acl(mut self, acl: Acl) -> Self {
        self.acl = acl;
        self
    }
    /// Whether the next call after a session expiry opens a fresh session by itself (default
    /// true). Locks of the expired session stay lost either way.
    pub fn reconnect_on_expiry(mut self, on: bool) -> Self {
        self.reconnect_on_expiry = on;
        self
    }
    /// The servers' `tickTime` (default: the longest one the servers in the host list report
    /// to the `conf` four-letter word at connect, else ZooKeeper's default of 2 s; see
    /// [`Client::server_tick_time`](crate::Client::server_tick_time) for the one in use).
    ///
    /// The lease of a hold is reckoned from it: only the leader expires sessions, and a
    /// follower tells the leader about its clients in its answers to the leader's pings, sent
    /// every half tick. A renewal counts once the leader has provably heard of it, which takes
    /// a little over half a tick (`docs/hold-model.md`). Saying a longer tick than the servers
    /// use only makes leases shorter; a shorter one than they use makes them unsound. Nothing
    /// the server grants bounds its tick: a server whose `minSessionTimeout` is set below two
    /// ticks grants sessions its leader expires on its own; a session timeout under about two
    /// ticks leaves holds believed little or not at all (a warning is logged at connect).
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = zklock::Options::default().server_tick_time(Duration::from_millis(500));
    /// ```
    pub fn server_tick_time(mut self, tick: Duration) -> Self {
        self.server_tick_time = Some(tick);
        self
    }
    /// Whether to set TCP_NODELAY on the session's socket (default true). Only for measuring
    /// what it is worth: without it a pipelined create + listing costs two round trips.
    #[doc(hidden)]
    pub fn tcp_nodelay(mut self, on: bool) -> Self {
        self.tcp_nodelay = on;
        self
    }
}
