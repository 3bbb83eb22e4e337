//! `zkl_lock`: one participant in one lock recipe, and the calls that use it.
//!
//! Each entry point checks its arguments and hands the call to the recipe; every decision
//! (queueing, waiting, reentrancy, cleanup) is the recipe's.

use std::ffi::{c_char, c_int, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::boundary::{
    box_into_ptr, box_take, try_clone_arc, try_ref, try_str, with_poison, BoxCastable, Castable,
    Failure, Out,
};
use super::client::{zkl_client, ClientHandle};
use super::status::{zkl_hold_state, zkl_status};
use crate::recipes::same_path_conflict;
use crate::{
    Client, Deadline, HoldState, Lockable, MultiLock, Mutex, Participant, ReadWriteLock, Result,
    Semaphore, SemaphoreMutex, SimpleLock,
};

/// One participant in one lock recipe; holds nothing when made. Its holds belong to the handle,
/// not to the thread that made a call: any thread may release what another acquired through the
/// same handle, reentrancy counts per handle, and zkl_lock_is_held, zkl_lock_hold_state and
/// zkl_lock_fencing_token answer for the handle. Use from one thread at a time, except
/// zkl_lock_cancel and zkl_lock_reset_cancel, which any thread may call at any time.
pub struct zkl_lock {
    _private: [u8; 0],
}

/// What a zkl_lock points to. Fields drop in order: the lock first (releasing what it holds
/// while its session is still open), then the clients it keeps alive.
pub(crate) struct LockHandle {
    lock: Body,
    poisoned: AtomicBool,
    _clients: Vec<Arc<ClientHandle>>,
}

impl Castable for zkl_lock {
    type Rust = LockHandle;
}
impl BoxCastable for zkl_lock {}

/// One lock, or a multi-lock (which cannot be a component of another).
enum Body {
    One(Box<dyn Lockable>),
    Multi(Box<MultiLock<'static>>),
}

impl Body {
    fn lockable(&self) -> &dyn Lockable {
        match self {
            Body::One(l) => &**l,
            Body::Multi(m) => m,
        }
    }
}

impl LockHandle {
    fn new(lock: Body, clients: Vec<Arc<ClientHandle>>) -> Box<LockHandle> {
        Box::new(LockHandle {
            lock,
            poisoned: AtomicBool::new(false),
            _clients: clients,
        })
    }

    fn run<T>(
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

/// The common part of the constructors: check every argument, make the lock, hand it out.
///
/// Pointers: client, path, out_lock: as the constructors' contracts say.
unsafe fn new_lock<L: Lockable + 'static>(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
    make: impl FnOnce(&Client, &str) -> Result<L>,
) -> std::result::Result<(), Failure> {
    // SAFETY: the caller's contract for `client`.
    let client = unsafe { try_clone_arc(client.cast_const(), "client") }?;
    // SAFETY: the caller's contract for `path`.
    let path = unsafe { try_str(path, "path") }?;
    // SAFETY: the caller's contract for `out_lock`.
    let out = unsafe { Out::new(out_lock, "out_lock") }?;
    let lock = client.run(|c| Ok(make(c, path)?))?;
    out.write(box_into_ptr::<zkl_lock>(LockHandle::new(
        Body::One(Box::new(lock)),
        vec![client],
    )));
    Ok(())
}

/// Makes a fair (FIFO), herd-free, exclusive lock at path, compatible with Curator's
/// InterProcessMutex (or kazoo's Lock, per the client's protocol). Reentrant per handle: n
/// acquires need n releases, from any threads (the handle is the participant).
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated;
/// out_lock is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_mutex_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, Mutex::per_handle) }
    })
}

/// Makes a fair exclusive lock at path that is not reentrant and that any thread may release
/// (Curator's InterProcessSemaphoreMutex semantics; an addition to the contract). Acquiring it
/// again through a handle that holds it is ZKL_WOULD_DEADLOCK (ZKL_INVALID_ARGUMENT before 0.3).
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated; out_lock is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_semaphore_mutex_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, SemaphoreMutex::new) }
    })
}

/// Makes a simple lock: one ephemeral node at path itself. Not fair (every waiter wakes on each
/// release), cheapest when contention is rare; not reentrant.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated; out_lock is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_simple_lock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, SimpleLock::new) }
    })
}

/// Makes the shared (read) half of the read-write lock at path, compatible with Curator's
/// InterProcessReadWriteLock (or kazoo's ReadLock, per the client's protocol): any number of
/// readers hold it together while no writer does. FIFO, so a waiting writer is not starved by
/// later readers. Reentrant per handle; any thread may release. A zkl_write_lock_new handle is
/// a separate participant: to downgrade within one participant make both halves with
/// zkl_rwlock_new.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated; out_lock is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_read_lock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(ReadWriteLock::per_handle(c, p)?.read_lock())) }
    })
}

