//! The session timeout the servers grant at each connect, reconnects included
//! (`docs/hold-model.md`, fact 1): ZooKeeper clamps every connect request to the limits of the
//! server that takes it (`minSessionTimeout`, `maxSessionTimeout`), and from then on the leader
//! expires the session with that grant. zookeeper-client keeps each grant to itself (it asks for
//! it again at its next reconnect, and `Client::session_timeout` stays the first one); it tells
//! it only in the event it traces as it reads each connect's answer ("received connect
//! response: ConnectResponse { .., session_timeout: N, .. }", at debug level, from the session
//! task that the runtime polls).
//!
//! So while the runtime polls a session's task, [`tapped`] makes [`Tap`] the thread's tracing
//! dispatcher: it reads that one event into the session's [`Granted`] and hands everything else,
//! that event included, to the dispatcher the thread had (a program's own subscriber sees what
//! it saw before). The grant is known before the crate reports the session connected: the
//! answer is read, then the state changes, in one poll.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

/// The last session timeout granted to one session's connects, as its task read it (0: none
/// read yet: the first connect's answer is read by the connect itself, whose grant
/// `zk::Client::session_timeout` says).
#[derive(Debug, Default)]
pub(crate) struct Granted {
    ms: AtomicU64,
}

/// A grant that could not be read: nothing can be believed of the session any more.
const UNKNOWN: u64 = u64::MAX;

impl Granted {
    /// The last grant read, if any; zero once a connect was answered with a grant that could
    /// not be read (then no lease runs).
    pub(crate) fn last(&self) -> Option<std::time::Duration> {
        match self.ms.load(Ordering::SeqCst) {
            0 => None,
            UNKNOWN => Some(std::time::Duration::ZERO),
            ms => Some(std::time::Duration::from_millis(ms)),
        }
    }

    /// The session reconnected, and its grant cannot be read in this build (its tracing is
    /// compiled without debug events: see [`readable`]).
    pub(crate) fn unreadable(&self) {
        if self.ms.swap(UNKNOWN, Ordering::SeqCst) != UNKNOWN {
            log::warn!(
                "zklock: the session reconnected and the session timeout the servers granted it \
                 cannot be learned in this build (tracing's debug level is compiled out): its \
                 holds are no longer believed"
            );
        }
    }

    fn record(&self, ms: u64) {
        self.ms.store(ms, Ordering::SeqCst);
    }
}

/// Whether this build can read grants at all: zookeeper-client's event is at debug level,
/// which a program may compile out of tracing (its `max_level_*` features).
pub(crate) fn readable() -> bool {
    tracing::level_filters::STATIC_MAX_LEVEL >= tracing::level_filters::LevelFilter::DEBUG
}

thread_local! {
    /// While a session's task is polled here: its grants, and the dispatcher the thread had.
    static POLLING: std::cell::RefCell<Option<(std::sync::Arc<Granted>, Dispatch)>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `poll` (a poll of a task of the session whose grants are `granted`) with [`Tap`] as
/// the thread's tracing dispatcher.
pub(crate) fn tapped<R>(granted: &std::sync::Arc<Granted>, poll: impl FnOnce() -> R) -> R {
    let tap = tap();
    let outer = tracing::dispatcher::get_default(|d| d.clone());
    // A poll within a poll (never expected) keeps the outer dispatcher of the first.
    let outer = if outer.downcast_ref::<Tap>().is_some() {
        POLLING
            .with(|p| p.borrow().as_ref().map(|(_, d)| d.clone()))
            .unwrap_or_else(Dispatch::none)
    } else {
        outer
    };
    let previous = POLLING.with(|p| p.replace(Some((granted.clone(), outer))));
    let r = tracing::dispatcher::with_default(tap, poll);
    POLLING.with(|p| *p.borrow_mut() = previous);
    r
}

fn tap() -> &'static Dispatch {
    static TAP: OnceLock<(Dispatch, Dispatch)> = OnceLock::new();
    // Two, kept for good: while only one dispatcher is registered, tracing asks the thread's
    // current default alone whether a callsite is wanted when it is first hit, and keeps the
    // answer (the connect's answer, first read by a connect that is not a tapped poll, would be
    // "never" for good); with two it asks every registered dispatcher, this one included.
    &TAP.get_or_init(|| (Dispatch::new(Tap), Dispatch::new(Tap)))
        .0
}

/// The dispatcher of the thread outside the poll (none outside a poll).
fn outer() -> Dispatch {
    POLLING
        .with(|p| p.borrow().as_ref().map(|(_, d)| d.clone()))
        .unwrap_or_else(Dispatch::none)
}

/// Whether an event may be zookeeper-client's of a connect's answer: one of its session
/// module's, at debug level, not yet seen to be another (its message tells: see [`Message`]).
fn is_answer(meta: &Metadata<'_>) -> bool {
    meta.is_event()
        && *meta.level() == Level::DEBUG
        && meta.module_path() == Some("zookeeper_client::session")
        && !OTHERS.read().contains(&meta.callsite())
}

/// The session module's debug events seen to be others (one a reply, say): never looked into
/// again.
static OTHERS: parking_lot::RwLock<Vec<tracing_core::callsite::Identifier>> =
    parking_lot::RwLock::new(Vec::new());

/// Reads the granted timeout out of the event's message; `answer`: whether it was a connect's
/// answer at all.
#[derive(Default)]
struct Message {
    answer: bool,
    ms: Option<u64>,
}

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() != "message" {
            return;
        }
        let text = format!("{value:?}");
        if let Some(rest) = text.strip_prefix("received connect response: ") {
            self.answer = true;
            self.ms = rest
                .split("session_timeout: ")
                .nth(1)
                .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .filter(|&ms| ms > 0);
        }
    }
}

/// The dispatcher of a session task's polls: reads the grants, forwards all.
struct Tap;

impl Subscriber for Tap {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Asked at each use: whether the thread's own dispatcher wants it, whether it may be a
        // connect's answer.
        Interest::sometimes()
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        is_answer(meta) || outer().enabled(meta)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        // Whatever the thread's own dispatcher may want.
        None
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        outer().new_span(span)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        outer().record(span, values)
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        outer().record_follows_from(span, follows)
    }

    fn event(&self, event: &Event<'_>) {
        if is_answer(event.metadata()) {
            let mut m = Message::default();
            event.record(&mut m);
            if !m.answer {
                OTHERS.write().push(event.metadata().callsite());
            } else if let Some(ms) = m.ms {
                POLLING.with(|p| {
                    if let Some((granted, _)) = p.borrow().as_ref() {
                        granted.record(ms);
                    }
                });
            } else {
                log::warn!(
                    "zklock: a connect's answer whose session timeout could not be read: the \
                     session's holds are no longer believed"
                );
                POLLING.with(|p| {
                    if let Some((granted, _)) = p.borrow().as_ref() {
                        granted.record(UNKNOWN);
                    }
                });
            }
        }
        let outer = outer();
        if outer.enabled(event.metadata()) {
            outer.event(event)
        }
    }

    fn enter(&self, span: &Id) {
        outer().enter(span)
    }

    fn exit(&self, span: &Id) {
        outer().exit(span)
    }

    fn clone_span(&self, id: &Id) -> Id {
        outer().clone_span(id)
    }

    fn try_close(&self, id: Id) -> bool {
        outer().try_close(id)
    }

    fn current_span(&self) -> tracing_core::span::Current {
        outer().current_span()
    }
}
