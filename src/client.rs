//! [`Client`]: one ZooKeeper session shared by any number of threads and locks, behind a
//! blocking facade over the async `zookeeper-client` crate.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use zookeeper_client as zk;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::Protocol;
use crate::runtime::{self, Outcome, Signal};

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
    fn acls(self) -> zk::Acls<'static> {
        match self {
            Acl::Open => zk::Acls::anyone_all(),
            Acl::CreatorAll => zk::Acls::creator_all(),
            Acl::CreatorAllReadAll => zk::Acls::new(&CREATOR_ALL_READ_ALL),
        }
    }
}

/// Options of a [`Client`].
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
        }
    }
}

impl Options {
    /// The session timeout asked of the server (default 10 s). Locks of a dead client are
    /// released by the server after about this long.
    pub fn session_timeout(mut self, t: Duration) -> Self {
        self.session_timeout = t;
        self
    }
    /// How long [`Client::connect`] waits for a session (default 10 s).
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
    /// Adds authentication, e.g. `("digest", "user:password")`; replayed on every reconnect.
    pub fn auth(mut self, scheme: impl Into<String>, auth: impl Into<Vec<u8>>) -> Self {
        self.auth.push((scheme.into(), auth.into()));
        self
    }
    /// The ACL of the nodes this client creates (default [`Acl::Open`]). A creator-only ACL
    /// needs [`Options::auth`]: [`Client::connect`] refuses it otherwise.
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
    /// The servers' `tickTime`, if it is not ZooKeeper's default of 2 s (default: 2 s, or half
    /// the granted session timeout if that is less, since a server with its default
    /// `minSessionTimeout` grants no session shorter than two ticks).
    ///
    /// The lease of a hold is reckoned from it: only the leader expires sessions, and a
    /// follower tells the leader about its clients in its answers to the leader's pings, sent
    /// every half tick. A renewal counts once the leader has provably heard of it, which takes
    /// a little over half a tick (`docs/hold-model.md`). Saying a longer tick than the servers
    /// use only makes leases shorter; a shorter one than they use makes them unsound.
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

/// A watch on a node's children, from [`Client::watch_children`]: fires once, on their next
/// change (or the node's creation or deletion).
pub struct ChildrenWatch {
    session: Arc<Session>,
    change: std::pin::Pin<Box<dyn std::future::Future<Output = zk::WatchedEvent> + Send>>,
    fired: bool,
}

impl ChildrenWatch {
    fn new(session: Arc<Session>, watch: zk::OneshotWatcher) -> ChildrenWatch {
        ChildrenWatch {
            session,
            change: Box::pin(watch.changed()),
            fired: false,
        }
    }

