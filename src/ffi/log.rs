//! `zkl_set_log_callback`: the library's log lines, handed to the host program.

use std::ffi::{c_char, c_void, CString};

use super::boundary::Failure;
use super::status::zkl_status;

/// The severity of a log line, as zkl_set_log_callback's max_level and its callback's level
/// (uint32_t on the wire).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum zkl_log_level {
    /// Something failed that the caller will not see as a status (a background delete gave up).
    ZKL_LOG_ERROR = 1,
    /// A lock lost or uncertain, a node deleted in the background, a retry.
    ZKL_LOG_WARN = 2,
    /// Lock acquired (with the wait) and released (with the hold time); session changes.
    ZKL_LOG_INFO = 3,
    /// Protocol steps.
    ZKL_LOG_DEBUG = 4,
    /// Everything.
    ZKL_LOG_TRACE = 5,
}

/// Receives one log line: its zkl_log_level, its target (the library's module, e.g.
/// "zklock::recipes::hold") and its message, both NUL-terminated and valid only during the call;
/// user_data is what zkl_set_log_callback was given. Called on the library's own threads, maybe
/// on several at once: it must be thread-safe, return promptly, and must not call back into the
/// library.
pub type zkl_log_callback = Option<
    unsafe extern "C" fn(
        level: u32,
        target: *const c_char,
        message: *const c_char,
        user_data: *mut c_void,
    ),
>;

struct UserData(*mut c_void);

// SAFETY: zkl_set_log_callback's contract: user_data may be used from any thread.
unsafe impl Send for UserData {}
// SAFETY: as above; the library only passes the pointer on, never dereferences it.
unsafe impl Sync for UserData {}

struct CallbackLogger {
    callback: unsafe extern "C" fn(u32, *const c_char, *const c_char, *mut c_void),
    user_data: UserData,
    max: log::LevelFilter,
}

fn text(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

impl log::Log for CallbackLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.max
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => zkl_log_level::ZKL_LOG_ERROR,
            log::Level::Warn => zkl_log_level::ZKL_LOG_WARN,
            log::Level::Info => zkl_log_level::ZKL_LOG_INFO,
            log::Level::Debug => zkl_log_level::ZKL_LOG_DEBUG,
            log::Level::Trace => zkl_log_level::ZKL_LOG_TRACE,
        };
        let target = text(record.target());
        let message = text(&record.args().to_string());
        // SAFETY: the callback is the host's, called as its contract says: two valid
        // NUL-terminated strings that live until it returns, and the host's own user_data.
        unsafe {
            (self.callback)(
                level as u32,
                target.as_ptr(),
                message.as_ptr(),
                self.user_data.0,
            )
        }
    }

    fn flush(&self) {}
}

/// Sends the library's log lines of max_level and more severe (a zkl_log_level, 1 = errors only
/// ... 5 = everything) to callback, with user_data. Set once per process: a second call, or a
/// call in a program that already installed a Rust logger, is ZKL_INVALID_ARGUMENT (the first
/// stays). Until then the library logs nothing.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL callback or a max_level outside 1..=5. Never blocks.
/// Any thread.
///
/// Pointers: callback is NULL or a function that may be called from any thread, at any time
/// until the process exits, with user_data.
#[no_mangle]
pub unsafe extern "C" fn zkl_set_log_callback(
    callback: zkl_log_callback,
    max_level: u32,
    user_data: *mut c_void,
) -> zkl_status {
    ffi_boundary!(status {
        let Some(callback) = callback else {
            return Err(Failure::null("callback"));
        };
        let max = match max_level {
            1 => log::LevelFilter::Error,
            2 => log::LevelFilter::Warn,
            3 => log::LevelFilter::Info,
            4 => log::LevelFilter::Debug,
            5 => log::LevelFilter::Trace,
            other => {
                return Err(Failure::invalid(format!(
                    "`max_level` {other} is not a zkl_log_level (1: ZKL_LOG_ERROR ... 5: ZKL_LOG_TRACE)"
                )))
            }
        };
        let logger = CallbackLogger { callback, user_data: UserData(user_data), max };
        log::set_boxed_logger(Box::new(logger)).map_err(|_| {
            Failure::invalid("a log callback (or another logger) is already set in this process; it can be set once")
        })?;
        log::set_max_level(max);
        Ok(())
    })
}
