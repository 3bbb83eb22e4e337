//! Guarded writes through a lock handle: `zkl_lock_multi`, `zkl_lock_set_data`,
//! `zkl_lock_create`, `zkl_lock_delete` (docs/guarded-writes.md).

use std::ffi::c_char;

use super::boundary::{try_ref, try_str, Failure};
use super::lock::zkl_lock;
use super::status::zkl_status;
use crate::recipes::guarded_multi;
use crate::{CreateMode, Op};

/// zkl_op.kind: create the node (zkl_op.mode says how it lives).
pub const ZKL_OP_CREATE: u32 = 0;
/// zkl_op.kind: replace the node's data.
pub const ZKL_OP_SET_DATA: u32 = 1;
/// zkl_op.kind: delete the node (it must have no children).
pub const ZKL_OP_DELETE: u32 = 2;
/// zkl_op.kind: write nothing, but fail the whole write unless the node exists.
pub const ZKL_OP_CHECK: u32 = 3;

/// zkl_op.mode of a create: stays until deleted.
pub const ZKL_NODE_PERSISTENT: u32 = 0;
/// zkl_op.mode of a create: goes when the holder's session ends.
pub const ZKL_NODE_EPHEMERAL: u32 = 1;
/// zkl_op.mode of a create: persistent, its name followed by a number the server gives.
pub const ZKL_NODE_PERSISTENT_SEQUENTIAL: u32 = 2;
/// zkl_op.mode of a create: ephemeral, its name followed by a number the server gives.
pub const ZKL_NODE_EPHEMERAL_SEQUENTIAL: u32 = 3;

/// One write of zkl_lock_multi, as ZooKeeper's multi takes them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zkl_op {
    /// ZKL_OP_CREATE, ZKL_OP_SET_DATA, ZKL_OP_DELETE or ZKL_OP_CHECK.
    pub kind: u32,
    /// The node's path (NUL-terminated UTF-8).
    pub path: *const c_char,
    /// The data of a create or set-data (len bytes; NULL with len 0 for none); else ignored.
    pub data: *const u8,
    /// How many bytes data has.
    pub len: usize,
    /// The data version a set-data, delete or check requires; -1 for any. Ignored by a create.
    pub version: i32,
    /// A create's ZKL_NODE_* mode; else ignored.
    pub mode: u32,
}

