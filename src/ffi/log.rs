//! The library's log records, handed to the host program: pulled with `zkl_log_next` from a
//! thread of the host's (`zkl_log_start` / `zkl_log_stop`), or pushed to a callback by the
//! library's own `zklock-log` thread (`zkl_set_log_callback`).
//!
//! Records are logged by any thread, also by threads that run ZooKeeper I/O (`zklock-io`, and
//! callers polling the session tasks, see `crate::runtime`). There a record is only formatted
//! and put in a bounded queue, under a lock of this module that guards nothing else: host code
//! never runs inside a poll of the I/O tasks, nor under any lock of the library, nor on a
//! thread the library uses for I/O. A host that blocks in its log code delays its own records,
//! never ZooKeeper I/O; past [`CAPACITY`] waiting records, new ones are dropped and counted, and
//! the count is delivered in their place.
//!
//! A forked child starts with delivery off, its own: the parent's queue, readers and
//! `zklock-log` threads stay the parent's ([`delivery`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::boundary::{Failure, Out};
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
/// user_data is what zkl_set_log_callback was given.
///
/// Threads: called on the library's log thread, "zklock-log", one call at a time, in the order
/// the lines were logged; never on a thread that runs ZooKeeper I/O or a zkl_ call, nor under
/// a lock of the library. So it may take its time (lines wait in a queue meanwhile; past 1024
/// waiting lines, new ones are dropped and a ZKL_LOG_WARN line from "zklock::log" says how
/// many) and it may call into the library, zkl_set_log_callback(NULL, 0, NULL) included.
/// A runtime that ends foreign threads while it shuts down (CPython during interpreter
/// finalization) must remove the callback before that (zkl_set_log_callback(NULL, 0, NULL) in
/// an exit hook), or pull lines with zkl_log_next from a thread of its own instead.
pub type zkl_log_callback = Option<
    unsafe extern "C" fn(
        level: u32,
        target: *const c_char,
        message: *const c_char,
        user_data: *mut c_void,
    ),
>;

/// The most log records waiting for their reader; past it, new records are dropped (and
/// counted).
pub(crate) const CAPACITY: usize = 1024;

/// One waiting record, or the count of records dropped at this point of the queue.
enum Item {
    Record {
        level: u32,
        target: String,
        message: String,
    },
    Dropped(u64),
}

