//! `zkl_lock`: one participant in one lock recipe, and the calls that use it.
//!
//! Each entry point checks its arguments and hands the call to the recipe; every decision
//! (queueing, waiting, reentrancy, cleanup) is the recipe's.

use std::ffi::{c_char, c_int};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::boundary::{
    box_take, try_ref, try_str, with_poison, BoxCastable, Castable, Failure, Out,
};
use super::client::ClientHandle;
use super::status::{zkl_hold_state, zkl_status};
use crate::recipes::revocable;
use crate::{Deadline, HoldState, Lockable, MultiLock};

/// One participant in one lock recipe; holds nothing when made. Its holds belong to the handle,
/// not to the thread that made a call: any thread may release what another acquired through the
/// same handle, reentrancy counts per handle, and zkl_lock_is_held, zkl_lock_hold_state and
/// zkl_lock_fencing_token answer for the handle.
///
/// Threads: the const rule of the conventions: every call taking a const zkl_lock (the queries,
/// zkl_lock_cancel, zkl_lock_reset_cancel, the waits, zkl_lock_participants, zkl_lock_stats,
/// zkl_lock_revoke_holders) may run on any thread beside any other; zkl_lock_acquire,
/// zkl_lock_release and zkl_lock_make_revocable take turns; zkl_lock_free runs alone.
pub struct zkl_lock {
    _private: [u8; 0],
}

/// What a zkl_lock points to. Fields drop in order: the lock first (releasing what it holds
/// while its session is still open), then the clients it keeps alive.
pub(crate) struct LockHandle {
    pub(super) lock: Body,
    pub(super) poisoned: AtomicBool,
    pub(super) _clients: Vec<Arc<ClientHandle>>,
}

impl Castable for zkl_lock {
    type Rust = LockHandle;
}
impl BoxCastable for zkl_lock {}

/// One lock, or a multi-lock (which cannot be a component of another).
pub(super) enum Body {
    One(Box<dyn Lockable>),
    Multi(Box<MultiLock<'static>>),
}

impl Body {
    pub(super) fn lockable(&self) -> &dyn Lockable {
        match self {
            Body::One(l) => &**l,
            Body::Multi(m) => m,
        }
    }
}

impl LockHandle {
    pub(super) fn new(lock: Body, clients: Vec<Arc<ClientHandle>>) -> Box<LockHandle> {
        Box::new(LockHandle {
            lock,
            poisoned: AtomicBool::new(false),
            _clients: clients,
        })
    }

    pub(super) fn run<T>(
        &self,
        f: impl FnOnce(&dyn Lockable) -> std::result::Result<T, Failure>,
    ) -> std::result::Result<T, Failure> {
        with_poison(&self.poisoned, "zkl_lock", || f(self.lock.lockable()))
    }

    /// As `run`, for a multi-lock's own calls; ZKL_INVALID_ARGUMENT for any other lock.
    fn run_multi<T>(
        &self,
        f: impl FnOnce(&MultiLock<'static>) -> std::result::Result<T, Failure>,
    ) -> std::result::Result<T, Failure> {
        match &self.lock {
            Body::Multi(m) => with_poison(&self.poisoned, "zkl_lock", || f(m)),
            Body::One(_) => Err(Failure::invalid("the lock is not a multi-lock")),
        }
    }
}

/// Acquires the lock. timeout_ms < 0 waits forever; 0 tries once without waiting; > 0 waits
/// at most that long in all.
///
/// Returns ZKL_OK when held: Held as it returns, its lease checked against the clock as the
/// last step (zkl_lock_hold_state says ZKL_HOLD_HELD). ZKL_TIMEOUT when not acquired in time
/// (0: the lock was busy), or when the hold's lease could not be proven by then (the node is
/// given back; < 0 and 0 prove for one session timeout at most: the servers may have expired
/// the session),
/// ZKL_CANCELLED when zkl_lock_cancel ended it (made during the acquire, or before it began:
/// see zkl_lock_cancel), ZKL_WOULD_DEADLOCK when it could only wait for this handle's own hold
/// (see the recipe's constructor), ZKL_CONNECTION_LOSS or ZKL_SESSION_EXPIRED when the session
/// failed, ZKL_CLOSED after zkl_client_close; on every non-OK status no node of this attempt is
/// left on the server. Blocks at most timeout_ms plus the session timeout. One thread at a time
/// per handle.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_acquire(lock: *mut zkl_lock, timeout_ms: i64) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        acquire(handle, timeout_ms)
    })
}