    /// Waits for the change, or `timeout` (None: forever): `Ok(true)` when it changed,
    /// `Ok(false)` at the timeout (the watch stays set: wait again), `Err` when the session ended.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool> {
        if self.fired {
            return Ok(true);
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let signal = Signal::new();
        match runtime::block_on(
            &mut self.change,
            deadline,
            Some(&signal),
            Some(&self.session.io),
        ) {
            Outcome::Ready(ev) => {
                self.fired = true;
                if ev.event_type == zk::EventType::Session && ev.session_state.is_terminated() {
                    return Err(self.session.ended_error().unwrap_or(Error::SessionExpired));
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The state of the client's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Connected: locks held are held.
    Connected,
    /// Disconnected, the session may survive: holding is uncertain until it reconnects or expires.
    Suspended,
    /// The session expired: every lock it held is lost. A new session may follow.
    Expired,
    /// The client was closed.
    Closed,
}

impl SessionState {
    /// Expired or Closed: the session will never come back.
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Expired | SessionState::Closed)
    }
}

/// A change of session state, as given to listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEvent {
    /// The new state.
    pub state: SessionState,
    /// The session's id.
    pub session_id: i64,
    /// Which session of this client (0 for the first, +1 for each fresh session after expiry).
    pub generation: u64,
}

/// A reading of CLOCK_BOOTTIME (`sys::boot_time`): leases run on it, so that a suspend of the
/// machine counts as the time it is for the servers.
type BootTime = Duration;

fn boot_now() -> BootTime {
    crate::sys::boot_time()
}

/// Keeps the session's lease running (`docs/hold-model.md`, "The lease"): every so often a
/// `sync`, which the server we talk to answers only after the leader has; each answer may prove
/// that the leader heard of the session at a later instant, and the lease runs from there. When
/// no answer comes before the lease ends, the lease lapses (holds turn Uncertain, loss callbacks
/// run). A renewal that fails for another reason is reported and tried again: the renewals stop
/// only when the session ends. Holds only a weak reference: it never keeps a session open.
fn renew_lease(session: &Arc<Session>) {
    use futures::future::{select, Either};
    let weak = Arc::downgrade(session);
    let gap = session.ping_gap;
    let every = (gap / 2).max(session.zk.session_timeout() / 10);
    runtime::spawn(async move {
        // The renewals answered so far (send time, answer time), oldest first.
        let mut answered: std::collections::VecDeque<(BootTime, BootTime)> = Default::default();
        loop {
            let (renewal, left, sent) = {
                let Some(s) = weak.upgrade() else { return };
                if s.state().is_terminal() {
                    return;
                }
                let sent = boot_now();
                let zk = s.zk.clone();
                (async move { zk.sync("/").await }, s.lease_remaining(), sent)
            };
            let mut renewal = std::pin::pin!(renewal);
            // Wait for the answer; if the lease ends first, say so and keep waiting.
            let reply = match select(renewal.as_mut(), async_io::Timer::after(left)).await {
                Either::Left((r, _)) => r,
                Either::Right(_) => {
                    if let Some(s) = weak.upgrade() {
                        s.lapse();
                    }
                    renewal.await
                }
            };
            match reply {
                // A chroot that does not exist still syncs the server.
                Ok(()) | Err(zk::Error::NoNode) => {
                    answered.push_back((sent, boot_now()));
                    if answered.len() > 16 {
                        answered.pop_front();
                    }
                    if let (Some(s), Some(anchor)) = (weak.upgrade(), confirmed(&answered, gap)) {
                        s.renewed(anchor);
                    }
                    async_io::Timer::after(every).await;
                }
                Err(e) if is_retriable(&e) => {
                    // No answer (the crate may fail requests at once while it has no
                    // connection): the lease may have run out meanwhile.
                    if let Some(s) = weak.upgrade() {
                        if s.lease_remaining().is_zero() {
                            s.lapse();
                        }
                    }
                    async_io::Timer::after(Duration::from_millis(50)).await;
                }
                Err(e) if Error::from(e.clone()).is_session_end() => {
                    // The session ended (or its task died): record it, so holds read Lost.
                    if let Some(s) = weak.upgrade() {
                        let _ = s.map_err(e);
                    }
                    return;
                }
                Err(e) => {
                    // Refused (throttled, say): the session lives, so keep renewing.
                    if let Some(s) = weak.upgrade() {
                        log::warn!(
                            "zklock session {:#x}: lease renewal refused: {e}; trying again",
                            s.id
                        );
                        if s.lease_remaining().is_zero() {
                            s.lapse();
                        }
                    }
                    async_io::Timer::after(every).await;
                }
            }
        }
    });
}

/// The latest instant at which the leader has provably heard of the session, from the renewals
/// answered (send and answer times, oldest first; every one was answered before the newest was
/// sent, and its answer is the one that asks): the send time of a renewal `j` such that a later
/// renewal `k` was sent at least `gap` after `j`'s answer.
///
/// Why (`docs/hold-model.md`): the leader pings each follower at least every `gap`, so it sent
/// one after `j` touched the session at the follower and before it answered `k`'s sync; the
/// follower answers pings in order with the sessions touched since its last answer, so it sent
/// that touch before it passed on `k`'s answer, hence before it forwarded the newest renewal,
/// whose answer proves the leader had read everything the follower wrote before it. A reconnect
/// in between proves it too: a session moves to another server only after the leader
/// revalidated (touched) it.
fn confirmed(
    answered: &std::collections::VecDeque<(BootTime, BootTime)>,
    gap: Duration,
) -> Option<BootTime> {
    let newest = answered.len().checked_sub(1)?;
    let mut anchor = None;
    for (j, &(sent_j, answered_j)) in answered.iter().enumerate().take(newest) {
        // k is neither j nor the newest renewal (whose answer proves k's ping answer arrived).
        if answered
            .range(j + 1..newest)
            .any(|&(sent_k, _)| sent_k >= answered_j + gap)
        {
            anchor = Some(sent_j);
        }
    }
    anchor
}

/// A failure that says nothing about the server's state: the request may or may not have
/// been applied, and asking again (on the same session) may succeed.
pub(crate) fn is_retriable(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::ConnectionLoss
            | zk::Error::UnexpectedError(_)
            | zk::Error::Timeout
            // The connection's own failures ("no response from connection in ...").
            | zk::Error::Custom(_)
            | zk::Error::NoHosts
    )
}

type Listener = Arc<dyn Fn(&SessionEvent) + Send + Sync>;
type LostCallback = (Weak<()>, Box<dyn FnOnce() + Send>);

/// Runs callbacks on a thread of their own (never inside a poll of the runtime's tasks, which
/// may be any caller's thread, nor under our locks).
/// `what` names the work (the thread is `zklock-<what>`).
pub(crate) fn run_detached(what: &str, fs: Vec<Box<dyn FnOnce() + Send>>) {
    if fs.is_empty() {
        return;
    }
    let name = format!("zklock-{what}");
    let spawned = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            for f in fs {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
                    log::error!("a {name} callback panicked");
                }
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start a thread for {what}: {e}");
    }
}

