//! The simple lock: one ephemeral node at the lock path itself.

use std::sync::Arc;

use zookeeper_client as zk;

use super::attempt::Attempt;
use super::front::Lock;
use super::guard::{Guard, GuardNoSend};
use super::hold::{background_forget_witnessed, Hold};
use super::lockable::Revocable;
use super::participants::{Owner, Policy};
use super::raw::{read_node, Participant, Recipe, Revokes};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{self, AttemptId, Protocol};
use crate::session::{is_retriable, Client};
use crate::wait::Signal;

/// The recipe of [`SimpleLock`]: one ephemeral node at the path, whose data carries the holder
/// id and the id of the attempt that made it, made in one `multi` with the attempt's witness
/// (`node::witness_path`): the node is ours only while our witness exists, and every delete
/// checks it in the same `multi`.
#[derive(Clone)]
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
    /// Creates, until the lock node at the path is known to be ours (`Some`) or someone
    /// else's (`None`). Each create is the lock node and a witness in one `multi`, with an id
    /// of its own (in the node's data and the witness's name). `unsettled`: the witnesses of
    /// this attempt's creates whose reply was lost; such a create may have been applied, or may
    /// still be (held in a partition): only its witness tells, now or later.
    fn try_create(
        &self,
        a: &Attempt,
        unsettled: &mut Vec<String>,
        d: Deadline,
    ) -> Result<Option<Hold>> {
        let session = &a.session;
        let opts = self.client.create_options(zk::CreateMode::Ephemeral);
        let held = |czxid, witness: String| {
            Some(Hold::witnessed(
                session.clone(),
                self.path.clone(),
                czxid,
                witness,
            ))
        };
        // No answer: a timeout if the deadline ran out on a connected session.
        let unknown = |e: &zk::Error| {
            Err(session.unanswered(
                e,
                format_args!("no reply from ZooKeeper in time to create {}", self.path),
            ))
        };
        loop {
            // One create, made again with the parents when one is missing.
            let (witness, answer) =
                a.with_parents(&[crate::path::parent(&self.path)], d, || {
                    let id = AttemptId::new().text(Protocol::Kazoo);
                    let data = node::simple_lock_data(self.client.holder_id(), &id);
                    let witness = node::witness_path(&self.path, &id);
                    // Sent now (the crate sends a request when it is made; the call waits for it).
                    // The token is the lock node's czxid: the witness's, as all of a multi's nodes
                    // share its zxid. A server before 3.9 answers a multi's creates without their
                    // stat, but a write's stat always comes back: hence the (empty) write of the
                    // witness.
                    let mut multi = session.zk.new_multi_writer();
                    multi
                        .add_create(&self.path, &data, &opts)
                        .and_then(|()| multi.add_create(&witness, &[], &opts))
                        .and_then(|()| multi.add_set_data(&witness, &[], None))
                        .map_err(|e| session.record_end_and_map(e))?;
                    let sent = multi.commit();
                    // The request's failure is the call's; an operation's failure is the answer:
                    // the token if the nodes were made.
                    let create = async move {
                        match sent.await {
                            Ok(made) => Ok(Ok(made.iter().find_map(|r| match r {
                                zk::MultiWriteResult::SetData { stat } if !stat.is_invalid() => {
                                    Some(stat.czxid)
                                }
                                _ => None,
                            }))),
                            Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                                Ok(Err((index, source)))
                            }
                            Err(zk::MultiWriteError::RequestFailed { source }) => Err(source),
                        }
                    };
                    match session.call(create, d) {
                        Ok(Err((_, zk::Error::NoNode))) => Ok(None),
                        answer => Ok(Some((witness, answer))),
                    }
                })?;
            match answer {
                Ok(Ok(Some(czxid))) => return Ok(held(czxid, witness)),
                // Made, with no stat to read the token from: the witness check below reads it.
                Ok(Ok(None)) => unsettled.push(witness),
                // Answered after everything before it was applied here: the lock node exists.
                // It is ours only if an earlier create of this attempt was applied after all.
                Ok(Err((0, zk::Error::NodeExists))) if unsettled.is_empty() => return Ok(None),
                Ok(Err((_, zk::Error::NodeExists))) => {}
                Ok(Err((_, e))) => return Err(session.record_end_and_map(e)),
                Err(e) => {
                    if !is_retriable(&e) {
                        return Err(session.record_end_and_map(e));
                    }
                    unsettled.push(witness);
                    if let Some(e) = session.ended_error() {
                        return Err(e);
                    }
                    if d.passed() {
                        return unknown(&e);
                    }
                    // Whether it was applied is read after a sync (a follower behind the
                    // leader may not show it yet).
                    match session.retry(d, || session.zk.sync(&self.path)) {
                        Ok(()) | Err(zk::Error::NoNode) => {}
                        Err(e) if is_retriable(&e) => return unknown(&e),
                        Err(e) => return Err(session.record_end_and_map(e)),
                    }
                }
            }
            // The lock node is this attempt's only if one of its witnesses exists (never
            // because its owner is our session, and never by its data, which a revocation
            // request overwrites).
            for i in 0..unsettled.len() {
                match session.retry(d, || session.zk.check_stat(&unsettled[i])) {
                    Ok(Some(stat)) => return Ok(held(stat.czxid, unsettled.swap_remove(i))),
                    Ok(None) => {}
                    Err(e) if is_retriable(&e) => return unknown(&e),
                    Err(e) => return Err(session.record_end_and_map(e)),
                }
            }
            match session.retry(d, || session.zk.check_stat(&self.path)) {
                Ok(Some(_)) => return Ok(None),
                Ok(None) => continue,
                Err(e) if is_retriable(&e) => return unknown(&e),
                Err(e) => return Err(session.record_end_and_map(e)),
            }
        }
    }

    /// [`Recipe::attempt`] once the session is known; `unsettled` as in
    /// [`RawSimpleLock::try_create`].
    fn attempt_in(&self, a: &Attempt, unsettled: &mut Vec<String>) -> Result<Option<Hold>> {
        let (session, d, signal) = (&a.session, a.d, &a.signal);
        // The first round trip runs to its answer even past a short deadline: a lock found
        // free in it is held (`Deadline::first_round`).
        let mut round = a.first_round();
        loop {
            let tried = self.try_create(a, unsettled, round);
            round = d;
            if let Some(h) = tried? {
                if signal.is_cancelled() {
                    // Cancel works at any time: what was taken is given back.
                    let _ = h.release();
                    return Err(session.ended_error().unwrap_or(Error::Cancelled));
                }
                return Ok(Some(h));
            }
            if a.try_once {
                return Ok(None);
            }
            let watcher = match session.call(session.zk.check_and_watch_stat(&self.path), d) {
                Ok((Some(_), w)) => w,
                Ok((None, _)) => continue,
                Err(e) if is_retriable(&e) && !d.passed() => continue,
                Err(e) if is_retriable(&e) => return Ok(None),
                Err(e) => return Err(session.record_end_and_map(e)),
            };
            if session.wait_watch(watcher, d.instant(), signal)?.is_none() {
                return Ok(None);
            }
        }
    }
}