/// zkl_lock_acquire's translation (zkl_lock_acquire_in runs it in a cancel scope).
pub(super) fn acquire(handle: &LockHandle, timeout_ms: i64) -> Result<(), Failure> {
    // < 0: forever. A timeout too long for the clock to represent is forever too.
    let deadline =
        Deadline::from_timeout(u64::try_from(timeout_ms).ok().map(Duration::from_millis));
    handle.run(|r| {
        if r.acquire(deadline)?.is_some() {
            Ok(())
        } else if timeout_ms == 0 {
            Err(Failure::new(zkl_status::ZKL_TIMEOUT, "not acquired: the lock is busy, or its hold could not be proven held within one session timeout (timeout 0 tries once)"))
        } else if timeout_ms < 0 {
            Err(Failure::new(zkl_status::ZKL_TIMEOUT, "not acquired: the hold could not be proven held within one session timeout (no answer from the ZooKeeper leader in time; the servers may have expired the session)"))
        } else {
            Err(Failure::new(zkl_status::ZKL_TIMEOUT, format!("not acquired within the timeout of {timeout_ms} ms")))
        }
    })
}

/// Releases one hold of the lock.
///
/// Returns ZKL_NOT_HELD if this handle does not hold it, ZKL_LOCK_LOST if the lock had been
/// lost (its session ended, or someone else deleted its node; the hold is dropped anyway;
/// ZKL_SESSION_EXPIRED before 0.3), ZKL_CLOSED after zkl_client_close,
/// ZKL_CONNECTION_LOSS if the server could not be told within one session timeout (the node is
/// then deleted in the background; the handle holds nothing any more either way). Blocks at
/// most the session timeout. Any thread may release what another acquired on the same handle;
/// one thread at a time per handle.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_release(lock: *mut zkl_lock) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        handle.run(|r| Ok(r.release()?))
    })
}

/// Ends the acquire under way on this handle: it returns ZKL_CANCELLED, having deleted its
/// node and given back a hold that arrived meanwhile. If no acquire is under way, the handle
/// remembers the cancel and its next zkl_lock_acquire returns ZKL_CANCELLED at once (before any
/// request), forgetting it: a cancel that lands just before an acquire begins is not lost
/// (kazoo's cancel() and Java's interrupt are sticky too). One cancel ends one acquire: several
/// with no acquire between are one, and a cancel never outlives the acquire it ends. A cancel
/// that came after the acquire it was meant for had returned is remembered all the same:
/// zkl_lock_reset_cancel forgets it. Any thread, at any time, even while another thread is
/// inside zkl_lock_acquire on the same handle. Returns at once.
///
/// Do not free the handle while another thread is inside zkl_lock_acquire: cancel, wait for
/// that thread to return, then free.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_cancel(lock: *const zkl_lock) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; cancel only touches the recipe's shared,
        // internally synchronised state, so a concurrent acquire on another thread is fine.
        let handle = unsafe { try_ref(lock, "lock") }?;
        handle.run(|r| {
            r.cancel();
            Ok(())
        })
    })
}

/// Forgets a cancel this handle remembers for its next acquire (zkl_lock_cancel with no acquire
/// under way), say one that came just after the acquire it was meant for had returned. Returns
/// 1 if there was one, else 0 (also for NULL). Never blocks; any thread, at any time.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_reset_cancel(lock: *const zkl_lock) -> c_int {
    ffi_boundary!(value {
        // SAFETY: the caller's contract for `lock`; as zkl_lock_cancel, this only touches the
        // recipe's shared, internally synchronised cancel state.
        match unsafe { try_ref(lock, "lock") } {
            Ok(handle) => handle.run(|r| Ok(r.reset_cancel())).map_or(0, c_int::from),
            Err(_) => 0,
        }
    })
}

