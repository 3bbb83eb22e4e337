//! The lease's clock, with no arrow to the rest of the session layer: the time it runs on
//! (CLOCK_BOOTTIME), the leader's ping gap for a tick, and which renewal confirms that the
//! leader heard of the session (`docs/hold-model.md`, "The lease").

use std::time::Duration;

/// A reading of CLOCK_BOOTTIME (`sys::boot_time`): leases run on it, so that a suspend of the
/// machine counts as the time it is for the servers.
pub(super) type BootTime = Duration;

pub(super) fn boot_now() -> BootTime {
    crate::sys::boot_time()
}

/// The session's recent requests that a server answered (send and answer times), any kind: each
/// touched the session at the server that answered it (`docs/hold-model.md`, fact 2), so each may
/// be the *j* of a confirmation. Kept a quarter of the ping gap apart at least (the newest is
/// replaced by a newer one until then), so that a busy session's few entries still reach back
/// more than a gap.
#[derive(Debug, Default)]
pub(super) struct Touches {
    recent: std::collections::VecDeque<(BootTime, BootTime)>,
}

impl Touches {
    const KEPT: usize = 12;

    /// A request sent at `sent` was answered by a server at `answered`.
    pub(super) fn record(&mut self, sent: BootTime, answered: BootTime, gap: Duration) {
        let n = self.recent.len();
        if n >= 2 && self.recent[n - 1].1 < self.recent[n - 2].1 + gap / 4 {
            let newest = &mut self.recent[n - 1];
            if sent >= newest.0 {
                *newest = (sent, answered);
            }
            return;
        }
        self.recent.push_back((sent, answered));
        if self.recent.len() > Self::KEPT {
            self.recent.pop_front();
        }
    }

    /// The send time of the latest touch answered at least `gap` before `k_sent` (the send time
    /// of a `sync`): what a confirmation through that `sync` anchors the lease at.
    pub(super) fn before(&self, k_sent: BootTime, gap: Duration) -> Option<BootTime> {
        self.recent
            .iter()
            .filter(|&&(_, answered)| answered + gap <= k_sent)
            .map(|&(sent, _)| sent)
            .max()
    }

    /// When the newest touch was answered.
    pub(super) fn newest_answered(&self) -> Option<BootTime> {
        self.recent.iter().map(|&(_, answered)| answered).max()
    }

    /// When the newest touch was sent.
    pub(super) fn newest_sent(&self) -> Option<BootTime> {
        self.recent.iter().map(|&(sent, _)| sent).max()
    }
}

/// The session's recent requests the leader answered before a server answered us (send and
/// answer times, in the order they were answered): its renewals (`sync`s) and its writes that
/// succeeded (a follower applies and answers a write only once the leader committed it,
/// `docs/hold-model.md`, fact 4). The newest [`LeaderAnswers::KEPT`].
#[derive(Debug, Default)]
pub(super) struct LeaderAnswers {
    recent: std::collections::VecDeque<(BootTime, BootTime)>,
}

impl LeaderAnswers {
    const KEPT: usize = 16;

    /// A request sent at `sent` went through the leader and was answered at `answered`.
    pub(super) fn record(&mut self, sent: BootTime, answered: BootTime) {
        self.recent.push_back((sent, answered));
        if self.recent.len() > Self::KEPT {
            self.recent.pop_front();
        }
    }

    /// When the newest of them was sent.
    pub(super) fn newest_sent(&self) -> Option<BootTime> {
        self.recent.iter().map(|&(sent, _)| sent).max()
    }
}