impl Item {
    fn into_parts(self) -> (u32, String, String) {
        match self {
            Item::Record {
                level,
                target,
                message,
            } => (level, target, message),
            Item::Dropped(n) => (
                zkl_log_level::ZKL_LOG_WARN as u32,
                "zklock::log".into(),
                format!(
                    "{n} log record(s) dropped: {CAPACITY} were waiting for the log reader already"
                ),
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Off,
    /// Records wait for zkl_log_next.
    Queue,
    /// Records wait for the `zklock-log` thread, which calls the callback.
    Callback,
}

struct State {
    mode: Mode,
    queue: VecDeque<Item>,
    /// Bumped by every stop: a reader of an earlier delivery ends.
    epoch: u64,
    /// The `zklock-log` threads still running (a stop waits for them, but for itself).
    dispatchers: Vec<ThreadId>,
}

/// The delivery of one process: its state, and a condvar notified when a record is queued,
/// when delivery stops, and when a dispatcher ends.
struct Delivery {
    state: Mutex<State>,
    changed: Condvar,
    pid: u32,
}

static DELIVERY: AtomicPtr<Delivery> = AtomicPtr::new(std::ptr::null_mut());

/// This process's delivery, made on first use. A forked child makes its own, off: the
/// parent's threads (a `zklock-log` dispatcher, a reader in `zkl_log_next`) do not exist in it,
/// yet they may hold the parent's lock or wait on its condvar, and a notify or an unlock in the
/// child could hand the lock to one of them for good. The parent's copy is left as it is.
fn delivery() -> &'static Delivery {
    let pid = std::process::id();
    let cur = DELIVERY.load(Ordering::Acquire);
    // SAFETY: a non-null DELIVERY points to a leaked Box that is never freed.
    if let Some(d) = unsafe { cur.as_ref() } {
        if d.pid == pid {
            return d;
        }
    }
    let fresh = Box::into_raw(Box::new(Delivery {
        state: Mutex::new(State {
            mode: Mode::Off,
            queue: VecDeque::new(),
            epoch: 0,
            dispatchers: Vec::new(),
        }),
        changed: Condvar::new(),
        pid,
    }));
    match DELIVERY.compare_exchange(cur, fresh, Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: fresh was just leaked from a Box and is never freed.
        Ok(_) => unsafe { &*fresh },
        Err(other) => {
            // Another thread of this process made one first: that one is this process's.
            // SAFETY: fresh was never shared; other is a leaked Box that is never freed.
            unsafe {
                drop(Box::from_raw(fresh));
                &*other
            }
        }
    }
}

/// The logger installed in the `log` crate: it queues, nothing more.
struct QueueLogger;

fn level_number(level: log::Level) -> u32 {
    (match level {
        log::Level::Error => zkl_log_level::ZKL_LOG_ERROR,
        log::Level::Warn => zkl_log_level::ZKL_LOG_WARN,
        log::Level::Info => zkl_log_level::ZKL_LOG_INFO,
        log::Level::Debug => zkl_log_level::ZKL_LOG_DEBUG,
        log::Level::Trace => zkl_log_level::ZKL_LOG_TRACE,
    }) as u32
}

impl log::Log for QueueLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // Formatted before taking the lock: the lock is held for a push, nothing more.
        let item = Item::Record {
            level: level_number(record.level()),
            target: record.target().to_string(),
            message: record.args().to_string(),
        };
        let d = delivery();
        let mut st = d.state.lock();
        if st.mode == Mode::Off {
            return;
        }
        if st.queue.len() >= CAPACITY {
            match st.queue.back_mut() {
                Some(Item::Dropped(n)) => *n += 1,
                _ => st.queue.push_back(Item::Dropped(1)),
            }
            return;
        }
        st.queue.push_back(item);
        drop(st);
        d.changed.notify_all();
    }

    fn flush(&self) {}
}

/// Installs [`QueueLogger`] in the `log` crate (once per process).
fn install() -> Result<(), Failure> {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    if *INSTALLED.get_or_init(|| log::set_logger(&QueueLogger).is_ok()) {
        Ok(())
    } else {
        Err(Failure::invalid(
            "another logger is installed in this process (a Rust program's own): zklock logs to it",
        ))
    }
}

fn level_filter(max_level: u32) -> Result<log::LevelFilter, Failure> {
    Ok(match max_level {
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
    })
}

/// Turns delivery on in `mode`, if no delivery is on.
fn start(mode: Mode, max_level: u32) -> Result<u64, Failure> {
    let max = level_filter(max_level)?;
    install()?;
    let mut st = delivery().state.lock();
    if st.mode != Mode::Off {
        return Err(Failure::invalid(
            "the library's log records already go to a log callback or to zkl_log_next; \
             stop that first (zkl_log_stop, or zkl_set_log_callback(NULL, 0, NULL))",
        ));
    }
    st.mode = mode;
    log::set_max_level(max);
    Ok(st.epoch)
}

/// Turns delivery off, drops the waiting records, ends the readers, and waits until no
/// `zklock-log` thread (but the calling one) runs any more.
fn stop() {
    let me = std::thread::current().id();
    let d = delivery();
    let mut st = d.state.lock();
    if st.mode != Mode::Off {
        log::set_max_level(log::LevelFilter::Off);
        st.mode = Mode::Off;
        st.epoch += 1;
        st.queue.clear();
        d.changed.notify_all();
    }
    while st.dispatchers.iter().any(|&t| t != me) {
        d.changed.wait(&mut st);
    }
}

enum Taken {
    Item(Item),
    TimedOut,
    Ended,
}

