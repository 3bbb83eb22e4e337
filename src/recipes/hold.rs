//! The hold model (`docs/hold-model.md`), decided once for every recipe: a hold is a node one
//! of the participant's own attempts made, with its fencing token, believed while its session's
//! lease runs ([`HoldState`]); and every node that stops being wanted goes away through one
//! path, [`Hold::release`] / [`remove_node`]. Who holds is the `participants` module's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::session::{is_retriable, LeaseUse, SendTime, Session, SessionState, Via};

/// What a participant may believe about its hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldState {
    /// Held, and the session is provably alive: the server cannot have freed it.
    Held,
    /// Held when last in touch with the server; cut off now, the session may or may not survive:
    /// stop acting until it is `Held` again.
    Uncertain,
    /// It was held, but its session ended: another process may hold it now.
    Lost,
    /// Not held.
    NotHeld,
}

/// A node this participant holds a lock with: made by one of its own attempts, never adopted
/// because of its session. (Public in name only: what a recipe's sealed attempt returns.)
#[derive(Clone)]
pub struct Hold {
    pub(crate) session: Arc<Session>,
    pub(crate) node: String,
    pub(crate) token: i64,
    /// Where the node's path is shared by every holder in turn (the simple lock): the hold's
    /// witness, a node unique to the hold made with it in one `multi`; every delete checks it
    /// in the same `multi` (`node::witness_path`).
    pub(crate) witness: Option<String>,
    /// When it was acquired (for the log line of its release, and the hold-time statistics).
    pub(crate) acquired: Instant,
    /// Alive while any copy of this hold exists: lock-lost callbacks of released holds lapse.
    alive: Arc<()>,
    /// The hold's need of its session's lease: renewed while some hold of the session exists.
    _lease: Arc<LeaseUse>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("node", &self.node)
            .field("token", &self.token)
            .finish()
    }
}

impl Hold {
    pub(crate) fn new(session: Arc<Session>, node: String, token: i64) -> Hold {
        Hold {
            _lease: Arc::new(session.lease_use()),
            session,
            node,
            token,
            witness: None,
            acquired: Instant::now(),
            alive: Arc::new(()),
        }
    }

    /// A hold on a node whose path every holder uses in turn (the simple lock's node at the
    /// lock path itself), made in one `multi` with `witness`, a node unique to this hold.
    pub(crate) fn witnessed(
        session: Arc<Session>,
        node: String,
        token: i64,
        witness: String,
    ) -> Hold {
        Hold {
            witness: Some(witness),
            ..Hold::new(session, node, token)
        }
    }

    /// What a delete of the node must prove, when the server applies it, to take only this
    /// hold's node.
    fn owner(&self) -> Owned {
        match &self.witness {
            Some(w) => Owned::Witness(w.clone()),
            None => Owned::ByName,
        }
    }

    /// Held while the session's lease runs (connected or not; not while a reconnect's answer
    /// is awaited: a failover the session survives makes a hold Uncertain for that round trip,
    /// never Lost), Uncertain once it ran out, Lost when the session ended.
    pub(crate) fn state(&self) -> HoldState {
        if self.session.forked().is_some() {
            // A forked child holds nothing: the hold is its parent's.
            return HoldState::NotHeld;
        }
        match self.session.state() {
            SessionState::Expired | SessionState::Closed => HoldState::Lost,
            _ if self.session.lease_live() => HoldState::Held,
            _ => HoldState::Uncertain,
        }
    }

    /// The one release path: deletes the node, retrying on connection loss for up to one
    /// session timeout; past that the delete goes on in the background (until the node is gone
    /// or the session ends) and the hold is forgotten all the same.
    ///
    /// `Err(LockLost)` when the session ended first or someone else had deleted the node;
    /// `Err(ConnectionLoss)` when the delete was handed to the background.
    pub(crate) fn release(self) -> Result<()> {
        self.release_by(None)
    }

