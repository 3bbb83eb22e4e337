//! [`Client`]: one ZooKeeper session at a time, shared by any number of threads and locks,
//! behind a blocking facade over the async `zookeeper-client` crate; a fresh session after
//! expiry when asked.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use zookeeper_client as zk;

use super::events::Events;
use super::hosts::{parse_hosts, Refused};
use super::kinds::{SessionEvent, SessionState};
use super::options::{Acl, Options};
use super::state::Session;
use super::watch::ChildrenWatch;
use crate::deadline::{saturating_after, Deadline};
use crate::error::{Error, Hint, Result};
use crate::node::{LockKind, Protocol};
use crate::runtime;
use crate::wait::Signal;

pub(crate) struct Inner {
    pub(super) hosts: String,
    pub(super) servers: Vec<SocketAddr>,
    /// The servers, each with its host name when it is reached over TLS.
    pub(super) named: Vec<(SocketAddr, Option<String>)>,
    pub(crate) options: Options,
    pub(crate) holder_id: String,
    pub(super) protocol: AtomicU8,
    pub(super) acl: AtomicU8,
    pub(super) current: Mutex<Option<Arc<Session>>>,
    pub(super) connect_lock: Mutex<()>,
    pub(super) generation: AtomicU64,
    /// The sessions' state and the listeners.
    pub(super) events: Arc<Events>,
    /// Authentication added after connecting, replayed on every later session too.
    pub(super) added_auth: Mutex<Vec<(String, Vec<u8>)>>,
    /// The process that connected. In a forked child the client is inert (see
    /// [`Client::connect`], "fork()").
    pub(super) pid: u32,
    /// The servers' tick as read at the first session's connect: a later session (after an
    /// expiry) reckons with it too, without asking again.
    pub(super) read_tick: Mutex<Option<Duration>>,
}

/// One ZooKeeper session, shared by any number of threads and locks (`Send + Sync`, cheap to
/// clone). Every call blocks the calling thread, never longer than its timeout plus the
/// session timeout.
///
/// **fork().** A client belongs to the process that connected it. In a child forked after it
/// was made, the client and every lock, guard and hold made from it are inert: every call
/// returns [`Error::Forked`] (`state()` says `Closed`, `is_held()` false) without a byte sent
/// to the parent's session, and dropping them (or `close`) releases nothing of the parent's
/// and returns at once. Make clients after fork, in the process that uses them; a child of a
/// process that had made a client cannot make one (the I/O executor does not survive fork).
///
/// ```no_run
/// use zklock::{Client, Options, SessionState};
/// let client = Client::connect("127.0.0.1:2181/myapp", Options::default())?;
/// assert_eq!(client.state(), SessionState::Connected);
/// client.add_listener(|ev| log::info!("session is now {:?}", ev.state));
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("hosts", &self.inner.hosts)
            .field("state", &self.state())
            .field("session_id", &format_args!("{:#x}", self.session_id()))
            .finish()
    }
}

/// Refuses an authentication scheme that cannot be added to a session: SASL authenticates in a
/// handshake when the session opens, and the servers end the session of an `addauth` with it.
fn check_auth_scheme(scheme: &str) -> Result<()> {
    if scheme.eq_ignore_ascii_case("sasl") {
        return Err(Error::invalid(Hint::Sasl.after(
            "the scheme \"sasl\" cannot be added as auth data: SASL authenticates in a \
             handshake when the session opens; give it in the options",
        )));
    }
    Ok(())
}

