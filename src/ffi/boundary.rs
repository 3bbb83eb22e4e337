//! The boundary every `extern "C"` body runs inside: [`ffi_boundary!`] catches panics and
//! turns a failure into its status plus this thread's last error message; the helpers below
//! check pointers and text and convert handles, so no entry point casts a raw pointer by hand.

use std::any::Any;
use std::ffi::{c_char, c_int, CStr};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::last_error::set_last_error;
use super::status::zkl_status;
use crate::Error;

/// Runs the body of an `extern "C"` fn behind the boundary.
///
/// - `ffi_boundary!(status { ... })`: the body is a `Result<(), Failure>` block (so `?` works);
///   `Ok` gives `ZKL_OK`, `Err` gives its status and sets the last error message.
/// - `ffi_boundary!(value { ... })`: the body gives the C value directly (`int`, `void`,
///   `const char *`).
///
/// Either way a panic is caught: `ZKL_INTERNAL_ERROR` (or 0 / nothing / a static message) and
/// the panic's text becomes the last error message. Nothing unwinds into C.
macro_rules! ffi_boundary {
    (status $body:block) => {
        $crate::ffi::boundary::run(
            move || -> ::std::result::Result<(), $crate::ffi::boundary::Failure> { $body },
        )
    };
    (value $body:block) => {
        $crate::ffi::boundary::run(move || $body)
    };
}

/// A failed call: the status it returns, the words of the last error message, and the setting
/// that would fix it (named in C's words after `message`, see `zkl_last_error_hint`).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: zkl_status,
    pub(crate) message: String,
    pub(crate) hint: Option<crate::Hint>,
}

impl Failure {
    pub(crate) fn new(status: zkl_status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
            hint: None,
        }
    }

    /// `ZKL_INVALID_ARGUMENT` with `message`.
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(
            zkl_status::ZKL_INVALID_ARGUMENT,
            format!("invalid argument: {}", message.into()),
        )
    }

    /// `ZKL_INVALID_ARGUMENT` for a NULL pointer argument.
    pub(crate) fn null(arg: &str) -> Failure {
        Failure::invalid(format!("`{arg}` is NULL"))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure {
            status: zkl_status::from(&e),
            message: e.without_hint(),
            hint: e.hint(),
        }
    }
}

/// What an `extern "C"` body may produce, and what its fn returns after a panic.
pub(crate) trait BoundaryReturn {
    type C;
    fn into_c(self) -> Self::C;
    fn panicked() -> Self::C;
}

impl BoundaryReturn for Result<(), Failure> {
    type C = zkl_status;
    fn into_c(self) -> zkl_status {
        match self {
            Ok(()) => zkl_status::ZKL_OK,
            Err(f) => {
                set_last_error(f.message, f.hint);
                f.status
            }
        }
    }
    fn panicked() -> zkl_status {
        zkl_status::ZKL_INTERNAL_ERROR
    }
}

impl BoundaryReturn for c_int {
    type C = c_int;
    fn into_c(self) -> c_int {
        self
    }
    fn panicked() -> c_int {
        0
    }
}

impl BoundaryReturn for u32 {
    type C = u32;
    fn into_c(self) -> u32 {
        self
    }
    fn panicked() -> u32 {
        0
    }
}

impl BoundaryReturn for usize {
    type C = usize;
    fn into_c(self) -> usize {
        self
    }
    fn panicked() -> usize {
        0
    }
}

impl BoundaryReturn for () {
    type C = ();
    fn into_c(self) {}
    fn panicked() {}
}

impl BoundaryReturn for *const c_char {
    type C = *const c_char;
    fn into_c(self) -> *const c_char {
        self
    }
    fn panicked() -> *const c_char {
        c"internal error: a Rust panic was caught at the C boundary".as_ptr()
    }
}

/// See [`ffi_boundary!`].
pub(crate) fn run<R: BoundaryReturn>(f: impl FnOnce() -> R) -> R::C {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.into_c(),
        Err(payload) => {
            set_last_error(
                format!(
                    "internal error: a Rust panic was caught at the C boundary: {}",
                    panic_message(&*payload)
                ),
                None,
            );
            // Dropping a payload can itself panic (a payload with a panicking Drop).
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            R::panicked()
        }
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic without a message)"
    }
}