/// The next item of delivery `epoch` in `mode`, waiting until `deadline` (None: forever).
fn take(mode: Mode, epoch: u64, deadline: Option<Instant>) -> Taken {
    let d = delivery();
    let mut st = d.state.lock();
    loop {
        if st.epoch != epoch || st.mode != mode {
            return Taken::Ended;
        }
        if let Some(item) = st.queue.pop_front() {
            return Taken::Item(item);
        }
        match deadline {
            None => d.changed.wait(&mut st),
            Some(until) => {
                if Instant::now() >= until || d.changed.wait_until(&mut st, until).timed_out() {
                    // One more look: a record or a stop may have come with the deadline.
                    if st.epoch != epoch || st.mode != mode {
                        return Taken::Ended;
                    }
                    return st.queue.pop_front().map_or(Taken::TimedOut, Taken::Item);
                }
            }
        }
    }
}

struct UserData(*mut c_void);

// SAFETY: zkl_set_log_callback's contract: user_data may be used from the library's log thread.
unsafe impl Send for UserData {}

type Callback = unsafe extern "C" fn(u32, *const c_char, *const c_char, *mut c_void);

fn text(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let bytes = e.into_vec();
        CString::new(String::from_utf8_lossy(&bytes).replace('\0', " ")).unwrap_or_default()
    })
}

/// The `zklock-log` thread: takes the records of delivery `epoch` and calls the callback with
/// each, holding no lock.
fn dispatch(epoch: u64, callback: Callback, user_data: UserData) {
    while let Taken::Item(item) = take(Mode::Callback, epoch, None) {
        let (level, target, message) = item.into_parts();
        let (target, message) = (text(target), text(message));
        // SAFETY: the callback is the host's, called as its contract says: two valid
        // NUL-terminated strings that live until it returns, and the host's own user_data.
        unsafe { callback(level, target.as_ptr(), message.as_ptr(), user_data.0) }
    }
}

/// Sends the library's log lines of max_level and more severe (a zkl_log_level, 1 = errors only
/// ... 5 = everything) to callback, with user_data, from the library's log thread (see
/// zkl_log_callback for the threads it runs on). Until a callback is set (or zkl_log_start
/// is called) the library logs nothing.
///
/// A NULL callback removes the callback that is set (as zkl_log_stop does; max_level and
/// user_data are then ignored): when this returns, the callback is not running and is never
/// called again (called from inside the callback itself, it returns at once and the callback
/// is not called again after the current call). Then another callback may be set.
///
/// Returns ZKL_INVALID_ARGUMENT for a max_level outside 1..=5, while a callback is set or
/// zkl_log_start is in effect (the first stays), and in a program that already installed a
/// Rust logger (the library's lines go to that logger). Never blocks, except the removal,
/// which waits for a call of the callback in progress to return. Any thread.
///
/// Pointers: callback is NULL or a function that may be called on the library's log thread,
/// with user_data, until it is removed (or until the process exits).
#[no_mangle]
pub unsafe extern "C" fn zkl_set_log_callback(
    callback: zkl_log_callback,
    max_level: u32,
    user_data: *mut c_void,
) -> zkl_status {
    ffi_boundary!(status {
        let Some(callback) = callback else {
            stop();
            return Ok(());
        };
        let epoch = start(Mode::Callback, max_level)?;
        let user_data = UserData(user_data);
        // The dispatcher is registered before it runs: a stop that follows waits for it.
        let d = delivery();
        let mut st = d.state.lock();
        let spawned = std::thread::Builder::new().name("zklock-log".into()).spawn(move || {
            dispatch(epoch, callback, user_data);
            let d = delivery();
            let mut st = d.state.lock();
            let me = std::thread::current().id();
            st.dispatchers.retain(|&t| t != me);
            drop(st);
            d.changed.notify_all();
        });
        match spawned {
            Ok(t) => {
                st.dispatchers.push(t.thread().id());
                Ok(())
            }
            Err(e) => {
                drop(st);
                stop();
                Err(Failure::new(zkl_status::ZKL_INTERNAL_ERROR, format!("cannot start the zklock-log thread: {e}")))
            }
        }
    })
}

