//! The hold model (`docs/hold-model.md`), decided once for every recipe: a hold is a
//! participant's node with its count and fencing token; [`Holds`] keeps a participant's holds
//! (per handle, or per thread for the Rust `Mutex` and read-write halves); and every node that
//! stops being wanted goes away through one path, [`Hold::release`] / [`remove_node`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::client::{is_retriable, Session, SessionState};
use crate::error::{Error, Result};

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
/// because of its session.
#[derive(Clone)]
pub(crate) struct Hold {
    pub(crate) session: Arc<Session>,
    pub(crate) node: String,
    pub(crate) token: i64,
    /// The node's path is shared by every holder in turn (the simple lock): it is ours only
    /// while its czxid is `token`, so a retried delete checks that first.
    shared_path: bool,
    /// When it was acquired (for the log line of its release, and the hold-time statistics).
    pub(crate) acquired: Instant,
    /// Alive while any copy of this hold exists: lock-lost callbacks of released holds lapse.
    alive: Arc<()>,
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
            session,
            node,
            token,
            shared_path: false,
            acquired: Instant::now(),
            alive: Arc::new(()),
        }
    }

    /// A hold on a node whose path every holder uses in turn (the simple lock's node at the
    /// lock path itself): only its czxid (`token`) tells it from the next holder's.
    pub(crate) fn at_shared_path(session: Arc<Session>, node: String, token: i64) -> Hold {
        Hold {
            shared_path: true,
            ..Hold::new(session, node, token)
        }
    }

    /// What proves the node is still this hold's when a delete must be retried.
    fn owner(&self) -> Owned {
        if self.shared_path {
            Owned::IfCzxid(self.token)
        } else {
            Owned::ByName
        }
    }

    /// Held while the session's lease runs (connected or not: a failover the session survives
    /// never makes a hold look lost), Uncertain once it ran out, Lost when the session ended.
    pub(crate) fn state(&self) -> HoldState {
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
        let r = remove_node_from(&self.session, &self.node, true, None, self.owner());
        self.log_release(&r);
        r
    }

    /// [`Hold::release`] in two steps, so that the delete can go out in one round trip with
    /// other requests: the delete is sent now (a session's requests are applied in the order
    /// they are sent), and [`SentRelease::finish`] takes its reply, retrying as `release` does.
    pub(crate) fn release_sent(self) -> SentRelease {
        let first: SentDelete = Box::pin(self.session.zk.delete(&self.node, None));
        SentRelease(Some((self, first)))
    }

    fn log_release(&self, r: &Result<()>) {
        match r {
            Ok(()) => log::debug!(
                "released {} after holding it {:?}",
                self.node,
                self.acquired.elapsed()
            ),
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
pub(crate) fn remove_node(session: &Arc<Session>, node: &str, held: bool) -> Result<()> {
    remove_node_from(session, node, held, None, Owned::ByName)
}

/// How a retried delete proves that the node is still the one it means to delete
/// (hold-model.md, "One release path").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owned {
    /// The node's name holds the attempt's unique id: no other attempt can have made it.
    ByName,
    /// The path is shared by successive holders: the node is ours only while its czxid is this.
    IfCzxid(i64),
}

/// For a node at a shared path: the version to delete it at if it is still the node created at
/// `czxid`, read after a `sync` (so the answer is the leader's, not a lagging follower's);
/// `None` if it is gone or someone else's.
async fn owned_version(
    session: &Session,
    node: &str,
    czxid: i64,
) -> std::result::Result<Option<i32>, zk::Error> {
    match session.zk.sync(node).await {
        Ok(()) | Err(zk::Error::NoNode) => {}
        Err(e) => return Err(e),
    }
    Ok(match session.zk.check_stat(node).await? {
        Some(stat) if stat.czxid == czxid => Some(stat.version),
        _ => None,
    })
}

/// One delete of `node` after an earlier try's reply was lost: by name, or (at a shared path)
/// only if it is still ours, at the version read.
async fn delete_again(
    session: &Session,
    node: &str,
    owner: Owned,
) -> std::result::Result<(), zk::Error> {
    match owner {
        Owned::ByName => session.zk.delete(node, None).await,
        Owned::IfCzxid(czxid) => loop {
            match owned_version(session, node, czxid).await? {
                None => return Err(zk::Error::NoNode),
                Some(version) => match session.zk.delete(node, Some(version)).await {
                    // Changed between the read and the delete: read again.
                    Err(zk::Error::BadVersion) => continue,
                    r => return r,
                },
            }
        },
    }
}

/// A delete already sent: its reply is awaited by [`SentRelease::finish`].
type SentDelete = Pin<Box<dyn Future<Output = std::result::Result<(), zk::Error>> + Send>>;

/// [`remove_node`], whose first delete may have been sent already (`first`): its reply is taken
/// as the first try's.
fn remove_node_from(
    session: &Arc<Session>,
    node: &str,
    held: bool,
    mut first: Option<SentDelete>,
    owner: Owned,
) -> Result<()> {
    // This thread waits for every request it sends here (see `runtime::Caller`).
    let _caller = crate::runtime::Caller::enter();
    match session.state() {
        SessionState::Expired => return Err(Error::LockLost),
        SessionState::Closed => {
            // Closing the client gave the lock up; still take the node away now rather than
            // when the last handle lets go of the session.
            let _ = session.call(session.zk.delete(node, None), crate::Deadline::TryOnce);
            return if held { Err(Error::LockLost) } else { Ok(()) };
        }
        _ => {}
    }
    let t = session.zk.session_timeout();
    let budget = Instant::now() + t;
    // One try waits a quarter of the session timeout for its reply at most: a reply lost while
    // the connection lives (the crate has no per-request timeout) is then asked again.
    let per_try = (t / 4).max(Duration::from_millis(200));
    let mut retried = false;
    loop {
        let until = (Instant::now() + per_try).min(budget);
        let reply = match first.take() {
            Some(sent) => session.wait_raw(sent, until),
            // The first try deletes by path: while the hold is ours, so is the node (a
            // session's requests fail once it ended). A retry proves ownership first.
            None if !retried => session.wait_raw(session.zk.delete(node, None), until),
            None => session.wait_raw(delete_again(session, node, owner), until),
        };
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
                    return Err(Error::ConnectionLoss(format!(
                        "could not delete {node} within the session timeout; \
                         it is deleted in the background"
                    )));
                }
                retried = true;
                crate::runtime::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                let e = session.map_err(e);
                return Err(if held && e.is_session_end() {
                    Error::LockLost
                } else {
                    e
                });
            }
        }
    }
}