    /// [`Hold::release`], waited for until `bound` at most (a try-once attempt's pinned
    /// instant): past it the delete goes on in the background.
    pub(crate) fn release_by(self, bound: Option<Instant>) -> Result<()> {
        let r = remove_node_from(&self.session, &self.node, true, self.owner(), bound);
        self.log_release(&r);
        r
    }

    /// [`Hold::release`] that nobody waits for: the delete is sent now (so it is applied before
    /// any later request of the session), and its reply is taken on the executor; a lost one is
    /// deleted again there, as [`background_delete`] does, until gone or the session ends. For
    /// a hold whose end matters to others only: the semaphore's guarding mutex, once the lease
    /// it guarded is counted.
    pub(crate) fn release_unwaited(self) {
        // A node named by its attempt (the guarding mutex's): its delete needs no witness.
        debug_assert!(
            self.witness.is_none(),
            "an unwaited release of a witnessed hold"
        );
        let sent = self.session.zk.delete(&self.node, None);
        let session = self.session.clone();
        session.clone().spawn(async move {
            match session.answered_within(sent).await {
                Ok(()) => self.log_release(&Ok(())),
                Err(e) if is_retriable(&e) && !session.state().is_terminal() => {
                    delete_until_gone(&session, &self.node, &Owned::ByName).await
                }
                // Gone: the session ended, or someone removed it.
                Err(e) => log::debug!("releasing {}: {e}", self.node),
            }
        });
    }

    fn log_release(&self, r: &Result<()>) {
        match r {
            Ok(()) => log::debug!(
                "released {} after holding it {:?}",
                self.node,
                self.acquired.elapsed()
            ),
            // The caller is told (`LockLost`): a warning too would say it twice.
            Err(Error::LockLost) => log::debug!("releasing {}: the hold was lost", self.node),
            Err(e) => log::warn!("releasing {}: {e}", self.node),
        }
    }

    /// Blocks until the hold is no longer believed (its lease ran out, or its session ended)
    /// or `timeout`; true if so.
    pub(crate) fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.session
            .wait_not_held(timeout.and_then(|t| Instant::now().checked_add(t)))
    }

    /// Calls `f` once, on its own thread, when this hold stops being believed (its lease runs
    /// out or its session ends; at once if that has happened). Nothing is kept once the hold is released.
    pub(crate) fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        self.session.on_end(&self.alive, f);
    }
}

/// Removes `node` (one of ours): now, retrying for up to one session timeout, else in the
/// background. Used by release and by every failed, timed-out or cancelled attempt.
/// `held`: whether the node was a hold (then a node already gone means someone else removed it:
/// `LockLost`).
/// `bound`: waited for until then at most (a try-once attempt's pinned instant: it returns by
/// then, and past it the delete goes on in the background).
pub(crate) fn remove_node(
    session: &Arc<Session>,
    node: &str,
    held: bool,
    bound: Option<Instant>,
) -> Result<()> {
    remove_node_from(session, node, held, Owned::ByName, bound)
}

/// What a delete carries to take only the node it means, whenever the server applies it (a
/// request whose reply was lost may be applied seconds later, after later requests of the same
/// session sent through another server: hold-model.md, "One release path").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owned {
    /// The node's name holds the attempt's unique id: no other attempt can have made it.
    ByName,
    /// The path is shared by successive holders: the node is deleted in one `multi` with this
    /// witness (unique to the hold, made with the node in one `multi`), which the `multi`
    /// checks first. A client's read is no such proof: the server applies the delete later.
    Witness(String),
}

