//! The session's event sink: the state every caller reads (the current session's), the
//! listeners and the thread they run on, and threads for callbacks of our own. A session reports
//! its state changes here as values; it holds no pointer back to its client, and this sink
//! knows no session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::kinds::{SessionEvent, SessionState};

pub(super) type Listener = Arc<dyn Fn(&SessionEvent) + Send + Sync>;

/// Runs callbacks on a thread of their own (never inside a poll of the runtime's tasks, which
/// may be any caller's thread, nor under our locks).
/// `what` names the work (the thread is `zklock-<what>`).
pub(crate) fn run_detached(what: &str, fs: Vec<Box<dyn FnOnce() + Send>>) {
    if fs.is_empty() {
        return;
    }
    let name = format!("zklock-{what}");
    let spawned = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            for f in fs {
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
                    log::error!("a {name} callback panicked");
                }
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start a thread for {what}: {e}");
    }
}

/// Where sessions report their state, and whoever asks reads it.
pub(crate) struct Events {
    /// The current session's (state, id, generation).
    pub(super) state: Mutex<(SessionState, i64, u64)>,
    pub(super) state_cv: Condvar,
    /// The generation of the client's current session (u64::MAX: none).
    current: AtomicU64,
    listeners: Mutex<Vec<(u64, Listener)>>,
    next_listener: AtomicU64,
    sender: Mutex<Option<std::sync::mpsc::Sender<SessionEvent>>>,
    /// Node watch events (not session events) received by waits on this client's sessions.
    pub(super) watch_events: AtomicU64,
}

impl Events {
    pub(super) fn new() -> Events {
        Events {
            state: Mutex::new((SessionState::Suspended, 0, 0)),
            state_cv: Condvar::new(),
            current: AtomicU64::new(u64::MAX),
            listeners: Mutex::new(Vec::new()),
            next_listener: AtomicU64::new(0),
            sender: Mutex::new(None),
            watch_events: AtomicU64::new(0),
        }
    }

    /// The session of `ev` is the client's current session from now on; `ev` says it is
    /// connected.
    pub(super) fn current_is(&self, ev: SessionEvent) {
        self.current.store(ev.generation, Ordering::SeqCst);
        self.publish(ev);
    }

    /// A session changed state: tell the listeners if it is the current one (or the client was
    /// closed).
    pub(super) fn report(&self, ev: SessionEvent) {
        if self.current.load(Ordering::SeqCst) == ev.generation || ev.state == SessionState::Closed
        {
            self.publish(ev);
        }
    }

    /// `ev` is the client's state now: record it for whoever asks, and send it to the listeners.
    fn publish(&self, ev: SessionEvent) {
        {
            let mut st = self.state.lock();
            *st = (ev.state, ev.session_id, ev.generation);
            self.state_cv.notify_all();
        }
        if let Some(tx) = self.sender.lock().as_ref() {
            let _ = tx.send(ev);
        }
    }

    /// Adds a listener (run on the listeners' thread); returns its id.
    pub(super) fn add_listener(self: &Arc<Self>, f: Listener) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed);
        self.listeners.lock().push((id, f));
        self.ensure_dispatcher();
        id
    }

    pub(super) fn remove_listener(&self, id: u64) {
        self.listeners.lock().retain(|(i, _)| *i != id);
    }

    fn ensure_dispatcher(self: &Arc<Self>) {
        let mut ev = self.sender.lock();
        if ev.is_some() {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel::<SessionEvent>();
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("zklock-listeners".into())
            .spawn(move || {
                while let Ok(e) = rx.recv() {
                    let Some(events) = weak.upgrade() else { return };
                    let ls: Vec<Listener> = events
                        .listeners
                        .lock()
                        .iter()
                        .map(|(_, l)| l.clone())
                        .collect();
                    drop(events);
                    for l in ls {
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l(&e))).is_err()
                        {
                            log::error!("a zklock session listener panicked");
                        }
                    }
                }
            })
            .expect("spawn the zklock-listeners thread");
        *ev = Some(tx);
    }
}
