//! The lease (`docs/hold-model.md`, "The lease"): how long the session is provably alive, kept
//! running by renewals only the leader answers. A hold is believed while its session's lease runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::clock::{boot_now, confirmed, lease_margin, renewal_period, BootTime};
use super::kinds::is_retriable;
use super::state::{answered_by_a_server, answered_within, SendTime, Session, Via};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::runtime;
use crate::wait::{Outcome, Signal};

/// Keeps the session's lease running (`docs/hold-model.md`, "The lease") while a hold needs it:
/// every so often a write that changes nothing ([`committed`]), which the server we talk to
/// answers only after the leader's quorum has committed it; each answer may prove that the
/// leader heard of the session at a later instant, and the lease runs from there. When no
/// answer comes before the lease ends, the lease lapses (holds turn Uncertain, loss callbacks
/// run). A renewal that fails for another reason is reported and
/// tried again: the renewals stop only when the session ends.
///
/// While nothing is held the task sends no renewal: it only times a cheap read (`check_stat` of
/// the root) when the session has sent nothing for a little less than the silence after which the
/// client would ping (`clock::idle_touch_period`), so that the session sends what a plain
/// client sends, and the next hold finds a touch to confirm its lease with
/// ([`Session::confirm_lease`]). Holds only a weak reference: it never keeps a session open.
pub(super) fn renew_lease(session: &Arc<Session>) {
    use futures::future::{select, Either};
    let weak = Arc::downgrade(session);
    let gap = session.ping_gap;
    // No longer than the client's own silence before a ping: a renewal then stands in for the
    // ping, and costs nothing the session would not send anyway. Of the session timeout granted
    // now: a reconnect may be granted another.
    let every = move |s: &Session| renewal_period(s.granted(), gap).min(s.idle_touch);
    runtime::spawn(async move {
        // Renewing (some hold needs the lease), and whether the lease ran meanwhile.
        let (mut renewing, mut believed) = (false, false);
        // The next renewal follows the answer at once (the second of two in a row).
        let mut quick = false;
        loop {
            let Some(s) = weak.upgrade() else { return };
            if s.state().is_terminal() {
                return;
            }
            let period = every(&s);
            let users = s.lease_users.load(Ordering::SeqCst);
            // Nothing held, and a waiter asked for the lease to be proven (`prove_lease_soon`):
            // two renewals in a row, then back to idle.
            let proving = users == 0 && s.proof_wanted.load(Ordering::SeqCst);
            if users == 0 && !proving {
                (renewing, believed) = (false, false);
                let newest = s.touches.lock().newest_sent();
                let due = newest.map_or(Duration::ZERO, |n| {
                    (n + s.idle_touch).saturating_sub(boot_now())
                });
                if !due.is_zero() {
                    drop(s);
                    let needed = std::pin::pin!(lease_needed(weak.clone()));
                    let _ = select(async_io::Timer::after(due), needed).await;
                    continue;
                }
                let zk = s.zk.clone();
                let (pause, patience) = (s.idle_touch.min(Duration::from_millis(250)), s.granted());
                drop(s);
                let sent = boot_now();
                let r = answered_within(patience, zk.check_stat("/")).await;
                let Some(s) = weak.upgrade() else { return };
                if answered_by_a_server(&r) {
                    s.touched(sent, boot_now());
                } else if let Err(e) = r {
                    if !is_retriable(&e) && Error::from(e.clone()).is_session_end() {
                        s.record_end(&Error::from(e));
                        return;
                    }
                    // No connection (or refused): try again a little later.
                    drop(s);
                    async_io::Timer::after(pause).await;
                }
                continue;
            }
            if !renewing {
                // A hold needs the lease again: if it is short, prove it again soon with two
                // renewals in a row (a touch of the idle spell is their `j`), else renew in a
                // period; a hold released by then costs no renewal.
                renewing = true;
                let left = s.lease_remaining();
                // (The session's writes confirm the lease while they go on: below.)
                let writing = !s.leader_renews_for(period).is_zero();
                quick = proving || (left < period * 3 && !writing);
                let first = if proving {
                    // For a waiter: now, while it waits.
                    Duration::ZERO
                } else if quick {
                    (gap / 4).min(period)
                } else {
                    period
                };
                drop(s);
                async_io::Timer::after(first).await;
                continue;
            }
            // A lease that ran out since the last look (no renewal and no write confirmed it in
            // time) lapses now: holds stop being believed, and whoever waits hears of it.
            let left_now = s.lease_remaining();
            believed |= !left_now.is_zero();
            if believed && left_now.is_zero() {
                s.lapse();
            }
            if !quick && !proving {
                // The session's own writes went through the leader lately: they renew the lease
                // as a renewal would (`Session::call_sent`), so none is sent while they do.
                let due = s.leader_renews_for(period);
                if !due.is_zero() {
                    drop(s);
                    async_io::Timer::after(due).await;
                    continue;
                }
            }
            let (renewal, left, sent, patience) = {
                let sent = boot_now();
                let patience = s.granted();
                (committed(s.zk.clone()), s.lease_remaining(), sent, patience)
            };
            believed |= !left.is_zero();
            drop(s);
            let mut renewal = std::pin::pin!(renewal);
            // Wait for the answer; if the lease ends first, say so and keep waiting, one session
            // timeout at most (then it is asked again). The lease's end is looked up afresh at
            // each wake: the session's writes may have renewed it meanwhile.
            let give_up = Instant::now() + patience;
            let reply = loop {
                let now = Instant::now();
                if now >= give_up {
                    break Err(zk::Error::ConnectionLoss);
                }
                let Some(s) = weak.upgrade() else { return };
                let left = s.lease_remaining();
                if left.is_zero() && believed {
                    s.lapse();
                }
                drop(s);
                let wait = if left.is_zero() {
                    give_up - now
                } else {
                    left.min(give_up - now)
                };
                match select(renewal.as_mut(), async_io::Timer::after(wait)).await {
                    Either::Left((r, _)) => break r,
                    // The lease ended (or was renewed meanwhile): look again.
                    Either::Right(_) => {}
                }
            };
            match reply {
                Ok(()) => {
                    let back = boot_now();
                    if let Some(s) = weak.upgrade() {
                        s.leader_answered(sent, back);
                    }
                    if std::mem::take(&mut quick) {
                        continue;
                    }
                    if proving {
                        // The pair is done: whatever it proved, the waiter's request is met.
                        if let Some(s) = weak.upgrade() {
                            s.proof_wanted.store(false, Ordering::SeqCst);
                        }
                        continue;
                    }
                    async_io::Timer::after(period).await;
                }
                Err(e) if is_retriable(&e) => {
                    // No answer (the crate may fail requests at once while it has no
                    // connection): the lease may have run out meanwhile.
                    if let Some(s) = weak.upgrade() {
                        if believed && s.lease_remaining().is_zero() {
                            s.lapse();
                        }
                    }
                    async_io::Timer::after(Duration::from_millis(50)).await;
                }
                Err(e) if Error::from(e.clone()).is_session_end() => {
                    // The session ended (or its task died): record it, so holds read Lost.
                    if let Some(s) = weak.upgrade() {
                        s.record_end(&Error::from(e));
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
                        if believed && s.lease_remaining().is_zero() {
                            s.lapse();
                        }
                    }
                    async_io::Timer::after(period).await;
                }
            }
        }
    });
}

