//! [`Deadline`]: how long an acquire may take, converted once from what the caller said.

use std::time::{Duration, Instant};

/// How long past a short deadline an acquire's first round trip may take (its create and its
/// look at the queue): a lock found free in it is held (`Deadline::first_round`).
pub(crate) const FIRST_ROUND_GRACE: Duration = Duration::from_millis(250);

/// How long an acquire may wait: forever, until an instant, or not at all.
///
/// Every acquire form maps to one of these once (`lock()` is `Forever`, `try_lock()` is
/// `TryOnce`, `try_lock_for(t)` is `At(now + t)`); the session caps each ZooKeeper request of
/// the acquire at one session timeout, so no call blocks longer than its deadline plus the
/// session timeout.
///
/// ```
/// use std::time::Duration;
/// use zklock::Deadline;
/// assert_eq!(Deadline::from_timeout(None), Deadline::Forever);
/// assert_eq!(Deadline::from_timeout(Some(Duration::ZERO)), Deadline::TryOnce);
/// assert!(matches!(Deadline::after(Duration::from_secs(1)), Deadline::At(_)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// Wait as long as it takes.
    Forever,
    /// Wait until this instant at most (one total deadline, however many steps the acquire has).
    At(Instant),
    /// Never wait for another holder: one attempt, which gives up at once if the lock is busy.
    TryOnce,
}

impl Deadline {
    /// `timeout` from now; a timeout too long for the clock to represent is `Forever`.
    pub fn after(timeout: Duration) -> Deadline {
        Instant::now()
            .checked_add(timeout)
            .map_or(Deadline::Forever, Deadline::At)
    }

    /// The C convention: `None` waits forever, zero tries once, anything else waits that long.
    pub fn from_timeout(timeout: Option<Duration>) -> Deadline {
        match timeout {
            None => Deadline::Forever,
            Some(t) if t.is_zero() => Deadline::TryOnce,
            Some(t) => Deadline::after(t),
        }
    }

    /// The instant, for `At`.
    pub fn instant(self) -> Option<Instant> {
        match self {
            Deadline::At(i) => Some(i),
            _ => None,
        }
    }

    /// Whether it is a try-once acquire.
    pub fn is_try_once(self) -> bool {
        self == Deadline::TryOnce
    }

    /// Whether an `At` deadline has passed.
    pub fn passed(self) -> bool {
        self.instant().is_some_and(|i| Instant::now() >= i)
    }

    /// Pins a try-once deadline to one instant, `t` from now, for every step of one attempt
    /// (each request, the recovery of a lost reply, a fresh session): returns whether it is a
    /// try-once attempt (which never waits for another holder) and the deadline of its steps.
    pub(crate) fn pinned(self, t: Duration) -> (bool, Deadline) {
        match self {
            Deadline::TryOnce => (true, Deadline::At(Instant::now() + t)),
            d => (false, d),
        }
    }

    /// The deadline of an acquire's first round trip (its create and its look at the queue):
    /// never sooner than [`FIRST_ROUND_GRACE`] (or `t`, if shorter) from now. A timed acquire
    /// that finds the lock free in that one round trip holds it, however short its timeout, as
    /// kazoo's and Curator's do, while an acquire on a stalled server still returns soon after
    /// its deadline: a timeout bounds the wait for another holder, and the first look gets at
    /// most the grace beyond it.
    pub(crate) fn first_round(self, t: Duration) -> Deadline {
        match self {
            Deadline::At(i) => Deadline::At(i.max(saturating_after(t.min(FIRST_ROUND_GRACE)))),
            d => d,
        }
    }

    /// The earlier of this deadline and `cap` from now: the bound of one step that must not
    /// take longer than `cap` (a ZooKeeper request, a reconnect). A `cap` too long for the
    /// clock is the farthest instant it can tell.
    pub fn capped(self, cap: Duration) -> Instant {
        let c = saturating_after(cap);
        self.instant().map_or(c, |i| i.min(c))
    }
}

/// `t` from now, or, for a `t` too long for the clock (`Duration::MAX`), a century from now:
/// a wait that long is a wait forever, and never an overflow.
pub(crate) fn saturating_after(t: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let now = Instant::now();
    now.checked_add(t.min(CENTURY))
        .or_else(|| now.checked_add(t.min(Duration::from_secs(u32::MAX.into()))))
        .unwrap_or(now)
}

/// A duration as people write it, to the millisecond: "1 s", "2.5 s", "145 ms", "0.4 ms"
/// (not Debug's "999.971476ms").
pub(crate) fn for_people(d: Duration) -> String {
    let micros = d.as_micros();
    let ms = (micros + 500) / 1000;
    let trimmed = |t: String| t.trim_end_matches('0').trim_end_matches('.').to_string();
    if ms >= 1000 {
        format!("{} s", trimmed(format!("{}.{:03}", ms / 1000, ms % 1000)))
    } else if micros >= 1000 {
        format!("{ms} ms")
    } else {
        format!("{} ms", trimmed(format!("0.{micros:03}")))
    }
}

#[cfg(test)]
mod for_people_tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        for (d, text) in [
            (Duration::from_nanos(2_999_986_386), "3 s"),
            (Duration::from_millis(2500), "2.5 s"),
            (Duration::from_micros(999_971), "1 s"),
            (Duration::from_micros(145_003), "145 ms"),
            (Duration::from_micros(400), "0.4 ms"),
            (Duration::from_secs(3600), "3600 s"),
        ] {
            assert_eq!(for_people(d), text, "{d:?}");
        }
    }
}
