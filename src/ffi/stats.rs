//! `zkl_stats`: a lock handle's statistics, and the call that reads them.

use std::time::Duration;

use super::boundary::{try_ref, Out};
use super::lock::zkl_lock;
use super::status::zkl_status;

/// A distribution of durations in zkl_stats: its count, and nearest-rank percentiles over the
/// most recent 1024 samples (max over all), in microseconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct zkl_percentiles {
    /// How many samples there were in all.
    pub count: u64,
    /// The median.
    pub p50_us: i64,
    /// The 90th percentile.
    pub p90_us: i64,
    /// The 99th percentile.
    pub p99_us: i64,
    /// The longest of all.
    pub max_us: i64,
}

impl From<crate::Percentiles> for zkl_percentiles {
    fn from(p: crate::Percentiles) -> zkl_percentiles {
        let us = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        zkl_percentiles {
            count: p.count,
            p50_us: us(p.p50),
            p90_us: us(p.p90),
            p99_us: us(p.p99),
            max_us: us(p.max),
        }
    }
}

/// One lock handle's statistics (zkl_lock_stats). Counts run from the handle's creation; an
/// acquire counts once, by its outcome (a reentrant one is an acquisition that waited 0); a hold
/// ends once, released or lost.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct zkl_stats {
    /// Acquires that took the lock.
    pub acquisitions: u64,
    /// Acquires that did not get it before their timeout (a busy timeout 0 included).
    pub timeouts: u64,
    /// Acquires ended by zkl_lock_cancel.
    pub cancels: u64,
    /// Acquires that failed otherwise (session or connection trouble, refused).
    pub failures: u64,
    /// Holds ended by their release.
    pub releases: u64,
    /// Holds lost before their release (seen when released: ZKL_LOCK_LOST and the like).
    pub losses: u64,
    /// From the acquire call to held, over the acquisitions.
    pub wait: zkl_percentiles,
    /// From held to released or lost, over the holds that ended.
    pub hold: zkl_percentiles,
}

/// Writes this handle's statistics to *out: acquires by outcome (acquired, timed out,
/// cancelled, failed), holds ended by release or by loss, and the wait and hold times of recent
/// ones as percentiles. For alerting without parsing logs (neither Curator nor kazoo keeps them).
/// A multi-lock counts its own acquires (its locks, taken over, count theirs no more).
///
/// ```c
/// zkl_stats st;
/// if (zkl_lock_stats(lock, &st) == ZKL_OK && st.wait.p99_us > 500000)
///     alert("waiting over half a second for /locks/orders");
/// ```
///
/// ZKL_INVALID_ARGUMENT for a NULL argument (then *out is left unchanged). Never blocks. Any
/// thread, even while another thread uses the handle.
///
/// Pointers: lock is NULL or a live zkl_lock; out is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_stats(lock: *const zkl_lock, out: *mut zkl_stats) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; the statistics are internally synchronised.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let s = handle.run(|r| Ok(r.stats()))?;
        out.write(zkl_stats {
            acquisitions: s.acquisitions,
            timeouts: s.timeouts,
            cancels: s.cancels,
            failures: s.failures,
            releases: s.releases,
            losses: s.losses,
            wait: s.wait.into(),
            hold: s.hold.into(),
        });
        Ok(())
    })
}