/// The latest instant at which the leader has provably heard of the session, from the requests
/// the leader answered (`leader`: renewals and writes) and the session's other answered requests
/// (`touches`): the send time of a request `j` (any of them) such that a request `k` the leader
/// answered was sent at least `gap` after `j`'s answer, and another one, `m`, was sent after
/// `k`'s answer (and answered).
///
/// Why (`docs/hold-model.md`): `j` touched the session at its server; the leader pings each
/// follower at least every `gap`, so it sent one after that touch and before it answered `k`;
/// the follower answers pings in order with the sessions touched since its last answer, so it
/// sent that touch before it passed on `k`'s answer, hence before it forwarded `m`, whose answer
/// proves the leader had read everything the follower wrote before it. A reconnect in between
/// proves it too: a session moves to another server only after the leader revalidated
/// (touched) it.
pub(super) fn confirmed(
    leader: &LeaderAnswers,
    touches: &Touches,
    gap: Duration,
) -> Option<BootTime> {
    let recent = &leader.recent;
    // k proves nothing until a request sent after its answer came back through the leader: some
    // m was sent after k's answer exactly when the latest send is. Of those k, the latest sent
    // proves the most (the later k was sent, the later the j it reaches back to).
    let latest_m = recent.iter().map(|&(sent, _)| sent).max()?;
    let sent_k = recent
        .iter()
        .filter(|&&(_, answered_k)| answered_k <= latest_m)
        .map(|&(sent_k, _)| sent_k)
        .max()?;
    let by_leader = recent
        .iter()
        .filter(|&&(_, answered_j)| answered_j + gap <= sent_k)
        .map(|&(sent_j, _)| sent_j)
        .max();
    by_leader.max(touches.before(sent_k, gap))
}

/// How often a lease is renewed while something is held, for a session timeout `t` and ping
/// gap `gap`: the longest period `P` whose lag (a renewal is anchored only once a later one,
/// sent a gap after its answer, and one after that are answered: about ⌈(gap + slack)/P⌉ + 2
/// periods behind at worst) leaves a tenth of `t` (at least 250 ms) of the lease's 0.9·`t`, among `t`/5 (where
/// the gap allows it) and (gap + slack)/m; if none does, the one with the least lag. With
/// `t` = 10 s and a 2 s tick, 2 s (30 renewals a minute); `t` = 4 s: 800 ms; `t` = 30 s: 6 s.
pub(super) fn renewal_period(t: Duration, gap: Duration) -> Duration {
    let reach = gap + Duration::from_millis(50);
    let lag = |p: Duration| {
        let steps = reach.as_secs_f64() / p.as_secs_f64();
        p.mul_f64((steps - 1e-6).ceil() + 2.0)
    };
    let candidates = std::iter::once(t / 5)
        .chain((1..=6).map(|m| reach / m))
        .filter(|p| *p >= Duration::from_millis(10));
    // Of the lease's 0.9·t, a tenth of t (at least 250 ms) is kept for a renewal that is late.
    let within = t
        .mul_f64(0.9)
        .saturating_sub((t / 10).max(Duration::from_millis(250)));
    let mut best: Option<Duration> = None;
    for p in candidates.clone() {
        if lag(p) <= within + Duration::from_millis(1) && best.is_none_or(|b| p > b) {
            best = Some(p);
        }
    }
    best.or_else(|| candidates.min_by_key(|&p| lag(p)))
        .unwrap_or(Duration::from_millis(10))
}

/// The connection timeout the session's client is given for a session timeout `t` (and the
/// caller's connect timeout): three fifths of `t`, the most for which zookeeper-client 0.11
/// still reckons its ticks from it. Its client pings after three of those ticks of silence
/// ([`idle_touch_period`]), like ZooKeeper's Java client (after about `t`/3 less a second), and
/// gives a connection up after eight ticks (`t` · 3/5; the Java client: `t` · 2/3).
pub(super) fn connection_timeout(t: Duration, connect_timeout: Duration) -> Duration {
    (t * 3 / 5)
        .min(connect_timeout)
        .max(Duration::from_millis(1))
}

/// How often an idle session (nothing held) sends a request it times itself (`Touches`), for a
/// granted session timeout `t` and the client's connection timeout `ct`: a little within the
/// silence after which zookeeper-client 0.11 sends a ping of its own (`Session::reset_timeout`
/// there: three ticks of `ct`/8, or of `t`/20 when `ct` is over 3/5 of `t`; at most 10 s), so
/// that it never needs to: the session sends what a plain client sends, and has a touch the
/// lease can be confirmed with when something is held again.
pub(super) fn idle_touch_period(t: Duration, ct: Duration) -> Duration {
    let tick = if ct.is_zero() || ct > t * 3 / 5 {
        t / 20
    } else {
        ct / 8
    };
    let ping = (tick * 3).min(Duration::from_secs(10));
    ping.saturating_sub(tick / 4).max(Duration::from_millis(10))
}