/// A release whose delete was sent ([`Hold::release_sent`]); [`SentRelease::finish`] (or drop)
/// completes it through the one release path.
#[must_use = "finish() takes the delete's reply (dropping does it too)"]
pub(crate) struct SentRelease(Option<(Hold, SentDelete)>);

impl SentRelease {
    /// Takes the sent delete's reply; on connection loss deletes again as [`Hold::release`] does.
    pub(crate) fn finish(mut self) -> Result<()> {
        self.complete()
    }

    fn complete(&mut self) -> Result<()> {
        let Some((hold, first)) = self.0.take() else {
            return Ok(());
        };
        let owner = hold.owner();
        let r = remove_node_from(&hold.session, &hold.node, true, Some(first), owner);
        hold.log_release(&r);
        r
    }
}

impl Drop for SentRelease {
    fn drop(&mut self) {
        let _ = self.complete();
    }
}

/// Deletes `node` in the background, until it is gone (or, at a shared path, no longer ours)
/// or the session ends.
pub(crate) fn background_delete(session: Arc<Session>, node: String, owner: Owned) {
    log::warn!("deleting {node} in the background");
    crate::runtime::spawn(async move {
        loop {
            match delete_again(&session, &node, owner).await {
                Err(e) if is_retriable(&e) && !session.state().is_terminal() => pause().await,
                _ => return,
            }
        }
    });
}