/// One ZooKeeper session (one `zookeeper-client` client). Locks keep the session they were
/// taken in, so a lock of an expired session can never be taken for held in a newer one.
pub(crate) struct Session {
    pub(crate) zk: zk::Client,
    /// The session's task and socket, for waiting callers (see `runtime::SessionIo`).
    io: runtime::SessionIo,
    /// The same session without the chroot (to create a missing chroot node).
    root: Option<zk::Client>,
    pub(crate) id: i64,
    pub(crate) generation: u64,
    state: Mutex<SessionState>,
    cv: Condvar,
    pub(crate) client: Weak<Inner>,
    /// The waits in progress on this session's watches.
    waits: Mutex<Vec<Weak<Signal>>>,
    /// Callbacks of holds that want to hear when the session ends, each alive while its hold is.
    lost_callbacks: Mutex<Vec<LostCallback>>,
    /// An instant (CLOCK_BOOTTIME) at which the leader provably heard of the session: it cannot
    /// expire the session before this plus the session timeout.
    lease_anchor: Mutex<BootTime>,
    /// The longest the leader may take between two pings of a follower (`confirmed`).
    ping_gap: Duration,
    /// The lease ran out (under the state lock's condvar); cleared when it is renewed.
    lapsed: std::sync::atomic::AtomicBool,
}

/// How long before the leader could expire the session a hold stops being believed: a tenth of
/// the session timeout, for clocks that run at different rates and for the time between our
/// reading of the clock and the caller acting on the answer (the leader only ever expires
/// later than the timeout: it rounds expiry up to its next tick).
fn lease_margin(timeout: Duration) -> Duration {
    timeout / 10
}

/// The longest the leader may take between two pings of one follower, with slack: it pings
/// every half tick (`Leader.lead`); a quarter more, and 10 ms, for its scheduling. The tick is
/// the one given in the options, or ZooKeeper's default 2 s, at most half the granted session
/// timeout (a server with its default `minSessionTimeout` grants no less than two ticks).
fn ping_gap(tick: Option<Duration>, granted: Duration) -> Duration {
    let tick = tick.unwrap_or_else(|| Duration::from_secs(2).min(granted / 2));
    tick / 2 + tick / 8 + Duration::from_millis(10)
}

impl Session {
    pub(crate) fn state(&self) -> SessionState {
        *self.state.lock()
    }

    /// When the lease ends (CLOCK_BOOTTIME): the latest instant the leader provably heard of
    /// the session, plus the session timeout the server granted, less the margin.
    fn lease_end(&self) -> BootTime {
        let t = self.zk.session_timeout();
        *self.lease_anchor.lock() + t - lease_margin(t)
    }

    /// Whether the session is provably alive now (not ended, and the lease is running).
    pub(crate) fn lease_live(&self) -> bool {
        !self.lease_remaining().is_zero()
    }

    /// How long the lease has left (zero once it ran out or the session ended).
    pub(crate) fn lease_remaining(&self) -> Duration {
        if self.state().is_terminal() {
            return Duration::ZERO;
        }
        self.lease_end().saturating_sub(boot_now())
    }

    /// The leader provably heard of the session at `at`: the lease runs from there.
    fn renewed(&self, at: BootTime) {
        let mut a = self.lease_anchor.lock();
        if at > *a {
            *a = at;
        }
        drop(a);
        if self.lease_live() {
            self.lapsed.store(false, Ordering::SeqCst);
        }
    }

    /// The lease ran out while no answer came: holds are no longer believed, and whoever waits
    /// for their loss hears of it now (the server may hand the locks to others from here on).
    fn lapse(&self) {
        if self.lapsed.swap(true, Ordering::SeqCst) {
            return;
        }
        log::warn!(
            "zklock session {:#x}: no answer from ZooKeeper within the lease; holds are uncertain",
            self.id
        );
        {
            let _st = self.state.lock();
            self.cv.notify_all();
        }
        self.fire_lost();
    }

    fn fire_lost(&self) {
        let fs = self
            .lost_callbacks
            .lock()
            .drain(..)
            .filter(|(alive, _)| alive.strong_count() > 0)
            .map(|(_, f)| f)
            .collect();
        run_detached("lost", fs);
    }

    /// Waits until holds of this session are no longer believed (the lease ran out, or the
    /// session ended) or `deadline`; true if so.
    pub(crate) fn wait_not_held(&self, deadline: Option<Instant>) -> bool {
        let mut st = self.state.lock();
        loop {
            // Not the lapse flag: a lease renewed since then is believed again.
            let left = self.lease_end().saturating_sub(boot_now());
            if st.is_terminal() || left.is_zero() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            // Wake at lease end at the latest (and on every state change and lapse).
            let end = Instant::now() + left;
            let wake = deadline.map_or(end, |d| d.min(end));
            self.cv.wait_until(&mut st, wake);
        }
    }

