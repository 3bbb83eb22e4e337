//! One ZooKeeper session: its state machine (connected, suspended, expired, closed), its
//! requests with their bounds and retries, and the one wait for a watch. Its lease is the
//! `lease` module's; its state changes go to its event sink (`events`) as values.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use zookeeper_client as zk;

use super::clock::{boot_now, BootTime, LeaderAnswers, Touches};
use super::events::{run_detached, Events};
use super::kinds::{is_retriable, SessionEvent, SessionState};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::runtime;
use crate::wait::{Outcome, Signal};

/// The instant a request was sent, or an instant before it ([`Session::call_sent`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendTime(BootTime);

impl SendTime {
    /// Now: taken before a request is made, it is no later than the request's send.
    pub(crate) fn now() -> SendTime {
        SendTime(boot_now())
    }
}

/// Who answers a request ([`Session::call_sent`]): the server we talk to (a read), or, when the
/// request succeeds, the leader first (a write: a follower answers it only once the leader
/// committed it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    Server,
    Leader,
}

/// A callback of a hold that wants to hear when its session ends, alive while the hold is.
pub(super) type LostCallback = (Weak<()>, Box<dyn FnOnce() + Send>);

/// One ZooKeeper session (one `zookeeper-client` client). Locks keep the session they were
/// taken in, so a lock of an expired session can never be taken for held in a newer one.
pub(crate) struct Session {
    pub(crate) zk: zk::Client,
    /// The session's task and socket, for waiting callers (see `runtime::SessionIo`).
    pub(super) io: runtime::SessionIo,
    /// The same session without the chroot (to create a missing chroot node).
    pub(super) root: Option<zk::Client>,
    pub(crate) id: i64,
    pub(crate) generation: u64,
    pub(super) state: Mutex<SessionState>,
    pub(super) cv: Condvar,
    /// Where its state changes are reported.
    pub(super) events: Arc<Events>,
    /// The waits in progress on this session's watches.
    pub(super) waits: Mutex<Vec<Weak<Signal>>>,
    /// Callbacks of holds that want to hear when the session ends, each alive while its hold is.
    pub(super) lost_callbacks: Mutex<Vec<LostCallback>>,
    /// An instant (CLOCK_BOOTTIME) at which the leader provably heard of the session: it cannot
    /// expire the session before this plus the session timeout.
    pub(super) lease_anchor: Mutex<BootTime>,
    /// The servers' tick the lease reckons with (`docs/hold-model.md`, "The server's tick").
    pub(super) tick: Duration,
    /// The longest the leader may take between two pings of a follower (`confirmed`).
    pub(super) ping_gap: Duration,
    /// The lease ran out (under the state lock's condvar); cleared when it is renewed.
    pub(super) lapsed: std::sync::atomic::AtomicBool,
    /// The session's recent requests a server answered: touches a lease can be confirmed with.
    pub(super) touches: Mutex<Touches>,
    /// The session's recent requests the leader answered (renewals, writes that succeeded): what
    /// confirms the lease (`clock::confirmed`). Locked before `touches` when both are.
    pub(super) leader: Mutex<LeaderAnswers>,
    /// How many holds (and copies of one) need the lease: it is renewed only while some do.
    pub(super) lease_users: std::sync::atomic::AtomicUsize,
    /// Wakes the lease's task when a hold needs the lease again.
    pub(super) lease_wake: futures::task::AtomicWaker,
    /// A waiter wants the lease proven once (`Session::prove_lease_soon`).
    pub(super) proof_wanted: std::sync::atomic::AtomicBool,
    /// How often the lease's task touches the session while nothing is held
    /// (`clock::idle_touch_period`).
    pub(super) idle_touch: Duration,
    /// The process that opened the session. In a forked child the session is the parent's:
    /// there it is `Closed`, every request fails at once ([`Error::Forked`]) and nothing is
    /// sent, so dropping or releasing what the child inherited touches nothing of the parent's.
    pub(super) pid: u32,
    /// Lost simple-lock creates still looked for, by lock path: one task and one watch per path
    /// (`hold::background_forget_witnessed`).
    pub(crate) forgets: Mutex<std::collections::HashMap<String, Arc<Unsettled>>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Its grant (if it reconnected) is not asked for again.
        crate::grants::forget(self.id);
    }
}

/// The lost creates at one lock path that one task looks for (`hold::background_forget_witnessed`):
/// their witnesses, and the task's wake-up when another is added.
#[derive(Default)]
pub(crate) struct Unsettled {
    pub(crate) witnesses: Mutex<Vec<String>>,
    added: futures::task::AtomicWaker,
    fresh: std::sync::atomic::AtomicBool,
}