/// Runs `f` for a handle: `ZKL_INTERNAL_ERROR` at once if the handle is poisoned; if `f`
/// panics the handle becomes poisoned and the panic goes on to [`ffi_boundary!`].
pub(crate) fn with_poison<T>(
    poisoned: &AtomicBool,
    what: &str,
    f: impl FnOnce() -> Result<T, Failure>,
) -> Result<T, Failure> {
    if poisoned.load(Ordering::Acquire) {
        return Err(Failure::new(
            zkl_status::ZKL_INTERNAL_ERROR,
            format!("internal error: this {what} handle is unusable after an earlier internal error; free it"),
        ));
    }
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            poisoned.store(true, Ordering::Release);
            std::panic::resume_unwind(payload)
        }
    }
}

/// A NUL-terminated C string argument as UTF-8 text.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid and unchanged for `'a`.
pub(crate) unsafe fn try_str<'a>(p: *const c_char, arg: &str) -> Result<&'a str, Failure> {
    // SAFETY: the caller's contract.
    let bytes = unsafe { try_bytes(p, arg) }?;
    std::str::from_utf8(bytes)
        .map_err(|e| Failure::invalid(format!("`{arg}` is not valid UTF-8 ({e})")))
}

/// A NUL-terminated C string argument as bytes (no UTF-8 check).
///
/// # Safety
/// As [`try_str`].
pub(crate) unsafe fn try_bytes<'a>(p: *const c_char, arg: &str) -> Result<&'a [u8], Failure> {
    if p.is_null() {
        return Err(Failure::null(arg));
    }
    // SAFETY: p is not NULL and, by the caller's contract, NUL-terminated and valid for 'a.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// An out-parameter: checked for NULL before the call does any work, written only on success.
pub(crate) struct Out<'a, T> {
    ptr: *mut T,
    _life: PhantomData<&'a mut T>,
}

impl<T> Out<'_, T> {
    /// # Safety
    /// `p` is NULL or valid for writing one `T` (it need not be initialised).
    pub(crate) unsafe fn new(p: *mut T, arg: &str) -> Result<Self, Failure> {
        if p.is_null() {
            Err(Failure::null(arg))
        } else {
            Ok(Out {
                ptr: p,
                _life: PhantomData,
            })
        }
    }

    /// Writes the result (call this last, once the call has succeeded).
    pub(crate) fn write(self, v: T) {
        // SAFETY: ptr is not NULL and valid for writes (the contract of `Out::new`); `write`
        // does not read or drop the old value, which may be uninitialised.
        unsafe { self.ptr.write(v) }
    }
}

/// How a C handle type is owned on the Rust side (after rustls-ffi's `Castable`).
pub(crate) trait Castable {
    /// The Rust value behind the handle.
    type Rust;
}

/// Handles given out as `Arc::into_raw` (shared ownership).
pub(crate) trait ArcCastable: Castable {}

/// Handles given out as `Box::into_raw` (sole ownership).
pub(crate) trait BoxCastable: Castable {}

/// A shared borrow of the value behind a handle.
///
/// # Safety
/// `p` is NULL or a live handle of type `C` made by this module, not freed during `'a`.
pub(crate) unsafe fn try_ref<'a, C: Castable>(
    p: *const C,
    arg: &str,
) -> Result<&'a C::Rust, Failure> {
    if p.is_null() {
        return Err(Failure::null(arg));
    }
    // SAFETY: p is not NULL and points to a live C::Rust (the caller's contract); only shared
    // borrows are ever made of a live handle, so this one aliases nothing mutable.
    Ok(unsafe { &*p.cast::<C::Rust>() })
}

/// Gives out a shared value as a handle.
pub(crate) fn arc_into_ptr<C: ArcCastable>(a: Arc<C::Rust>) -> *mut C {
    Arc::into_raw(a).cast_mut().cast()
}

/// A new strong reference to the value behind a handle.
///
/// # Safety
/// As [`try_ref`], for a handle made by [`arc_into_ptr`].
pub(crate) unsafe fn try_clone_arc<C: ArcCastable>(
    p: *const C,
    arg: &str,
) -> Result<Arc<C::Rust>, Failure> {
    if p.is_null() {
        return Err(Failure::null(arg));
    }
    let p = p.cast::<C::Rust>();
    // SAFETY: p came from Arc::into_raw of an Arc<C::Rust> whose count is still held by the
    // handle (the caller's contract); incrementing first keeps the handle's own count intact.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
    }
}

