//! This thread's last error message, and `zkl_last_error_message`.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::from(c"no error"));
}

/// Records message as this thread's last error (NUL bytes in it become U+FFFD).
pub(crate) fn set_last_error(message: String) {
    let c = CString::new(message).unwrap_or_else(|e| {
        let text = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{fffd}");
        CString::new(text).unwrap_or_default()
    });
    // During thread teardown the slot may be gone: then there is nobody left to read it.
    let _ = LAST_ERROR.try_with(|slot| match slot.try_borrow_mut() {
        Ok(mut s) => *s = c,
        Err(_) => log::error!("zklock: last error slot busy; message dropped"),
    });
}

/// The message of the last call on this thread that returned a status other than ZKL_OK
/// ("no error" before any). Never NULL. Owned by the library (never free it); valid until
/// the next zkl_ call on this thread that fails; successful calls do not clear it. Each
/// thread has its own message.
#[no_mangle]
pub extern "C" fn zkl_last_error_message() -> *const c_char {
    ffi_boundary!(value {
        LAST_ERROR
            .try_with(|slot| slot.borrow().as_ptr())
            .unwrap_or(c"no error message: the calling thread is exiting".as_ptr())
    })
}
