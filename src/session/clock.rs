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
pub(super) fn confirmed(
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
}