    fn set_state(&self, s: SessionState) -> bool {
        {
            let mut st = self.state.lock();
            if *st == s || st.is_terminal() {
                return false;
            }
            *st = s;
            self.cv.notify_all();
        }
        if s.is_terminal() {
            self.fire_lost();
        }
        true
    }

    /// Calls `f` once, on its own thread, when this session ends, if the hold `alive` stands for
    /// still exists then (at once if the session has already ended).
    pub(crate) fn on_end(&self, alive: &Arc<()>, f: Box<dyn FnOnce() + Send>) {
        let mut callbacks = self.lost_callbacks.lock();
        if !self.lease_live() {
            drop(callbacks);
            run_detached("lost", vec![f]);
            return;
        }
        callbacks.retain(|(a, _)| a.strong_count() > 0);
        callbacks.push((Arc::downgrade(alive), f));
    }

    /// The error for a call on a session that has ended.
    pub(crate) fn ended_error(&self) -> Option<Error> {
        match self.state() {
            SessionState::Expired => Some(Error::SessionExpired),
            SessionState::Closed => Some(Error::Closed),
            _ => None,
        }
    }

    /// The default deadline of one call: the session timeout from now (calls made while
    /// disconnected are queued by the crate until reconnect or expiry).
    pub(crate) fn call_deadline(&self) -> Instant {
        self.cap(Deadline::Forever)
    }

    /// The bound of one request of an operation whose deadline is `d`: the earlier of `d` and
    /// one session timeout from now (the per-call cap lives here, not at each call site).
    pub(crate) fn cap(&self, d: Deadline) -> Instant {
        d.capped(self.zk.session_timeout().max(Duration::from_millis(500)))
    }

    /// One request, bounded by [`Session::cap`]; not retried (for requests that must not be
    /// sent twice, such as creates). A missed bound is `ConnectionLoss`.
    pub(crate) fn call<T>(
        &self,
        fut: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
        d: Deadline,
    ) -> std::result::Result<T, zk::Error> {
        self.wait_raw(fut, self.cap(d))
    }

    /// An idempotent request (read, delete), sent again on connection loss until it gets an
    /// answer, `d` passes (a try-once operation: one session timeout) or the session ends.
    /// The errors left are the server's answers, `ConnectionLoss` when time ran out, and the
    /// session's end.
    pub(crate) fn retry<T, F>(
        &self,
        d: Deadline,
        mut request: impl FnMut() -> F,
    ) -> std::result::Result<T, zk::Error>
    where
        F: std::future::Future<Output = std::result::Result<T, zk::Error>>,
    {
        let until = match d {
            Deadline::TryOnce => Some(self.cap(d)),
            _ => d.instant(),
        };
        loop {
            match self.wait_raw(request(), self.cap(d)) {
                Err(e) if is_retriable(&e) => {
                    if self.state().is_terminal() || until.is_some_and(|u| Instant::now() >= u) {
                        return Err(e);
                    }
                    runtime::sleep(Duration::from_millis(20));
                }
                r => return r,
            }
        }
    }

    /// Blocks on one ZooKeeper reply until `deadline`.
    pub(crate) fn wait<T>(
        &self,
        fut: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
        deadline: Instant,
    ) -> Result<T> {
        self.wait_raw(fut, deadline).map_err(|e| self.map_err(e))
    }

    /// Like [`Session::wait`] but keeps the crate's error (so recipes can tell `NoNode` from
    /// `NodeExists`); a missed deadline is `ConnectionLoss`.
    pub(crate) fn wait_raw<T>(
        &self,
        fut: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
        deadline: Instant,
    ) -> std::result::Result<T, zk::Error> {
        match runtime::call(fut, deadline, Some(&self.io)) {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => {
                if matches!(
                    e,
                    zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
                ) {
                    self.map_err(e.clone());
                }
                Err(e)
            }
            None => Err(zk::Error::ConnectionLoss),
        }
    }

    pub(crate) fn map_err(&self, e: zk::Error) -> Error {
        let e = Error::from(e);
        if e.is_session_end() {
            // The crate saw the end before our state task: record it now.
            let s = if e == Error::Closed {
                SessionState::Closed
            } else {
                SessionState::Expired
            };
            if let Some(inner) = self.client.upgrade() {
                inner.on_state(self, s);
            } else {
                self.set_state(s);
            }
        }
        e
    }

    /// The one wait of every acquire for a one-shot watch: `Ok(Some(event))` when it fired
    /// (look again), `Ok(None)` at `deadline`; the session's end (or `Error::Cancelled` when
    /// `signal` was cancelled) as an error. Disconnection alone does not wake: the crate re-arms
    /// watches on reconnect.
    pub(crate) fn wait_watch(
        &self,
        watcher: zk::OneshotWatcher,
        deadline: Option<Instant>,
        signal: &Arc<Signal>,
    ) -> Result<Option<zk::EventType>> {
        match self.wait_watch_raw(watcher, deadline, signal) {
            Outcome::Ready(ev)
                if ev.event_type == zk::EventType::Session && ev.session_state.is_terminated() =>
            {
                Err(self.ended_error().unwrap_or(Error::SessionExpired))
            }
            Outcome::Ready(ev) => Ok(Some(ev.event_type)),
            Outcome::TimedOut => Ok(None),
            Outcome::Cancelled => Err(self.ended_error().unwrap_or(Error::Cancelled)),
        }
    }

