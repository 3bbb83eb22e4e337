//! Per-lock statistics: what an operator alerts on without parsing logs (neither Curator nor
//! kazoo keeps them). Every handle counts its own acquires by outcome, the holds that ended by
//! release or by loss, and keeps the wait and hold times of its recent acquires.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How many recent samples of each time the percentiles are taken over.
const KEPT: usize = 1024;

/// A snapshot of one lock handle's statistics ([`Lock::stats`](crate::Lock::stats)).
///
/// Counts run from the handle's creation. An acquire counts once, by its outcome; a reentrant
/// acquire is an acquisition that waited 0. A hold ends once: by its release (`releases`) or
/// lost (`losses`: its session ended or its node was removed under it, seen at its release).
///
/// ```no_run
/// use zklock::{Client, Lockable, Mutex, Options};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let m = Mutex::new(&client, "/locks/orders")?;
/// drop(m.lock()?);
/// let s = m.stats();
/// println!("{} acquired, wait p99 {:?}, {} lost", s.acquisitions, s.wait.p99, s.losses);
/// # Ok::<(), zklock::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStats {
    /// Acquires that took the lock.
    pub acquisitions: u64,
    /// Acquires that did not get it before their deadline (a busy try-once included).
    pub timeouts: u64,
    /// Acquires ended by a cancel.
    pub cancels: u64,
    /// Acquires that failed otherwise (session or connection trouble, refused).
    pub failures: u64,
    /// Holds ended by their release.
    pub releases: u64,
    /// Holds that were lost before their release (seen when released).
    pub losses: u64,
    /// From the acquire call to held, over the acquisitions.
    pub wait: Percentiles,
    /// From held to released or lost, over the holds that ended.
    pub hold: Percentiles,
}

/// A distribution of durations: its count, and nearest-rank percentiles over the most recent
/// 1024 samples (`max` over all of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Percentiles {
    /// How many samples there were in all.
    pub count: u64,
    /// The median.
    pub p50: Duration,
    /// The 90th percentile.
    pub p90: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The longest of all.
    pub max: Duration,
}

#[derive(Default)]
struct Samples {
    recent: VecDeque<Duration>,
    count: u64,
    max: Duration,
}

impl Samples {
    fn add(&mut self, d: Duration) {
        if self.recent.len() == KEPT {
            self.recent.pop_front();
        }
        self.recent.push_back(d);
        self.count += 1;
        self.max = self.max.max(d);
    }

    fn percentiles(&self) -> Percentiles {
        let mut sorted: Vec<Duration> = self.recent.iter().copied().collect();
        sorted.sort_unstable();
        // Nearest rank: the smallest sample with at least p % of the samples at or below it.
        let rank = |p: usize| match sorted.len() {
            0 => Duration::ZERO,
            n => sorted[(p * n).div_ceil(100).clamp(1, n) - 1],
        };
        Percentiles {
            count: self.count,
            p50: rank(50),
            p90: rank(90),
            p99: rank(99),
            max: self.max,
        }
    }
}

#[derive(Default)]
struct Inner {
    acquisitions: u64,
    timeouts: u64,
    cancels: u64,
    failures: u64,
    releases: u64,
    losses: u64,
    wait: Samples,
    hold: Samples,
}

/// The statistics a lock handle keeps (a snapshot is [`LockStats`]).
#[derive(Default)]
pub(crate) struct Stats(parking_lot::Mutex<Inner>);

impl Stats {
    /// Runs one acquire and counts it by its outcome.
    pub(crate) fn attempt<T>(&self, f: impl FnOnce() -> Result<Option<T>>) -> Result<Option<T>> {
        let started = Instant::now();
        let r = f();
        self.acquire_ended(started, &r);
        r
    }

    /// An acquire that started at `started` ended with `r`.
    pub(crate) fn acquire_ended<T>(&self, started: Instant, r: &Result<Option<T>>) {
        let mut s = self.0.lock();
        match r {
            Ok(Some(_)) => {
                s.acquisitions += 1;
                s.wait.add(started.elapsed());
            }
            Ok(None) | Err(Error::Timeout) => s.timeouts += 1,
            Err(Error::Cancelled) => s.cancels += 1,
            Err(_) => s.failures += 1,
        }
    }

    /// A hold held for `held` ended with `outcome` (its release's result).
    pub(crate) fn hold_ended(&self, held: Duration, outcome: &Result<()>) {
        let mut s = self.0.lock();
        match outcome {
            Err(Error::LockLost | Error::SessionExpired | Error::Closed) => s.losses += 1,
            _ => s.releases += 1,
        }
        s.hold.add(held);
    }

    pub(crate) fn snapshot(&self) -> LockStats {
        let s = self.0.lock();
        LockStats {
            acquisitions: s.acquisitions,
            timeouts: s.timeouts,
            cancels: s.cancels,
            failures: s.failures,
            releases: s.releases,
            losses: s.losses,
            wait: s.wait.percentiles(),
            hold: s.hold.percentiles(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nearest_rank_percentiles_of_a_known_sequence() {
        let mut s = Samples::default();
        for n in 1..=100 {
            s.add(ms(n));
        }
        let p = s.percentiles();
        assert_eq!(
            (p.count, p.p50, p.p90, p.p99, p.max),
            (100, ms(50), ms(90), ms(99), ms(100))
        );
        let one = {
            let mut s = Samples::default();
            s.add(ms(7));
            s.percentiles()
        };
        assert_eq!((one.p50, one.p99, one.max), (ms(7), ms(7), ms(7)));
        assert_eq!(Samples::default().percentiles(), Percentiles::default());
    }

    #[test]
    fn only_the_recent_samples_make_the_percentiles_but_max_and_count_are_all_time() {
        let mut s = Samples::default();
        s.add(ms(5000));
        for _ in 0..KEPT {
            s.add(ms(1));
        }
        let p = s.percentiles();
        assert_eq!((p.count, p.p99, p.max), (KEPT as u64 + 1, ms(1), ms(5000)));
    }

    #[test]
    fn outcomes_are_counted_where_they_belong() {
        let st = Stats::default();
        assert_eq!(st.attempt(|| Ok(Some(1))).unwrap(), Some(1));
        assert_eq!(st.attempt::<i64>(|| Ok(None)).unwrap(), None);
        let _ = st.attempt::<i64>(|| Err(Error::Cancelled));
        let _ = st.attempt::<i64>(|| Err(Error::SessionExpired));
        st.hold_ended(ms(10), &Ok(()));
        st.hold_ended(ms(20), &Err(Error::LockLost));
        let s = st.snapshot();
        assert_eq!(
            (
                s.acquisitions,
                s.timeouts,
                s.cancels,
                s.failures,
                s.releases,
                s.losses
            ),
            (1, 1, 1, 1, 1, 1)
        );
        assert_eq!((s.wait.count, s.hold.count, s.hold.max), (1, 2, ms(20)));
    }
}
