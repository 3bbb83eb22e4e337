//! [`Client`]: one ZooKeeper session at a time, shared by any number of threads and locks,
//! behind a blocking facade over the async `zookeeper-client` crate; a fresh session after
//! expiry when asked.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use zookeeper_client as zk;

use super::events::{run_detached, Events};
use super::lease::{boot_now, gap_fits, ping_gap, read_server_tick, renew_lease, DEFAULT_TICK};
use super::options::{Acl, Options};
use super::state::{Session, SessionEvent, SessionState};
use super::watch::ChildrenWatch;
use crate::deadline::{saturating_after, Deadline};
use crate::error::{Error, ErrorDetail, Result};
use crate::node::{LockKind, Protocol};
use crate::runtime;
use crate::wait::{Outcome, Signal};

pub(crate) struct Inner {
    hosts: String,
    servers: Vec<SocketAddr>,
    /// The servers, each with its host name when it is reached over TLS.
    named: Vec<(SocketAddr, Option<String>)>,
    pub(crate) options: Options,
    pub(crate) holder_id: String,
    protocol: AtomicU8,
    acl: AtomicU8,
    current: Mutex<Option<Arc<Session>>>,
    connect_lock: Mutex<()>,
    generation: AtomicU64,
    /// The sessions' state and the listeners.
    events: Arc<Events>,
    /// Authentication added after connecting, replayed on every later session too.
    added_auth: Mutex<Vec<(String, Vec<u8>)>>,
    /// The process that connected. In a forked child the client is inert (see
    /// [`Client::connect`], "fork()").
    pid: u32,
    /// The servers' tick as read at the first session's connect: a later session (after an
    /// expiry) reckons with it too, without asking again.
    read_tick: Mutex<Option<Duration>>,
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

/// A host list's servers and its chroot: `host:port,...[/chroot]`, each host optionally
/// written `tcp://host:port` (plaintext) or `tcp+tls://host:port` (TLS), as zookeeper-client
/// reads them.
struct HostList<'a> {
    /// The list without the chroot (what zookeeper-client is given).
    list: &'a str,
    chroot: Option<&'a str>,
    /// Each host: (its text without the prefix, name, port, `Some(true)` for `tcp+tls://`,
    /// `Some(false)` for `tcp://`, `None`: the client's default).
    hosts: Vec<(&'a str, &'a str, u16, Option<bool>)>,
}

const PLAIN: &str = "tcp://";
const SECURE: &str = "tcp+tls://";

fn strip_scheme(h: &str) -> (&str, Option<bool>) {
    if let Some(rest) = h.strip_prefix(SECURE) {
        (rest, Some(true))
    } else if let Some(rest) = h.strip_prefix(PLAIN) {
        (rest, Some(false))
    } else {
        (h, None)
    }
}