/// One delete of `node`: by name, or (at a shared path) with its witness in one `multi` (the
/// witness's delete first) that fails whole, deleting nothing, unless the witness exists when
/// the server applies it.
/// `NoNode` when the node (or its witness) is gone.
async fn delete_once(
    session: &Session,
    node: &str,
    owner: &Owned,
) -> std::result::Result<(), zk::Error> {
    let witness = match owner {
        Owned::ByName => return session.zk.delete(node, None).await,
        Owned::Witness(w) => w,
    };
    // The witness's delete is the check: it fails, and the multi with it, once the witness is
    // gone.
    let mut multi = session.zk.new_multi_writer();
    multi.add_delete(witness, None)?;
    multi.add_delete(node, None)?;
    match multi.commit().await {
        Ok(_) => Ok(()),
        // The lock node went without its witness (deleted by hand): the witness goes alone.
        Err(zk::MultiWriteError::OperationFailed {
            index: 1,
            source: zk::Error::NoNode,
        }) => match session.zk.delete(witness, None).await {
            Ok(()) | Err(zk::Error::NoNode) => Err(zk::Error::NoNode),
            Err(e) => Err(e),
        },
        Err(e) => Err(e.into()),
    }
}

/// [`remove_node`] of a node whose deletes must prove `owner`. `bound`: waited for until then at
/// most, else for one session timeout.
fn remove_node_from(
    session: &Arc<Session>,
    node: &str,
    held: bool,
    owner: Owned,
    bound: Option<Instant>,
) -> Result<()> {
    // This thread waits for every request it sends here (`session::waiting_caller`).
    let _caller = crate::session::waiting_caller();
    match session.state() {
        SessionState::Expired => return Err(Error::LockLost),
        SessionState::Closed => {
            // Closing the client gave the lock up; still take the node away now rather than
            // when the last handle lets go of the session.
            let _ = session.call(delete_once(session, node, &owner), Deadline::TryOnce);
            return if held { Err(Error::LockLost) } else { Ok(()) };
        }
        _ => {}
    }
    let t = session.granted();
    let budget = bound.map_or(Instant::now() + t, |b| b.min(Instant::now() + t));
    // One try waits a quarter of the session timeout for its reply at most: a reply lost while
    // the connection lives (the crate has no per-request timeout) is then asked again.
    let per_try = (t / 4).max(Duration::from_millis(200));
    let mut retried = false;
    loop {
        let until = Deadline::At((Instant::now() + per_try).min(budget));
        // Every try carries its own proof (a lost try may still be applied, later).
        let reply = session.call_sent(
            SendTime::now(),
            Via::Leader,
            delete_once(session, node, &owner),
            until,
        );
        match reply {
            Ok(()) => return Ok(()),
            // Gone before our first delete: someone else removed it (or the server did). After
            // a lost reply, our own earlier delete may have done it.
            Err(zk::Error::NoNode) if held && !retried => {
                log::warn!("{node} was deleted by someone else while held");
                return Err(Error::LockLost);
            }
            Err(zk::Error::NoNode) => return Ok(()),
            Err(e) if is_retriable(&e) => {
                if let Some(e) = session.ended_error() {
                    return Err(if held && e == Error::SessionExpired {
                        Error::LockLost
                    } else {
                        e
                    });
                }
                if Instant::now() >= budget {
                    background_delete(session.clone(), node.to_string(), owner);
                    return Err(Error::ConnectionLoss(
                        format!(
                            "could not delete {node} within the session timeout; \
                         it is deleted in the background"
                        )
                        .into(),
                    ));
                }
                retried = true;
                session.pause(Duration::from_millis(20));
            }
            Err(e) => {
                let e = session.record_end_and_map(e);
                return Err(if held && e.is_session_end() {
                    Error::LockLost
                } else {
                    e
                });
            }
        }
    }
}

/// Deletes `node` in the background, until it is gone (or, at a shared path, no longer ours)
/// or the session ends.
pub(crate) fn background_delete(session: Arc<Session>, node: String, owner: Owned) {
    log::warn!("deleting {node} in the background");
    session
        .clone()
        .spawn(async move { delete_until_gone(&session, &node, &owner).await });
}

async fn pause() {
    async_io::Timer::after(Duration::from_millis(100)).await;
}