async fn pause() {
    async_io::Timer::after(Duration::from_millis(100)).await;
}

/// A create whose outcome could not be learned in time: in the background, until done or the
/// session ends, find the node it may have made and delete it. `needle` is the attempt's unique
/// id; `in_data`: the id is in the node's data (the non-sequential node `path`), not in the
/// name of a child of `path`. Requests of a session are applied in order, so a look made after
/// the create sees its node if the create was applied.
pub(crate) fn background_forget(
    session: &Arc<Session>,
    path: String,
    needle: String,
    in_data: bool,
) {
    log::warn!("removing the node of an attempt at {path} in the background");
    let session = session.clone();
    crate::runtime::spawn(async move {
        loop {
            // Read what the leader has confirmed: a follower behind it may not show the node
            // yet (or still show an earlier one).
            let synced = match session.zk.sync(&path).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(e) => Err(e),
            };
            let found = match synced {
                Err(e) => Err(e),
                Ok(()) if in_data => match session.zk.get_data(&path).await {
                    Ok((data, stat)) if data.ends_with(needle.as_bytes()) => {
                        Ok(Some((path.clone(), Owned::IfCzxid(stat.czxid))))
                    }
                    Ok(_) | Err(zk::Error::NoNode) => Ok(None),
                    Err(e) => Err(e),
                },
                Ok(()) => match session.zk.list_children(&path).await {
                    Ok(children) => Ok(children
                        .iter()
                        .find(|c| c.contains(&needle))
                        .map(|n| (format!("{path}/{n}"), Owned::ByName))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(e) => Err(e),
                },
            };
            match found {
                Ok(None) => return,
                Ok(Some((node, owner))) => loop {
                    match delete_again(&session, &node, owner).await {
                        Err(e) if is_retriable(&e) && !session.state().is_terminal() => {
                            pause().await
                        }
                        _ => return,
                    }
                },
                Err(e) if is_retriable(&e) && !session.state().is_terminal() => pause().await,
                Err(_) => return,
            }
        }
    });
}

/// Whose holds a table keeps apart: one participant per handle (C handles, the semaphore mutex,
/// the simple lock) or one per thread (the Rust `Mutex` and read-write halves, as Curator's
/// `InterProcessMutex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Handle,
    Thread,
}

enum Slot {
    /// An attempt of this participant is under way.
    Acquiring,
    Held {
        hold: Hold,
        count: usize,
    },
}

/// The holds of one lock handle's participants, and the rules every recipe shares: a second
/// acquire while an attempt is under way is refused (never two nodes for one participant),
/// a reentrant acquire counts, a release removes only the hold it released.
pub(crate) struct Holds {
    owner: Owner,
    reentrant: bool,
    /// The lock, in words, for errors ("the mutex at /locks/a").
    what: String,
    slots: parking_lot::Mutex<HashMap<Option<ThreadId>, Slot>>,
    /// The handle's statistics (its acquires are counted by the recipe's `acquire`).
    pub(crate) stats: crate::stats::Stats,
    /// Whether its holds are revocable, and the requests seen.
    revocation: Arc<super::revoke::Revocation>,
}

/// How an acquire starts.
pub(crate) enum Begin<'a> {
    /// The participant already held it (reentrant): the count went up; this is the token.
    Reentered(i64),
    /// A fresh attempt: complete it with the hold it makes, or drop it.
    Fresh(Ticket<'a>),
}

/// A participant's attempt under way. Dropped without a hold, it lets the next attempt start.
pub(crate) struct Ticket<'a> {
    holds: &'a Holds,
    key: Option<ThreadId>,
    started: Instant,
    done: bool,
}