impl<'a> HostList<'a> {
    fn parse(hosts: &'a str) -> Result<HostList<'a>> {
        // The chroot starts at the first '/' of the last host, after its scheme.
        let last = hosts.rfind(',').map_or(0, |i| i + 1);
        let tail = &hosts[last..];
        let lead = tail.len() - tail.trim_start().len();
        let (rest, _) = strip_scheme(&tail[lead..]);
        let at = last + lead + (tail.len() - lead - rest.len());
        let (list, chroot) = match hosts[at..].find('/') {
            Some(i) => (&hosts[..at + i], Some(&hosts[at + i..])),
            None => (hosts, None),
        };
        if let Some(c) = chroot {
            crate::path::validate_path(c).map_err(|e| {
                // The path's own words, without a second "invalid argument: ".
                let why = match e {
                    Error::InvalidArgument(m) => m,
                    other => other.to_string(),
                };
                Error::invalid(format!("bad chroot in host list {hosts:?}: {why}"))
            })?;
        }
        if list.trim().is_empty() {
            return Err(Error::invalid(format!(
                "host list {hosts:?} names no server"
            )));
        }
        let mut out = Vec::new();
        for h in list.split(',') {
            let (text, tls) = strip_scheme(h.trim());
            if text.contains("://") {
                return Err(Error::invalid(format!(
                    "host {h:?} of host list {hosts:?}: the only schemes are tcp:// and tcp+tls://"
                )));
            }
            let (name, port) = match text.rsplit_once(':') {
                Some((name, port)) => (name, port),
                None => (text, "2181"),
            };
            let port: u16 = port.parse().map_err(|_| {
                Error::invalid(format!("bad port in host {h:?} of host list {hosts:?}"))
            })?;
            if name.is_empty() {
                return Err(Error::invalid(format!(
                    "empty host name in host list {hosts:?}"
                )));
            }
            out.push((text, name, port, tls));
        }
        Ok(HostList {
            list,
            chroot,
            hosts: out,
        })
    }

    /// Whether some host is written `tcp+tls://`.
    fn names_tls(&self) -> bool {
        self.hosts.iter().any(|h| h.3 == Some(true))
    }
}

/// The servers' addresses; each with its host name when it is reached over TLS (`tls`: hosts
/// without a scheme use TLS).
fn parse_hosts(hosts: &str, tls: bool) -> Result<Vec<(SocketAddr, Option<String>)>> {
    let parsed = HostList::parse(hosts)?;
    let mut out = Vec::new();
    for (text, name, port, scheme) in &parsed.hosts {
        let secure = scheme.unwrap_or(tls).then(|| name.to_string());
        match (*name, *port).to_socket_addrs() {
            Ok(addrs) => out.extend(addrs.map(|a| (a, secure.clone()))),
            Err(e) => log::warn!("cannot resolve {text}: {e}"),
        }
    }
    if out.is_empty() {
        // Nothing to connect to: say so now, not after the connect timeout.
        return Err(Error::ConnectionLoss(
            format!(
                "cannot connect to {hosts}: {}",
                diagnose(hosts, None, Duration::ZERO)
            )
            .into(),
        ));
    }
    Ok(out)
}

/// Refuses an authentication scheme that cannot be added to a session: SASL authenticates in a
/// handshake when the session opens, and the servers end the session of an `addauth` with it.
fn check_auth_scheme(scheme: &str) -> Result<()> {
    if scheme.eq_ignore_ascii_case("sasl") {
        return Err(Error::invalid(
            "the scheme \"sasl\" cannot be added as auth data: SASL authenticates in a \
             handshake when the session opens; give it in the options (Options::sasl, \
             zkl_options_set_sasl_digest_md5 in C, sasl_options in Python, --sasl-user with the \
             command)",
        ));
    }
    Ok(())
}

/// Why no session could be opened with `hosts`, in words: per server, "cannot resolve host",
/// "connection refused by", "no answer from", why its TLS handshake fails, or that it
/// "accepts connections" (each probed once, waiting at most `wait` for each answer). `tls`:
/// the client's TLS options, when it has some (hosts without a scheme then use TLS).
fn diagnose(hosts: &str, tls: Option<&super::secure::Tls>, wait: Duration) -> String {
    let Ok(parsed) = HostList::parse(hosts) else {
        return String::new();
    };
    let mut why = Vec::new();
    for (_, host, port, scheme) in &parsed.hosts {
        let secure = scheme.unwrap_or(tls.is_some());
        let addrs: Vec<SocketAddr> = match (*host, *port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(_) => {
                why.push(format!("cannot resolve host {host:?}"));
                continue;
            }
        };
        for a in addrs {
            if wait.is_zero() {
                continue;
            }
            why.push(match std::net::TcpStream::connect_timeout(&a, wait) {
                Ok(_) => explain_silence(a, host, secure, tls, wait),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    format!("connection refused by {a}")
                }
                Err(_) => format!("no answer from {a}"),
            });
        }
    }
    why.join("; ")
}

/// Why a server that accepts connections opened no session.
fn explain_silence(
    a: SocketAddr,
    host: &str,
    secure: bool,
    tls: Option<&super::secure::Tls>,
    wait: Duration,
) -> String {
    #[cfg(feature = "tls")]
    {
        if secure {
            return super::secure::explain_handshake(a, host, tls, wait).unwrap_or_else(|| {
                format!("{a} completed the TLS handshake but opened no ZooKeeper session")
            });
        }
        if super::secure::speaks_tls(a, wait) {
            return format!(
                "{a} did not answer as ZooKeeper: it speaks TLS; is it a TLS port? (write \
                 tcp+tls://{host}:{} or give Options::tls)",
                a.port()
            );
        }
    }
    #[cfg(not(feature = "tls"))]
    let _ = (host, secure, tls, wait);
    format!("{a} accepts connections but opened no ZooKeeper session")
}

/// Starts zookeeper-client's connect: hosts without a scheme use TLS when `tls` is set.
#[cfg(feature = "tls")]
fn connect(
    connector: zk::Connector,
    tls: bool,
    list: &str,
) -> impl std::future::Future<Output = std::result::Result<zk::Client, zk::Error>> + Send + '_ {
    if tls {
        futures::future::Either::Left(connector.secure_connect(list))
    } else {
        futures::future::Either::Right(connector.connect(list))
    }
}

