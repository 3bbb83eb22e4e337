//! `zkl_lock`: one participant in one lock recipe, and the calls that use it.
//!
//! Each entry point checks its arguments and hands the call to the recipe; every decision
//! (queueing, waiting, reentrancy, cleanup) is the recipe's.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::boundary::{
    box_into_ptr, box_take, try_clone_arc, try_ref, try_str, with_poison, BoxCastable, Castable,
    Failure, Out,
};
use super::client::{zkl_client, ClientHandle};
use super::status::zkl_status;
use crate::{
    Client, Error, Lockable, MultiLock, Mutex, ReadLock, ReadWriteLock, Result, Semaphore,
    SemaphoreMutex, SimpleLock, WriteLock,
};

/// One participant in one lock recipe; holds nothing when made. Use from one thread at a time,
/// except zkl_lock_cancel, which any thread may call at any time. A lock made by zkl_mutex_new,
/// zkl_read_lock_new or zkl_write_lock_new is reentrant per thread and must be released on the
/// thread that acquired it (zkl_lock_is_held and zkl_lock_fencing_token also answer for the
/// calling thread); the other kinds belong to the handle: any thread may release them.
pub struct zkl_lock {
    _private: [u8; 0],
}

/// A lock of one kind (anything but a multi-lock).
pub(crate) enum Single {
    Mutex(Mutex),
    SemaphoreMutex(SemaphoreMutex),
    Simple(SimpleLock),
    Read(ReadLock),
    Write(WriteLock),
    Semaphore(Semaphore),
}

impl Single {
    fn lockable(&self) -> &(dyn Lockable + Send + Sync) {
        match self {
            Single::Mutex(l) => l,
            Single::SemaphoreMutex(l) => l,
            Single::Simple(l) => l,
            Single::Read(l) => l,
            Single::Write(l) => l,
            Single::Semaphore(l) => l,
        }
    }

    fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
        match self {
            Single::Mutex(l) => l.acquire(timeout),
            Single::SemaphoreMutex(l) => l.acquire(timeout),
            Single::Simple(l) => l.acquire(timeout),
            Single::Read(l) => l.acquire(timeout),
            Single::Write(l) => l.acquire(timeout),
            Single::Semaphore(l) => l.acquire_lease(timeout),
        }
    }

    fn is_held(&self) -> bool {
        match self {
            Single::Mutex(l) => l.is_held(),
            Single::SemaphoreMutex(l) => l.is_held(),
            Single::Simple(l) => l.is_held(),
            Single::Read(l) => l.is_held(),
            Single::Write(l) => l.is_held(),
            Single::Semaphore(l) => l.is_held(),
        }
    }

    fn fencing_token(&self) -> Option<i64> {
        match self {
            Single::Mutex(l) => l.fencing_token(),
            Single::SemaphoreMutex(l) => l.fencing_token(),
            Single::Simple(l) => l.fencing_token(),
            Single::Read(l) => l.fencing_token(),
            Single::Write(l) => l.fencing_token(),
            Single::Semaphore(l) => l.fencing_token(),
        }
    }
}

/// So a multi-lock can own the components.
impl Lockable for Single {
    fn path(&self) -> &str {
        self.lockable().path()
    }
    fn acquire_until(&self, deadline: Option<Instant>, try_once: bool) -> Result<bool> {
        self.lockable().acquire_until(deadline, try_once)
    }
    fn release(&self) -> Result<()> {
        self.lockable().release()
    }
    fn cancel(&self) {
        self.lockable().cancel()
    }
    fn is_held(&self) -> bool {
        self.lockable().is_held()
    }
    fn order_rank(&self) -> u8 {
        self.lockable().order_rank()
    }
}

/// The recipe behind a handle.
pub(crate) enum Recipe {
    Single(Single),
    /// The multi-lock owns its components.
    Multi {
        multi: MultiLock<'static>,
    },
}

impl Recipe {
    fn acquire(&self, timeout: Option<Duration>) -> Result<bool> {
        match self {
            Recipe::Single(l) => l.acquire(timeout),
            Recipe::Multi { multi, .. } => multi.acquire(timeout),
        }
    }

    fn release(&self) -> Result<()> {
        match self {
            Recipe::Single(l) => l.lockable().release(),
            Recipe::Multi { multi, .. } => multi.release(),
        }
    }

    fn cancel(&self) {
        match self {
            Recipe::Single(l) => l.lockable().cancel(),
            Recipe::Multi { multi, .. } => multi.cancel(),
        }
    }