impl Unsettled {
    /// Ready once a witness was added since the last time it was ready.
    pub(crate) fn added(&self) -> impl std::future::Future<Output = ()> + '_ {
        futures::future::poll_fn(move |cx| {
            self.added.register(cx.waker());
            if self.fresh.swap(false, Ordering::SeqCst) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
    }

    fn add(&self, witness: String) {
        self.witnesses.lock().push(witness);
        self.fresh.store(true, Ordering::SeqCst);
        self.added.wake();
    }
}

impl Session {
    /// A lost create at `node` whose witness is `witness`, to be looked for: `Some` (the set to
    /// look in) when no task looks at `node` yet and one must start, `None` when the task that
    /// does was told.
    pub(crate) fn unsettled(&self, node: &str, witness: String) -> Option<Arc<Unsettled>> {
        let mut forgets = self.forgets.lock();
        if let Some(u) = forgets.get(node) {
            u.add(witness);
            return None;
        }
        let u = Arc::new(Unsettled::default());
        u.witnesses.lock().push(witness);
        forgets.insert(node.to_string(), u.clone());
        Some(u)
    }

    /// The task looking at `node` ends if nothing is left to look for: true if so (a witness
    /// added meanwhile keeps it on).
    pub(crate) fn settled(&self, node: &str, u: &Unsettled) -> bool {
        let mut forgets = self.forgets.lock();
        if u.witnesses.lock().is_empty() {
            forgets.remove(node);
            return true;
        }
        false
    }

    /// `Closed` in a forked child (see [`Session::forked`]).
    pub(crate) fn state(&self) -> SessionState {
        if self.forked().is_some() {
            return SessionState::Closed;
        }
        *self.state.lock()
    }

    /// [`Error::Forked`] if this process is a forked child of the one that opened the session.
    pub(crate) fn forked(&self) -> Option<Error> {
        (crate::sys::process_id() != self.pid).then(|| Error::forked(self.pid))
    }

    pub(super) fn fire_lost(&self) {
        let fs = self
            .lost_callbacks
            .lock()
            .drain(..)
            .filter(|(alive, _)| alive.strong_count() > 0)
            .map(|(_, f)| f)
            .collect();
        run_detached("lost", fs);
    }

    /// This session's event of state `s`, for listeners.
    pub(super) fn event(&self, s: SessionState) -> SessionEvent {
        SessionEvent {
            state: s,
            session_id: self.id,
            generation: self.generation,
        }
    }

    /// The session changed state: record it, and report it to the client's event sink.
    pub(super) fn on_state(&self, s: SessionState) {
        if !self.set_state(s) {
            return;
        }
        match s {
            SessionState::Expired => log::warn!(
                "zklock session {:#x} expired: every lock it held is lost",
                self.id
            ),
            _ => log::info!("zklock session {:#x}: {s:?}", self.id),
        }
        self.events.report(self.event(s));
    }

    pub(super) fn set_state(&self, s: SessionState) -> bool {
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
        if let Some(e) = self.forked() {
            return Some(e);
        }
        match self.state() {
            SessionState::Expired => Some(Error::SessionExpired),
            SessionState::Closed => Some(Error::Closed),
            _ => None,
        }
    }

    /// The session timeout the lease reckons with (`docs/hold-model.md`, fact 1): the least
    /// the servers granted the session at any connect, the first included. ZooKeeper grants
    /// one again at every reconnect, within the limits of the server that takes it (`grants`);
    /// the leader expires the session with the latest, and a new leader with the first (the
    /// one its creation logged) until it hears of the session again.
    pub(crate) fn granted(&self) -> Duration {
        let first = self.zk.session_timeout();
        crate::grants::granted(self.id).map_or(first, |t| t.min(first))
    }

    /// The bound of one request of an operation whose deadline is `d`: the earlier of `d` and
    /// one session timeout from now (the per-call cap lives here, not at each call site).
    pub(crate) fn cap(&self, d: Deadline) -> Instant {
        d.capped(self.granted().max(Duration::from_millis(500)))
    }

    /// The deadline of each step of a call that takes no timeout of its caller's (a look at a
    /// queue, a revocation request, a lock's kind): a step (a request and its retries) that no
    /// server answers for one session timeout ends the call, as the contract says ("no call
    /// hangs past its timeout plus the session timeout"), where it used to be retried until the
    /// session ended; a slow server that answers each step in time is waited for.
    pub(crate) fn one_call(&self) -> Deadline {
        Deadline::TryOnce
    }

