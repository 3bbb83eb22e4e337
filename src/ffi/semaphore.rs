//! A semaphore's several leases at once: `zkl_semaphore_acquire_many` and
//! `zkl_semaphore_release_many` (Semaphore::acquire_many's door).

use std::time::Duration;

use super::boundary::{try_ref, Failure};
use super::lock::zkl_lock;
use super::status::zkl_status;
use crate::Deadline;

/// Takes n leases of a semaphore (zkl_semaphore_new) at once, all or none, under one timeout:
/// Curator's InterProcessSemaphoreV2.acquire(qty) in its layout (kazoo's too, per the client's
/// protocol), but never holding some while waiting for the rest: the mutex that guards the count
/// is taken once and the n lease nodes are held together. timeout_ms < 0 waits forever; 0
/// tries once (never waiting for a lease, but up to half a second for the mutex); > 0 waits at
/// most that long in all.
///
/// On ZKL_OK the handle holds n more leases, Held as it returns, and out_tokens[0..n) are their
/// fencing tokens (oldest first); return them with zkl_semaphore_release_many (or one by one with
/// zkl_lock_release, or all with zkl_lock_free). On any other status out_tokens is left unchanged
/// and no lease of this acquire is left: ZKL_TIMEOUT when they were not all free in time,
/// ZKL_CANCELLED (zkl_lock_cancel), ZKL_WOULD_DEADLOCK when this handle's own leases leave fewer
/// than n free (it could only wait for itself), ZKL_INVALID_ARGUMENT for NULL, n 0, n over
/// max_leases or a lock that is not a semaphore, ZKL_CONNECTION_LOSS or ZKL_SESSION_EXPIRED when
/// the session failed, ZKL_CLOSED after zkl_client_close. Blocks at most timeout_ms plus the
/// session timeout. One thread at a time per handle (as zkl_lock_acquire).
///
/// ```c
/// int64_t tokens[3];
/// if (zkl_semaphore_acquire_many(sem, 3, 5000, tokens) == ZKL_OK) {
///     use_three_slots(tokens);
///     zkl_semaphore_release_many(sem, tokens, 3);
/// }
/// ```
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; out_tokens is NULL or
/// valid for writing n int64_t values.
#[no_mangle]
pub unsafe extern "C" fn zkl_semaphore_acquire_many(
    lock: *mut zkl_lock,
    n: u32,
    timeout_ms: i64,
    out_tokens: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        if out_tokens.is_null() {
            return Err(Failure::null("out_tokens"));
        }
        let deadline =
            Deadline::from_timeout(u64::try_from(timeout_ms).ok().map(Duration::from_millis));
        let tokens = handle.run(|r| match r.acquire_holds(n, deadline)? {
            Some(tokens) => Ok(tokens),
            None if timeout_ms == 0 => Err(Failure::new(zkl_status::ZKL_TIMEOUT, format!("not acquired: fewer than {n} leases are free (timeout 0 tries once)"))),
            None if timeout_ms < 0 => Err(Failure::new(zkl_status::ZKL_TIMEOUT, "not acquired: the leases could not be proven held within one session timeout (no answer from the ZooKeeper leader in time)")),
            None => Err(Failure::new(zkl_status::ZKL_TIMEOUT, format!("not acquired: {n} leases were not free within the timeout of {timeout_ms} ms"))),
        })?;
        // SAFETY: the caller's contract: out_tokens (not NULL, checked above) is valid for
        // writing n values, and the acquire made exactly n.
        let out = unsafe { std::slice::from_raw_parts_mut(out_tokens, tokens.len()) };
        out.copy_from_slice(&tokens);
        Ok(())
    })
}

/// Returns the leases with these fencing tokens (as zkl_semaphore_acquire_many wrote them)
/// together: each one is returned whatever became of the others, and the status is the first
/// failure's (ZKL_NOT_HELD for a token this handle holds no lease of, ZKL_LOCK_LOST for a lease
/// lost meanwhile, ZKL_CONNECTION_LOSS when a delete was handed to the background: see
/// zkl_lock_release), else ZKL_OK. ZKL_INVALID_ARGUMENT for NULL or n 0 (nothing is returned
/// then). Blocks at most the session timeout per lease. One thread at a time per handle.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; tokens is NULL or
/// points to n readable int64_t values.
#[no_mangle]
pub unsafe extern "C" fn zkl_semaphore_release_many(
    lock: *mut zkl_lock,
    tokens: *const i64,
    n: usize,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        if tokens.is_null() {
            return Err(Failure::null("tokens"));
        }
        if n == 0 {
            return Err(Failure::invalid("`n` is 0: no lease to return"));
        }
        // SAFETY: the caller's contract: tokens (not NULL, checked above) points to n values.
        let tokens = unsafe { std::slice::from_raw_parts(tokens, n) };
        handle.run(|r| {
            let mut first = Ok(());
            for &t in tokens {
                if let Err(e) = r.release_hold(t) {
                    if first.is_ok() {
                        first = Err(e.into());
                    }
                }
            }
            first
        })
    })
}
