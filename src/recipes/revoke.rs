//! Revocation as Curator has it: cooperative. Someone asks a holder to let go by writing
//! `__REVOKE__` into the holder's lock node (Curator's `Revoker.attemptRevoke`); a holder that
//! made its lock revocable watches its own node's data and is told (a callback on a thread of
//! its own, or a wait that returns). Nothing forces a holder: one that never made its lock
//! revocable, or that ignores the request, keeps its hold.
//!
//! A holder that made its lock revocable also marks its node's data (`node::REVOCABLE_MARK`,
//! written before the acquire returns), so that whoever asks can tell it will hear; the request
//! overwrites the mark.

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

/// Writes the revocable mark into `node`, whose data was `data` at `version`: refused if the
/// node changed since (a request came: it is read again), or if the hold's witness is gone.
async fn mark(
    zk: &zk::Client,
    node: &str,
    witness: Option<&str>,
    data: &[u8],
    version: i32,
) -> Result<(), zk::Error> {
    let marked = crate::node::with_revocable_mark(data);
    let mut multi = zk.new_multi_writer();
    if let Some(w) = witness {
        multi.add_check_version(w, -1)?;
    }
    multi.add_set_data(node, &marked, Some(version))?;
    multi.commit().await.map(|_| ()).map_err(zk::Error::from)
}

/// Marks the hold's node revocable (unless a request is already there), waiting at most one
/// request's bound; on failure the watch marks it later.
fn mark_now(hold: &Hold) {
    let s = &hold.session;
    let d = crate::deadline::Deadline::At(s.cap(crate::deadline::Deadline::Forever));
    for _ in 0..3 {
        let (data, stat) = match s.retry(d, || s.zk.get_data(&hold.node)) {
            Ok(read) => read,
            Err(e) => {
                log::debug!("marking {} revocable: {e}", hold.node);
                return;
            }
        };
        let marked = crate::node::revocable_parts(&data).1;
        if marked
            || crate::node::is_revoke_request(&data)
            || (hold.witness.is_some() && stat.czxid != hold.token)
        {
            return;
        }
        let write = mark(
            &s.zk,
            &hold.node,
            hold.witness.as_deref(),
            &data,
            stat.version,
        );
        match s.call(write, d) {
            Ok(()) => return,
            // Changed meanwhile (a request?): read it again.
            Err(zk::Error::BadVersion) => continue,
            Err(e) => {
                log::debug!("marking {} revocable: {e}", hold.node);
                return;
            }
        }
    }
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
    /// The node is marked revocable first, waited for (at most one request's bound): a holder
    /// whose acquire returned says it listens.
    pub(crate) fn watch(self: &Arc<Self>, hold: &Hold) {
        mark_now(hold);
        let (zk, node, rev) = (hold.session.zk.clone(), hold.node.clone(), Arc::clone(self));
        let (token, witness) = (hold.token, hold.witness.clone());
        hold.session.spawn(async move {
            loop {
                match zk.get_and_watch_data(&node).await {
                    Ok((data, stat, watcher)) => {
                        if witness.is_some() && stat.czxid != token {
                            return; // another holder's node at a shared path
                        }
                        if crate::node::is_revoke_request(&data) {
                            rev.requested(&node, token);
                        } else if !crate::node::revocable_parts(&data).1 {
                            // Not marked yet (the first try failed): mark it; the write ends
                            // this watch, and the loop reads the node again.
                            let _ = mark(&zk, &node, witness.as_deref(), &data, stat.version).await;
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
