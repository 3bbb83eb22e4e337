//! `zkl_cancel_scope`: a cancel of its own for one acquire, where zkl_lock_cancel ends whichever
//! acquire is under way on a handle (a semaphore handle may have several, one per thread).

use std::sync::Arc;

use super::boundary::{box_into_ptr, box_take, try_ref, BoxCastable, Castable, Out};
use super::lock::{acquire, zkl_lock};
use super::status::zkl_status;
use crate::wait::AcquireScope;

/// A cancel for the acquires made with it (zkl_lock_acquire_in), and for no other: an
/// event loop or a signal handler that gives up one acquire leaves the handle's other acquires
/// under way (zkl_lock_cancel ends whichever is). Sticky: once zkl_cancel_scope_cancel was
/// called, every acquire made with the scope returns ZKL_CANCELLED, at once if it begins after
/// the cancel; a scope is for one acquire, or for the acquires that should end together.
///
/// ```c
/// zkl_cancel_scope *scope;
/// if (zkl_cancel_scope_new(&scope) != ZKL_OK) return 1;
/// // on a thread of its own:    s = zkl_lock_acquire_in(sem, -1, scope);
/// // elsewhere, to give it up:  zkl_cancel_scope_cancel(scope);
/// // once that acquire returned: zkl_cancel_scope_free(scope);
/// ```
///
/// Threads: zkl_cancel_scope_cancel may run on any thread beside any other call;
/// zkl_cancel_scope_free runs alone, once no zkl_lock_acquire_in uses the scope.
pub struct zkl_cancel_scope {
    _private: [u8; 0],
}

impl Castable for zkl_cancel_scope {
    type Rust = Arc<AcquireScope>;
}
impl BoxCastable for zkl_cancel_scope {}

/// Makes a cancel scope, not cancelled, in *out.
///
/// Pointers: out is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_cancel_scope_new(out: *mut *mut zkl_cancel_scope) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        out.write(box_into_ptr::<zkl_cancel_scope>(Box::new(AcquireScope::new())));
        Ok(())
    })
}

/// Ends the acquires made with the scope (each returns ZKL_CANCELLED, having deleted its node
/// and given back a hold that arrived meanwhile), and every one made with it from now on. No
/// other acquire of their handles is touched. Any thread, at any time; returns at once.
///
/// Pointers: scope is NULL or a live zkl_cancel_scope, not freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_cancel_scope_cancel(scope: *const zkl_cancel_scope) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `scope`; cancel is internally synchronised.
        let scope = unsafe { try_ref(scope, "scope") }?;
        scope.cancel();
        Ok(())
    })
}

/// Frees a cancel scope. NULL is a no-op; must not be called twice for one scope, nor while a
/// zkl_lock_acquire_in uses it.
///
/// Pointers: scope is NULL or a live zkl_cancel_scope not used by any other thread during or
/// after the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_cancel_scope_free(scope: *mut zkl_cancel_scope) {
    ffi_boundary!(value {
        // SAFETY: the caller's contract: scope is NULL or a live handle freed only now.
        drop(unsafe { box_take(scope) })
    })
}

/// zkl_lock_acquire, ended by zkl_cancel_scope_cancel on scope (ZKL_CANCELLED) as well as by
/// zkl_lock_cancel on the handle. Everything else is as zkl_lock_acquire says: timeout_ms < 0
/// waits forever, 0 tries once, > 0 waits at most that long in all; ZKL_OK only for a hold that
/// is held as it returns; no node of the attempt is left on any other status.
///
/// Pointers: lock is NULL or a live zkl_lock, scope NULL or a live zkl_cancel_scope, neither
/// freed during the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_acquire_in(
    lock: *mut zkl_lock,
    timeout_ms: i64,
    scope: *const zkl_cancel_scope,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock` and `scope`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        // SAFETY: as above.
        let scope = unsafe { try_ref(scope, "scope") }?;
        scope.run(|| acquire(handle, timeout_ms))
    })
}
