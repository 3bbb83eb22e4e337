//! The clock that leases run on.

/// Time since boot on CLOCK_BOOTTIME. Unlike `Instant` (CLOCK_MONOTONIC) it keeps counting
/// while the machine is suspended, as the servers' clocks do: a lease reckoned on it ends on
/// time across a suspend.
pub(crate) fn boot_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid for writing one timespec; CLOCK_BOOTTIME exists on every Linux since 2.6.39.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        // Not reached on Linux; the monotonic clock is the closest stand-in.
        // SAFETY: as above.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