/// Applies ops[0..count) to ZooKeeper in one multi, together with a check that this handle's
/// hold (its most recent, for a semaphore's several leases) still exists: all of them, or none.
/// The fence for writes to ZooKeeper: a holder that lost its lock (its session expired while it
/// was paused or cut off, and someone else took the lock) cannot write, however late its request
/// reaches the servers. For any other resource, fence with zkl_lock_fencing_token.
///
/// Returns ZKL_OK when every write was applied. ZKL_LOCK_LOST when the hold's node is gone or
/// its session ended, ZKL_NOT_HELD when the handle holds nothing, ZKL_ZOOKEEPER_ERROR when an
/// operation failed (its index and path in zkl_last_error_message): nothing was written then.
/// ZKL_CONNECTION_LOSS when no reply came within the session timeout: the writes may have been
/// applied, and then only while the hold was held. ZKL_INVALID_ARGUMENT for NULL, count 0, an
/// unknown kind or mode, a malformed path or a multi-lock. Blocks at most the session timeout.
/// One thread at a time per handle.
///
/// ```c
/// zkl_op ops[2] = {
///     { ZKL_OP_SET_DATA, "/config/primary", (const uint8_t *)"db-2", 4, -1, 0 },
///     { ZKL_OP_CREATE, "/config/history/db-2", NULL, 0, -1, ZKL_NODE_PERSISTENT },
/// };
/// if (zkl_lock_multi(lock, ops, 2) == ZKL_LOCK_LOST) stop_acting_as_holder();
/// ```
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; ops is NULL or points to
/// count readable zkl_op values, each path NULL or NUL-terminated and each data NULL or readable
/// for len bytes.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_multi(
    lock: *mut zkl_lock,
    ops: *const zkl_op,
    count: usize,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`.
        let handle = unsafe { try_ref(lock.cast_const(), "lock") }?;
        if ops.is_null() {
            return Err(Failure::null("ops"));
        }
        if count == 0 {
            return Err(Failure::invalid("`count` is 0: a guarded write needs at least one operation"));
        }
        // SAFETY: the caller's contract: ops (not NULL) points to count readable values.
        let ops = unsafe { std::slice::from_raw_parts(ops, count) };
        let ops = ops
            .iter()
            .enumerate()
            // SAFETY: the caller's contract for each op's path and data.
            .map(|(i, op)| unsafe { to_op(op, i) })
            .collect::<Result<Vec<Op>, Failure>>()?;
        handle.run(|r| Ok(guarded_multi(r, &ops).map(drop)?))
    })
}

/// Replaces the data of path (any version) with data[0..len) only while this handle's hold
/// holds: zkl_lock_multi of one ZKL_OP_SET_DATA, with its statuses.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; path is NULL or
/// NUL-terminated; data is NULL (with len 0) or readable for len bytes.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_set_data(
    lock: *mut zkl_lock,
    path: *const c_char,
    data: *const u8,
    len: usize,
) -> zkl_status {
    let op = zkl_op {
        kind: ZKL_OP_SET_DATA,
        path,
        data,
        len,
        version: -1,
        mode: 0,
    };
    // SAFETY: our caller's contract is zkl_lock_multi's for one op.
    unsafe { zkl_lock_multi(lock, &op, 1) }
}

/// Creates path holding data[0..len) as mode says (a ZKL_NODE_* value) only while this handle's
/// hold holds: zkl_lock_multi of one ZKL_OP_CREATE, with its statuses (ZKL_ZOOKEEPER_ERROR if the
/// node exists or its parent does not). A sequential node's name is not returned: list the
/// parent to find it.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; path is NULL or
/// NUL-terminated; data is NULL (with len 0) or readable for len bytes.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_create(
    lock: *mut zkl_lock,
    path: *const c_char,
    data: *const u8,
    len: usize,
    mode: u32,
) -> zkl_status {
    let op = zkl_op {
        kind: ZKL_OP_CREATE,
        path,
        data,
        len,
        version: -1,
        mode,
    };
    // SAFETY: our caller's contract is zkl_lock_multi's for one op.
    unsafe { zkl_lock_multi(lock, &op, 1) }
}

/// Deletes path (any version) only while this handle's hold holds: zkl_lock_multi of one
/// ZKL_OP_DELETE, with its statuses.
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; path is NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_delete(lock: *mut zkl_lock, path: *const c_char) -> zkl_status {
    let op = zkl_op {
        kind: ZKL_OP_DELETE,
        path,
        data: std::ptr::null(),
        len: 0,
        version: -1,
        mode: 0,
    };
    // SAFETY: our caller's contract is zkl_lock_multi's for one op.
    unsafe { zkl_lock_multi(lock, &op, 1) }
}

/// One C op as the library's.
///
/// # Safety
/// `op.path` is NULL or NUL-terminated; `op.data` is NULL or readable for `op.len` bytes.
unsafe fn to_op(op: &zkl_op, i: usize) -> Result<Op, Failure> {
    let at = |what: &str| Failure::invalid(format!("ops[{i}]: {what}"));
    // SAFETY: the caller's contract for `op.path`.
    let path = unsafe { try_str(op.path, "path") }
        .map_err(|f| at(f.message.trim_start_matches("invalid argument: ")))?
        .to_string();
    let data = || -> Result<Vec<u8>, Failure> {
        match (op.data.is_null(), op.len) {
            (_, 0) => Ok(Vec::new()),
            (true, _) => Err(at("`data` is NULL but `len` is not 0")),
            // SAFETY: the caller's contract: data is readable for len bytes.
            (false, n) => Ok(unsafe { std::slice::from_raw_parts(op.data, n) }.to_vec()),
        }
    };
    let version = match op.version {
        -1 => None,
        v if v >= 0 => Some(v),
        v => return Err(at(&format!("`version` {v} (-1 for any, else 0 or more)"))),
    };
    Ok(match op.kind {
        ZKL_OP_CREATE => Op::Create {
            path,
            data: data()?,
            mode: match op.mode {
                ZKL_NODE_PERSISTENT => CreateMode::Persistent,
                ZKL_NODE_EPHEMERAL => CreateMode::Ephemeral,
                ZKL_NODE_PERSISTENT_SEQUENTIAL => CreateMode::PersistentSequential,
                ZKL_NODE_EPHEMERAL_SEQUENTIAL => CreateMode::EphemeralSequential,
                m => return Err(at(&format!("unknown `mode` {m} (a ZKL_NODE_* value)"))),
            },
        },
        ZKL_OP_SET_DATA => Op::SetData {
            path,
            data: data()?,
            version,
        },
        ZKL_OP_DELETE => Op::Delete { path, version },
        ZKL_OP_CHECK => Op::Check { path, version },
        k => return Err(at(&format!("unknown `kind` {k} (a ZKL_OP_* value)"))),
    })
}