impl Revokes for RawSimpleLock {}

impl Recipe for RawSimpleLock {
    fn revocable_front(lock: &Lock<Self>) -> Option<&dyn Revocable> {
        Some(lock)
    }

    type GuardMarker = GuardNoSend;
    const NAME: &'static str = "SimpleLock";

    fn path(&self) -> &str {
        &self.path
    }
    fn client(&self) -> &Client {
        &self.client
    }
    /// Creates the node at the path, or waits for it to go and tries again.
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>> {
        // This thread waits for every request it sends here (`session::waiting_caller`).
        let _caller = crate::session::waiting_caller();
        // A try-once attempt still needs its requests answered: one session timeout in all.
        let a = Attempt::begin(&self.client, self.client.protocol(), d, signal)?;
        let mut unsettled = Vec::new();
        let r = self.attempt_in(&a, &mut unsettled);
        // A create whose reply was lost and whose node is not the hold: removed in the
        // background if it was applied, or when it is.
        for witness in unsettled {
            background_forget_witnessed(&a.session, self.path.clone(), witness);
        }
        r
    }

    /// The parent: its children change when the lock's node comes and goes.
    fn queue_path(&self) -> String {
        crate::path::parent(&self.path).to_string()
    }
    /// The holder, if any, as the only participant (the holder id without the attempt id).
    fn participants(&self) -> Result<Vec<Participant>> {
        let s = self.client.session()?;
        let d = s.one_call();
        let read = s.retry(d, || s.zk.get_data(&self.path));
        let Some((data, created_ms, hidden)) = read_node(&s, &self.path, read, d)? else {
            return Ok(Vec::new());
        };
        let (holder_id, _) = node::simple_lock_parts(&data);
        let revocable = node::revocable_parts(&data).1;
        Ok(vec![Participant {
            node: crate::path::name(&self.path).to_string(),
            sequence: 0,
            holder_id,
            hidden,
            is_holder: true,
            is_reader: false,
            created_ms,
            revocable,
        }])
    }
}