/// A renewal: a write the leader's quorum commits, which changes nothing (a `multi` of one
/// check of the root, at any version). A server answers a write only once its leader has had
/// it logged by a quorum (`docs/hold-model.md`, fact 4 and "A leader cut off from its
/// quorum"): a `sync` would do for a leader with its quorum, but one cut off from it answers
/// syncs on its own until its `syncLimit` runs out, whatever the other members' is. A chroot
/// that does not exist fails the check; a failed `multi` is committed all the same (ZooKeeper
/// logs it as an error transaction), and counts.
async fn committed(zk: zk::Client) -> Result<(), zk::Error> {
    let mut multi = zk.new_multi_writer();
    multi.add_check_version("/", -1)?;
    match multi.commit().await {
        Ok(_)
        | Err(zk::MultiWriteError::OperationFailed {
            source: zk::Error::NoNode,
            ..
        }) => Ok(()),
        Err(
            zk::MultiWriteError::OperationFailed { source, .. }
            | zk::MultiWriteError::RequestFailed { source },
        ) => Err(source),
    }
}

/// Ready when a hold needs the session's lease (or the session is gone or ended).
fn lease_needed(weak: std::sync::Weak<Session>) -> impl std::future::Future<Output = ()> {
    futures::future::poll_fn(move |cx| {
        let Some(s) = weak.upgrade() else {
            return std::task::Poll::Ready(());
        };
        s.lease_wake.register(cx.waker());
        if s.lease_users.load(Ordering::SeqCst) > 0
            || s.proof_wanted.load(Ordering::SeqCst)
            || s.state().is_terminal()
        {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
}

/// A hold's need of its session's lease: the lease is renewed while one exists
/// ([`Session::lease_use`]).
pub(crate) struct LeaseUse(Arc<Session>);

impl Drop for LeaseUse {
    fn drop(&mut self) {
        self.0.lease_users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The longest `tickTime` the servers at `servers` report to the `conf` four-letter word, asked
/// in parallel, each within `wait`; `None` if none answers with one (ZooKeeper runs only the
/// four-letter words in its `4lw.commands.whitelist`, by default `srvr` alone).
pub(super) fn read_server_tick(
    servers: &[(std::net::SocketAddr, Option<String>)],
    tls: Option<&super::tls::Tls>,
    wait: Duration,
) -> Option<Duration> {
    if wait.is_zero() {
        return None;
    }
    std::thread::scope(|s| {
        let asks: Vec<_> = servers
            .iter()
            .map(|(a, name)| s.spawn(move || ask_tick(a, name.as_deref(), tls, wait)))
            .collect();
        asks.into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .max()
    })
}

/// The tick one server reports; `tls_name`: the server's name when it is reached over TLS.
fn ask_tick(
    addr: &std::net::SocketAddr,
    tls_name: Option<&str>,
    tls: Option<&super::tls::Tls>,
    wait: Duration,
) -> Option<Duration> {
    if let Some(name) = tls_name {
        #[cfg(feature = "tls")]
        return super::probe::four_letter(*addr, name, tls, "conf", wait)
            .and_then(|t| parse_tick(&t));
        #[cfg(not(feature = "tls"))]
        return {
            let _ = (name, tls);
            None
        };
    }
    use std::io::{Read, Write};
    let end = Instant::now() + wait;
    let mut sock = std::net::TcpStream::connect_timeout(addr, wait).ok()?;
    sock.write_all(b"conf").ok()?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() || text.len() > 64 * 1024 {
            return None;
        }
        sock.set_read_timeout(Some(left)).ok()?;
        match sock.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
    parse_tick(&String::from_utf8_lossy(&text))
}

/// The `tickTime=<ms>` line of a `conf` answer.
pub(super) fn parse_tick(conf: &str) -> Option<Duration> {
    conf.lines()
        .find_map(|l| l.trim().strip_prefix("tickTime="))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

impl Session {
    /// Says that a hold needs this session's lease, for as long as the value lives: the lease
    /// is renewed from now on (wakes the lease's task if it was idle).
    pub(crate) fn lease_use(self: &Arc<Self>) -> LeaseUse {
        if self.lease_users.fetch_add(1, Ordering::SeqCst) == 0 {
            self.lease_wake.wake();
        }
        LeaseUse(self.clone())
    }

    /// Asks the lease's task to prove the lease once, in the background, if less than half a
    /// session timeout of it is left (a waiter, about to wait for its turn: the hold it gets
    /// then finds the lease running, and its acquire returns without proving it, if the wait is
    /// shorter than that). Two renewals per wait at most, none while the lease runs long.
    pub(crate) fn prove_lease_soon(&self) {
        // Half a session timeout or more left: the wait is likely over before it runs out.
        if self.lease_remaining() >= self.granted() / 2
            || self.proof_wanted.swap(true, Ordering::SeqCst)
        {
            return;
        }
        self.lease_wake.wake();
    }

    /// Makes the lease of a hold just taken provable, if it is not (the session held nothing
    /// for longer than its lease): two renewals in a row, the first sent a ping gap after a
    /// touch of the session (`Touches`; an idle session times one every
    /// `clock::idle_touch_period`), anchor the lease at that touch (`confirmed`). Waits for a
    /// touch to be a gap old if none is, and a reconnecting session to connect. Returns when the
    /// lease runs, or with the lease still out when `d` (at most one session timeout) passes,
    /// `signal` is cancelled, or the session ended.
    pub(crate) fn confirm_lease(&self, d: Deadline, signal: &Signal) {
        let until = self.cap(d);
        let gap = self.ping_gap;
        let length = {
            let t = self.granted();
            t - lease_margin(t)
        };
        // Waits `t` (to `until` at most); false if cancelled meanwhile.
        let pause = |t: Duration| {
            let wake = Instant::now() + t.min(until.saturating_duration_since(Instant::now()));
            let waited = runtime::block_on(
                futures::future::pending::<()>(),
                Some(wake),
                Some(signal),
                Some(&self.io),
            );
            !matches!(waited, Outcome::Cancelled)
        };
        loop {
            if self.lease_live()
                || self.state().is_terminal()
                || signal.is_cancelled()
                || Instant::now() >= until
            {
                return;
            }
            if self.state() != super::SessionState::Connected {
                // Reconnecting: the session may yet live, and be proven once it has a server.
                // (Looked at again every 20 ms, driving the session's I/O meanwhile.)
                if !pause(Duration::from_millis(20)) {
                    return;
                }
                continue;
            }
            let now = boot_now();
            let usable = self
                .touches
                .lock()
                .before(now, gap)
                .filter(|&j| j + length > now + Duration::from_millis(20));
            if usable.is_none() {
                // Wait until the newest touch is a gap old; with none recent enough, make one.
                // (Not matched on the lock's guard: `call` below records its touch under it.)
                let newest = self.touches.lock().newest_answered();
                let wait = match newest {
                    Some(r) if r + gap > now => r + gap - now,
                    _ if answered_by_a_server(&self.call(self.zk.sync("/"), d)) => continue,
                    // Refused (throttled, say) or unanswered: a little later.
                    _ => Duration::from_millis(50),
                };
                if !pause(wait) {
                    return;
                }
                continue;
            }
            // k and m: their answers confirm the lease as they come (`leader_answered`).
            let k = self.call_sent(SendTime::now(), Via::Leader, committed(self.zk.clone()), d);
            let m = k.is_ok().then(|| {
                self.call_sent(SendTime::now(), Via::Leader, committed(self.zk.clone()), d)
            });
            let proven = m.is_some_and(|m| m.is_ok()) && self.lease_live();
            if !proven && !pause(Duration::from_millis(50)) {
                return;
            }
        }
    }

    /// When the lease ends (CLOCK_BOOTTIME): the latest instant the leader provably heard of
    /// the session, plus the session timeout the servers granted, less the margin; and no
    /// later than a reconnect's request whose answer is not read yet (a server may have
    /// revalidated the session with a grant the client does not know: "The timeout, per
    /// connect").
    pub(super) fn lease_end(&self) -> BootTime {
        let t = self.granted();
        let end = *self.lease_anchor.lock() + t - lease_margin(t);
        match self.grant_unknown_since() {
            Some(asked) => end.min(asked),
            None => end,
        }
    }

    /// Since when a server may have taken the session with a grant the client does not know:
    /// a reconnect's request whose answer is not read yet; in a build that cannot see the
    /// requests (`grants::readable`), any time the session is not connected (from the start
    /// of time, as far as the lease goes).
    fn grant_unknown_since(&self) -> Option<BootTime> {
        crate::grants::asking_since(self.id).or_else(|| {
            (!crate::grants::readable()
                && !matches!(
                    self.zk.state(),
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
                ))
            .then_some(BootTime::ZERO)
        })
    }

    /// How long, at least, before the leader could expire the session (and the servers hand
    /// its locks on): the lease's anchor plus the least grant (the lease itself ends a tenth
    /// before). Zero once it ended, or while a reconnect's answer is awaited (a server may have
    /// taken the session with a grant the client does not know: "The timeout, per connect").
    pub(crate) fn handover_bound(&self) -> Duration {
        if self.state().is_terminal() || self.grant_unknown_since().is_some() {
            return Duration::ZERO;
        }
        (*self.lease_anchor.lock() + self.granted()).saturating_sub(boot_now())
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

    /// A request sent at `sent` went through the leader and was answered at `answered` (a
    /// renewal, or a write that succeeded): it touched the session, and the lease runs from what
    /// the leader's answers now prove (`clock::confirmed`).
    pub(super) fn leader_answered(&self, sent: BootTime, answered: BootTime) {
        self.touched(sent, answered);
        let anchor = {
            let mut leader = self.leader.lock();
            leader.record(sent, answered);
            confirmed(&leader, &self.touches.lock(), self.ping_gap)
        };
        if let Some(anchor) = anchor {
            self.renewed(anchor);
        }
    }

    /// How long until the newest request the leader answered (a write, or a renewal) is
    /// `every` old: zero when none went through the leader within `every`.
    fn leader_renews_for(&self, every: Duration) -> Duration {
        self.leader
            .lock()
            .newest_sent()
            .map_or(Duration::ZERO, |n| (n + every).saturating_sub(boot_now()))
    }

    /// The leader provably heard of the session at `at`: the lease runs from there.
    pub(super) fn renewed(&self, at: BootTime) {
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
    pub(super) fn lapse(&self) {
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

    /// Waits until holds of this session are no longer believed (the lease ran out, or the
    /// session ended) or `deadline`; true if so.
    pub(crate) fn wait_not_held(&self, deadline: Option<Instant>) -> bool {
        if self.forked().is_some() {
            // A forked child holds nothing of its parent's.
            return true;
        }
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
}

#[cfg(test)]
mod lease_tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_tick_is_read_from_a_conf_answer() {
        let conf = "clientPort=2181\ndataDir=/d\ntickTime=6000\nmaxClientCnxns=0\n\
                    minSessionTimeout=1000\nmaxSessionTimeout=60000\nserverId=1\n";
        assert_eq!(parse_tick(conf), Some(ms(6000)));
        assert_eq!(
            parse_tick("conf is not executed because it is not in the whitelist.\n"),
            None
        );
        assert_eq!(parse_tick("tickTime=0\n"), None);
    }
}