/// 1 while this handle holds the lock and zkl_lock_hold_state would say ZKL_HOLD_HELD (the
/// session is provably alive; for a multi-lock: every component), else 0 (also for NULL). Never blocks.
/// Any thread, even while another thread uses the handle (as zkl_lock_hold_state).
///
/// Pointers: lock is NULL or a live zkl_lock.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_is_held(lock: *const zkl_lock) -> c_int {
    ffi_boundary!(value {
        // SAFETY: the caller's contract for `lock`.
        match unsafe { try_ref(lock, "lock") } {
            Ok(handle) => handle.run(|r| Ok(r.is_held())).map_or(0, c_int::from),
            Err(_) => 0,
        }
    })
}

/// Writes the fencing token of the current hold to *out_token: strictly increasing across
/// successive holders of the same lock (the lock node's creation zxid), so a resource can
/// refuse writes from a holder that lost the lock. For a multi-lock: the largest of its
/// components' tokens, which fences only a resource written by holders of that whole set;
/// a component's own token is zkl_multi_lock_token_at's.
///
/// Returns ZKL_NOT_HELD if this handle does not hold it or lost it, ZKL_CLOSED in a forked
/// child (the hold is the parent's); then *out_token is left unchanged. Never blocks. Any
/// thread, even while another thread uses the handle.
///
/// Pointers: lock is NULL or a live zkl_lock; out_token is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_fencing_token(
    lock: *const zkl_lock,
    out_token: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out_token`.
        let out = unsafe { Out::new(out_token, "out_token") }?;
        let token = handle.run(|r| Ok(r.fencing_token()?))?;
        out.write(token);
        Ok(())
    })
}

/// Writes the fencing token of the multi-lock's component at `index` (its index in the array
/// given to zkl_multi_lock_new) in the current hold to *out_token: that lock's own token (its
/// node's creation zxid), strictly increasing across successive holders of that lock, whether
/// they held it alone or in a multi-lock. Fence a resource that this component guards with it.
///
/// Returns ZKL_NOT_HELD if the multi-lock is not held or a component's hold was lost;
/// ZKL_INVALID_ARGUMENT for NULL, a lock that is not a multi-lock, or an index past its
/// components; then *out_token is left unchanged. Never blocks. Any thread, even while another
/// thread uses the handle.
///
/// Pointers: lock is NULL or a live zkl_lock; out_token is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_multi_lock_token_at(
    lock: *const zkl_lock,
    index: usize,
    out_token: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out_token`.
        let out = unsafe { Out::new(out_token, "out_token") }?;
        let token = handle.run_multi(|m| {
            let n = m.paths().len();
            if index >= n {
                return Err(Failure::invalid(format!("`index` {index} is past the multi-lock's {n} locks")));
            }
            Ok(m.tokens()?[index])
        })?;
        out.write(token);
        Ok(())
    })
}

/// As zkl_multi_lock_token_at, for the component at path (the write half's token, for both
/// halves of one read-write lock: the read half keeps it).
///
/// Returns ZKL_NOT_HELD if the multi-lock is not held or a component's hold was lost;
/// ZKL_INVALID_ARGUMENT for NULL, a lock that is not a multi-lock, or a path none of its
/// components has; then *out_token is left unchanged. Never blocks. Any thread, even while
/// another thread uses the handle.
///
/// Pointers: lock is NULL or a live zkl_lock; path is NULL or NUL-terminated; out_token is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_multi_lock_token_of(
    lock: *const zkl_lock,
    path: *const c_char,
    out_token: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `path`.
        let path = unsafe { try_str(path, "path") }?;
        // SAFETY: the caller's contract for `out_token`.
        let out = unsafe { Out::new(out_token, "out_token") }?;
        let token = handle.run_multi(|m| Ok(m.token_of(path)?))?;
        out.write(token);
        Ok(())
    })
}