    fn is_held(&self) -> bool {
        match self {
            Recipe::Single(l) => l.is_held(),
            Recipe::Multi { multi, .. } => multi.is_held(),
        }
    }

    fn fencing_token(&self) -> std::result::Result<i64, Failure> {
        match self {
            Recipe::Single(l) => l.fencing_token().ok_or_else(|| Error::NotHeld.into()),
            Recipe::Multi { .. } => Err(Failure::invalid(
                "a multi-lock has no single fencing token (each of its locks has its own)",
            )),
        }
    }
}

/// What a `zkl_lock` points to. Fields drop in order: the recipe first (releasing what it
/// holds while its session is still open), then the clients it keeps alive.
pub(crate) struct LockHandle {
    recipe: Recipe,
    poisoned: AtomicBool,
    _clients: Vec<Arc<ClientHandle>>,
}

impl Castable for zkl_lock {
    type Rust = LockHandle;
}
impl BoxCastable for zkl_lock {}

impl LockHandle {
    fn run<T>(
        &self,
        f: impl FnOnce(&Recipe) -> std::result::Result<T, Failure>,
    ) -> std::result::Result<T, Failure> {
        with_poison(&self.poisoned, "zkl_lock", || f(&self.recipe))
    }
}

/// The common part of the constructors: check every argument, make the recipe, hand it out.
///
/// # Safety
/// `client`, `path`, `out_lock`: as the constructors' contracts say.
unsafe fn new_lock(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
    make: impl FnOnce(&Client, &str) -> Result<Single>,
) -> std::result::Result<(), Failure> {
    // SAFETY: the caller's contract for `client`.
    let client = unsafe { try_clone_arc(client.cast_const(), "client") }?;
    // SAFETY: the caller's contract for `path`.
    let path = unsafe { try_str(path, "path") }?;
    // SAFETY: the caller's contract for `out_lock`.
    let out = unsafe { Out::new(out_lock, "out_lock") }?;
    let recipe = Recipe::Single(client.run(|c| Ok(make(c, path)?))?);
    let handle = Box::new(LockHandle {
        recipe,
        poisoned: AtomicBool::new(false),
        _clients: vec![client],
    });
    out.write(box_into_ptr::<zkl_lock>(handle));
    Ok(())
}

/// Makes a fair (FIFO), herd-free, exclusive lock at path, compatible with Curator's
/// InterProcessMutex (or kazoo's Lock, per the client's protocol). Reentrant per thread: n
/// acquires by one thread need n releases, on that thread.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// # Safety
/// `client` is NULL or a live zkl_client; `path` is NULL or NUL-terminated; `out_lock` is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_mutex_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(Single::Mutex(Mutex::new(c, p)?))) }
    })
}

/// Makes a fair exclusive lock at path that is not reentrant and that any thread may release
/// (Curator's InterProcessSemaphoreMutex semantics; an addition to the contract). Acquiring it
/// again through a handle that holds it is ZKL_INVALID_ARGUMENT.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// # Safety
/// As zkl_mutex_new.
#[no_mangle]
pub unsafe extern "C" fn zkl_semaphore_mutex_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(Single::SemaphoreMutex(SemaphoreMutex::new(c, p)?))) }
    })
}

/// Makes a simple lock: one ephemeral node at path itself. Not fair (every waiter wakes on each
/// release), cheapest when contention is rare; not reentrant.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// # Safety
/// As zkl_mutex_new.
#[no_mangle]
pub unsafe extern "C" fn zkl_simple_lock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(Single::Simple(SimpleLock::new(c, p)?))) }
    })
}

/// Makes the shared (read) half of the read-write lock at path, compatible with Curator's
/// InterProcessReadWriteLock (or kazoo's ReadLock, per the client's protocol): any number of
/// readers hold it together while no writer does. FIFO, so a waiting writer is not starved by
/// later readers. Reentrant per thread; release on the acquiring thread. A thread holding the
/// write half through zkl_write_lock_new's handle is a separate participant: to downgrade
/// within one participant make both halves with zkl_rwlock_new.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// # Safety
/// As zkl_mutex_new.
#[no_mangle]
pub unsafe extern "C" fn zkl_read_lock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(Single::Read(ReadWriteLock::new(c, p)?.read_lock()))) }
    })
}

