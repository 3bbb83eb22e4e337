//! Guarded writes: ZooKeeper writes that the servers apply only while the hold that makes them
//! still exists (`docs/guarded-writes.md`). Every write is one `multi` whose first operation is
//! a `check` of the hold's own node, so the servers apply the writes and the check together or
//! not at all: a holder whose session expired, whose node was deleted, or whose lock went to
//! someone else cannot write, however late its request arrives. The hold's node is unique to
//! it (its name holds its attempt's unique id, or its sequence number); where the path is
//! shared by successive holders (the simple lock's node at the lock path), the check is of the
//! hold's witness, made with the node in one `multi` and unique to the hold
//! (`node::witness_path`). Only existence is checked, not a version: the node's data changes
//! when a holder is asked to let go (revocation writes into it) and it is still held then; an
//! ephemeral node exists only while the session that made it lives.

use zookeeper_client as zk;

use super::guard::{Guard, Guarded};
use super::hold::Hold;
use super::lockable::Lockable;
use super::owned::{AsyncLock, OwnedGuard};
use crate::deadline::Deadline;
use crate::error::{Error, ErrorDetail, Result};
use crate::session::Client;

/// How a node made by a guarded write lives: persistent (the default) or ephemeral (it goes
/// with the holder's session), with or without a sequence number appended by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CreateMode {
    /// Stays until deleted.
    #[default]
    Persistent,
    /// Goes when the holder's session ends.
    Ephemeral,
    /// Persistent, its name followed by a number the server gives.
    PersistentSequential,
    /// Ephemeral, its name followed by a number the server gives.
    EphemeralSequential,
}

impl CreateMode {
    fn zk(self) -> zk::CreateMode {
        match self {
            CreateMode::Persistent => zk::CreateMode::Persistent,
            CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
            CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
        }
    }
}

/// One write of a guarded [`multi`](Guard::multi), as ZooKeeper's `multi` takes them. A
/// version of `None` matches any version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Creates `path` holding `data` (its parent must exist), with the client's ACL.
    Create {
        /// The node's path (for a sequential mode, the prefix of its name).
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Persistent or ephemeral, sequential or not.
        mode: CreateMode,
    },
    /// Replaces the data of `path` (if its data version is `version`).
    SetData {
        /// The node's path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The data version it must have, or any.
        version: Option<i32>,
    },
    /// Deletes `path` (if its data version is `version`; it must have no children).
    Delete {
        /// The node's path.
        path: String,
        /// The data version it must have, or any.
        version: Option<i32>,
    },
    /// Writes nothing: the multi fails unless `path` exists (with data version `version`).
    Check {
        /// The node's path.
        path: String,
        /// The data version it must have, or any.
        version: Option<i32>,
    },
}

impl Op {
    /// Creates a persistent node `path` holding `data`.
    pub fn create(path: impl Into<String>, data: impl Into<Vec<u8>>) -> Op {
        Op::Create {
            path: path.into(),
            data: data.into(),
            mode: CreateMode::Persistent,
        }
    }

    /// Replaces the data of `path`, whatever its version.
    pub fn set_data(path: impl Into<String>, data: impl Into<Vec<u8>>) -> Op {
        Op::SetData {
            path: path.into(),
            data: data.into(),
            version: None,
        }
    }

    /// Deletes `path`, whatever its version.
    pub fn delete(path: impl Into<String>) -> Op {
        Op::Delete {
            path: path.into(),
            version: None,
        }
    }

    /// Requires `path` to exist, whatever its version.
    pub fn check(path: impl Into<String>) -> Op {
        Op::Check {
            path: path.into(),
            version: None,
        }
    }

    /// The same operation, applied only if the node's data version is `v` (a create has no
    /// version: unchanged).
    pub fn version(self, v: i32) -> Op {
        match self {
            Op::SetData { path, data, .. } => Op::SetData {
                path,
                data,
                version: Some(v),
            },
            Op::Delete { path, .. } => Op::Delete {
                path,
                version: Some(v),
            },
            Op::Check { path, .. } => Op::Check {
                path,
                version: Some(v),
            },
            op => op,
        }
    }

    /// The node this operation is about.
    pub fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::SetData { path, .. }
            | Op::Delete { path, .. }
            | Op::Check { path, .. } => path,
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Op::Create { .. } => "create",
            Op::SetData { .. } => "set the data of",
            Op::Delete { .. } => "delete",
            Op::Check { .. } => "check",
        }
    }
}

/// What one [`Op`] of a guarded write did, in the order of the ops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// The node was made at this path (a sequential one's, with its number).
    Created {
        /// Its path.
        path: String,
    },
    /// The data was replaced; the node's data version is now `version`.
    DataSet {
        /// The new data version.
        version: i32,
    },
    /// The node was deleted.
    Deleted,
    /// The node was there.
    Checked,
}