/// Writes what this handle may believe about its hold to *out_state, as a zkl_hold_state
/// value: ZKL_HOLD_NONE, ZKL_HOLD_HELD (the session is provably alive), ZKL_HOLD_UNCERTAIN (cut
/// off long enough that the server may have freed it: stop acting; it returns to HELD if the
/// session reconnects in time) or ZKL_HOLD_LOST (the session ended). For a multi-lock: HELD only
/// when every component is held, else the worst state among them.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument (then *out_state is left unchanged). Never blocks.
/// Any thread, even while another thread uses the handle (as zkl_lock_is_held).
///
/// Pointers: lock is NULL or a live zkl_lock; out_state is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_hold_state(
    lock: *const zkl_lock,
    out_state: *mut u32,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out_state`.
        let out = unsafe { Out::new(out_state, "out_state") }?;
        let state = handle.run(|r| Ok(zkl_hold_state::from(r.hold_state())))?;
        out.write(state as u32);
        Ok(())
    })
}

/// Writes to *out_ms how many milliseconds the hold stays provably valid if the server went
/// silent now: the lease runs from an instant at which the ZooKeeper leader provably heard of
/// the session, for the session timeout less a tenth of it, and is renewed (through the leader)
/// while the session is connected. 0 once it ran out (the hold is then ZKL_HOLD_UNCERTAIN or
/// ZKL_HOLD_LOST).
///
/// ZKL_NOT_HELD if the handle holds nothing, ZKL_INVALID_ARGUMENT for a NULL argument; then
/// *out_ms is left unchanged. Never blocks. Any thread, even while another thread uses the
/// handle.
///
/// Pointers: lock is NULL or a live zkl_lock; out_ms is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_lease_remaining_ms(
    lock: *const zkl_lock,
    out_ms: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out_ms`.
        let out = unsafe { Out::new(out_ms, "out_ms") }?;
        let left = handle.run(|r| r.lease_remaining().ok_or_else(|| crate::Error::NotHeld.into()))?;
        out.write(i64::try_from(left.as_millis()).unwrap_or(i64::MAX));
        Ok(())
    })
}

/// Blocks until this handle's hold stops being believed, so that the holder stops acting on it
/// (the waitable form of Curator's and kazoo's "lock lost" listeners): its lease ran out
/// (ZKL_HOLD_UNCERTAIN: cut off from the servers long enough that the session may have expired)
/// or its session ended (ZKL_HOLD_LOST). timeout_ms < 0 waits forever; 0 only looks.
///
/// Returns ZKL_OK when the hold is no longer believed (zkl_lock_hold_state tells which state),
/// ZKL_NOT_HELD if the handle holds nothing or its hold is released during the wait (noticed
/// within 200 ms), ZKL_TIMEOUT if it is still held at the timeout. Runs no code of yours: call
/// it on a thread of your own. Any thread, even while another thread uses the handle (as
/// zkl_lock_cancel); do not free the handle during the call (wait in slices if you must stop
/// the waiter).
///
/// ```c
/// // on a watcher thread of the holder's
/// while (running) {
///     zkl_status s = zkl_lock_wait_lost(lock, 200);
///     if (s == ZKL_OK) { stop_writing(); break; }
///     if (s == ZKL_NOT_HELD) break;
/// }
/// ```
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_wait_lost(lock: *const zkl_lock, timeout_ms: i64) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; like cancel, waiting only reads the recipe's
        // internally synchronised state.
        let handle = unsafe { try_ref(lock, "lock") }?;
        let end = u64::try_from(timeout_ms)
            .ok()
            .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)));
        handle.run(|r| {
            // The recipe's wait ends on the hold's end, not on its release: look at the hold
            // between slices, so a release ends the wait too.
            const SLICE: Duration = Duration::from_millis(200);
            loop {
                match r.hold_state() {
                    HoldState::NotHeld => {
                        return Err(Failure::new(zkl_status::ZKL_NOT_HELD, "the handle holds nothing (or its hold was released)"));
                    }
                    HoldState::Uncertain | HoldState::Lost => return Ok(()),
                    HoldState::Held => {}
                }
                let left = end.map(|e| e.saturating_duration_since(Instant::now()));
                if left.is_some_and(|l| l.is_zero()) {
                    return Err(Failure::new(zkl_status::ZKL_TIMEOUT, "still held at the timeout"));
                }
                r.wait_lost(Some(left.map_or(SLICE, |l| l.min(SLICE))));
            }
        })
    })
}

