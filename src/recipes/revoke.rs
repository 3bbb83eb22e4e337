//! Revocation as Curator has it: cooperative. Someone asks a holder to let go by writing
//! `__REVOKE__` into the holder's lock node (Curator's `Revoker.attemptRevoke`); a holder that
//! made its lock revocable watches its own node's data and is told (a callback on a thread of
//! its own, or a wait that returns). Nothing forces a holder: one that never made its lock
//! revocable, or that ignores the request, keeps its hold.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use super::hold::Hold;

type Callback = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct State {
    enabled: bool,
    callbacks: Vec<Callback>,
    /// The hold (node, fencing token) a request was seen for: a simple lock's successive holds
    /// share a node, never a token.
    requested: Option<(String, i64)>,
}

/// A participant table's revocation: whether its holds are revocable, who to tell, and the node
/// a request was seen for.
#[derive(Default)]
pub(crate) struct Revocation {
    state: parking_lot::Mutex<State>,
    cv: parking_lot::Condvar,
}

impl Revocation {
    /// Makes holds revocable from now on; `f` is called on each request.
    pub(crate) fn enable(&self, f: Callback) {
        let mut st = self.state.lock();
        st.enabled = true;
        st.callbacks.push(f);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.state.lock().enabled
    }

    /// Starts watching `node` (a hold just taken, or held when revocation was enabled) for
    /// requests, until the node goes or the session ends. The watch runs on the executor; the
    /// callbacks run on a thread of their own.
    /// At a shared path (the simple lock's, used by successive holders) the node is this hold's
    /// only while its czxid is the hold's token.
    pub(crate) fn watch(self: &Arc<Self>, hold: &Hold) {
        let (zk, node, rev) = (hold.session.zk.clone(), hold.node.clone(), Arc::clone(self));
        let (token, shared) = (hold.token, hold.witness.is_some());
        hold.session.spawn(async move {
            loop {
                match zk.get_and_watch_data(&node).await {
                    Ok((data, stat, watcher)) => {
                        if shared && stat.czxid != token {
                            return; // another holder's node at a shared path
                        }
                        if crate::node::is_revoke_request(&data) {
                            rev.requested(&node, token);
                        }
                        let event = watcher.changed().await;
                        if event.event_type != zk::EventType::NodeDataChanged {
                            // Deleted (released), or the session ended.
                            return;
                        }
                    }
                    Err(e) if crate::session::is_retriable(&e) => {
                        async_io::Timer::after(Duration::from_millis(200)).await;
                    }
                    Err(_) => return,
                }
            }
        });
    }

    fn requested(&self, node: &str, token: i64) {
        let callbacks = {
            let mut st = self.state.lock();
            st.requested = Some((node.to_string(), token));
            self.cv.notify_all();
            st.callbacks.clone()
        };
        log::info!("revocation of {node} requested");
        let calls: Vec<Box<dyn FnOnce() + Send>> = callbacks
            .into_iter()
            .map(|f| Box::new(move || f()) as Box<dyn FnOnce() + Send>)
            .collect();
        crate::session::run_detached("revoke", calls);
    }

    /// Wakes waiters (a hold ended).
    pub(crate) fn notify(&self) {
        let _st = self.state.lock();
        self.cv.notify_all();
    }

    /// Waits until a request is seen for the hold `current()` names (node, token), or it names
    /// none (the hold ended), or `deadline`: `Some(true)` requested, `Some(false)` not held,
    /// `None` timed out.
    pub(crate) fn wait(
        &self,
        current: impl Fn() -> Option<(String, i64)>,
        deadline: Option<Instant>,
    ) -> Option<bool> {
        let mut st = self.state.lock();
        loop {
            let Some(hold) = current() else {
                return Some(false);
            };
            if st.requested.as_ref() == Some(&hold) {
                return Some(true);
            }
            match deadline {
                Some(d) => {
                    if self.cv.wait_until(&mut st, d).timed_out() {
                        return None;
                    }
                }
                None => self.cv.wait(&mut st),
            }
        }
    }
}