/// Drops the handle's reference (NULL: nothing).
///
/// # Safety
/// `p` is NULL or a handle made by [`arc_into_ptr`] and not freed before.
pub(crate) unsafe fn arc_free<C: ArcCastable>(p: *const C) {
    if !p.is_null() {
        // SAFETY: p came from Arc::into_raw and its reference has not been given back yet.
        drop(unsafe { Arc::from_raw(p.cast::<C::Rust>()) });
    }
}

/// Gives out an owned value as a handle.
pub(crate) fn box_into_ptr<C: BoxCastable>(b: Box<C::Rust>) -> *mut C {
    Box::into_raw(b).cast()
}

/// Takes back the value behind a handle (NULL: None).
///
/// # Safety
/// `p` is NULL or a handle made by [`box_into_ptr`], not freed or taken before, and not in
/// use by any other thread.
pub(crate) unsafe fn box_take<C: BoxCastable>(p: *mut C) -> Option<Box<C::Rust>> {
    if p.is_null() {
        None
    } else {
        // SAFETY: p came from Box::into_raw and nobody else uses or owns it any more.
        Some(unsafe { Box::from_raw(p.cast::<C::Rust>()) })
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;
    use crate::ffi::zkl_last_error_message;

    fn last_error() -> String {
        // SAFETY: zkl_last_error_message never returns NULL and the text lives until the next
        // failing call on this thread.
        unsafe { CStr::from_ptr(zkl_last_error_message()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_becomes_internal_error_with_its_message() {
        let s = run(|| -> Result<(), Failure> { panic!("boom {}", 42) });
        assert_eq!(s, zkl_status::ZKL_INTERNAL_ERROR);
        assert!(last_error().contains("boom 42"), "{}", last_error());
        assert_eq!(run(|| -> c_int { panic!("x") }), 0);
        let p = run(|| -> *const c_char { panic!("x") });
        assert!(!p.is_null());
    }

    #[test]
    fn a_failure_sets_the_message_and_success_keeps_it() {
        assert_eq!(
            run(|| Err(Failure::null("path"))),
            zkl_status::ZKL_INVALID_ARGUMENT
        );
        assert_eq!(last_error(), "invalid argument: `path` is NULL");
        assert_eq!(
            run(|| -> Result<(), Failure> { Ok(()) }),
            zkl_status::ZKL_OK
        );
        assert_eq!(last_error(), "invalid argument: `path` is NULL");
        assert_eq!(
            run(|| Err(Failure::from(Error::ZooKeeper("a\0b".into())))),
            zkl_status::ZKL_ZOOKEEPER_ERROR
        );
        assert_eq!(last_error(), "ZooKeeper error: a\u{fffd}b");
    }

    #[test]
    fn a_panic_poisons_the_handle() {
        let poisoned = AtomicBool::new(false);
        let s = run(|| {
            with_poison(&poisoned, "zkl_lock", || -> Result<(), Failure> {
                panic!("inside")
            })
        });
        assert_eq!(s, zkl_status::ZKL_INTERNAL_ERROR);
        assert!(poisoned.load(Ordering::Relaxed));
        let s = run(|| with_poison(&poisoned, "zkl_lock", || Ok(())));
        assert_eq!(s, zkl_status::ZKL_INTERNAL_ERROR);
        assert!(last_error().contains("unusable"), "{}", last_error());
    }

    #[test]
    fn text_and_out_params() {
        // SAFETY: NULL is allowed; the other pointers point to live NUL-terminated strings.
        unsafe {
            assert!(try_str(std::ptr::null(), "x").is_err());
            assert_eq!(try_str(c"/a".as_ptr(), "x").unwrap(), "/a");
            let bad = b"/\xff\0";
            assert_eq!(
                try_str(bad.as_ptr().cast(), "path").unwrap_err().status,
                zkl_status::ZKL_INVALID_ARGUMENT
            );
            assert_eq!(try_bytes(bad.as_ptr().cast(), "auth").unwrap(), b"/\xff");
            assert!(Out::<i64>::new(std::ptr::null_mut(), "out").is_err());
            let mut v = 1i64;
            Out::new(&mut v, "out").unwrap().write(7);
            assert_eq!(v, 7);
        }
    }
}