/// How long before the leader could expire the session a hold stops being believed: a tenth of
/// the session timeout, for clocks that run at different rates and for the time between our
/// reading of the clock and the caller acting on the answer (the leader only ever expires
/// later than the timeout: it rounds expiry up to its next tick).
pub(super) fn lease_margin(timeout: Duration) -> Duration {
    timeout / 10
}

/// ZooKeeper's default `tickTime`: the tick a lease reckons with when it is neither given
/// ([`Options::server_tick_time`](crate::Options::server_tick_time)) nor read from the servers.
pub(super) const DEFAULT_TICK: Duration = Duration::from_secs(2);

/// The longest the leader may take between two pings of one follower, with slack: it pings
/// every half tick (`Leader.lead`); a quarter more, and 10 ms, for its scheduling.
///
/// The tick must be the leader's own (`docs/hold-model.md`, "The server's tick"): nothing the
/// client is granted bounds it. A server whose `minSessionTimeout` is below two ticks grants
/// sessions shorter than the gap, and expires those of its followers' clients on its own.
pub(super) fn ping_gap(tick: Duration) -> Duration {
    tick / 2 + tick / 8 + Duration::from_millis(10)
}

/// Whether a lease reckoned with this ping gap can stay running under a session timeout of
/// `granted`: a renewal is anchored only once another, sent a gap after its answer, was
/// answered too, so a gap of half the session timeout or more leaves holds believed for little
/// or none of the time.
pub(super) fn gap_fits(gap: Duration, granted: Duration) -> bool {
    gap < granted / 2
}