impl Ticket<'_> {
    /// Records the attempt's hold; returns its fencing token.
    pub(crate) fn complete(mut self, hold: Hold) -> i64 {
        let token = hold.token;
        log::debug!(
            "acquired {} after waiting {:?} (fencing token {token})",
            hold.node,
            self.started.elapsed()
        );
        let watch = self.holds.revocation.enabled().then(|| {
            (
                hold.session.clone(),
                hold.node.clone(),
                hold.token,
                hold.shared_path,
            )
        });
        self.holds
            .slots
            .lock()
            .insert(self.key, Slot::Held { hold, count: 1 });
        self.done = true;
        if let Some((session, node, token, shared)) = watch {
            self.holds.revocation.watch(&session, &node, token, shared);
        }
        token
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut slots = self.holds.slots.lock();
            if matches!(slots.get(&self.key), Some(Slot::Acquiring)) {
                slots.remove(&self.key);
            }
        }
    }
}

impl Holds {
    pub(crate) fn new(owner: Owner, reentrant: bool, what: String) -> Holds {
        Holds {
            owner,
            reentrant,
            what,
            slots: parking_lot::Mutex::new(HashMap::new()),
            stats: Default::default(),
            revocation: Default::default(),
        }
    }

    fn key(&self) -> Option<ThreadId> {
        match self.owner {
            Owner::Handle => None,
            Owner::Thread => Some(std::thread::current().id()),
        }
    }

    /// Starts an acquire of the calling participant.
    pub(crate) fn begin(&self) -> Result<Begin<'_>> {
        let what = &self.what;
        let key = self.key();
        let mut slots = self.slots.lock();
        match slots.get_mut(&key) {
            None => {
                slots.insert(key, Slot::Acquiring);
                Ok(Begin::Fresh(Ticket {
                    holds: self,
                    key,
                    started: Instant::now(),
                    done: false,
                }))
            }
            Some(Slot::Acquiring) => Err(Error::WouldDeadlock(format!(
                "an acquire of {what} is already under way for this participant"
            ))),
            Some(Slot::Held { hold, count }) => {
                if !self.reentrant {
                    return Err(Error::WouldDeadlock(format!(
                        "{what} is already held by this handle and is not reentrant"
                    )));
                }
                if hold.state() == HoldState::Lost {
                    return Err(Error::LockLost);
                }
                *count += 1;
                Ok(Begin::Reentered(hold.token))
            }
        }
    }

    /// Releases one hold of the calling participant (the last of a reentrant count deletes the
    /// node through the one release path). `NotHeld` if it holds nothing.
    pub(crate) fn release(&self) -> Result<()> {
        let hold = {
            let key = self.key();
            let mut slots = self.slots.lock();
            match slots.get_mut(&key) {
                Some(Slot::Held { count, .. }) if *count > 1 => {
                    *count -= 1;
                    return Ok(());
                }
                Some(Slot::Held { .. }) => match slots.remove(&key) {
                    Some(Slot::Held { hold, .. }) => hold,
                    _ => unreachable!("checked above"),
                },
                _ => return Err(Error::NotHeld),
            }
        };
        let acquired = hold.acquired;
        let r = hold.release();
        self.stats.hold_ended(acquired.elapsed(), &r);
        self.revocation.notify();
        r
    }

    /// Makes the participants' holds revocable from now on (the current hold too); `f` is called
    /// on each request, on a thread of its own.
    pub(crate) fn make_revocable(&self, f: Box<dyn Fn() + Send + Sync>) -> Result<()> {
        let first = !self.revocation.enabled();
        self.revocation.enable(Arc::from(f));
        if first {
            let held: Vec<Hold> = self
                .slots
                .lock()
                .values()
                .filter_map(|s| match s {
                    Slot::Held { hold, .. } => Some(hold.clone()),
                    _ => None,
                })
                .collect();
            for h in held {
                self.revocation
                    .watch(&h.session, &h.node, h.token, h.shared_path);
            }
        }
        Ok(())
    }

    /// Waits until someone asks the calling participant's hold to be given up: `Ok(true)` if
    /// asked, `Ok(false)` at the timeout; `NotHeld` if it holds nothing (or let go meanwhile).
    pub(crate) fn wait_revoke_request(&self, timeout: Option<Duration>) -> Result<bool> {
        if !self.revocation.enabled() {
            return Err(Error::invalid(format!(
                "{} was not made revocable: nobody can ask it to let go",
                self.what
            )));
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        match self
            .revocation
            .wait(|| self.current().map(|h| (h.node, h.token)), deadline)
        {
            Some(true) => Ok(true),
            Some(false) => Err(Error::NotHeld),
            None => Ok(false),
        }
    }

    /// The calling participant's hold (a copy: never wait while holding the table).
    pub(crate) fn current(&self) -> Option<Hold> {
        match self.slots.lock().get(&self.key()) {
            Some(Slot::Held { hold, .. }) => Some(hold.clone()),
            _ => None,
        }
    }

    pub(crate) fn state(&self) -> HoldState {
        self.current().map_or(HoldState::NotHeld, |h| h.state())
    }

    pub(crate) fn token(&self) -> Option<i64> {
        self.current()
            .filter(|h| h.state() != HoldState::Lost)
            .map(|h| h.token)
    }

    pub(crate) fn fencing_token(&self) -> Result<i64> {
        self.token().ok_or(Error::NotHeld)
    }

    /// How long the calling participant's hold stays provably valid if the server went silent
    /// now; `None` if it holds nothing.
    pub(crate) fn lease_remaining(&self) -> Option<Duration> {
        self.current().map(|h| h.session.lease_remaining())
    }

    /// Waits (never holding the table) until the calling participant's hold is lost; true if
    /// lost or nothing is held.
    pub(crate) fn wait_lost(&self, timeout: Option<Duration>) -> bool {
        self.current().map_or(true, |h| h.wait_lost(timeout))
    }

    /// Calls `f` when the calling participant's hold is lost (at once if nothing is held).
    pub(crate) fn on_lost(&self, f: Box<dyn FnOnce() + Send>) {
        match self.current() {
            Some(h) => h.on_lost(f),
            None => f(),
        }
    }

    pub(crate) fn count(&self) -> usize {
        match self.slots.lock().get(&self.key()) {
            Some(Slot::Held { count, .. }) => *count,
            _ => 0,
        }
    }
}