    fn wait_watch_raw(
        &self,
        watcher: zk::OneshotWatcher,
        deadline: Option<Instant>,
        signal: &Arc<Signal>,
    ) -> Outcome<zk::WatchedEvent> {
        // Registered so that `Client::close` can wake this wait.
        self.waits.lock().push(Arc::downgrade(signal));
        if self.state() == SessionState::Closed {
            signal.cancel();
        }
        let r = runtime::block_on(watcher.changed(), deadline, Some(signal), Some(&self.io));
        self.waits
            .lock()
            .retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(signal)));
        if let Outcome::Ready(ev) = &r {
            if ev.event_type != zk::EventType::Session {
                if let Some(inner) = self.client.upgrade() {
                    inner.watch_events.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        r
    }
}

pub(crate) struct Inner {
    hosts: String,
    servers: Vec<SocketAddr>,
    pub(crate) options: Options,
    pub(crate) holder_id: String,
    protocol: AtomicU8,
    acl: AtomicU8,
    current: Mutex<Option<Arc<Session>>>,
    connect_lock: Mutex<()>,
    generation: AtomicU64,
    state: Mutex<(SessionState, i64, u64)>,
    state_cv: Condvar,
    listeners: Mutex<Vec<(u64, Listener)>>,
    next_listener: AtomicU64,
    events: Mutex<Option<std::sync::mpsc::Sender<SessionEvent>>>,
    watch_events: AtomicU64,
    /// Authentication added after connecting, replayed on every later session too.
    added_auth: Mutex<Vec<(String, Vec<u8>)>>,
}

/// One ZooKeeper session, shared by any number of threads and locks (`Send + Sync`, cheap to
/// clone). Every call blocks the calling thread, never longer than its timeout plus the
/// session timeout.
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

fn parse_hosts(hosts: &str) -> Result<Vec<SocketAddr>> {
    let list = match hosts.find('/') {
        Some(i) => {
            crate::path::validate_path(&hosts[i..]).map_err(|e| {
                // The path's own words, without a second "invalid argument: ".
                let why = match e {
                    Error::InvalidArgument(m) => m,
                    other => other.to_string(),
                };
                Error::invalid(format!("bad chroot in host list {hosts:?}: {why}"))
            })?;
            &hosts[..i]
        }
        None => hosts,
    };
    if list.trim().is_empty() {
        return Err(Error::invalid(format!(
            "host list {hosts:?} names no server"
        )));
    }
    let mut out = Vec::new();
    for h in list.split(',') {
        let h = h.trim();
        let (host, port) = match h.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => (h, "2181"),
        };
        let port: u16 = port.parse().map_err(|_| {
            Error::invalid(format!("bad port in host {h:?} of host list {hosts:?}"))
        })?;
        if host.is_empty() {
            return Err(Error::invalid(format!(
                "empty host name in host list {hosts:?}"
            )));
        }
        match (host, port).to_socket_addrs() {
            Ok(addrs) => out.extend(addrs),
            Err(e) => log::warn!("cannot resolve {h}: {e}"),
        }
    }
    if out.is_empty() {
        // Nothing to connect to: say so now, not after the connect timeout.
        return Err(Error::ConnectionLoss(format!(
            "cannot connect to {hosts}: {}",
            diagnose(hosts, Duration::ZERO)
        )));
    }
    Ok(out)
}

/// Why no session could be opened with `hosts`, in words: per server, "cannot resolve host",
/// "connection refused by", "no answer from" or "accepts connections" (each probed once,
/// waiting at most `wait` for a TCP answer).
fn diagnose(hosts: &str, wait: Duration) -> String {
    let list = hosts.split('/').next().unwrap_or_default();
    let mut why = Vec::new();
    for h in list.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let (host, port) = h.rsplit_once(':').unwrap_or((h, "2181"));
        let port: u16 = port.parse().unwrap_or(2181);
        let addrs: Vec<SocketAddr> = match (host, port).to_socket_addrs() {
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
                Ok(_) => format!("{a} accepts connections but opened no ZooKeeper session"),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    format!("connection refused by {a}")
                }
                Err(_) => format!("no answer from {a}"),
            });
        }
    }
    why.join("; ")
}