/// What a guarded write needs of its hold: the hold (its session, and the node that proves
/// it) and the client whose ACL its creates take. Public in name only.
#[doc(hidden)]
pub struct Fence {
    pub(crate) hold: Hold,
    pub(crate) client: Client,
}

impl Fence {
    /// The node whose existence proves the hold: its witness where the path is shared by
    /// successive holders, else its own node.
    fn check_path(&self) -> &str {
        self.hold.witness.as_deref().unwrap_or(&self.hold.node)
    }

    /// Applies `ops` in one `multi` after a check of the hold's node: all of them, only if the
    /// node exists when the servers apply it.
    pub(crate) fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        if ops.is_empty() {
            return Err(Error::invalid(
                "a guarded write needs at least one operation",
            ));
        }
        for op in ops {
            crate::path::validate_path(op.path())?;
        }
        let session = &self.hold.session;
        // This thread waits for what it asks ZooKeeper (`session::waiting_caller`).
        let _caller = crate::session::waiting_caller();
        if let Some(e) = session.ended_error() {
            return Err(lost_on_end(e));
        }
        let check = self.check_path();
        let bad = |e: zk::Error| Error::invalid(format!("a guarded write's operation: {e}"));
        let mut w = session.zk.new_multi_writer();
        // Version -1: the node exists, whatever its data (a revocation request writes into it).
        w.add_check_version(check, -1).map_err(bad)?;
        for op in ops {
            match op {
                Op::Create { path, data, mode } => {
                    w.add_create(path, data, &self.client.create_options(mode.zk()))
                }
                Op::SetData {
                    path,
                    data,
                    version,
                } => w.add_set_data(path, data, *version),
                Op::Delete { path, version } => w.add_delete(path, *version),
                Op::Check { path, version } => w.add_check_version(path, version.unwrap_or(-1)),
            }
            .map_err(bad)?;
        }
        let commit = w.commit();
        // The reply is waited for one session timeout at most, and never sent again (a create
        // or a conditional write applied twice would fail the second time).
        let reply = session.call(
            async move {
                match commit.await {
                    Ok(r) => Ok(Ok(r)),
                    Err(zk::MultiWriteError::RequestFailed { source }) => Err(source),
                    Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                        Ok(Err((index, source)))
                    }
                }
            },
            Deadline::TryOnce,
        );
        match reply {
            Ok(Ok(results)) => Ok(results
                .into_iter()
                .skip(1)
                .map(|r| match r {
                    zk::MultiWriteResult::Create { path, .. } => OpResult::Created { path },
                    zk::MultiWriteResult::SetData { stat } => OpResult::DataSet {
                        version: stat.version,
                    },
                    zk::MultiWriteResult::Delete => OpResult::Deleted,
                    // A check (the crate's enum may grow: nothing else is asked here).
                    _ => OpResult::Checked,
                })
                .collect()),
            Ok(Err((0, zk::Error::NoNode | zk::Error::BadVersion))) => {
                log::warn!("a guarded write was refused: {check} is gone, the hold with it");
                Err(Error::LockLost)
            }
            Ok(Err((i, e))) => {
                let op = &ops[i.saturating_sub(1)];
                Err(Error::ZooKeeper(ErrorDetail::with_source(
                    format!(
                        "a guarded write wrote nothing: operation {} ({} {}) failed: {e}",
                        i.saturating_sub(1),
                        op.verb(),
                        op.path()
                    ),
                    e,
                )))
            }
            Err(e) => Err(match session.record_end_and_map(e) {
                // A connection lost before the reply: the writes may have been applied, and
                // then only while the hold's node existed.
                Error::ConnectionLoss(d) => Error::ConnectionLoss(
                    format!(
                        "no reply to a guarded write ({d}): it may have been applied, \
                         if at all while the hold was still held"
                    )
                    .into(),
                ),
                e => lost_on_end(e),
            }),
        }
    }
}

/// A session's end, for a write of its hold: the hold is lost.
fn lost_on_end(e: Error) -> Error {
    match e {
        Error::SessionExpired | Error::Closed => Error::LockLost,
        e => e,
    }
}

/// The guarded write `ops` of the calling participant's most recent hold of `lock` (the C
/// API's, whose handle is the participant and holds no guard).
pub(crate) fn guarded_multi(lock: &dyn Lockable, ops: &[Op]) -> Result<Vec<OpResult>> {
    let token = match lock.fencing_token() {
        Ok(t) => t,
        Err(Error::NotHeld) if lock.hold_state() == super::HoldState::Lost => {
            return Err(Error::LockLost)
        }
        Err(e) => return Err(e),
    };
    fence(lock, token)?.multi(ops)
}