/// Makes the exclusive (write) half of the read-write lock at path, compatible with Curator's
/// InterProcessReadWriteLock (or kazoo's WriteLock, per the client's protocol): held alone,
/// with no reader. FIFO. Reentrant per thread; release on the acquiring thread.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free;
/// on any other status *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL argument or
/// a malformed path. Never blocks. Any thread.
///
/// # Safety
/// As zkl_mutex_new.
#[no_mangle]
pub unsafe extern "C" fn zkl_write_lock_new(
    client: *mut zkl_client,
    path: *const c_char,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(Single::Write(ReadWriteLock::new(c, p)?.write_lock()))) }
    })
}

/// Makes both halves of one read-write lock at path (an addition to the contract): unlike
/// separate zkl_read_lock_new and zkl_write_lock_new handles, these two share their holds, so a
/// thread holding the write half may then take the read half (write -> read downgrade, as
/// Curator allows); taking the write half while holding only the read half fails at once with
/// ZKL_INVALID_ARGUMENT (an upgrade would deadlock). Reentrant per thread; release on the
/// acquiring thread.
///
/// On ZKL_OK, *out_read and *out_write each own a new handle that holds nothing yet: free each
/// with zkl_lock_free; on any other status both are left unchanged. ZKL_INVALID_ARGUMENT for a
/// NULL argument or a malformed path. Never blocks. Any thread.
///
/// # Safety
/// `client` is NULL or a live zkl_client; `path` is NULL or NUL-terminated; `out_read` and
/// `out_write` are NULL or valid for writing.
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
        let rw = client.run(|c| Ok(ReadWriteLock::new(c, path)?))?;
        let handle = |single: Single| {
            box_into_ptr::<zkl_lock>(Box::new(LockHandle {
                recipe: Recipe::Single(single),
                poisoned: AtomicBool::new(false),
                _clients: vec![client.clone()],
            }))
        };
        out_r.write(handle(Single::Read(rw.read_lock())));
        out_w.write(handle(Single::Write(rw.write_lock())));
        Ok(())
    })
}

/// Makes a counting semaphore at path with at most max_leases holders at once (Curator's
/// InterProcessSemaphoreV2 or kazoo's Semaphore layout, per the client's protocol). Each
/// zkl_lock_acquire takes one lease and each zkl_lock_release returns the most recent one; a
/// handle may hold several; any thread may release. An acquire with timeout 0 never waits for a
/// lease, but may wait up to half a second for the short-held mutex that guards the count.
///
/// On ZKL_OK, *out_lock owns a new handle that holds nothing yet: free it with zkl_lock_free
/// (which returns its leases); on any other status *out_lock is left unchanged.
/// ZKL_INVALID_ARGUMENT for a NULL argument, a malformed path or max_leases 0. Never blocks.
/// Any thread.
///
/// # Safety
/// As zkl_mutex_new.
#[no_mangle]
pub unsafe extern "C" fn zkl_semaphore_new(
    client: *mut zkl_client,
    path: *const c_char,
    max_leases: u32,
    out_lock: *mut *mut zkl_lock,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: our caller's contract is new_lock's.
        unsafe { new_lock(client, path, out_lock, |c, p| Ok(Single::Semaphore(Semaphore::new(c, p, max_leases)?))) }
    })
}

/// Makes an all-or-nothing lock over count locks of any kinds (not multi-locks): an acquire
/// takes every one (in a canonical order, so two multi-locks over the same locks cannot
/// deadlock) or, on failure, releases those it took and leaves nothing held; one timeout
/// covers the whole acquire. zkl_lock_is_held is 1 while every component is held;
/// zkl_lock_fencing_token is ZKL_INVALID_ARGUMENT (each component has its own token). If a
/// component is a mutex or read/write half, acquire and release on one thread.
///
/// Takes ownership of locks[0..count) on ZKL_OK only: they must not be used or freed any more
/// (zkl_lock_free of the multi-lock frees them); on any other status they stay the caller's
/// and *out_lock is left unchanged. ZKL_INVALID_ARGUMENT for a NULL array, out_lock or element,
/// count 0, the same handle twice, or a multi-lock as an element. Never blocks. Any thread.
///
/// # Safety
/// `locks` is NULL or points to `count` readable handle pointers, each NULL or a live zkl_lock
/// that no other thread uses; `out_lock` is NULL or valid for writing.
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
            if matches!(h.recipe, Recipe::Multi { .. }) {
                return Err(Failure::invalid(format!("locks[{i}] is a multi-lock: give its locks instead")));
            }
            if h.poisoned.load(Ordering::Acquire) {
                return Err(Failure::new(
                    zkl_status::ZKL_INTERNAL_ERROR,
                    format!("locks[{i}] is unusable after an earlier internal error"),
                ));
            }
        }
        let mut parts: Vec<Box<dyn Lockable + Send + Sync>> = Vec::with_capacity(count);
        let mut clients = Vec::new();
        for &p in ptrs {
            // SAFETY: checked above: live, distinct handles the caller gives up now.
            let Some(handle) = (unsafe { box_take(p) }) else { unreachable!("checked non-NULL") };
            let LockHandle { recipe, _clients: mut cs, .. } = *handle;
            let Recipe::Single(single) = recipe else { unreachable!("checked not a multi-lock") };
            parts.push(Box::new(single));
            clients.append(&mut cs);
        }
        let multi = MultiLock::from_boxed(parts);
        let handle = Box::new(LockHandle {
            recipe: Recipe::Multi { multi },
            poisoned: AtomicBool::new(false),
            _clients: clients,
        });
        out.write(box_into_ptr::<zkl_lock>(handle));
        Ok(())
    })
}

