//! The session timeouts the servers grant at each connect, reconnects included, and the
//! connects asked and not yet answered (`docs/hold-model.md`, fact 1 and "The timeout, per
//! connect"): ZooKeeper clamps every connect request to the limits of the server that takes
//! it (`minSessionTimeout`, `maxSessionTimeout`), and the leader files the session with that
//! grant as it revalidates it, before the client reads the answer, if it ever does.
//! zookeeper-client keeps each grant to itself (it asks for it again at its next reconnect, and
//! `Client::session_timeout` stays the first one); it tells both only in the events it traces
//! as it sends a connect request ("sending connect request: ConnectRequest { .., session_id: S,
//! .. }") and reads its answer ("received connect response: ConnectResponse { session_timeout:
//! N, session_id: S, .. }"), at debug level, from the session task that the runtime polls.
//!
//! So while the runtime polls a task, [`tapped`] makes [`Tap`] the thread's tracing dispatcher:
//! it reads those two events into [`granted`]'s and [`asking_since`]'s table, and hands
//! everything, those events included, to the dispatcher the thread had (a program's own
//! subscriber sees what it saw before). A reconnect's request is known asked before a byte of
//! it is written, and its grant known before the crate reports the session connected: the
//! answer is read, then the state changes, in one poll.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

/// What is known of one session's reconnects.
#[derive(Clone, Copy)]
struct Connects {
    /// The least session timeout any answer granted it (ms): the leader files the session with
    /// the grant of each revalidation, and a new leader with the one its creation logged, so no
    /// grant it was given is ever safe to forget. Zero once an answer's grant could not be read
    /// (then no lease runs).
    least: u64,
    /// When a connect request was first sent that no answer followed yet (CLOCK_BOOTTIME): a
    /// server may have revalidated the session with a grant the client has not read.
    asking: Option<Duration>,
}

/// Reconnects by session id. A session's first connect is answered to the connect itself, whose
/// grant `zk::Client::session_timeout` says: it is not here until a reconnect.
static CONNECTS: parking_lot::RwLock<Option<HashMap<i64, Connects>>> =
    parking_lot::RwLock::new(None);

fn update(session: i64, f: impl FnOnce(&mut Connects)) {
    let mut all = CONNECTS.write();
    let c = all
        .get_or_insert_with(HashMap::new)
        .entry(session)
        .or_insert(Connects {
            least: u64::MAX,
            asking: None,
        });
    f(c)
}

/// A connect request of `session` is about to be sent.
fn asked(session: i64) {
    let now = crate::sys::boot_time();
    update(session, |c| {
        c.asking.get_or_insert(now);
    })
}

/// An answer to `session`'s connect granted `ms` (`None`: unreadable).
fn answered(session: i64, ms: Option<u64>) {
    update(session, |c| {
        c.least = c.least.min(ms.unwrap_or(0));
        c.asking = None;
    })
}

/// The least session timeout granted to `session` at a reconnect, if an answer to one was read;
/// zero once an answer's grant could not be read (then no lease runs).
pub(crate) fn granted(session: i64) -> Option<Duration> {
    let c = *CONNECTS.read().as_ref()?.get(&session)?;
    (c.least != u64::MAX).then(|| Duration::from_millis(c.least))
}

/// Since when (CLOCK_BOOTTIME) `session` has asked to reconnect without an answer read: from
/// then on a server may have filed it with a grant the client does not know, so no lease runs
/// past that instant until an answer is read.
pub(crate) fn asking_since(session: i64) -> Option<Duration> {
    CONNECTS.read().as_ref()?.get(&session)?.asking
}

/// The session is gone: its grants are not asked for again.
pub(crate) fn forget(session: i64) {
    if let Some(all) = CONNECTS.write().as_mut() {
        all.remove(&session);
    }
}

/// Whether this build can read grants at all: zookeeper-client's events are at debug level,
/// which a program may compile out of tracing (its `max_level_*` features).
pub(crate) fn readable() -> bool {
    tracing::level_filters::STATIC_MAX_LEVEL >= tracing::level_filters::LevelFilter::DEBUG
}

