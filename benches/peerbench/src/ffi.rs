//! W1–W3 through zklock's C ABI (`zklock::testing::ffi::zkl_*`), called exactly as a C program would:
//! NUL-terminated strings, status codes, out-pointers, opaque handles.

use std::ffi::{CStr, CString};

use zklock::testing::ffi::{
    zkl_client, zkl_client_connect, zkl_client_free, zkl_last_error_message, zkl_lock,
    zkl_lock_acquire, zkl_lock_cancel, zkl_lock_free, zkl_lock_release, zkl_mutex_new, zkl_status,
};

pub(crate) fn last_error() -> String {
    let p = zkl_last_error_message();
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the library returns NULL or a NUL-terminated string it owns, valid until the
    // next call on this thread.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub(crate) fn check(st: zkl_status) -> zklock::Result<()> {
    match st {
        zkl_status::ZKL_OK => Ok(()),
        zkl_status::ZKL_CANCELLED => Err(zklock::Error::Cancelled),
        zkl_status::ZKL_TIMEOUT => Err(zklock::Error::Timeout),
        zkl_status::ZKL_NOT_HELD => Err(zklock::Error::NotHeld),
        st => Err(zklock::Error::ZooKeeper(
            format!("{st:?}: {}", last_error()).into(),
        )),
    }
}

/// A `zkl_client*`.
pub struct FfiClient(*mut zkl_client);

/// A `zkl_lock*` from `zkl_mutex_new`.
pub struct FfiMutex(*mut zkl_lock);

// SAFETY: a zkl_client may be used by any number of threads at once.
unsafe impl Send for FfiClient {}
// SAFETY: as above.
unsafe impl Sync for FfiClient {}
// SAFETY: a zkl_lock may move between threads; the harness uses each from one thread at a
// time (W1 is single-threaded), and zkl_lock_cancel may be called from any thread.
unsafe impl Send for FfiMutex {}
// SAFETY: as above.
unsafe impl Sync for FfiMutex {}

impl FfiClient {
    pub fn connect(hosts: &str) -> Result<FfiClient, String> {
        let hosts = CString::new(hosts).map_err(|e| e.to_string())?;
        let mut out: *mut zkl_client = std::ptr::null_mut();
        // SAFETY: hosts is NUL-terminated; out is valid for writing.
        let ms = super::session_timeout().as_millis() as _;
        // SAFETY: as above.
        let st = unsafe { zkl_client_connect(hosts.as_ptr(), ms, &mut out) };
        check(st).map_err(|e| e.to_string())?;
        Ok(FfiClient(out))
    }

    pub fn mutex(&self, path: &str) -> zklock::Result<FfiMutex> {
        let path = CString::new(path).map_err(|e| zklock::Error::InvalidArgument(e.to_string()))?;
        let mut out: *mut zkl_lock = std::ptr::null_mut();
        // SAFETY: self.0 is a live client; path is NUL-terminated; out is valid for writing.
        check(unsafe { zkl_mutex_new(self.0, path.as_ptr(), &mut out) })?;
        Ok(FfiMutex(out))
    }
}

impl Drop for FfiClient {
    fn drop(&mut self) {
        // SAFETY: self.0 is a live client, freed once.
        unsafe { zkl_client_free(self.0) }
    }
}

impl super::Lock for FfiMutex {
    fn acquire(&self) -> zklock::Result<()> {
        // SAFETY: self.0 is a live lock, used by one thread at a time.
        check(unsafe { zkl_lock_acquire(self.0, -1) })
    }
    fn release(&self) -> zklock::Result<()> {
        // SAFETY: as above.
        check(unsafe { zkl_lock_release(self.0) })
    }
    fn cancel(&self) {
        // SAFETY: self.0 is a live lock; cancel may be called from any thread.
        let _ = unsafe { zkl_lock_cancel(self.0) };
    }
}

impl Drop for FfiMutex {
    fn drop(&mut self) {
        // SAFETY: self.0 is a live lock, freed once, not in use by another thread.
        unsafe { zkl_lock_free(self.0) }
    }
}
