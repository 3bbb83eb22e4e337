//! The lease (`docs/hold-model.md`, "The lease"): how long the session is provably alive, kept
//! running by renewals only the leader answers. A hold is believed while its session's lease runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::state::{is_retriable, Session};
use crate::error::Error;
use crate::runtime;

/// A reading of CLOCK_BOOTTIME (`sys::boot_time`): leases run on it, so that a suspend of the
/// machine counts as the time it is for the servers.
pub(super) type BootTime = Duration;

pub(super) fn boot_now() -> BootTime {
    crate::sys::boot_time()
}

/// Keeps the session's lease running (`docs/hold-model.md`, "The lease"): every so often a
/// `sync`, which the server we talk to answers only after the leader has; each answer may prove
/// that the leader heard of the session at a later instant, and the lease runs from there. When
/// no answer comes before the lease ends, the lease lapses (holds turn Uncertain, loss callbacks
/// run). A renewal that fails for another reason is reported and tried again: the renewals stop
/// only when the session ends. Holds only a weak reference: it never keeps a session open.
pub(super) fn renew_lease(session: &Arc<Session>) {
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

/// How long before the leader could expire the session a hold stops being believed: a tenth of
/// the session timeout, for clocks that run at different rates and for the time between our
/// reading of the clock and the caller acting on the answer (the leader only ever expires
/// later than the timeout: it rounds expiry up to its next tick).
pub(super) fn lease_margin(timeout: Duration) -> Duration {
    timeout / 10
}

/// The longest the leader may take between two pings of one follower, with slack: it pings
/// every half tick (`Leader.lead`); a quarter more, and 10 ms, for its scheduling. The tick is
/// the one given in the options, or ZooKeeper's default 2 s, at most half the granted session
/// timeout (a server with its default `minSessionTimeout` grants no less than two ticks).
pub(super) fn ping_gap(tick: Option<Duration>, granted: Duration) -> Duration {
    let tick = tick.unwrap_or_else(|| Duration::from_secs(2).min(granted / 2));
    tick / 2 + tick / 8 + Duration::from_millis(10)
}

impl Session {
    /// When the lease ends (CLOCK_BOOTTIME): the latest instant the leader provably heard of
    /// the session, plus the session timeout the server granted, less the margin.
    pub(super) fn lease_end(&self) -> BootTime {
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