impl Client {
    /// Connects to ZooKeeper. `hosts` is `host:port[,host:port...][/chroot]`. Blocks until the
    /// session is established or the connect timeout passes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed host list; [`Error::ConnectionLoss`] when no
    /// server answered in time; [`Error::SessionExpired`] when authentication failed.
    pub fn connect(hosts: &str, options: Options) -> Result<Client> {
        let servers = parse_hosts(hosts)?;
        if options.session_timeout < Duration::from_millis(100) {
            return Err(Error::invalid("session timeout below 100 ms"));
        }
        if options.session_timeout > Duration::from_secs(3600) {
            return Err(Error::invalid(
                "session timeout above one hour (servers grant at most their maxSessionTimeout)",
            ));
        }
        if options.acl != Acl::Open && options.auth.is_empty() {
            return Err(Error::invalid(format!(
                "the ACL {:?} grants rights to the creator's authenticated identity: add authentication (Options::auth)",
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
            protocol: AtomicU8::new(options.protocol as u8),
            acl: AtomicU8::new(options.acl as u8),
            options,
            holder_id,
            current: Mutex::new(None),
            connect_lock: Mutex::new(()),
            generation: AtomicU64::new(0),
            state: Mutex::new((SessionState::Suspended, 0, 0)),
            state_cv: Condvar::new(),
            listeners: Mutex::new(Vec::new()),
            next_listener: AtomicU64::new(0),
            events: Mutex::new(None),
            watch_events: AtomicU64::new(0),
            added_auth: Mutex::new(Vec::new()),
        });
        let client = Client { inner };
        let bound = Instant::now() + client.inner.options.connect_timeout;
        client.new_session(None, bound, None)?;
        Ok(client)
    }

    /// Opens a fresh session (after expiry, or to start over). Locks of the old session are lost.
    pub fn reconnect(&self) -> Result<()> {
        let old = self.inner.current.lock().clone();
        let bound = Instant::now() + self.inner.options.connect_timeout;
        self.new_session(old.map(|s| s.generation), bound, None)
    }

    /// Opens a session, waiting for it until `bound` at most, or until `cancel` is cancelled
    /// (then `Cancelled`).
    fn new_session(
        &self,
        replacing: Option<u64>,
        bound: Instant,
        cancel: Option<&Signal>,
    ) -> Result<()> {
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
        if self.inner.state.lock().0 == SessionState::Closed && replacing.is_some() {
            return Err(Error::Closed);
        }
        let opts = &self.inner.options;
        let mut connector = zk::Client::connector()
            .with_session_timeout(opts.session_timeout)
            .with_connection_timeout(opts.session_timeout.min(opts.connect_timeout));
        for (scheme, auth) in opts.auth.iter().chain(self.inner.added_auth.lock().iter()) {
            connector = connector.with_auth(scheme, auth);
        }
        let deadline = bound;
        let hosts = self.inner.hosts.clone();
        let (list, chroot) = match hosts.find('/') {
            Some(i) => (hosts[..i].to_string(), Some(hosts[i..].to_string())),
            None => (hosts.clone(), None),
        };
        let started = Instant::now();
        // The leader creates the session after this instant: the first lease runs from here.
        let asked = boot_now();
        // The session's tasks and socket come to be during the connect: kept, so that a caller
        // waiting on this session wakes on its socket and polls its task itself.
        let (connected, io) = runtime::SessionIo::connect(&self.inner.servers, |io| {
            let fut = runtime::enter(|| connector.connect(&list));
            runtime::enter(|| runtime::block_on(fut, Some(deadline), cancel, Some(io)))
        });
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
                return Err(Error::ZooKeeper("authentication failed".into()))
            }
            Some(Err(e)) => {
                return Err(Error::ConnectionLoss(format!(
                    "cannot connect to {hosts}: {e} ({})",
                    diagnose(&hosts, Duration::from_millis(250))
                )))
            }
            None => {
                return Err(Error::ConnectionLoss(format!(
                    "no ZooKeeper session with {hosts} within {:?}: {}",
                    opts.connect_timeout
                        .min(bound.saturating_duration_since(started)),
                    diagnose(&hosts, Duration::from_millis(250))
                )))
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
        let session = Arc::new(Session {
            ping_gap: ping_gap(opts.server_tick_time, granted),
            io,
            id: zk.session_id().0,
            generation,
            state: Mutex::new(SessionState::Connected),
            cv: Condvar::new(),
            client: Arc::downgrade(&self.inner),
            waits: Mutex::new(Vec::new()),
            lost_callbacks: Mutex::new(Vec::new()),
            lease_anchor: Mutex::new(asked),
            lapsed: std::sync::atomic::AtomicBool::new(false),
            root: chroot.as_ref().map(|_| zk.clone()),
            zk: match chroot {
                Some(c) => zk.chroot(c).map_err(|_| Error::invalid("bad chroot"))?,
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
                match session.client.upgrade() {
                    Some(inner) => inner.on_state(&session, ours),
                    None => {
                        session.set_state(ours);
                    }
                }
                if ours.is_terminal() {
                    return;
                }
            }
        });
        *self.inner.current.lock() = Some(session.clone());
        self.inner.publish(&session, SessionState::Connected);
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
                    self.new_session(Some(s.generation), bound, cancel)?;
                    self.inner.current.lock().clone().ok_or(Error::Closed)
                }
                SessionState::Expired => Err(Error::SessionExpired),
                SessionState::Closed => Err(Error::Closed),
                _ => Ok(s),
            },
        }
    }

    /// The session state now.
    pub fn state(&self) -> SessionState {
        self.inner.state.lock().0
    }

    /// The current session's id (0 before the first session).
    pub fn session_id(&self) -> i64 {
        self.inner.state.lock().1
    }

    /// Which session of this client is current (0 for the first).
    pub fn generation(&self) -> u64 {
        self.inner.state.lock().2
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

    /// Waits until the state satisfies `pred` or `timeout` passes; returns the state then.
    pub fn wait_for_state(
        &self,
        timeout: Duration,
        pred: impl Fn(SessionState) -> bool,
    ) -> SessionState {
        // A timeout too long for the clock is no timeout.
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.inner.state.lock();
        while !pred(st.0) {
            match deadline {
                Some(d) => {
                    if self.inner.state_cv.wait_until(&mut st, d).timed_out() {
                        break;
                    }
                }
                None => self.inner.state_cv.wait(&mut st),
            }
        }
        st.0
    }

    /// Calls `f` on every change of session state, on a dedicated thread (never on the I/O
    /// thread), so `f` may call the client. Returns an id for [`Client::remove_listener`].
    pub fn add_listener(&self, f: impl Fn(&SessionEvent) + Send + Sync + 'static) -> u64 {
        let id = self.inner.next_listener.fetch_add(1, Ordering::Relaxed);
        self.inner.listeners.lock().push((id, Arc::new(f)));
        self.inner.ensure_dispatcher();
        id
    }

    /// Asks the holder of the lock node `node_path` (a full path, e.g. from a lock's
    /// participants) to let go, as Curator's `Revoker.attemptRevoke`: writes `__REVOKE__` into
    /// the node. Holders that made their lock revocable (zklock's
    /// [`make_revocable`](crate::Lockable::make_revocable), Curator's `makeRevocable`) are told;
    /// others are not affected. `Ok(false)` if the node is gone.
    pub fn request_revoke(&self, node_path: &str) -> Result<bool> {
        crate::path::validate_path(node_path)?;
        let s = self.session()?;
        match s.retry(Deadline::Forever, || {
            s.zk.set_data(node_path, crate::node::REVOKE_MESSAGE, None)
        }) {
            Ok(_) => Ok(true),
            Err(zk::Error::NoNode) => Ok(false),
            Err(e) => Err(s.map_err(e)),
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
    pub fn lock_kind(&self, path: &str) -> Result<crate::LockKind> {
        crate::path::validate_path(path)?;
        let s = self.session()?;
        let (data, stat) = match s.retry(Deadline::Forever, || s.zk.get_data(path)) {
            Ok(x) => x,
            Err(zk::Error::NoNode) => return Ok(crate::LockKind::Free),
            Err(e) => return Err(s.map_err(e)),
        };
        let ephemeral = stat.ephemeral_owner != 0;
        let children = if ephemeral {
            Vec::new()
        } else {
            match s.retry(Deadline::Forever, || s.zk.list_children(path)) {
                Ok(c) => c,
                Err(zk::Error::NoNode) => return Ok(crate::LockKind::Free),
                Err(e) => return Err(s.map_err(e)),
            }
        };
        Ok(crate::node::classify(&children, ephemeral, &data))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, id: u64) {
        self.inner.listeners.lock().retain(|(i, _)| *i != id);
    }

    /// Adds authentication to the session now, and to every later session of this client.
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        let s = self.session()?;
        s.wait(s.zk.auth(scheme, auth), s.call_deadline())?;
        self.inner
            .added_auth
            .lock()
            .push((scheme.to_string(), auth.to_vec()));
        Ok(())
    }

    /// Closes the client: acquires waiting on it return [`Error::Closed`] (deleting their
    /// nodes), later calls return [`Error::Closed`], and the session ends, its remaining lock
    /// nodes deleted by the server at once, when the last lock made from this client is dropped.
    pub fn close(&self) {
        let s = self.inner.current.lock().take();
        if let Some(s) = s {
            self.inner.on_state(&s, SessionState::Closed);
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
        self.inner.watch_events.load(Ordering::Relaxed)
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

    /// Creates the missing ancestors of the node `path` (nothing for a child of the root).
    pub(crate) fn create_parents_of(
        &self,
        session: &Session,
        path: &str,
        deadline: Instant,
        protocol: Protocol,
    ) -> Result<()> {
        match crate::path::parent(path) {
            "/" => Ok(()),
            parent => self.create_parents(session, parent, deadline, protocol),
        }
    }

    /// Creates `path` and its missing ancestors (and a missing chroot node): container nodes
    /// under the Curator protocol, so the server reaps empty lock directories; persistent nodes
    /// under kazoo's, which remembers directories it made and fails if they vanish. All creates
    /// leave at once and are applied in order: one round trip whatever the depth.
    pub(crate) fn create_parents(
        &self,
        session: &Session,
        path: &str,
        deadline: Instant,
        protocol: Protocol,
    ) -> Result<()> {
        let mode = match protocol {
            Protocol::Curator => zk::CreateMode::Container,
            Protocol::Kazoo => zk::CreateMode::Persistent,
        };
        let opts = self.create_options(mode);
        let prefixes = |p: &str| -> Vec<String> {
            let mut out = Vec::new();
            let mut prefix = String::new();
            for seg in p[1..].split('/') {
                prefix.push('/');
                prefix.push_str(seg);
                out.push(prefix.clone());
            }
            out
        };
        let chroot = match &session.root {
            Some(_) => prefixes(session.zk.path()),
            None => Vec::new(),
        };
        let own = prefixes(path);
        let mut pending = Vec::new();
        if let Some(root) = &session.root {
            // A missing chroot node is created too (Curator does the same for its namespace).
            for p in &chroot {
                pending.push(root.create(p, &[], &opts));
            }
        }
        for p in &own {
            pending.push(session.zk.create(p, &[], &opts));
        }
        for f in pending {
            match session.wait(f, deadline) {
                Ok(_) | Err(Error::ZooKeeper(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Inner {
    fn on_state(&self, session: &Session, s: SessionState) {
        if !session.set_state(s) {
            return;
        }
        match s {
            SessionState::Expired => log::warn!(
                "zklock session {:#x} expired: every lock it held is lost",
                session.id
            ),
            _ => log::info!("zklock session {:#x}: {s:?}", session.id),
        }
        let is_current = self.current.lock().as_ref().map(|c| c.generation)
            == Some(session.generation)
            || s == SessionState::Closed;
        if is_current {
            self.publish(session, s);
        }
    }

    fn publish(&self, session: &Session, s: SessionState) {
        {
            let mut st = self.state.lock();
            *st = (s, session.id, session.generation);
            self.state_cv.notify_all();
        }
        let ev = SessionEvent {
            state: s,
            session_id: session.id,
            generation: session.generation,
        };
        if let Some(tx) = self.events.lock().as_ref() {
            let _ = tx.send(ev);
        }
    }

    fn ensure_dispatcher(self: &Arc<Self>) {
        let mut ev = self.events.lock();
        if ev.is_some() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<SessionEvent>();
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("zklock-listeners".into())
            .spawn(move || {
                while let Ok(e) = rx.recv() {
                    let Some(inner) = weak.upgrade() else { return };
                    let ls: Vec<Listener> = inner
                        .listeners
                        .lock()
                        .iter()
                        .map(|(_, l)| l.clone())
                        .collect();
                    drop(inner);
                    for l in ls {
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l(&e))).is_err()
                        {
                            log::error!("a zklock session listener panicked");
                        }
                    }
                }
            })
            .expect("spawn the zklock-listeners thread");
        *ev = Some(tx);
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
        let m = crate::Mutex::new(&c, "/socket-test").unwrap();
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

#[cfg(test)]
mod lease_tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A renewal's own answer proves nothing about the leader: the lease moves only to the send
    /// time of a renewal followed, a ping gap after its answer, by another answered renewal,
    /// and only once a third renewal sent after that one's answer was answered too.
    #[test]
    fn the_lease_runs_from_a_renewal_the_leader_provably_heard_of() {
        let gap = ms(300);
        let mut answered = std::collections::VecDeque::new();
        answered.push_back((ms(0), ms(1)));
        assert_eq!(confirmed(&answered, gap), None);
        answered.push_back((ms(200), ms(201)));
        assert_eq!(confirmed(&answered, gap), None, "k sent within the gap");
        answered.push_back((ms(400), ms(401)));
        assert_eq!(confirmed(&answered, gap), None, "k is the newest renewal");
        answered.push_back((ms(600), ms(601)));
        // j = 0 (answered at 1), k = 2 (sent at 400 >= 301), newest = 3.
        assert_eq!(confirmed(&answered, gap), Some(ms(0)));
        answered.push_back((ms(800), ms(801)));
        // j = 1 (answered at 201), k = 3 (sent at 600 >= 501).
        assert_eq!(confirmed(&answered, gap), Some(ms(200)));
    }

    #[test]
    fn the_ping_gap_follows_the_tick_and_the_granted_timeout() {
        // ZooKeeper's default tick: pings every second, a quarter more and 10 ms.
        assert_eq!(ping_gap(None, Duration::from_secs(10)), ms(1260));
        // A one-second session: the tick is at most half of it.
        assert_eq!(
            ping_gap(None, Duration::from_secs(1)),
            ms(322) + Duration::from_micros(500)
        );
        assert_eq!(
            ping_gap(Some(ms(100)), Duration::from_secs(1)),
            ms(72) + Duration::from_micros(500)
        );
    }
}