/// `session` reconnected, and its grant cannot be read in this build (see [`readable`]): the
/// leader may expire it sooner than the lease would reckon.
pub(crate) fn unreadable(session: i64) {
    if granted(session) != Some(Duration::ZERO) {
        log::warn!(
            "zklock session {session:#x} reconnected, and the session timeout the servers \
             granted it cannot be learned in this build (tracing's debug level is compiled \
             out): its holds are no longer believed"
        );
        answered(session, None);
    }
}

thread_local! {
    /// While a task is polled here: the dispatcher the thread had.
    static POLLING: std::cell::RefCell<Option<Dispatch>> = const { std::cell::RefCell::new(None) };
}

/// Runs `poll` (a poll of a runtime task: zookeeper-client's session tasks are among them)
/// with [`Tap`] as the thread's tracing dispatcher.
pub(crate) fn tapped<R>(poll: impl FnOnce() -> R) -> R {
    let outer = tracing::dispatcher::get_default(|d| d.clone());
    // A poll within a poll keeps the outer dispatcher of the first.
    let outer = if outer.downcast_ref::<Tap>().is_some() {
        self::outer()
    } else {
        outer
    };
    let previous = POLLING.with(|p| p.replace(Some(outer)));
    let r = tracing::dispatcher::with_default(tap(), poll);
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
        .with(|p| p.borrow().clone())
        .unwrap_or_else(Dispatch::none)
}

/// Whether an event may be zookeeper-client's of a connect's request or answer: one of its
/// session module's, at debug level, not yet seen to be another (its message tells: see
/// [`Message`]).
fn is_connect(meta: &Metadata<'_>) -> bool {
    meta.is_event()
        && *meta.level() == Level::DEBUG
        && meta.module_path() == Some("zookeeper_client::session")
        && !OTHERS.read().contains(&meta.callsite())
}

/// The session module's debug events seen to be others (one a reply, say): never looked into
/// again.
static OTHERS: parking_lot::RwLock<Vec<tracing_core::callsite::Identifier>> =
    parking_lot::RwLock::new(Vec::new());

/// Which of a connect's events a message is.
#[derive(Default, PartialEq)]
enum Said {
    /// Another event of the module's.
    #[default]
    Other,
    Request,
    Answer,
}

/// Reads the session (and an answer's granted timeout) out of the event's message.
#[derive(Default)]
struct Message {
    said: Said,
    session: Option<i64>,
    ms: Option<u64>,
}

/// The number after `key: ` in `text`.
fn field<T: std::str::FromStr>(text: &str, key: &str) -> Option<T> {
    let rest = text.split(&format!("{key}: ")).nth(1)?;
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() != "message" {
            return;
        }
        let text = format!("{value:?}");
        if let Some(rest) = text.strip_prefix("received connect response: ") {
            self.said = Said::Answer;
            self.session = self::field(rest, "session_id").filter(|&id: &i64| id != 0);
            self.ms = self::field(rest, "session_timeout").filter(|&ms: &u64| ms > 0);
        } else if let Some(rest) = text.strip_prefix("sending connect request: ") {
            // A first connect asks for session 0: it is no reconnect.
            self.said = Said::Request;
            self.session = self::field(rest, "session_id").filter(|&id: &i64| id != 0);
        }
    }
}

/// The dispatcher of the runtime's polls: reads the grants, forwards all.
struct Tap;

impl Subscriber for Tap {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // Asked at each use: whether the thread's own dispatcher wants it, whether it may be a
        // connect's answer.
        Interest::sometimes()
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        is_connect(meta) || outer().enabled(meta)
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
        if is_connect(event.metadata()) {
            let mut m = Message::default();
            event.record(&mut m);
            match (m.said, m.session, m.ms) {
                (Said::Other, _, _) => OTHERS.write().push(event.metadata().callsite()),
                (Said::Request, Some(session), _) => asked(session),
                (Said::Answer, Some(session), Some(ms)) => answered(session, Some(ms)),
                (Said::Answer, Some(session), None) => {
                    log::warn!(
                        "zklock session {session:#x}: a connect's answer whose session timeout \
                         could not be read: the session's holds are no longer believed"
                    );
                    answered(session, None);
                }
                // A first connect's request; an answer with no session: the server refused
                // it (expired), nothing to learn.
                (_, None, _) => {}
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
