//! The constructors of `zkl_lock`: one per recipe kind, and the multi-lock over several.
//!
//! Each checks its arguments and hands them to the recipe's own constructor; the handle it
//! makes is `lock.rs`'s.

use std::ffi::c_char;
use std::sync::atomic::Ordering;

use super::boundary::{box_into_ptr, box_take, try_clone_arc, try_ref, try_str, Failure, Out};
use super::client::zkl_client;
use super::lock::{zkl_lock, Body, LockHandle};
use super::status::zkl_status;
use crate::recipes::same_path_conflict;
use crate::{
    Client, LeaderElection, Lockable, MultiLock, Mutex, ReadWriteLock, Result, Semaphore,
    SemaphoreMutex, SimpleLock,
};

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

/// Makes a participant of a leader election (laid out as Curator's LeaderLatch, or kazoo's
/// Election under the kazoo protocol): zkl_lock_acquire joins and waits for leadership,
/// zkl_lock_is_held says whether it leads now (false as soon as the leadership's lease is not
/// provably alive, before another participant could lead), zkl_lock_fencing_token is the
/// term (strictly greater than every earlier leader's), zkl_lock_release relinquishes, and
/// zkl_lock_participants marks the leader as the holder. Not reentrant.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// Pointers: client is NULL or a live zkl_client; path is NULL or NUL-terminated; out_lock is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_leader_election_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, LeaderElection::new) }
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