/// A create whose outcome could not be learned in time: in the background, until done or the
/// session ends, find the node it may have made and delete it. `needle` is the attempt's unique
/// id, in the name of a child of `dir`. A create whose reply was lost is not dead (sent through
/// a follower cut off from its leader, it may be applied after the heal, after a first look
/// found nothing), so the directory's children stay watched until the node is found and gone,
/// or the session ends.
pub(crate) fn background_forget(session: &Arc<Session>, dir: String, needle: String) {
    log::warn!("removing the node of an attempt at {dir} in the background");
    let session = session.clone();
    session.clone().spawn(async move {
        loop {
            // Read what the leader has confirmed: a follower behind it may not show the node
            // yet.
            let looked = match session.answered_within(sync(&session, &dir)).await {
                Err(e) => Err(e),
                Ok(()) => {
                    session
                        .answered_within(session.zk.list_and_watch_children(&dir))
                        .await
                }
            };
            match looked {
                Ok((children, watcher)) => {
                    let orphans = children.iter().filter(|c| c.contains(&needle));
                    for n in orphans {
                        delete_until_gone(&session, &format!("{dir}/{n}"), &Owned::ByName).await;
                    }
                    // Several creates of the attempt may have lost their reply: watch on.
                    if !wait_for_change(&session, watcher).await {
                        return;
                    }
                }
                // No directory: the create cannot have been applied (nor be, unless the
                // directory is made again, which a waiting create of ours does not do).
                Err(zk::Error::NoNode) => return,
                Err(e) if is_retriable(&e) && !session.state().is_terminal() => pause().await,
                Err(_) => return,
            }
        }
    });
}

/// Waits for a watch to fire; false if the session ended meanwhile.
async fn wait_for_change(session: &Session, watcher: zk::OneshotWatcher) -> bool {
    let event = watcher.changed().await;
    !(session.state().is_terminal()
        || event.event_type == zk::EventType::Session
            && matches!(
                event.session_state,
                zk::SessionState::Expired | zk::SessionState::Closed
            ))
}

/// A simple-lock create (a `multi` of the lock node `node` and its `witness`) whose outcome
/// could not be learned in time: in the background, delete both if they appear, for as long as
/// the session lives. A create whose reply was lost is not dead: sent through a follower cut off
/// from its leader, it may be applied after the heal, long after a first look found nothing.
///
/// One task and one watch per lock path and session, however many such creates there are: the
/// lock node's own (every create of the lock makes it, ours included), set before each look at
/// the witnesses still unsettled, each a name in the session's `forgets` until it is found and
/// deleted, or the session ends.
pub(crate) fn background_forget_witnessed(session: &Arc<Session>, node: String, witness: String) {
    log::warn!("removing the node of an attempt at {node} in the background");
    let Some(unsettled) = session.unsettled(&node, witness) else {
        // The task that looks at this path was told.
        return;
    };
    let session = session.clone();
    session.clone().spawn(async move {
        use futures::future::{select, Either};
        loop {
            // The watch first: a create applied after it fires it, one applied before it is
            // found by the look below.
            let watched = match session
                .answered_within(session.zk.check_and_watch_stat(&node))
                .await
            {
                Ok((_, watcher)) => watcher,
                Err(e) if is_retriable(&e) && !session.state().is_terminal() => {
                    pause().await;
                    continue;
                }
                Err(_) => return,
            };
            // What the leader has confirmed (a follower behind it may not show a witness yet),
            // then every witness at once: one round trip, however many.
            let pending: Vec<String> = unsettled.witnesses.lock().clone();
            let looked = match session.answered_within(sync(&session, &node)).await {
                Err(e) => Err(e),
                Ok(()) => {
                    let looks = pending.iter().map(|w| session.zk.check_stat(w));
                    let all = futures::future::join_all(looks);
                    match session.answered_within(async { Ok(all.await) }).await {
                        Ok(answers) => answers
                            .into_iter()
                            .collect::<std::result::Result<Vec<_>, _>>(),
                        Err(e) => Err(e),
                    }
                }
            };
            let mut failed = false;
            match looked {
                Ok(stats) => {
                    for (w, stat) in pending.into_iter().zip(stats) {
                        if stat.is_some() {
                            delete_until_gone(&session, &node, &Owned::Witness(w.clone())).await;
                            unsettled.witnesses.lock().retain(|x| *x != w);
                        }
                    }
                }
                Err(e) if is_retriable(&e) && !session.state().is_terminal() => failed = true,
                Err(_) => return,
            }
            if session.settled(&node, &unsettled) {
                return;
            }
            if failed {
                pause().await;
                continue;
            }
            // Fires when the lock node is made (or goes) and when the session ends; or another
            // lost create at this path is added.
            let changed = std::pin::pin!(wait_for_change(&session, watched));
            if let Either::Left((false, _)) = select(changed, unsettled.added()).await {
                return;
            }
        }
    });
}