/// Acquires the lock. timeout_ms < 0 waits forever; 0 tries once without waiting; > 0 waits
/// at most that long in all.
///
/// Returns ZKL_OK when held, ZKL_TIMEOUT when not acquired in time (0: the lock was busy),
/// ZKL_CANCELLED when zkl_lock_cancel interrupted the wait, ZKL_CONNECTION_LOSS or
/// ZKL_SESSION_EXPIRED when the session failed; on every non-OK status no node of this attempt
/// is left on the server. Blocks at most timeout_ms plus the session timeout. One thread at a
/// time per handle.
///
/// # Safety
/// `lock` is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_acquire(lock: *mut zkl_lock, timeout_ms: i64) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        // < 0: forever. A timeout too long for the clock to represent is forever too.
        let timeout = u64::try_from(timeout_ms)
            .ok()
            .map(Duration::from_millis)
            .filter(|t| Instant::now().checked_add(*t).is_some());
        handle.run(|r| {
            if r.acquire(timeout)? {
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
/// Returns ZKL_NOT_HELD if this handle (for a mutex or read/write half: this thread) does not
/// hold it, ZKL_SESSION_EXPIRED if the lock had been lost with its session (the hold is dropped
/// anyway), ZKL_CONNECTION_LOSS if the server could not be told in time (still held: call
/// again, or free the handle to finish in the background). Blocks at most twice the session
/// timeout. One thread at a time per handle.
///
/// # Safety
/// `lock` is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_release(lock: *mut zkl_lock) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        handle.run(|r| Ok(r.release()?))
    })
}

/// Cancels the acquires waiting on this handle now: they return ZKL_CANCELLED (acquires that
/// start later are not affected). Any thread, at any time, even while another thread is inside
/// zkl_lock_acquire on the same handle. Returns at once (for a multi-lock: within a second, while
/// the waiting acquire lets go of the locks it took).
///
/// Do not free the handle while another thread is inside zkl_lock_acquire: cancel, wait for
/// that thread to return, then free.
///
/// # Safety
/// `lock` is NULL or a live zkl_lock, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_cancel(lock: *mut zkl_lock) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; cancel only touches the recipe's shared,
        // internally synchronised state, so a concurrent acquire on another thread is fine.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        handle.run(|r| {
            r.cancel();
            Ok(())
        })
    })
}

/// 1 while the lock is held (for a mutex or read/write half: by the calling thread) and the
/// session is alive (for a multi-lock: every component), else 0 (also for NULL). Never blocks.
/// One thread at a time per handle.
///
/// # Safety
/// `lock` is NULL or a live zkl_lock.
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
/// refuse writes from a holder that lost the lock.
///
/// Returns ZKL_NOT_HELD if not held (for a mutex or read/write half: by the calling thread) or
/// lost, and ZKL_INVALID_ARGUMENT for a multi-lock; then *out_token is left unchanged. Never
/// blocks. One thread at a time per handle.
///
/// # Safety
/// `lock` is NULL or a live zkl_lock; `out_token` is NULL or valid for writing.
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
        let token = handle.run(|r| r.fencing_token())?;
        out.write(token);
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
/// # Safety
/// `lock` is NULL or a live zkl_lock that no other thread uses during or after the call.
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