/// Queues the library's log lines of max_level and more severe (a zkl_log_level, 1 = errors
/// only ... 5 = everything) for zkl_log_next, which takes them on a thread of the caller's:
/// the way for a runtime that must run its own code on its own threads (Python, with its
/// interpreter lock and its shutdown) to hear the library. At most 1024 lines wait; past that,
/// new ones are dropped and counted, and a ZKL_LOG_WARN line from "zklock::log" says how many
/// in their place.
///
/// Returns ZKL_INVALID_ARGUMENT for a max_level outside 1..=5, while a log callback is set or
/// zkl_log_start is in effect already, and in a program that already installed a Rust logger.
/// Never blocks. Any thread.
#[no_mangle]
pub extern "C" fn zkl_log_start(max_level: u32) -> zkl_status {
    ffi_boundary!(status {
        start(Mode::Queue, max_level)?;
        Ok(())
    })
}

/// Takes the next log line queued since zkl_log_start, waiting for one up to timeout_ms
/// (< 0: as long as it takes; 0: not at all): its zkl_log_level to *out_level, its target
/// (the library's module, e.g. "zklock::recipes::hold") to *out_target and its message to
/// *out_message. Lines come in the order they were logged, each to one caller.
///
/// Returns ZKL_OK with a line; ZKL_TIMEOUT if none came in time; ZKL_CANCELLED when log lines
/// are not queued (before zkl_log_start) or stop being queued during the wait (zkl_log_stop);
/// ZKL_INVALID_ARGUMENT for a NULL argument. On any status but ZKL_OK the out-parameters are
/// left unchanged. The strings are owned by the library and valid until the next
/// zkl_log_next call on the same thread. Blocks at most timeout_ms. Any thread, several at
/// once.
///
/// Pointers: out_level, out_target and out_message are NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_log_next(
    timeout_ms: i64,
    out_level: *mut u32,
    out_target: *mut *const c_char,
    out_message: *mut *const c_char,
) -> zkl_status {
    thread_local! {
        static LINE: RefCell<(CString, CString)> = RefCell::new(Default::default());
    }
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `out_level`.
        let out_level = unsafe { Out::new(out_level, "out_level") }?;
        // SAFETY: the caller's contract for `out_target`.
        let out_target = unsafe { Out::new(out_target, "out_target") }?;
        // SAFETY: the caller's contract for `out_message`.
        let out_message = unsafe { Out::new(out_message, "out_message") }?;
        let epoch = delivery().state.lock().epoch;
        let deadline = u64::try_from(timeout_ms)
            .ok()
            .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms)));
        let item = match take(Mode::Queue, epoch, deadline) {
            Taken::Item(item) => item,
            Taken::TimedOut => {
                return Err(Failure::new(zkl_status::ZKL_TIMEOUT, format!("no log line within {timeout_ms} ms")))
            }
            Taken::Ended => {
                return Err(Failure::new(
                    zkl_status::ZKL_CANCELLED,
                    "log lines are not queued: zkl_log_start was not called, or zkl_log_stop was",
                ))
            }
        };
        let (level, target, message) = item.into_parts();
        let (target, message) = LINE.with(|line| {
            let mut line = line.borrow_mut();
            *line = (text(target), text(message));
            (line.0.as_ptr(), line.1.as_ptr())
        });
        out_level.write(level);
        out_target.write(target);
        out_message.write(message);
        Ok(())
    })
}

/// Stops the delivery of the library's log lines, whichever way they go: the queued lines
/// are dropped, zkl_log_next calls waiting for one return ZKL_CANCELLED, and a log callback is
/// removed as zkl_set_log_callback(NULL, 0, NULL) removes it (when this returns, it is not
/// running and never called again; from inside the callback, it returns at once). The library
/// then logs nothing until zkl_log_start or zkl_set_log_callback. ZKL_OK also when nothing was
/// delivered. Never blocks, but for a call of the log callback in progress. Any thread.
#[no_mangle]
pub extern "C" fn zkl_log_stop() -> zkl_status {
    ffi_boundary!(status {
        stop();
        Ok(())
    })
}