/// Makes the exclusive (write) half of the read-write lock at path, compatible with Curator's
/// InterProcessReadWriteLock (or kazoo's WriteLock, per the client's protocol): held alone,
/// with no reader. FIFO. Reentrant per handle; any thread may release.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated; out_lock is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_write_lock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(ReadWriteLock::per_handle(c, p)?.write_lock())) }
    })
}

/// Makes both halves of one read-write lock at path (an addition to the contract): unlike
/// separate zkl_read_lock_new and zkl_write_lock_new handles, these two are one participant, so
/// while the write half is held the read half may be taken too (write -> read downgrade, as
/// Curator allows; the read hold keeps the write hold's fencing token); taking the write half
/// while holding only the read half fails at once with ZKL_WOULD_DEADLOCK (an upgrade would
/// deadlock; ZKL_INVALID_ARGUMENT before 0.3). Reentrant per handle; any thread may release.
///
/// On ZKL_OK, *out_read and *out_write each own a new handle that holds nothing yet: free each
/// with zkl_lock_free; on any other status both are left unchanged. ZKL_INVALID_ARGUMENT for a
/// NULL argument or a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated;
/// out_read and out_write are NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_rwlock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_read: *mut *mut zkl_lock,
    out_write: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `client`.
        let client = unsafe { try_clone_arc(client.cast_const(), "client") }?;
        // SAFETY: the caller's contract for `path`.
        let path = unsafe { try_str(path, "path") }?;
        // SAFETY: the caller's contract for `out_read`.
        let out_r = unsafe { Out::new(out_read, "out_read") }?;
        // SAFETY: the caller's contract for `out_write`.
        let out_w = unsafe { Out::new(out_write, "out_write") }?;
        let rw = client.run(|c| Ok(ReadWriteLock::per_handle(c, path)?))?;
        let handle = |lock: Box<dyn Lockable>| {
            box_into_ptr::<zkl_lock>(LockHandle::new(Body::One(lock), vec![client.clone()]))
        };
        out_r.write(handle(Box::new(rw.read_lock())));
        out_w.write(handle(Box::new(rw.write_lock())));
        Ok(())
    })
}

/// Makes a counting semaphore at path with at most max_leases holders at once (Curator's
/// InterProcessSemaphoreV2 or kazoo's Semaphore layout, per the client's protocol). Each
/// zkl_lock_acquire takes one lease and each zkl_lock_release returns the most recent one; a
/// handle may hold several; any thread may release. An acquire through a handle whose own leases
/// already fill max_leases could only wait for itself: ZKL_WOULD_DEADLOCK at once (other
/// handles wait as usual). An acquire with timeout 0 never waits for a
/// lease, but may wait up to half a second for the short-held mutex that guards the count.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free
/// (which returns its leases); on any other status *out_lock is left unchanged.
/// ZKL_INVALID_ARGUMENT for a NULL argument, a malformed path or max_leases 0. Never blocks.
/// Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated; out_lock is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_semaphore_new(
    client: *mut zkl_client,
    path: *const c_char,
    max_leases: u32,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Semaphore::new(c, p, max_leases)) }
    })
}