impl Client {
    /// Connects to ZooKeeper. `hosts` is `host:port[,host:port...][/chroot]`. Blocks until the
    /// session is established or the connect timeout passes.
    ///
    /// Hosts may be written `tcp+tls://host:port` (TLS) or `tcp://host:port` (plaintext); a
    /// host without a scheme uses TLS when [`Options::tls`] is given. See [`Tls`](crate::Tls)
    /// and [`Sasl`](crate::Sasl) for secured servers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed host list or TLS file; [`Error::ConnectionLoss`]
    /// when no server answered in time (the message says, per server, what was seen: refused,
    /// no answer, a TLS port reached in plaintext or the reverse); [`Error::AuthFailed`] when
    /// the servers refused the credentials (SASL) or a TLS handshake failed over a certificate
    /// (the message says which and what to fix). Every error comes within the connect timeout;
    /// when every server refuses the connection, at once ("connection refused by ...").
    /// [`Error::InvalidArgument`] too for a zero connect timeout, a session timeout outside
    /// 100 ms to one hour, and auth data of the scheme `sasl` ([`Options::sasl`] is the way).
    ///
    /// [`Error::Forked`] in a forked child of a process that had made a client already (its
    /// I/O executor and async-io's reactor are the parent's and do not run in the child).
    pub fn connect(hosts: &str, options: Options) -> Result<Client> {
        if let Some(parent) = runtime::made_in_parent() {
            return Err(Error::Forked(format!(
                "zklock's I/O was started before fork(), in process {parent} (this is process \
                 {}): a forked child of a process that made a client cannot make clients; \
                 make clients after fork, in processes that made none before forking",
                std::process::id()
            )));
        }
        let named = parse_hosts(hosts, options.tls.is_some())?;
        let servers = named.iter().map(|(a, _)| *a).collect();
        if options.session_timeout < Duration::from_millis(100) {
            return Err(Error::invalid("session timeout below 100 ms"));
        }
        if options.session_timeout > Duration::from_secs(3600) {
            return Err(Error::invalid(
                "session timeout above one hour (servers grant at most their maxSessionTimeout)",
            ));
        }
        if options.connect_timeout.is_zero() {
            return Err(Error::invalid(Hint::ConnectTimeout.after(
                "connect timeout of zero: a connect takes at least one round trip to the \
                 servers; give it a duration (the session timeout is a good one)",
            )));
        }
        for (scheme, _) in &options.auth {
            check_auth_scheme(scheme)?;
        }
        if options.acl != Acl::Open && !options.has_identity() {
            return Err(Error::invalid(Hint::Identity.after(format_args!(
                "the ACL {:?} grants rights to the creator's authenticated identity: give the \
                 client one: SASL, a TLS client certificate, or auth data",
                options.acl
            ))));
        }
        let holder_id = options
            .holder_id
            .clone()
            .unwrap_or_else(|| format!("{}:{}", crate::sys::hostname(), std::process::id()));
        let inner = Arc::new(Inner {
            hosts: hosts.to_string(),
            servers,
            named,
            protocol: AtomicU8::new(options.protocol as u8),
            acl: AtomicU8::new(options.acl as u8),
            options,
            holder_id,
            current: Mutex::new(None),
            connect_lock: Mutex::new(()),
            generation: AtomicU64::new(0),
            events: Arc::new(Events::new()),
            added_auth: Mutex::new(Vec::new()),
            pid: crate::sys::process_id(),
            read_tick: Mutex::new(None),
        });
        let client = Client { inner };
        let bound = saturating_after(client.inner.options.connect_timeout);
        client.new_session(None, bound, None, Refused::Ends)?;
        Ok(client)
    }