    /// One request, bounded by [`Session::cap`]; not retried (for requests that must not be
    /// sent twice, such as creates). A missed bound that is the caller's deadline `d`, on a
    /// connected session, is `zk::Error::Timeout` (the caller's time ran out: a timeout, not a
    /// failure; [`Session::record_end_and_map`] makes it [`Error::Timeout`]); a missed
    /// session-timeout cap, or a deadline missed while disconnected, is `ConnectionLoss`. Either
    /// way the request may still be applied. (The crate itself returns `Timeout` only from a connect, never to a
    /// request.) A deadline that is in effect the session cap (a try-once attempt's pinned
    /// instant) is the caller's too: without a reply for a session timeout the crate has
    /// dropped the connection, and the session is no longer connected.
    /// The crate's error is kept (so recipes can tell `NoNode` from `NodeExists`); a session's
    /// end is recorded as it is seen.
    pub(crate) fn call<T>(
        &self,
        fut: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
        d: Deadline,
    ) -> std::result::Result<T, zk::Error> {
        self.call_sent(SendTime::now(), Via::Server, fut, d)
    }

    /// [`Session::call`] of a request sent no earlier than `sent` (taken before the request was
    /// made: the crate sends a request as it is made, and the reply of a pipelined one is taken
    /// a round trip later). A write (`Via::Leader`) that the server answered with success was
    /// committed by the leader first: it confirms the lease as a renewal does
    /// (`docs/hold-model.md`, "The lease").
    pub(crate) fn call_sent<T>(
        &self,
        sent: SendTime,
        via: Via,
        fut: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
        d: Deadline,
    ) -> std::result::Result<T, zk::Error> {
        if self.forked().is_some() {
            // The parent's session: not a byte goes out (the request queued by the crate is
            // never polled here), no wait; `record_end_and_map` makes it `Error::Forked`.
            return Err(zk::Error::ClientClosed);
        }
        let cap = self.cap(Deadline::Forever);
        let bound = d.instant().map_or(cap, |i| i.min(cap));
        let outcome = runtime::block_on(fut, Some(bound), None, Some(&self.io));
        if let Outcome::Ready(r) = &outcome {
            if answered_by_a_server(r) {
                let answered = boot_now();
                if via == Via::Leader && r.is_ok() {
                    self.leader_answered(sent.0, answered);
                } else {
                    self.touched(sent.0, answered);
                }
            }
        }
        match outcome {
            Outcome::Ready(Ok(v)) => Ok(v),
            Outcome::Ready(Err(e)) => {
                if matches!(
                    e,
                    zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
                ) {
                    self.record_end(&Error::from(e.clone()));
                }
                Err(e)
            }
            // A missed bound (this wait is never cancelled).
            Outcome::TimedOut | Outcome::Cancelled => {
                if bound < cap && self.state() == SessionState::Connected {
                    Err(zk::Error::Timeout)
                } else {
                    Err(zk::Error::ConnectionLoss)
                }
            }
        }
    }