/// Makes an all-or-nothing lock over count locks of any kinds (not multi-locks): an acquire
/// takes every one (in a canonical order, so two multi-locks over the same locks cannot
/// deadlock) or, on failure, releases those it took and leaves nothing held; one timeout
/// covers the whole acquire. zkl_lock_is_held is 1 while every component is held. Each
/// component's own fencing token: zkl_multi_lock_token_at (by its index in locks) or
/// zkl_multi_lock_token_of (by path); fence a resource that one component guards with that
/// component's token. zkl_lock_fencing_token of the multi-lock is the largest of them: it
/// increases from one holder of this same set of exclusive locks to the next, but is no
/// component's token (on one component, a holder of that lock alone may get a smaller one).
/// A failed component release does not keep the others (or itself) held: see
/// zkl_lock_release.
///
/// Takes ownership of locks[0..count) on ZKL_OK only: they must not be used or freed any more
/// (zkl_lock_free of the multi-lock frees them); on any other status they stay the caller's
/// and *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL array, out_lock or element,
/// count 0, the same handle twice, a multi-lock as an element, or two locks on one path (the
/// second would wait for the first, held by the multi-lock itself; only the read and write
/// halves of one zkl_rwlock_new may share a path). Never blocks. Any thread.
///
/// Pointers: locks is NULL or points to count readable handle pointers, each NULL or a live
/// zkl_lock that no other thread uses; out_lock is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_multi_lock_new(
    locks: *const *mut zkl_lock,
    count: usize,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        if locks.is_null() {
            return Err(Failure::null("locks"));
        }
        // SAFETY: the caller's contract for `out_lock`.
        let out = unsafe { Out::new(out_lock, "out_lock") }?;
        if count == 0 {
            return Err(Failure::invalid("`count` is 0: a multi-lock needs at least one lock"));
        }
        // SAFETY: locks is not NULL and points to `count` readable pointers (caller's contract).
        let ptrs = unsafe { std::slice::from_raw_parts(locks, count) };
        // Check everything before taking anything: ownership moves on ZKL_OK only.
        for (i, &p) in ptrs.iter().enumerate() {
            // SAFETY: each element is NULL or a live zkl_lock (caller's contract).
            let h = unsafe { try_ref(p.cast_const(), &format!("locks[{i}]")) }?;
            if ptrs[..i].contains(&p) {
                return Err(Failure::invalid(format!("locks[{i}] is the same handle as an earlier element")));
            }
            if matches!(h.lock, Body::Multi(_)) {
                return Err(Failure::invalid(format!("locks[{i}] is a multi-lock: give its locks instead")));
            }
            if h.poisoned.load(Ordering::Acquire) {
                return Err(Failure::new(
                    zkl_status::ZKL_INTERNAL_ERROR,
                    format!("locks[{i}] is unusable after an earlier internal error"),
                ));
            }
        }
        // Two locks on one path would wait for each other: refused before anything is taken.
        let views: Vec<&dyn Lockable> = ptrs
            .iter()
            // SAFETY: checked above: each is a live zkl_lock.
            .filter_map(|&p| unsafe { try_ref(p.cast_const(), "locks") }.ok())
            .map(|h| h.lock.lockable())
            .collect();
        if let Some(f) = same_path_conflict(&views) {
            return Err(Failure::from(f.error.unwrap_or(crate::Error::NotHeld)));
        }
        let mut parts: Vec<Box<dyn Lockable>> = Vec::with_capacity(count);
        let mut clients = Vec::new();
        for &p in ptrs {
            // SAFETY: checked above: live, distinct handles the caller gives up now.
            let Some(handle) = (unsafe { box_take(p) }) else { unreachable!("checked non-NULL") };
            let LockHandle { lock, _clients: mut cs, .. } = *handle;
            let Body::One(lock) = lock else { unreachable!("checked: not a multi-lock") };
            parts.push(lock);
            clients.append(&mut cs);
        }
        let multi = MultiLock::from_boxed(parts);
        out.write(box_into_ptr::<zkl_lock>(LockHandle::new(Body::Multi(Box::new(multi)), clients)));
        Ok(())
    })
}

/// Acquires the lock. timeout_ms < 0 waits forever; 0 tries once without waiting; > 0 waits
/// at most that long in all.
///
/// Returns ZKL_OK when held, ZKL_TIMEOUT when not acquired in time (0: the lock was busy),
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
        // < 0: forever. A timeout too long for the clock to represent is forever too.
        let deadline = Deadline::from_timeout(u64::try_from(timeout_ms).ok().map(Duration::from_millis));
        handle.run(|r| {
            if r.acquire(deadline)?.is_some() {
                Ok(())
            } else if timeout_ms == 0 {
                Err(Failure::new(zkl_status::ZKL_TIMEOUT, "not acquired: the lock is busy (timeout 0 tries once)"))
            } else {
                Err(Failure::new(zkl_status::ZKL_TIMEOUT, format!("not acquired within the timeout of {timeout_ms} ms")))
            }
        })
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
/// Returns ZKL_NOT_HELD if this handle does not hold it or lost it; then *out_token is left
/// unchanged. Never blocks. Any thread, even while another thread uses the handle.
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
/// *out_ms is left unchanged. Never blocks. Any thread.
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
        handle.run(|r| Ok(r.make_revocable(Box::new(|| {}))?))
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
        if handle.run(|r| Ok(r.wait_revoke_request(timeout)?))? {
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
/// the session timeout. Any thread.
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
        let asked = handle.run(|r| Ok(r.revoke_holders()?))?;
        out.write(asked.len());
        Ok(())
    })
}

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

/// A snapshot of a lock's participants (zkl_lock_participants); read it with
/// zkl_participants_count and zkl_participants_get, free it with zkl_participants_free.
pub struct zkl_participants {
    _private: [u8; 0],
}

/// What a zkl_participants points to: the participants, and their text as C strings.
pub(crate) struct ParticipantsHandle {
    items: Vec<(Participant, CString, CString)>,
}

impl Castable for zkl_participants {
    type Rust = ParticipantsHandle;
}
impl BoxCastable for zkl_participants {}