    /// Opens a fresh session (after expiry, or to start over). Locks of the old session are lost.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn reconnect(&self) -> Result<()> {
        let old = self.inner.current.lock().clone();
        let bound = saturating_after(self.inner.options.connect_timeout);
        self.new_session(old.map(|s| s.generation), bound, None, Refused::Ends)
    }

    /// The current session, opening a fresh one first if it expired and the policy says so.
    pub(crate) fn session(&self) -> Result<Arc<Session>> {
        self.session_for(Deadline::Forever, None)
    }

    /// The current session for an operation whose deadline is `d`: a fresh session after expiry
    /// is waited for until `d` at most (a try-once operation: one session timeout), never the
    /// whole connect timeout past the caller's deadline, and not past a cancel of `cancel`.
    pub(crate) fn session_for(&self, d: Deadline, cancel: Option<&Signal>) -> Result<Arc<Session>> {
        self.not_forked()?;
        let cur = self.inner.current.lock().clone();
        match cur {
            None => Err(Error::Closed),
            Some(s) => match s.state() {
                SessionState::Expired if self.inner.options.reconnect_on_expiry => {
                    let opts = &self.inner.options;
                    let bound = match d {
                        Deadline::TryOnce => d.capped(opts.session_timeout),
                        _ => d.capped(opts.connect_timeout),
                    };
                    // Servers that refuse now may be restarting: waited for, to the bound.
                    self.new_session(Some(s.generation), bound, cancel, Refused::Waits)?;
                    self.inner.current.lock().clone().ok_or(Error::Closed)
                }
                SessionState::Expired => Err(Error::SessionExpired),
                SessionState::Closed => Err(Error::Closed),
                _ => Ok(s),
            },
        }
    }

    /// `Err(Forked)` in a forked child of the process that made this client.
    pub(super) fn not_forked(&self) -> Result<()> {
        if crate::sys::process_id() == self.inner.pid {
            Ok(())
        } else {
            Err(Error::forked(self.inner.pid))
        }
    }

    /// The session state now (`Closed` in a forked child: the session is the parent's).
    pub fn state(&self) -> SessionState {
        if self.not_forked().is_err() {
            return SessionState::Closed;
        }
        self.inner.events.state.lock().0
    }

    /// The current session's id (0 before the first session).
    pub fn session_id(&self) -> i64 {
        self.inner.events.state.lock().1
    }

    /// Which session of this client is current (0 for the first).
    pub fn generation(&self) -> u64 {
        self.inner.events.state.lock().2
    }

    /// The holder id stored in this client's lock nodes.
    pub fn holder_id(&self) -> &str {
        &self.inner.holder_id
    }

    /// The default naming protocol of locks made from this client.
    pub fn protocol(&self) -> Protocol {
        match self.inner.protocol.load(Ordering::Relaxed) {
            1 => Protocol::Kazoo,
            _ => Protocol::Curator,
        }
    }

    /// Sets the naming protocol of locks made after this call.
    pub fn set_protocol(&self, p: Protocol) {
        self.inner.protocol.store(p as u8, Ordering::Relaxed);
    }

    /// The ACL of the nodes this client creates.
    pub fn acl(&self) -> Acl {
        match self.inner.acl.load(Ordering::Relaxed) {
            1 => Acl::CreatorAll,
            2 => Acl::CreatorAllReadAll,
            _ => Acl::Open,
        }
    }

    /// Sets the ACL of the nodes created after this call (lock nodes and the parents the
    /// library creates).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a creator-only ACL on a client without authentication
    /// (the server would refuse every create with `InvalidACL`).
    pub fn set_acl(&self, acl: Acl) -> Result<()> {
        // SASL and a TLS client certificate are identities too (a Kerberos or DIGEST-MD5
        // client's creator-only ACL was refused here).
        if acl != Acl::Open
            && !self.inner.options.has_identity()
            && self.inner.added_auth.lock().is_empty()
        {
            return Err(Error::invalid(format!(
                "the ACL {acl:?} grants rights to the creator's authenticated identity: add authentication first"
            )));
        }
        self.inner.acl.store(acl as u8, Ordering::Relaxed);
        Ok(())
    }

    /// The session timeout asked for.
    pub fn session_timeout(&self) -> Duration {
        self.inner.options.session_timeout
    }

    /// How long, at least, before the servers could expire the current session and hand its
    /// locks to another client, as far as this client can prove it: a hold's lease ends a
    /// tenth of the session timeout before that instant, and this is how long a holder that
    /// stopped believing has to stop whatever the lock protects (`zklock` kills its COMMAND
    /// by then). Zero once that may have happened, or while a reconnect's answer is awaited
    /// (the server that takes it may grant a session timeout the client does not know yet);
    /// `None` once the client is closed.
    ///
    /// ```no_run
    /// # let client = zklock::Client::connect("127.0.0.1:2181", zklock::Options::default())?;
    /// if let Some(left) = client.handover_bound() {
    ///     println!("no other client can hold our locks for {left:?} yet");
    /// }
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn handover_bound(&self) -> Option<Duration> {
        self.inner
            .current
            .lock()
            .as_ref()
            .map(|s| s.handover_bound())
    }

    /// The servers' tick the current session's lease reckons with: the one given in
    /// [`Options::server_tick_time`], else the longest `tickTime` the servers reported to the
    /// `conf` four-letter word at connect, else ZooKeeper's default of 2 s (`None` once the
    /// client is closed).
    pub fn server_tick_time(&self) -> Option<Duration> {
        self.inner.current.lock().as_ref().map(|s| s.tick)
    }

    /// The identities the servers know this client by, as `scheme:id` (ZooKeeper's `whoami`,
    /// servers 3.7 and later): `ip:127.0.0.1`, `sasl:bob` (SASL), `x509:CN=client` (a TLS
    /// client certificate), `digest:app` ([`Options::auth`]). A creator-only ACL grants its
    /// rights to these.
    ///
    /// ```no_run
    /// # let client = zklock::Client::connect("127.0.0.1:2181", zklock::Options::default())?;
    /// println!("connected as {}", client.identities()?.join(", "));
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn identities(&self) -> Result<Vec<String>> {
        self.session()?.identities()
    }

    /// Waits until the state satisfies `pred` or `timeout` passes; returns the state then.
    pub fn wait_for_state(
        &self,
        timeout: Duration,
        pred: impl Fn(SessionState) -> bool,
    ) -> SessionState {
        if self.not_forked().is_err() {
            // Closed for good here: waiting would only wait.
            return SessionState::Closed;
        }
        // A timeout too long for the clock is no timeout.
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.inner.events.state.lock();
        while !pred(st.0) {
            match deadline {
                Some(d) => {
                    if self
                        .inner
                        .events
                        .state_cv
                        .wait_until(&mut st, d)
                        .timed_out()
                    {
                        break;
                    }
                }
                None => self.inner.events.state_cv.wait(&mut st),
            }
        }
        st.0
    }

    /// Calls `f` on every change of session state, on a dedicated thread (never on the I/O
    /// thread), so `f` may call the client. Returns an id for [`Client::remove_listener`].
    pub fn add_listener(&self, f: impl Fn(&SessionEvent) + Send + Sync + 'static) -> u64 {
        self.inner.events.add_listener(Arc::new(f))
    }

    /// Asks the holder of the lock node `node_path` (a full path, e.g. from a lock's
    /// participants) to let go, as Curator's `Revoker.attemptRevoke`: writes `__REVOKE__` into
    /// the node. Holders that made their lock revocable (zklock's
    /// [`make_revocable`](crate::Revocable::make_revocable), Curator's `makeRevocable`) are told;
    /// others are not affected. `Ok(false)` if the node is gone.
    pub fn request_revoke(&self, node_path: &str) -> Result<bool> {
        crate::path::validate_path(node_path)?;
        let s = self.session()?;
        let d = s.one_call();
        loop {
            let data = match s.retry(d, || s.zk.get_data(node_path)) {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => return Ok(false),
                Err(e) => return Err(s.record_end_and_map(e)),
            };
            // A simple lock's node is shared by its holders in turn: the write carries the
            // hold's witness, so that, applied late, it never lands on the next holder's node.
            let (message, witness) = crate::node::revoke_request(node_path, &data);
            let written = s.retry(d, || async {
                let mut multi = s.zk.new_multi_writer();
                if let Some(w) = &witness {
                    multi.add_check_version(w, -1)?;
                }
                multi.add_set_data(node_path, &message, None)?;
                multi.commit().await.map_err(zk::Error::from)
            });
            match written {
                Ok(_) => return Ok(true),
                // That hold ended; ask whoever holds now.
                Err(zk::Error::NoNode) if witness.is_some() => continue,
                Err(zk::Error::NoNode) => return Ok(false),
                Err(e) => return Err(s.record_end_and_map(e)),
            }
        }
    }

    /// The kind of lock at `path`, read from its node and its children's names (Curator's and
    /// kazoo's layouts): what to list or revoke there without being told the kind.
    ///
    /// ```no_run
    /// use zklock::{Client, LockKind, Options};
    /// let client = Client::connect("127.0.0.1:2181", Options::default())?;
    /// match client.lock_kind("/locks/orders")? {
    ///     LockKind::Free => println!("nobody holds it"),
    ///     kind => println!("{kind:?}"),
    /// }
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn lock_kind(&self, path: &str) -> Result<LockKind> {
        crate::path::validate_path(path)?;
        let s = self.session()?;
        let d = s.one_call();
        let (data, stat) = match s.retry(d, || s.zk.get_data(path)) {
            Ok(x) => x,
            Err(zk::Error::NoNode) => return Ok(LockKind::Free),
            Err(e) => return Err(s.record_end_and_map(e)),
        };
        let ephemeral = stat.ephemeral_owner != 0;
        let children = if ephemeral {
            Vec::new()
        } else {
            match s.retry(d, || s.zk.list_children(path)) {
                Ok(c) => c,
                Err(zk::Error::NoNode) => return Ok(LockKind::Free),
                Err(e) => return Err(s.record_end_and_map(e)),
            }
        };
        Ok(crate::node::classify(&children, ephemeral, &data))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: u64) {
        self.inner.events.remove_listener(id);
    }

    /// Adds authentication to the session now, and to every later session of this client.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the scheme `sasl`, at once (SASL is a handshake when the
    /// session opens: [`Options::sasl`]). [`Error::AuthFailed`] when the servers refuse it (a
    /// scheme they have no provider for, or data its provider refuses): ZooKeeper then closes
    /// the connection, and the session is over, with every lock it held.
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        check_auth_scheme(scheme)?;
        let s = self.session()?;
        match s.call(s.zk.auth(scheme, auth), Deadline::Forever) {
            Ok(()) => {}
            Err(zk::Error::AuthFailed) => {
                return Err(Error::AuthFailed(
                    format!(
                        "the servers refused auth scheme {scheme:?} (a scheme they have no \
                         provider for, or data its provider refuses) and closed the connection: \
                         this session is over, and every lock it held is lost"
                    )
                    .into(),
                ))
            }
            Err(e) => return Err(s.record_end_and_map(e)),
        }
        self.inner
            .added_auth
            .lock()
            .push((scheme.to_string(), auth.to_vec()));
        Ok(())
    }

    /// Closes the client: acquires waiting on it return [`Error::Closed`] (deleting their
    /// nodes), later calls return [`Error::Closed`], and the session ends, its remaining lock
    /// nodes deleted by the server at once, when the last lock made from this client is dropped.
    ///
    /// In a forked child it does nothing: the session is the parent's.
    pub fn close(&self) {
        if self.not_forked().is_err() {
            return;
        }
        let s = self.inner.current.lock().take();
        if let Some(s) = s {
            s.on_state(SessionState::Closed);
            // Waiting acquires return `Closed` (and delete their nodes on the way out).
            for w in s.waits.lock().drain(..) {
                if let Some(sig) = w.upgrade() {
                    sig.cancel();
                }
            }
        }
    }

    /// The children of `path` (empty if it does not exist), and a watch that fires on their next
    /// change: to follow a lock's queue without polling (see [`Lockable::queue_path`](crate::Lockable::queue_path)).
    ///
    /// ```no_run
    /// use zklock::{Client, Lockable, Mutex, Options};
    /// let client = Client::connect("127.0.0.1:2181", Options::default())?;
    /// let m = Mutex::new(&client, "/locks/orders")?;
    /// loop {
    ///     let (_, mut change) = client.watch_children(&m.queue_path())?;
    ///     println!("{:?}", m.participants()?);
    ///     change.wait(None)?;
    /// }
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn watch_children(&self, path: &str) -> Result<(Vec<String>, ChildrenWatch)> {
        crate::path::validate_path(path)?;
        let s = self.session()?;
        loop {
            match s.retry(Deadline::Forever, || s.zk.list_and_watch_children(path)) {
                Ok((children, w)) => return Ok((children, ChildrenWatch::new(s, w))),
                Err(zk::Error::NoNode) => {
                    // Not there yet: watch for its creation instead.
                    match s.retry(Deadline::Forever, || s.zk.check_and_watch_stat(path)) {
                        Ok((None, w)) => return Ok((Vec::new(), ChildrenWatch::new(s, w))),
                        Ok((Some(_), _)) => continue,
                        Err(e) => return Err(s.record_end_and_map(e)),
                    }
                }
                Err(e) => return Err(s.record_end_and_map(e)),
            }
        }
    }

    /// How many node watch events (not session events) this client's waits have received:
    /// one per wake-up of a waiter, so a herd-free lock shows one per release.
    pub fn watch_events(&self) -> u64 {
        self.inner.events.watch_events.load(Ordering::Relaxed)
    }

    /// How many lock-lost callbacks the current session keeps (of holds not yet released): what
    /// a watcher's polling must not grow.
    #[doc(hidden)]
    pub fn lost_callbacks(&self) -> usize {
        self.inner
            .current
            .lock()
            .as_ref()
            .map_or(0, |s| s.lost_callbacks.lock().len())
    }

    /// Whether TCP_NODELAY is set on this process's sockets to the servers (one entry per socket).
    #[doc(hidden)]
    pub fn socket_nodelay(&self) -> Vec<bool> {
        self.inner
            .servers
            .iter()
            .flat_map(|s| crate::sys::nodelay_to(*s))
            .collect()
    }

    /// The options of a node this client creates in `mode` (with the client's ACL).
    pub(crate) fn create_options(&self, mode: zk::CreateMode) -> zk::CreateOptions<'static> {
        mode.with_acls(self.acl().acls())
    }
}