/// Starts zookeeper-client's connect (without the `tls` feature, `tls` is refused earlier).
#[cfg(not(feature = "tls"))]
fn connect(
    connector: zk::Connector,
    _tls: bool,
    list: &str,
) -> impl std::future::Future<Output = std::result::Result<zk::Client, zk::Error>> + Send + '_ {
    connector.connect(list)
}

/// How long a connect over TLS goes before its servers' handshakes are probed.
const TLS_PROBE_AFTER: Duration = Duration::from_millis(1000);

/// How long a connect goes before its servers are probed for refusing connections (a refused
/// connect is known at once; a server that opens a session does so within this).
const REFUSED_PROBE_AFTER: Duration = Duration::from_millis(250);

/// What a connect does when every server refuses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// Fails at once, saying so (`Client::connect`, `Client::reconnect`: asked for now).
    Ends,
    /// Waits on to its bound (a fresh session after expiry: the servers may be restarting).
    Waits,
}

/// "connection refused by ..." for each of `servers` when every one refuses a TCP connection
/// now (a refusal comes at once; `wait` bounds a server that does not answer), `None` when one
/// does not refuse: waiting on will not make a server answer soon. Only a TCP connect, closed
/// at once: nothing is sent to a server that accepts.
fn all_refused(servers: &[SocketAddr], wait: Duration) -> Option<String> {
    let mut why = Vec::new();
    for a in servers {
        match std::net::TcpStream::connect_timeout(a, wait) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                why.push(format!("connection refused by {a}"))
            }
            _ => return None,
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// Whether probing the servers (`why`, from [`diagnose`]) found a TLS handshake failing over
/// a certificate: retrying will not help.
fn certificate_trouble(why: &str) -> bool {
    [
        "not signed by a CA this client trusts",
        "certificate is not issued for",
        "requires a client certificate",
        "refused the client certificate",
        "out of its validity period",
        "certificate was refused",
    ]
    .iter()
    .any(|c| why.contains(c))
}

/// The error of a failed connect whose servers were probed (`why`): a TLS handshake that
/// failed over certificates is [`Error::AuthFailed`] (retrying will not help), anything else
/// a connection loss.
fn connect_failure(detail: ErrorDetail, why: &str) -> Error {
    if certificate_trouble(why) {
        Error::AuthFailed(detail)
    } else {
        Error::ConnectionLoss(detail)
    }
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
            return Err(Error::invalid(
                "connect timeout of zero: a connect takes at least one round trip to the \
                 servers; give Options::connect_timeout a duration (the session timeout is a \
                 good one)",
            ));
        }
        for (scheme, _) in &options.auth {
            check_auth_scheme(scheme)?;
        }
        if options.acl != Acl::Open && !options.has_identity() {
            return Err(Error::invalid(format!(
                "the ACL {:?} grants rights to the creator's authenticated identity: give the client one (Options::sasl, a TLS client certificate, or Options::auth)",
                options.acl
            )));
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

    /// Opens a session, waiting for it until `bound` at most, or until `cancel` is cancelled
    /// (then `Cancelled`); when every server refuses the connection, until it is seen, per
    /// `refused`.
    fn new_session(
        &self,
        replacing: Option<u64>,
        bound: Instant,
        cancel: Option<&Signal>,
        refused: Refused,
    ) -> Result<()> {
        self.not_forked()?;
        let cancelled = || cancel.is_some_and(|c| c.is_cancelled());
        // Another thread may be opening one: wait for it in slices, so a cancel is heard.
        let _g = loop {
            let slice = (Instant::now() + Duration::from_millis(20)).min(bound);
            if let Some(g) = self.inner.connect_lock.try_lock_until(slice) {
                break g;
            }
            if cancelled() {
                return Err(Error::Cancelled);
            }
            if Instant::now() >= bound {
                return Err(Error::ConnectionLoss(
                    "another thread is still opening a new session".into(),
                ));
            }
        };
        if cancelled() {
            return Err(Error::Cancelled);
        }
        if let Some(gen) = replacing {
            // Someone else replaced it while we waited.
            if let Some(cur) = self.inner.current.lock().as_ref() {
                if cur.generation != gen && !cur.state().is_terminal() {
                    return Ok(());
                }
            }
        }
        if self.inner.events.state.lock().0 == SessionState::Closed && replacing.is_some() {
            return Err(Error::Closed);
        }
        let opts = &self.inner.options;
        let mut connector = zk::Client::connector()
            .with_session_timeout(opts.session_timeout)
            .with_connection_timeout(opts.session_timeout.min(opts.connect_timeout));
        for (scheme, auth) in opts.auth.iter().chain(self.inner.added_auth.lock().iter()) {
            connector = connector.with_auth(scheme, auth);
        }
        let hosts = self.inner.hosts.clone();
        let parsed = HostList::parse(&hosts)?;
        let connector = super::secure::apply(
            connector,
            opts.tls.as_ref(),
            parsed.names_tls(),
            opts.sasl.as_ref(),
        )?;
        let (list, chroot) = (parsed.list.to_string(), parsed.chroot.map(str::to_string));
        // What is left of the wait after the connect is kept to say why it failed (a TLS
        // handshake's probe, a server's answer): the error comes within the connect timeout.
        let wait_left = bound.saturating_duration_since(Instant::now());
        let reserve = (wait_left / 20).min(Duration::from_millis(200));
        let deadline = bound - reserve;
        let probe_wait =
            (reserve / (2 * self.inner.servers.len().max(1) as u32)).max(Duration::from_millis(20));
        let started = Instant::now();
        // The tick the lease reckons with (`docs/hold-model.md`, "The server's tick"): the one
        // given, else the longest the servers report, else ZooKeeper's default.
        // Asked of the servers once per client, beside the connect (over TLS each ask is a
        // handshake of its own: in sequence it doubled a connect's time).
        let ask_tick = opts.server_tick_time.is_none() && self.inner.read_tick.lock().is_none();
        let tick_wait = Duration::from_millis(500).min(bound.saturating_duration_since(started));
        // The leader creates the session after this instant: the first lease runs from here.
        let asked = boot_now();
        // The session's tasks and socket come to be during the connect: kept, so that a caller
        // waiting on this session wakes on its socket and polls its task itself.
        // Over TLS, a connect not done after a moment has its servers probed: a handshake that
        // fails over a certificate fails as it will every time, so the error comes now, not at
        // the end of the connect timeout.
        let tls_used = self.inner.named.iter().any(|(_, name)| name.is_some());
        let ((connected, io), read) = std::thread::scope(|scope| {
            let reading = ask_tick.then(|| {
                scope.spawn(|| read_server_tick(&self.inner.named, opts.tls.as_ref(), tick_wait))
            });
            let connected = runtime::SessionIo::connect(&self.inner.servers, |io| {
                let mut fut = Box::pin(runtime::enter(|| {
                    connect(connector, opts.tls.is_some(), &list)
                }));
                // Without TLS, a connect refused by every server is said at once too (when
                // asked for now: `refused`), not at the end of the connect timeout.
                let probe_after = match (tls_used, refused) {
                    (true, _) => Some(TLS_PROBE_AFTER),
                    (false, Refused::Ends) => Some(REFUSED_PROBE_AFTER),
                    (false, Refused::Waits) => None,
                };
                let until = probe_after.map_or(deadline, |p| (started + p).min(deadline));
                let r = runtime::enter(|| {
                    runtime::block_on(fut.as_mut(), Some(until), cancel, Some(io))
                });
                if !matches!(r, Outcome::TimedOut) || until >= deadline {
                    return (r, None);
                }
                if refused == Refused::Ends {
                    // Only refusals are looked for here (the diagnosis comes with a failure).
                    if let Some(why) = all_refused(&self.inner.servers, probe_wait) {
                        return (Outcome::TimedOut, Some(why));
                    }
                }
                if tls_used {
                    let why = diagnose(&hosts, opts.tls.as_ref(), probe_wait);
                    if certificate_trouble(&why) {
                        return (Outcome::TimedOut, Some(why));
                    }
                }
                let r = runtime::enter(|| {
                    runtime::block_on(fut.as_mut(), Some(deadline), cancel, Some(io))
                });
                (r, None)
            });
            (connected, reading.and_then(|h| h.join().ok().flatten()))
        });
        if let Some(t) = read {
            *self.inner.read_tick.lock() = Some(t);
        }
        let tick = opts
            .server_tick_time
            .unwrap_or_else(|| self.inner.read_tick.lock().unwrap_or(DEFAULT_TICK));
        let (connected, early_why) = connected;
        if let Some(why) = early_why {
            let detail = ErrorDetail::new(format!("no ZooKeeper session with {hosts}: {why}"));
            return Err(connect_failure(detail, &why));
        }
        let connected = match connected {
            Outcome::Ready(r) => Some(r),
            Outcome::TimedOut => None,
            Outcome::Cancelled => return Err(Error::Cancelled),
        };
        let zk = match connected {
            Some(Ok(zk)) => zk,
            Some(Err(zk::Error::BadArguments(m))) => {
                return Err(Error::invalid(format!("host list {hosts:?}: {m}")))
            }
            Some(Err(zk::Error::AuthFailed)) => {
                return Err(Error::AuthFailed(
                    match &opts.sasl {
                        Some(s) => format!(
                            "{} failed at {hosts}: a wrong user or password, or a user the \
                             servers do not know",
                            s.describe()
                        ),
                        None => format!(
                            "{hosts} refused the client: the servers require authentication \
                             (SASL, enforce.auth.enabled): give credentials (Options::sasl)"
                        ),
                    }
                    .into(),
                ))
            }
            Some(Err(e)) => {
                let why = diagnose(&hosts, opts.tls.as_ref(), probe_wait);
                let detail =
                    ErrorDetail::with_source(format!("cannot connect to {hosts}: {e} ({why})"), e);
                return Err(connect_failure(detail, &why));
            }
            None => {
                let why = diagnose(&hosts, opts.tls.as_ref(), probe_wait);
                let detail = ErrorDetail::new(format!(
                    "no ZooKeeper session with {hosts} within {:?}: {why}",
                    opts.connect_timeout
                        .min(bound.saturating_duration_since(started))
                ));
                return Err(connect_failure(detail, &why));
            }
        };
        if opts.tcp_nodelay {
            io.set_nodelay(&self.inner.servers);
        }
        let generation = match replacing {
            None => 0,
            Some(_) => self.inner.generation.fetch_add(1, Ordering::SeqCst) + 1,
        };
        let granted = zk.session_timeout();
        if !gap_fits(ping_gap(tick), granted) {
            log::warn!(
                "zklock session {:#x}: the servers' tick ({tick:?}{}) is too long for the session \
                 timeout granted ({granted:?}): holds will be believed little or not at all \
                 (docs/hold-model.md, \"The server's tick\"); ask for a longer session timeout, \
                 or give the servers' tickTime if it is shorter",
                zk.session_id().0,
                if opts.server_tick_time.is_some() {
                    ", as given"
                } else {
                    ", as read or assumed"
                }
            );
        }
        let session = Arc::new(Session {
            tick,
            ping_gap: ping_gap(tick),
            io,
            id: zk.session_id().0,
            generation,
            state: Mutex::new(SessionState::Connected),
            cv: Condvar::new(),
            events: self.inner.events.clone(),
            waits: Mutex::new(Vec::new()),
            lost_callbacks: Mutex::new(Vec::new()),
            lease_anchor: Mutex::new(asked),
            lapsed: std::sync::atomic::AtomicBool::new(false),
            pid: self.inner.pid,
            root: chroot.as_ref().map(|_| zk.clone()),
            zk: match chroot {
                Some(c) => zk
                    .chroot(c.clone())
                    .map_err(|_| Error::invalid(format!("bad chroot {c:?}")))?,
                None => zk,
            },
        });
        log::info!(
            "zklock session {:#x} (generation {generation}) connected to {hosts}",
            session.id
        );
        renew_lease(&session);
        // Follow the session's state in a runtime task (run by whichever thread polls the
        // tasks, see `runtime`): only flags and notifications happen there; listeners run on
        // their own thread.
        let mut watcher = session.zk.state_watcher();
        let weak = Arc::downgrade(&session);
        let servers = self.inner.servers.clone();
        let nodelay = opts.tcp_nodelay;
        runtime::spawn(async move {
            loop {
                let s = watcher.changed().await;
                let Some(session) = weak.upgrade() else {
                    return;
                };
                let ours = match s {
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        // A reconnect opened a new socket: set the option again and find it,
                        // on a thread of its own (scanning the process's descriptors must not
                        // hold up the tasks of every other session).
                        let (found, servers) = (session.clone(), servers.clone());
                        run_detached(
                            "reconnect",
                            vec![Box::new(move || {
                                found.io.reconnected(&servers);
                                if nodelay {
                                    found.io.set_nodelay(&servers);
                                }
                            })],
                        );
                        SessionState::Connected
                    }
                    zk::SessionState::Disconnected => {
                        session.io.disconnected();
                        SessionState::Suspended
                    }
                    zk::SessionState::Expired | zk::SessionState::AuthFailed => {
                        SessionState::Expired
                    }
                    zk::SessionState::Closed => SessionState::Closed,
                };
                session.events.on_state(&session, ours);
                if ours.is_terminal() {
                    return;
                }
            }
        });
        *self.inner.current.lock() = Some(session.clone());
        self.inner.events.current_is(&session);
        Ok(())
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
    fn not_forked(&self) -> Result<()> {
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
        if acl != Acl::Open
            && self.inner.options.auth.is_empty()
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
    /// [`make_revocable`](crate::Lockable::make_revocable), Curator's `makeRevocable`) are told;
    /// others are not affected. `Ok(false)` if the node is gone.
    pub fn request_revoke(&self, node_path: &str) -> Result<bool> {
        crate::path::validate_path(node_path)?;
        let s = self.session()?;
        loop {
            let data = match s.retry(Deadline::Forever, || s.zk.get_data(node_path)) {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => return Ok(false),
                Err(e) => return Err(s.map_err(e)),
            };
            // A simple lock's node is shared by its holders in turn: the write carries the
            // hold's witness, so that, applied late, it never lands on the next holder's node.
            let (message, witness) = crate::node::revoke_request(node_path, &data);
            let written = s.retry(Deadline::Forever, || async {
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
                Err(e) => return Err(s.map_err(e)),
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
        let (data, stat) = match s.retry(Deadline::Forever, || s.zk.get_data(path)) {
            Ok(x) => x,
            Err(zk::Error::NoNode) => return Ok(LockKind::Free),
            Err(e) => return Err(s.map_err(e)),
        };
        let ephemeral = stat.ephemeral_owner != 0;
        let children = if ephemeral {
            Vec::new()
        } else {
            match s.retry(Deadline::Forever, || s.zk.list_children(path)) {
                Ok(c) => c,
                Err(zk::Error::NoNode) => return Ok(LockKind::Free),
                Err(e) => return Err(s.map_err(e)),
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
            Err(e) => return Err(s.map_err(e)),
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
            self.inner.events.on_state(&s, SessionState::Closed);
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
                        Err(e) => return Err(s.map_err(e)),
                    }
                }
                Err(e) => return Err(s.map_err(e)),
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

#[cfg(all(test, feature = "testing"))]
mod socket_tests {
    use super::*;
    use crate::testing::{eventually, TestingServer};

    fn socket_of(c: &Client) -> Option<i32> {
        let s = c.inner.current.lock().clone()?;
        s.io.socket()
    }

    fn peer_port(fd: i32) -> Option<u16> {
        crate::sys::peer_of(fd).map(|a| a.port())
    }

    /// A waiting caller sleeps on its session's socket: the session must know which one it
    /// is, at connect and again after a reconnect (a new socket).
    #[test]
    fn a_session_finds_its_socket_at_connect_and_after_the_server_restarts() {
        let _serial = crate::runtime::tests::SERIAL.lock();
        let mut server = TestingServer::start().unwrap();
        let opts = Options::default().session_timeout(Duration::from_secs(30));
        let c = Client::connect(&server.connect_string(), opts).unwrap();
        let fd = socket_of(&c).expect("no socket found at connect");
        assert_eq!(peer_port(fd), Some(server.port()));
        server.restart().unwrap();
        assert!(
            eventually(Duration::from_secs(30), || {
                c.state() == SessionState::Connected
                    && socket_of(&c).and_then(peer_port) == Some(server.port())
            }),
            "after the restart: state {:?}, socket {:?}",
            c.state(),
            socket_of(&c)
        );
        // The same session, on its new socket, still answers.
        let m = crate::recipes::Mutex::new(&c, "/socket-test").unwrap();
        drop(m.lock().unwrap());
    }

    /// Sessions connecting at the same time never claim one socket between two of them.
    #[test]
    fn sessions_connecting_together_never_share_a_claimed_socket() {
        let _serial = crate::runtime::tests::SERIAL.lock();
        let server = TestingServer::shared();
        let clients: Vec<Client> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| {
                        Client::connect(&server.connect_string(), Options::default()).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen: Vec<i32> = clients.iter().filter_map(socket_of).collect();
        let found = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), found, "two sessions claim one socket");
        for fd in seen {
            assert_eq!(peer_port(fd), Some(server.port()));
        }
    }
}