impl Drop for Holds {
    fn drop(&mut self) {
        for (_, slot) in self.slots.get_mut().drain() {
            if let Slot::Held { hold, .. } = slot {
                let _ = hold.release();
            }
        }
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::testing::{eventually, Admin, TestingServer};
    use crate::{Client, Lockable, Options, SimpleLock};

    /// The background delete of a simple-lock hold (handed over when a release could not finish
    /// in time) runs after the node may have changed hands: it must delete only the node created
    /// at the hold's czxid, never the next holder's node at the same path.
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
        let path = "/hold-tests/background-delete";
        let la = SimpleLock::new(&a, path).unwrap();
        let token_a = la.acquire(crate::Deadline::Forever).unwrap().unwrap();
        // A's node goes (as after A's own delete whose reply was lost), B takes the lock.
        let admin = Admin::connect(&hosts).unwrap();
        admin.delete(path).unwrap();
        let lb = SimpleLock::new(&b, path).unwrap();
        let token_b = lb.acquire(crate::Deadline::TryOnce).unwrap().expect("free");
        assert!(token_b > token_a);
        let session = a.session().unwrap();
        background_delete(session, path.to_string(), Owned::IfCzxid(token_a));
        // The background delete of A's node ran and left B's.
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(admin.node(path).unwrap().map(|n| n.czxid), Some(token_b));
        assert!(lb.is_held());
        // And it does delete A's own node when it is still there.
        lb.release().unwrap();
        let lc = SimpleLock::new(&a, path).unwrap();
        let token_c = lc.acquire(crate::Deadline::TryOnce).unwrap().expect("free");
        background_delete(
            a.session().unwrap(),
            path.to_string(),
            Owned::IfCzxid(token_c),
        );
        assert!(eventually(Duration::from_secs(5), || admin
            .node(path)
            .unwrap()
            .is_none()));
    }
}