/// One participant of a lock, as zkl_participants_get writes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zkl_participant {
    /// The node's name (a child of the lock path; the lock path itself for a simple lock).
    /// Owned by the snapshot: valid until zkl_participants_free.
    pub node: *const c_char,
    /// The holder id stored in the node ("" if none). Owned by the snapshot.
    pub holder_id: *const c_char,
    /// The sequence number the server gave the node: queue order.
    pub sequence: i64,
    /// 1 if it holds the lock now (for a semaphore: one of the leases), else 0.
    pub is_holder: i32,
    /// 1 for a node of the read half of a read-write lock, else 0.
    pub is_reader: i32,
}

/// Takes a snapshot of the lock's participants, holders first, then waiters in queue order
/// (for a semaphore: the lease holders; lease_holders in Curator's words), and writes it to
/// *out: read it with zkl_participants_count / zkl_participants_get, free it with
/// zkl_participants_free.
///
/// On ZKL_OK *out owns the snapshot; on any other status it is left unchanged.
/// ZKL_INVALID_ARGUMENT for a NULL argument; ZKL_CONNECTION_LOSS or ZKL_SESSION_EXPIRED when
/// the server could not be read. Blocks at most the session timeout. Any thread, even while
/// another thread uses the handle.
///
/// ```c
/// zkl_participants *ps;
/// if (zkl_lock_participants(lock, &ps) == ZKL_OK) {
///     zkl_participant p;
///     for (size_t i = 0; zkl_participants_get(ps, i, &p) == ZKL_OK; i++)
///         printf("%s %s\n", p.is_holder ? "holder" : "waiter", p.holder_id);
///     zkl_participants_free(ps);
/// }
/// ```
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; out is NULL or valid
/// for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_participants(
    lock: *const zkl_lock,
    out: *mut *mut zkl_participants,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; listing reads only the server and the
        // recipe's internally synchronised state.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let participants = handle.run(|r| Ok(r.participants()?))?;
        // Text from the server may hold a NUL, which C text cannot: it is dropped.
        let c_text = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
        let items = participants
            .into_iter()
            .map(|p| {
                let (node, holder) = (c_text(&p.node), c_text(&p.holder_id));
                (p, node, holder)
            })
            .collect();
        out.write(box_into_ptr::<zkl_participants>(Box::new(ParticipantsHandle { items })));
        Ok(())
    })
}

/// How many participants the snapshot holds (0 for NULL). Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_count(participants: *const zkl_participants) -> usize {
    ffi_boundary!(value {
        // SAFETY: the caller's contract for `participants`.
        unsafe { try_ref(participants, "participants") }.map_or(0, |h| h.items.len())
    })
}

/// Writes participant number index (from 0, holders first) of the snapshot to *out. Its strings
/// are owned by the snapshot: valid until zkl_participants_free.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument or an index past the last participant (then *out
/// is left unchanged). Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants; out is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_get(
    participants: *const zkl_participants,
    index: usize,
    out: *mut zkl_participant,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `participants`.
        let handle = unsafe { try_ref(participants, "participants") }?;
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let (p, node, holder) = handle.items.get(index).ok_or_else(|| {
            Failure::invalid(format!("`index` {index} is past the last of {} participants", handle.items.len()))
        })?;
        out.write(zkl_participant {
            node: node.as_ptr(),
            holder_id: holder.as_ptr(),
            sequence: p.sequence,
            is_holder: i32::from(p.is_holder),
            is_reader: i32::from(p.is_reader),
        });
        Ok(())
    })
}

/// Writes to *out_ms when participant number index's node was created, by the server's clock,
/// in milliseconds since the Unix epoch: how long it has been queued or holding.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument or an index past the last participant (then
/// *out_ms is left unchanged). Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants; out_ms is NULL or valid for
/// writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_created_ms(
    participants: *const zkl_participants,
    index: usize,
    out_ms: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `participants`.
        let handle = unsafe { try_ref(participants, "participants") }?;
        // SAFETY: the caller's contract for `out_ms`.
        let out = unsafe { Out::new(out_ms, "out_ms") }?;
        let (p, _, _) = handle.items.get(index).ok_or_else(|| {
            Failure::invalid(format!("`index` {index} is past the last of {} participants", handle.items.len()))
        })?;
        out.write(p.created_ms);
        Ok(())
    })
}

/// Frees a snapshot of participants. NULL is a no-op; must not be called twice for one
/// snapshot. Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants that no other thread uses during
/// or after the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_free(participants: *mut zkl_participants) {
    ffi_boundary!(value {
        // SAFETY: the caller's contract: NULL or a live snapshot freed only now.
        drop(unsafe { box_take(participants) });
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