    /// An idempotent request (read, delete), sent again on connection loss until it gets an
    /// answer, `d` passes (a try-once operation: one session timeout) or the session ends.
    /// The errors left are the server's answers, `Timeout` or `ConnectionLoss` when time ran
    /// out (as [`Session::call`] says), and the session's end.
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
        // Each try ends by then too (a try-once operation's one session timeout in all).
        let step = until.map_or(d, Deadline::At);
        loop {
            match self.call(request(), step) {
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

    /// `request`'s answer, or `ConnectionLoss` when none came within one session timeout: a
    /// request whose bytes were lost while its connection lived on is never answered, and a
    /// background task waiting for it would wait for as long as the session lives (a retry
    /// sends it again).
    pub(crate) async fn answered_within<T>(
        &self,
        request: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
    ) -> std::result::Result<T, zk::Error> {
        answered_within(self.granted(), request).await
    }

    /// A request sent at `sent` was answered by a server at `answered`: it touched the session
    /// there (`Touches`).
    pub(super) fn touched(&self, sent: BootTime, answered: BootTime) {
        self.touches.lock().record(sent, answered, self.ping_gap);
    }

    /// The error of a step that `d`'s passing cut short before a request went out:
    /// [`Error::Timeout`] on a connected session, else a connection loss saying `what`.
    pub(crate) fn deadline_passed(&self, what: impl std::fmt::Display) -> Error {
        if self.state() == SessionState::Connected {
            Error::Timeout
        } else {
            Error::ConnectionLoss(what.to_string().into())
        }
    }

    /// The error of a request left unanswered (`e` is [`is_retriable`]): [`Error::Timeout`]
    /// when the caller's deadline ran out on a connected session, else a connection loss
    /// saying `what` could not be learned.
    pub(crate) fn unanswered(&self, e: &zk::Error, what: impl std::fmt::Display) -> Error {
        match e {
            zk::Error::Timeout => Error::Timeout,
            _ => Error::ConnectionLoss(crate::error::ErrorDetail::with_source(
                what.to_string(),
                e.clone(),
            )),
        }
    }

    /// The crate's error `e` as ours, recording the session's end if `e` says it ended
    /// ([`Session::record_end`]): a `NoAuth` names the identities the servers know this client
    /// by, a missed caller's deadline is [`Error::Timeout`], and in a forked child every error
    /// is [`Error::Forked`].
    pub(crate) fn record_end_and_map(&self, e: zk::Error) -> Error {
        if let Some(forked) = self.forked() {
            // Nothing is recorded: the session is the parent's, alive or not.
            return forked;
        }
        if matches!(e, zk::Error::NoAuth) {
            // Say who the servers take this client for: the usual cause is an ACL made by
            // another identity (a creator-only ACL names its creator's).
            let who = self
                .identities()
                .map(|ids| ids.join(", "))
                .unwrap_or_else(|_| "unknown (whoami failed)".into());
            return Error::ZooKeeper(crate::error::ErrorDetail::with_source(
                format!(
                    "not authorized: the node's ACL does not grant this to this client, which \
                     the servers know as {who} (a creator-only ACL grants rights to the \
                     identity that created the node only)"
                ),
                e,
            ));
        }
        if matches!(e, zk::Error::Timeout) {
            // `Session::call`'s word for the caller's deadline running out.
            return Error::Timeout;
        }
        let e = Error::from(e);
        self.record_end(&e);
        e
    }

    /// When `e` says the session ended (expired, closed), records the end now (the crate saw it
    /// before our state task): the session's state changes, its loss callbacks run, and the
    /// client's listeners hear of it. Nothing in a forked child: the session is the parent's.
    pub(super) fn record_end(&self, e: &Error) {
        if self.forked().is_some() || !e.is_session_end() {
            return;
        }
        let s = if *e == Error::Closed {
            SessionState::Closed
        } else {
            SessionState::Expired
        };
        self.on_state(s);
    }

    /// The identities the servers know this session by (`scheme:id`, ZooKeeper's `whoami`,
    /// servers 3.7 and later): `ip:127.0.0.1`, `sasl:bob`, `x509:CN=client`, `digest:app`.
    pub(crate) fn identities(&self) -> Result<Vec<String>> {
        let users = self
            .call(self.zk.list_auth_users(), Deadline::TryOnce)
            .map_err(Error::from)?;
        Ok(users
            .iter()
            .map(|u| format!("{}:{}", u.scheme(), u.user()))
            .collect())
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
        // The hold this wait leads to should find its lease running.
        self.prove_lease_soon();
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
        if self.forked().is_some() {
            return Outcome::Cancelled;
        }
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
                self.events.watch_events.fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }
}

/// Marks the calling thread, for as long as the guard lives, as one that waits for what it asks
/// ZooKeeper (an acquire, a release): a task woken meanwhile is polled by this thread's next
/// wait instead of waking the executor's own thread. Take it first thing in an operation.
pub(crate) fn waiting_caller() -> runtime::Caller {
    runtime::Caller::enter()
}

impl Session {
    /// Runs `work` in the background, on the executor that drives the sessions (work that must
    /// go on after the caller returns: a delete handed over, a revocation watch).
    pub(crate) fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        runtime::spawn(work)
    }

    /// The same session without the chroot, if the client has one (to create a missing chroot
    /// node).
    pub(crate) fn root(&self) -> Option<&zk::Client> {
        self.root.as_ref()
    }

    /// Pauses the calling thread between two tries of a request (polling the sessions' tasks
    /// meanwhile, as every wait does).
    pub(crate) fn pause(&self, d: Duration) {
        runtime::sleep(d)
    }
}

/// Whether a request's result is a server's answer (so the request touched the session there):
/// success, or one of the answers a server gives about nodes. Errors the client makes up itself
/// (connection loss, a closed client, a bad argument) are not.
pub(super) fn answered_by_a_server<T>(r: &std::result::Result<T, zk::Error>) -> bool {
    matches!(
        r,
        Ok(_)
            | Err(zk::Error::NoNode
                | zk::Error::NodeExists
                | zk::Error::BadVersion
                | zk::Error::NotEmpty
                | zk::Error::NoChildrenForEphemerals)
    )
}

/// `request`'s answer, or `ConnectionLoss` when none came within `bound`
/// ([`Session::answered_within`], for a task that holds no strong reference to its session).
pub(super) async fn answered_within<T>(
    bound: Duration,
    request: impl std::future::Future<Output = std::result::Result<T, zk::Error>>,
) -> std::result::Result<T, zk::Error> {
    use futures::future::{select, Either};
    let request = std::pin::pin!(request);
    match select(request, async_io::Timer::after(bound)).await {
        Either::Left((r, _)) => r,
        Either::Right(_) => Err(zk::Error::ConnectionLoss),
    }
}