#[cfg(test)]
mod clock_tests {
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
        let none = Touches::default();
        let mut answered = LeaderAnswers::default();
        answered.record(ms(0), ms(1));
        assert_eq!(confirmed(&answered, &none, gap), None);
        answered.record(ms(200), ms(201));
        assert_eq!(
            confirmed(&answered, &none, gap),
            None,
            "k sent within the gap"
        );
        answered.record(ms(400), ms(401));
        assert_eq!(
            confirmed(&answered, &none, gap),
            None,
            "k is the newest renewal"
        );
        answered.record(ms(600), ms(601));
        // j = 0 (answered at 1), k = 2 (sent at 400 >= 301), newest = 3.
        assert_eq!(confirmed(&answered, &none, gap), Some(ms(0)));
        answered.record(ms(800), ms(801));
        // j = 1 (answered at 201), k = 3 (sent at 600 >= 501).
        assert_eq!(confirmed(&answered, &none, gap), Some(ms(200)));
    }

    /// Any request a server answered may be the `j` of a confirmation (it touched the session),
    /// so a lease that was idle is confirmed by two renewals in a row once a touch is a gap old;
    /// a renewal or a touch answered less than a gap before `k` was sent proves nothing.
    #[test]
    fn a_touch_a_gap_before_two_renewals_anchors_the_lease() {
        let gap = ms(300);
        let mut touches = Touches::default();
        touches.record(ms(100), ms(101), gap);
        touches.record(ms(700), ms(702), gap);
        let mut answered = LeaderAnswers::default();
        answered.record(ms(900), ms(901));
        assert_eq!(
            confirmed(&answered, &touches, gap),
            None,
            "k is the newest renewal"
        );
        answered.record(ms(902), ms(903));
        // k = the renewal sent at 900: the touch answered at 101 is a gap older, 702 is not.
        assert_eq!(confirmed(&answered, &touches, gap), Some(ms(100)));
        answered.record(ms(1010), ms(1011));
        // The renewal sent at 1010 (>= 702 + 300) is the newest: not yet a k.
        assert_eq!(confirmed(&answered, &touches, gap), Some(ms(100)));
        answered.record(ms(1012), ms(1013));
        assert_eq!(confirmed(&answered, &touches, gap), Some(ms(700)));
    }

    /// Touches a quarter gap apart are kept; closer ones replace the newest.
    #[test]
    fn touches_keep_the_older_ones_a_busy_session_would_push_out() {
        let gap = ms(400);
        let mut touches = Touches::default();
        for i in 0..1000 {
            touches.record(ms(i), ms(i + 1), gap);
        }
        // The newest is kept, and one answered at least a gap before the end.
        assert_eq!(touches.newest_sent(), Some(ms(999)));
        let j = touches.before(ms(1000), gap).expect("a touch a gap old");
        assert!(j >= ms(1000 - 400 - 100 - 1), "{j:?}");
    }

    #[test]
    fn renewals_keep_the_lease_with_a_third_of_it_to_spare() {
        let tick = DEFAULT_TICK;
        assert_eq!(renewal_period(ms(10_000), ping_gap(tick)), ms(2000));
        assert_eq!(renewal_period(ms(30_000), ping_gap(tick)), ms(6000));
        assert_eq!(renewal_period(ms(4_000), ping_gap(tick)), ms(800));
        // T = 3 s with a 2 s tick: (1260 + 50) / 3 ms, lag 5 periods = 2.18 s < 2.4 s.
        let p = renewal_period(ms(3_000), ping_gap(tick));
        assert!(p > ms(430) && p < ms(440), "{p:?}");
        // The test servers: T = 1 s, a 500 ms tick.
        let p = renewal_period(ms(1_000), ping_gap(ms(500)));
        assert!(p >= ms(100) && p <= ms(200), "{p:?}");
    }

    #[test]
    fn an_idle_session_touches_just_within_the_clients_ping() {
        let t = ms(10_000);
        let ct = connection_timeout(t, ms(10_000));
        assert_eq!(ct, ms(6000));
        // The client's tick is 750 ms, its ping after 2,250 ms of silence.
        assert_eq!(
            idle_touch_period(t, ct),
            ms(2250) - ms(187) - Duration::from_micros(500)
        );
        // A server that grants less than asked: the client reckons with t/20.
        assert_eq!(idle_touch_period(ms(4000), ct), ms(600) - ms(50));
    }

    #[test]
    fn the_ping_gap_follows_the_tick() {
        // ZooKeeper's default tick: pings every second, a quarter more and 10 ms.
        assert_eq!(ping_gap(DEFAULT_TICK), ms(1260));
        assert_eq!(ping_gap(ms(500)), ms(322) + Duration::from_micros(500));
        assert_eq!(ping_gap(ms(100)), ms(72) + Duration::from_micros(500));
        // A 1 s session fits a 500 ms tick, not the default one nor a 6 s one.
        assert!(gap_fits(ping_gap(ms(500)), ms(1000)));
        assert!(!gap_fits(ping_gap(DEFAULT_TICK), ms(1000)));
        assert!(!gap_fits(ping_gap(ms(6000)), ms(1000)));
        assert!(gap_fits(ping_gap(DEFAULT_TICK), ms(4000)));
    }

    /// A write the server answered with success went through the leader, as a renewal does:
    /// a lock taken and released in a loop proves its lease with its own creates and deletes.
    /// Requests in flight together prove nothing of each other: `m` must be sent after `k`'s
    /// answer (pipelined in one round trip, or from other threads, it is not).
    #[test]
    fn writes_confirm_the_lease_only_when_one_is_sent_after_the_others_answer() {
        let gap = ms(300);
        let mut touches = Touches::default();
        touches.record(ms(100), ms(102), gap);
        let mut leader = LeaderAnswers::default();
        // k (sent at 500, a gap after the touch's answer) and m sent together: m was on its
        // way before k's answer.
        leader.record(ms(500), ms(502));
        leader.record(ms(501), ms(503));
        assert_eq!(
            confirmed(&leader, &touches, gap),
            None,
            "m sent before k's answer"
        );
        // A write sent after k's answer (an acquire's create after the release's delete).
        leader.record(ms(502), ms(505));
        assert_eq!(confirmed(&leader, &touches, gap), Some(ms(100)));
        // Answered out of the order they were sent in (two threads): the m of a k may come
        // back first.
        let mut leader = LeaderAnswers::default();
        leader.record(ms(900), ms(950));
        leader.record(ms(500), ms(960));
        assert_eq!(
            confirmed(&leader, &touches, gap),
            None,
            "900 was sent before 960"
        );
        leader.record(ms(961), ms(962));
        // k = 500 (or 900): j = the touch answered at 102.
        assert_eq!(confirmed(&leader, &touches, gap), Some(ms(100)));
    }
}