/// The fence of the hold `token` of `lock`, or why there is none.
impl Fence {
    /// One `set_data` (any version) under the check; the node's new data version.
    fn set_data(&self, path: &str, data: &[u8]) -> Result<i32> {
        match self.multi(&[Op::set_data(path, data)])?.as_slice() {
            [OpResult::DataSet { version }] => Ok(*version),
            _ => unreachable!("one set_data, one result"),
        }
    }

    /// One create under the check; the path made.
    fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        let op = Op::Create {
            path: path.to_string(),
            data: data.to_vec(),
            mode,
        };
        match self.multi(&[op])?.into_iter().next() {
            Some(OpResult::Created { path }) => Ok(path),
            _ => unreachable!("one create, one result"),
        }
    }

    /// One delete (any version) under the check.
    fn delete(&self, path: &str) -> Result<()> {
        self.multi(&[Op::delete(path)]).map(drop)
    }
}

fn fence<L: Lockable + ?Sized>(lock: &L, token: i64) -> Result<Fence> {
    match lock.fence_of(token) {
        Some(f) => Ok(f),
        None if lock.hold_state_of(token) == super::HoldState::NotHeld => Err(Error::NotHeld),
        None => Err(Error::invalid(format!(
            "guarded writes need the hold of one lock, not of a multi-lock ({}): \
             write under one of its locks' own guards",
            lock.path()
        ))),
    }
}

/// The guarded writes of a [`Guard`]: ZooKeeper writes applied only while this hold holds
/// (see `docs/guarded-writes.md`).
impl<L: Guarded + ?Sized> Guard<'_, L> {
    /// Applies `ops` in one ZooKeeper `multi`, together with a check that this hold's node
    /// still exists: all of them, or none. The fence for writes to ZooKeeper: a holder that lost
    /// its lock (its session expired while it was paused or cut off, and someone else took the
    /// lock) cannot write, however late its request reaches the servers. (For any other
    /// resource, fence with [`Guard::fencing_token`].)
    ///
    /// # Errors
    /// [`Error::LockLost`] when the hold's node is gone or its session ended: nothing was
    /// written. [`Error::ZooKeeper`] when an operation failed (its index, verb and path in the
    /// message; the ZooKeeper error as its source): nothing was written.
    /// [`Error::ConnectionLoss`] when no reply came within a session timeout: the writes may
    /// have been applied, and then only while the hold was held. [`Error::InvalidArgument`]
    /// for no ops or a malformed path, or the guard of a multi-lock.
    ///
    /// ```no_run
    /// use zklock::{Client, Mutex, Op, Options};
    /// let client = Client::connect("127.0.0.1:2181", Options::default())?;
    /// let lock = Mutex::new(&client, "/locks/config")?;
    /// let guard = lock.lock()?;
    /// guard.multi(&[
    ///     Op::set_data("/config/primary", "db-2"),
    ///     Op::create("/config/history/db-2", guard.fencing_token().to_string()),
    /// ])?; // Err(LockLost), nothing written, if the lock was lost meanwhile
    /// # Ok::<(), zklock::Error>(())
    /// ```
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        self.fence()?.multi(ops)
    }

    fn fence(&self) -> Result<Fence> {
        fence(self.lockable(), self.fencing_token())
    }

    /// Replaces the data of `path` (any version) only while this hold holds; as
    /// [`Guard::multi`]. Returns the node's new data version.
    pub fn set_data(&self, path: &str, data: &[u8]) -> Result<i32> {
        self.fence()?.set_data(path, data)
    }

    /// Creates `path` holding `data` (`mode`: persistent, ephemeral, sequential) only while
    /// this hold holds; as [`Guard::multi`]. Returns the path made.
    pub fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        self.fence()?.create(path, data, mode)
    }

    /// Deletes `path` (any version) only while this hold holds; as [`Guard::multi`].
    pub fn delete(&self, path: &str) -> Result<()> {
        self.fence()?.delete(path)
    }
}

/// The guarded writes of an [`OwnedGuard`], as [`Guard`]'s.
impl<L: AsyncLock> OwnedGuard<L> {
    /// As [`Guard::multi`].
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>> {
        self.fence()?.multi(ops)
    }

    fn fence(&self) -> Result<Fence> {
        self.as_holder(|l, t| fence(l, t))
    }

    /// As [`Guard::set_data`].
    pub fn set_data(&self, path: &str, data: &[u8]) -> Result<i32> {
        self.fence()?.set_data(path, data)
    }

    /// As [`Guard::create`].
    pub fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        self.fence()?.create(path, data, mode)
    }

    /// As [`Guard::delete`].
    pub fn delete(&self, path: &str) -> Result<()> {
        self.fence()?.delete(path)
    }
}
