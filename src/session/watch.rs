//! A watch on a node's children, for those who follow a lock's queue
//! ([`Client::watch_children`](super::Client::watch_children)).

use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::state::Session;
use crate::error::{Error, Result};
use crate::runtime;
use crate::wait::{Outcome, Signal};

/// A watch on a node's children, from [`Client::watch_children`](crate::Client::watch_children): fires once, on their next
/// change (or the node's creation or deletion).
pub struct ChildrenWatch {
    session: Arc<Session>,
    change: std::pin::Pin<Box<dyn std::future::Future<Output = zk::WatchedEvent> + Send>>,
    fired: bool,
}

impl ChildrenWatch {
    pub(super) fn new(session: Arc<Session>, watch: zk::OneshotWatcher) -> ChildrenWatch {
        ChildrenWatch {
            session,
            change: Box::pin(watch.changed()),
            fired: false,
        }
    }

    /// Waits for the change, or `timeout` (None: forever): `Ok(true)` when it changed,
    /// `Ok(false)` at the timeout (the watch stays set: wait again), `Err` when the session ended.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<bool> {
        if self.fired {
            return Ok(true);
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let signal = Signal::new();
        match runtime::block_on(
            &mut self.change,
            deadline,
            Some(&signal),
            Some(&self.session.io),
        ) {
            Outcome::Ready(ev) => {
                self.fired = true;
                if ev.event_type == zk::EventType::Session && ev.session_state.is_terminated() {
                    return Err(self.session.ended_error().unwrap_or(Error::SessionExpired));
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
