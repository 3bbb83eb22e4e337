//! Opening a session: `Client::new_session` and its helpers (zookeeper-client's connect, the
//! probes of servers that do not answer, the session's state follower).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use zookeeper_client as zk;

use super::client::Client;
use super::clock::{
    boot_now, connection_timeout, gap_fits, idle_touch_period, ping_gap, DEFAULT_TICK,
};
use super::events::run_detached;
use super::hosts::{
    all_refused, certificate_trouble, connect_failure, diagnose, HostList, Refused,
};
use super::kinds::SessionState;
use super::lease::{read_server_tick, renew_lease};
use super::state::Session;
use crate::error::{Error, ErrorDetail, Hint, Result};
use crate::runtime;
use crate::wait::{Outcome, Signal};

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
pub(super) const TLS_PROBE_AFTER: Duration = Duration::from_millis(1000);

/// How long before a connect's deadline its servers are probed beside it, for the words of the
/// error should it fail (half the wait at most).
pub(super) const DIAGNOSIS_LEAD: Duration = Duration::from_millis(1000);

/// How long a connect goes before its servers are probed for refusing connections (a refused
/// connect is known at once; a server that opens a session does so within this).
pub(super) const REFUSED_PROBE_AFTER: Duration = Duration::from_millis(250);

impl Client {
    /// Opens a session, waiting for it until `bound` at most, or until `cancel` is cancelled
    /// (then `Cancelled`); when every server refuses the connection, until it is seen, per
    /// `refused`.
    pub(super) fn new_session(
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
            .with_connection_timeout(connection_timeout(
                opts.session_timeout,
                opts.connect_timeout,
            ));
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
            &parsed.hosts.iter().map(|h| h.1).collect::<Vec<_>>(),
        )?;
        let (list, chroot) = (parsed.list.to_string(), parsed.chroot.map(str::to_string));
        // What is left of the wait after the connect is kept to say why it failed (a TLS
        // handshake's probe, a server's answer): the error comes within the connect timeout.
        let wait_left = bound.saturating_duration_since(Instant::now());
        let reserve = (wait_left / 20).min(Duration::from_millis(200));
        let deadline = bound - reserve;
        // Each server's probe (a connect, then an answer) shares `budget` with the others'.
        let per_probe = |budget: Duration| {
            (budget / (2 * self.inner.servers.len().max(1) as u32)).max(Duration::from_millis(20))
        };
        let probe_wait = per_probe(reserve);
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
        // A connect still not done a moment before its deadline has its servers probed beside
        // it, for the error's words should it fail (at the deadline alone, the probe had a
        // twentieth of the wait: a busy server answered later, and the words said less).
        let lead = DIAGNOSIS_LEAD.min(deadline.saturating_duration_since(started) / 2);
        let diagnosis_wait = per_probe(lead);
        let diagnose_in_background = || {
            let (hosts, tls) = (hosts.clone(), opts.tls.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("zklock-diagnose".into())
                .spawn(move || {
                    let _ = tx.send(diagnose(&hosts, tls.as_ref(), diagnosis_wait));
                })
                .ok()
                .map(|_| rx)
        };
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
                // The early probes, where the connect takes them.
                let early = 'probe: {
                    let Some(until) = probe_after
                        .map(|p| (started + p).min(deadline))
                        .filter(|&u| u < deadline)
                    else {
                        break 'probe None;
                    };
                    let r = runtime::enter(|| {
                        runtime::block_on(fut.as_mut(), Some(until), cancel, Some(io))
                    });
                    if !matches!(r, Outcome::TimedOut) {
                        break 'probe Some((r, None));
                    }
                    if refused == Refused::Ends {
                        // Only refusals are looked for here (the diagnosis comes with a failure).
                        if let Some(why) = all_refused(&self.inner.servers, probe_wait) {
                            break 'probe Some((Outcome::TimedOut, Some(why)));
                        }
                    }
                    if tls_used {
                        let why = diagnose(&hosts, opts.tls.as_ref(), probe_wait);
                        if certificate_trouble(&why) {
                            break 'probe Some((Outcome::TimedOut, Some(why)));
                        }
                    }
                    None
                };
                if let Some((r, why)) = early {
                    return (r, why, None);
                }
                // The last stretch to the deadline, with the servers probed beside it.
                let r = runtime::enter(|| {
                    runtime::block_on(fut.as_mut(), Some(deadline - lead), cancel, Some(io))
                });
                if !matches!(r, Outcome::TimedOut) || lead.is_zero() {
                    return (r, None, None);
                }
                let diagnosis = diagnose_in_background();
                let r = runtime::enter(|| {
                    runtime::block_on(fut.as_mut(), Some(deadline), cancel, Some(io))
                });
                (r, None, diagnosis)
            });
            (connected, reading.and_then(|h| h.join().ok().flatten()))
        });
        if let Some(t) = read {
            *self.inner.read_tick.lock() = Some(t);
        }
        let tick = opts
            .server_tick_time
            .unwrap_or_else(|| self.inner.read_tick.lock().unwrap_or(DEFAULT_TICK));
        let (connected, early_why, diagnosis) = connected;
        if let Some(why) = early_why {
            let detail =
                ErrorDetail::new(why.ending(format!("no ZooKeeper session with {hosts}: {why}")));
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
                        None => Hint::Sasl.after(format_args!(
                            "{hosts} refused the client: the servers require authentication \
                             (SASL, enforce.auth.enabled): give credentials"
                        )),
                    }
                    .into(),
                ))
            }
            Some(Err(e)) => {
                let why = diagnose(&hosts, opts.tls.as_ref(), probe_wait);
                let detail = ErrorDetail::with_source(
                    why.ending(format!("cannot connect to {hosts}: {e} ({why})")),
                    e,
                );
                return Err(connect_failure(detail, &why));
            }
            None => {
                // The probes that ran beside the connect's last stretch, else probes now.
                let why = match diagnosis {
                    Some(rx) => rx
                        .recv_timeout(bound.saturating_duration_since(Instant::now()))
                        .unwrap_or_else(|_| {
                            "no server answered the probes in time".to_string().into()
                        }),
                    None => diagnose(&hosts, opts.tls.as_ref(), probe_wait),
                };
                let detail = ErrorDetail::new(why.ending(format!(
                    "no ZooKeeper session with {hosts} within {}: {why}",
                    crate::deadline::for_people(
                        opts.connect_timeout
                            .min(bound.saturating_duration_since(started))
                    )
                )));
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
            touches: Mutex::new(Default::default()),
            leader: Mutex::new(Default::default()),
            lease_users: Default::default(),
            lease_wake: Default::default(),
            proof_wanted: Default::default(),
            idle_touch: idle_touch_period(
                granted,
                connection_timeout(opts.session_timeout, opts.connect_timeout),
            ),
            pid: self.inner.pid,
            forgets: Default::default(),
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
                        if !crate::grants::readable() {
                            // Its grant is not known: the leader may expire it sooner.
                            crate::grants::unreadable(session.id);
                        }
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
                session.on_state(ours);
                if ours.is_terminal() {
                    return;
                }
            }
        });
        *self.inner.current.lock() = Some(session.clone());
        self.inner
            .events
            .current_is(session.event(SessionState::Connected));
        Ok(())
    }
}

#[cfg(all(test, feature = "testing"))]
mod socket_tests {
    use super::*;
    use crate::session::options::Options;
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