/// Makes this handle's holds revocable (Curator's makeRevocable): from now on, the current hold
/// included, a request to let go (zkl_lock_revoke_holders, zkl_client_request_revoke,
/// `zklock revoke`, Curator's Revoker.attemptRevoke) ends zkl_lock_wait_revoke_request.
/// Revocation is cooperative: nothing is released unless the holder releases. For the mutex,
/// the semaphore mutex, the read-write halves and the simple lock.
///
/// ZKL_INVALID_ARGUMENT for NULL, a semaphore or a multi-lock. Never blocks. One thread at a
/// time per handle.
///
/// Pointers: lock is NULL or a live zkl_lock.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_make_revocable(lock: *mut zkl_lock) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        handle.run(|r| Ok(revocable(r)?.make_revocable(Box::new(|| {}))?))
    })
}

/// Blocks until someone asks this handle to give up its current hold (after
/// zkl_lock_make_revocable). timeout_ms < 0 waits forever; 0 only looks.
///
/// Returns ZKL_OK when asked (the hold is still held: release it to comply), ZKL_TIMEOUT if not
/// asked in time, ZKL_NOT_HELD if the handle holds nothing or releases meanwhile,
/// ZKL_INVALID_ARGUMENT for NULL or a lock not made revocable. Runs no code of yours. Any
/// thread, even while another thread uses the handle; do not free the handle during the call.
///
/// ```c
/// // on a thread of the holder's
/// if (zkl_lock_wait_revoke_request(lock, -1) == ZKL_OK) finish_up_and_release();
/// ```
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_wait_revoke_request(
    lock: *const zkl_lock,
    timeout_ms: i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; the wait reads internally synchronised state.
        let handle = unsafe { try_ref(lock, "lock") }?;
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        if handle.run(|r| Ok(revocable(r)?.wait_revoke_request(timeout)?))? {
            Ok(())
        } else {
            Err(Failure::new(zkl_status::ZKL_TIMEOUT, "no revocation request within the timeout"))
        }
    })
}

/// Asks every current holder of this lock to let go (cooperative: only holders that made their
/// locks revocable, zklock's or Curator's, hear it) and writes how many were asked to *out_count.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument or a semaphore or multi-lock;
/// ZKL_CONNECTION_LOSS or ZKL_SESSION_EXPIRED when the server could not be told. Blocks at most
/// the session timeout. Any thread, even while another thread uses the handle.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; out_count is NULL or
/// valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_revoke_holders(
    lock: *const zkl_lock,
    out_count: *mut usize,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out_count`.
        let out = unsafe { Out::new(out_count, "out_count") }?;
        let asked = handle.run(|r| Ok(revocable(r)?.revoke_holders()?))?;
        out.write(asked.len());
        Ok(())
    })
}

/// Frees a lock handle, releasing first whatever it holds (if the server cannot be told in
/// time, the node is deleted in the background while the session lives). NULL is a no-op;
/// must not be called twice for one handle. Frees the client's session too if the client and
/// all its other locks were freed already. Blocks at most twice the session timeout.
///
/// Never call it while another thread is inside a call on the same handle (even
/// zkl_lock_acquire: cancel, wait for that thread to return, then free).
///
/// In a forked child of the process that made the lock: frees the child's copy of the memory
/// only and returns at once; what the handle holds stays the parent's (nothing is released).
///
/// Pointers: lock is NULL or a live zkl_lock that no other thread uses during or after the
/// call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_free(lock: *mut zkl_lock) {
    ffi_boundary!(value {
        // SAFETY: the caller's contract: lock is NULL or a live handle freed only now and used by
        // nobody else.
        drop(unsafe { box_take(lock) });
    })
}

// Cancel and the shared borrows of a handle cross threads: both types must be Send + Sync.
const _: () = {
    const fn thread_safe<T: Send + Sync>() {}
    thread_safe::<LockHandle>();
    thread_safe::<ClientHandle>();
};