/// A `sync` of `path` (a missing node is no failure).
async fn sync(session: &Session, path: &str) -> std::result::Result<(), zk::Error> {
    match session.zk.sync(path).await {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes `node` (as `owner` proves it ours) until it is gone or the session ends.
async fn delete_until_gone(session: &Session, node: &str, owner: &Owned) {
    loop {
        match session
            .answered_within(delete_once(session, node, owner))
            .await
        {
            Err(e) if is_retriable(&e) && !session.state().is_terminal() => pause().await,
            _ => return,
        }
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::recipes::{Lockable, SimpleLock};
    use crate::session::{Client, Options};
    use crate::testing::{eventually, Admin, TestingServer};

    /// The background delete of a simple-lock hold (handed over when a release could not finish
    /// in time) runs after the node may have changed hands: it must delete only the node of the
    /// hold whose witness it carries, never the next holder's node at the same path.
    #[test]
    fn a_background_delete_at_a_shared_path_never_deletes_the_next_holders_node() {
        let _serial = crate::runtime::tests::SERIAL.lock();
        let server = TestingServer::shared();
        let hosts = server.connect_string();
        let opts = || Options::default().session_timeout(Duration::from_secs(4));
        let (a, b) = (
            Client::connect(&hosts, opts()).unwrap(),
            Client::connect(&hosts, opts()).unwrap(),
        );
        let (dir, path) = ("/hold-tests", "/hold-tests/background-delete");
        let admin = Admin::connect(&hosts).unwrap();
        let witness_of = |token: i64| {
            admin
                .children(dir)
                .unwrap()
                .into_iter()
                .map(|c| format!("{dir}/{c}"))
                .find(|c| {
                    c.starts_with(&format!("{path}.witness-"))
                        && admin.node(c).unwrap().map(|n| n.czxid) == Some(token)
                })
                .expect("the hold's witness, made with its node")
        };
        let la = SimpleLock::new(&a, path).unwrap();
        let token_a = la.acquire(Deadline::Forever).unwrap().unwrap();
        let witness_a = witness_of(token_a);
        // A's node goes with its witness (as after A's own delete whose reply was lost), B
        // takes the lock.
        admin.delete(path).unwrap();
        admin.delete(&witness_a).unwrap();
        let lb = SimpleLock::new(&b, path).unwrap();
        let token_b = lb.acquire(Deadline::TryOnce).unwrap().expect("free");
        assert!(token_b > token_a);
        let session = a.session().unwrap();
        background_delete(session, path.to_string(), Owned::Witness(witness_a));
        // The background delete of A's node ran and left B's.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(admin.node(path).unwrap().map(|n| n.czxid), Some(token_b));
        assert!(lb.is_held());
        // And it does delete A's own node when it is still there.
        lb.release().unwrap();
        let lc = SimpleLock::new(&a, path).unwrap();
        let token_c = lc.acquire(Deadline::TryOnce).unwrap().expect("free");
        let witness_c = witness_of(token_c);
        background_delete(
            a.session().unwrap(),
            path.to_string(),
            Owned::Witness(witness_c.clone()),
        );
        assert!(eventually(Duration::from_secs(5), || admin
            .node(path)
            .unwrap()
            .is_none()
            && admin.node(&witness_c).unwrap().is_none()));
    }
}
