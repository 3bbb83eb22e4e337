//! This thread's last error: its message, the setting that would fix it (its hint), and
//! `zkl_last_error_message`, `zkl_last_error_hint`, `zkl_last_error_reason`.

use std::cell::RefCell;
use std::ffi::{c_char, CString};

use super::status::zkl_hint;

/// The last error of a thread: the message in C's words, and its hint with the words before it.
struct LastError {
    message: CString,
    reason: CString,
    hint: zkl_hint,
}

thread_local! {
    static LAST_ERROR: RefCell<LastError> = RefCell::new(LastError {
        message: CString::from(c"no error"),
        reason: CString::from(c"no error"),
        hint: zkl_hint::ZKL_HINT_NONE,
    });
}

/// `text` as a C string (NUL bytes in it become U+FFFD).
fn c_string(text: String) -> CString {
    CString::new(text).unwrap_or_else(|e| {
        let text = String::from_utf8_lossy(&e.into_vec()).replace('\0', "\u{fffd}");
        CString::new(text).unwrap_or_default()
    })
}

/// Records this thread's last error: `reason`, and the setting that would fix it (named in C's
/// words after the reason in the message).
pub(crate) fn set_last_error(reason: String, hint: Option<crate::Hint>) {
    let message = match hint {
        Some(h) => c_string(format!("{reason} ({})", zkl_hint::from(h).c_setting())),
        None => c_string(reason.clone()),
    };
    let last = LastError {
        message,
        reason: c_string(reason),
        hint: hint.map_or(zkl_hint::ZKL_HINT_NONE, zkl_hint::from),
    };
    // During thread teardown the slot may be gone: then there is nobody left to read it.
    let _ = LAST_ERROR.try_with(|slot| match slot.try_borrow_mut() {
        Ok(mut s) => *s = last,
        Err(_) => log::error!("zklock: last error slot busy; message dropped"),
    });
}

/// The message of the last call on this thread that returned a status other than ZKL_OK
/// ("no error" before any). Never NULL. Owned by the library (never free it); valid until
/// the next zkl_ call on this thread that fails; successful calls do not clear it. Each
/// thread has its own message. When the error has a hint (zkl_last_error_hint), the message
/// ends with the C setting that fixes it, in parentheses: zkl_last_error_reason() then
/// " (zkl_options_set_tls_key_password)".
#[no_mangle]
pub extern "C" fn zkl_last_error_message() -> *const c_char {
    ffi_boundary!(value {
        LAST_ERROR
            .try_with(|slot| slot.borrow().message.as_ptr())
            .unwrap_or(c"no error message: the calling thread is exiting".as_ptr())
    })
}

/// The setting that would fix the last error on this thread, a zkl_hint (ZKL_HINT_NONE when
/// the message names none). For language bindings, which name the setting their own way: show
/// zkl_last_error_reason(), then " (", the language's own name for the setting, ")". Never
/// blocks; the same lifetime and thread rules as zkl_last_error_message.
#[no_mangle]
pub extern "C" fn zkl_last_error_hint() -> u32 {
    ffi_boundary!(value {
        LAST_ERROR
            .try_with(|slot| slot.borrow().hint as u32)
            .unwrap_or(zkl_hint::ZKL_HINT_NONE as u32)
    })
}

/// The last error's message without its hint: zkl_last_error_message() up to the " (" that
/// names the C setting, or the whole message when zkl_last_error_hint() is ZKL_HINT_NONE.
/// Never NULL; owned by the library, with the same lifetime as zkl_last_error_message.
#[no_mangle]
pub extern "C" fn zkl_last_error_reason() -> *const c_char {
    ffi_boundary!(value {
        LAST_ERROR
            .try_with(|slot| slot.borrow().reason.as_ptr())
            .unwrap_or(c"no error message: the calling thread is exiting".as_ptr())
    })
}
