//! The simple lock: one ephemeral node at the lock path itself.

use std::sync::Arc;

use zookeeper_client as zk;

use super::front::{Guard, Lock};
use super::hold::{background_forget, Hold};
use super::holds::{Owner, Policy};
use super::protected::create_parents_of;
use super::raw::{Participant, Recipe};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{AttemptId, Protocol};
use crate::session::{is_retriable, Client, Session};
use crate::wait::CancelToken;

/// Between the holder id and the attempt id in the node's data.
const ATTEMPT_MARK: &str = "\nzklock-attempt:";

/// The recipe of [`SimpleLock`]: one ephemeral node at the path, whose data carries the holder
/// id and the id of the attempt that made it (the node is ours only if it carries ours).
pub struct RawSimpleLock {
    client: Client,
    path: String,
}

/// The cheapest lock: one ephemeral node at the path itself, holding the holder id.
/// `try_lock` never waits; `lock` watches the node and retries when it is deleted (every
/// waiter wakes on each release, so prefer [`Mutex`](crate::Mutex) under contention). Not
/// reentrant; the hold belongs to the handle, so any thread may release it.
///
/// ```no_run
/// use zklock::{Client, Options, SimpleLock};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let l = SimpleLock::new(&client, "/locks/cron")?;
/// if let Some(_g) = l.try_lock()? { /* run the job */ }
/// # Ok::<(), zklock::Error>(())
/// ```
pub type SimpleLock = Lock<RawSimpleLock>;

/// Holds a [`SimpleLock`]; releases on drop.
pub type SimpleLockGuard<'a> = Guard<'a, SimpleLock>;

impl SimpleLock {
    /// A simple lock at `path`.
    pub fn new(client: &Client, path: &str) -> Result<SimpleLock> {
        crate::path::validate_path(path)?;
        let raw = RawSimpleLock {
            client: client.clone(),
            path: path.to_string(),
        };
        Ok(Lock::from_raw(
            raw,
            Owner::Handle,
            Policy::Once,
            "simple lock",
        ))
    }
}

impl RawSimpleLock {
    /// One create of this attempt's node: `Some(hold)` if the node at the path is this
    /// attempt's, `None` if someone else's.
    fn try_create(
        &self,
        session: &Arc<Session>,
        data: &[u8],
        attempt: &str,
        d: Deadline,
    ) -> Result<Option<Hold>> {
        let opts = self.client.create_options(zk::CreateMode::Ephemeral);
        let held = |czxid| {
            Some(Hold::at_shared_path(
                session.clone(),
                self.path.clone(),
                czxid,
            ))
        };
        let mut parents_made = false;
        let unknown = || {
            // Whether the create was applied cannot be learned in time: remove its node, if it
            // made one, in the background.
            background_forget(session, self.path.clone(), attempt.to_string(), true);
            Err(Error::ConnectionLoss(
                format!("no reply from ZooKeeper in time to create {}", self.path).into(),
            ))
        };
        loop {
            // Whether the create's reply was lost: then whether it was applied is read after a
            // sync (a follower behind the leader may not show our node, or show an older one).
            let mut lost_reply = false;
            match session.call(session.zk.create(&self.path, data, &opts), d) {
                Ok((stat, _)) => return Ok(held(stat.czxid)),
                // Answered after everything before it was applied here: this server shows the
                // node that exists.
                Err(zk::Error::NodeExists) => {}
                Err(zk::Error::NoNode) if !parents_made => {
                    create_parents_of(
                        &self.client,
                        session,
                        &self.path,
                        session.cap(d),
                        self.client.protocol(),
                    )?;
                    parents_made = true;
                    continue;
                }
                Err(e) if is_retriable(&e) => {
                    if let Some(e) = session.ended_error() {
                        return Err(e);
                    }
                    if d.passed() {
                        return unknown();
                    }
                    lost_reply = true;
                }
                Err(e) => return Err(session.map_err(e)),
            }
            if lost_reply {
                match session.retry(d, || session.zk.sync(&self.path)) {
                    Ok(()) | Err(zk::Error::NoNode) => {}
                    Err(e) if is_retriable(&e) => return unknown(),
                    Err(e) => return Err(session.map_err(e)),
                }
            }
            // The node exists, or the create's outcome is unknown: it is ours only if it
            // carries this attempt's id (never because its owner is our session: other handles
            // share the session).
            match session.retry(d, || session.zk.get_data(&self.path)) {
                Ok((found, stat)) if found == data => return Ok(held(stat.czxid)),
                Ok(_) => return Ok(None),
                Err(zk::Error::NoNode) => continue,
                Err(e) if is_retriable(&e) => return unknown(),
                Err(e) => return Err(session.map_err(e)),
            }
        }
    }
}

impl Recipe for RawSimpleLock {
    type GuardSend = *const ();

    fn path(&self) -> &str {
        &self.path
    }
    fn client(&self) -> &Client {
        &self.client
    }
    /// Creates the node at the path, or waits for it to go and tries again.
    fn attempt(&self, d: Deadline, cancel: &CancelToken) -> Result<Option<Hold>> {
        // This thread waits for every request it sends here (`session::waiting_caller`).
        let _caller = crate::session::waiting_caller();
        // Registered first: a cancel from here on is heard, even while a fresh session opens.
        let reg = cancel.register();
        // A try-once attempt still needs its requests answered: one session timeout in all.
        let (try_once, d) = d.pinned(self.client.session_timeout());
        let session = self.client.session_for(d, Some(&reg.signal))?;
        let attempt = AttemptId::new().text(Protocol::Kazoo);
        let data = format!("{}{ATTEMPT_MARK}{attempt}", self.client.holder_id()).into_bytes();
        loop {
            if let Some(h) = self.try_create(&session, &data, &attempt, d)? {
                if reg.signal.is_cancelled() {
                    // Cancel works at any time: what was taken is given back.
                    let _ = h.release();
                    return Err(session.ended_error().unwrap_or(Error::Cancelled));
                }
                return Ok(Some(h));
            }
            if try_once {
                return Ok(None);
            }
            let watcher = match session.call(session.zk.check_and_watch_stat(&self.path), d) {
                Ok((Some(_), w)) => w,
                Ok((None, _)) => continue,
                Err(e) if is_retriable(&e) && !d.passed() => continue,
                Err(e) if is_retriable(&e) => return Ok(None),
                Err(e) => return Err(session.map_err(e)),
            };
            if session
                .wait_watch(watcher, d.instant(), &reg.signal)?
                .is_none()
            {
                return Ok(None);
            }
        }
    }

    /// The parent: its children change when the lock's node comes and goes.
    fn queue_path(&self) -> String {
        crate::path::parent(&self.path).to_string()
    }
    /// The holder, if any, as the only participant (the holder id without the attempt id).
    fn participants(&self) -> Result<Vec<Participant>> {
        let s = self.client.session()?;
        match s.retry(Deadline::Forever, || s.zk.get_data(&self.path)) {
            Ok((d, stat)) => {
                let text = String::from_utf8_lossy(&d);
                let holder_id = text
                    .split(ATTEMPT_MARK)
                    .next()
                    .unwrap_or_default()
                    .to_string();
                Ok(vec![Participant {
                    node: crate::path::name(&self.path).to_string(),
                    sequence: 0,
                    holder_id,
                    is_holder: true,
                    is_reader: false,
                    created_ms: stat.ctime,
                }])
            }
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(s.map_err(e)),
        }
    }
}
