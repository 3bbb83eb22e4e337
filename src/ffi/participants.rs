//! `zkl_participants`: a snapshot of a lock's participants, and the calls that take and read it.

use std::ffi::{c_char, CString};

use super::boundary::{box_into_ptr, box_take, try_ref, BoxCastable, Castable, Failure, Out};
use super::lock::zkl_lock;
use super::status::zkl_status;
use crate::Participant;

/// A snapshot of a lock's participants (zkl_lock_participants); read it with
/// zkl_participants_count and zkl_participants_get, free it with zkl_participants_free.
///
/// Threads: never changed once made, so its calls run on any thread at once;
/// zkl_participants_free runs alone.
pub struct zkl_participants {
    _private: [u8; 0],
}

/// What a zkl_participants points to: the participants, and their text as C strings.
pub(crate) struct ParticipantsHandle {
    items: Vec<(Participant, CString, CString)>,
}

impl Castable for zkl_participants {
    type Rust = ParticipantsHandle;
}
impl BoxCastable for zkl_participants {}

/// One participant of a lock, as zkl_participants_get writes it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zkl_participant {
    /// The node's name (a child of the lock path; the lock path itself for a simple lock).
    /// Owned by the snapshot: valid until zkl_participants_free.
    pub node: *const c_char,
    /// The holder id stored in the node ("" if none). Owned by the snapshot.
    pub holder_id: *const c_char,
    /// The sequence number the server gave the node: queue order.
    pub sequence: i64,
    /// 1 if it holds the lock now (for a semaphore: one of the leases), else 0.
    pub is_holder: i32,
    /// 1 for a node of the read half of a read-write lock, else 0.
    pub is_reader: i32,
}

/// Takes a snapshot of the lock's participants, holders first, then waiters in queue order
/// (for a semaphore: the lease holders; lease_holders in Curator's words), and writes it to
/// *out: read it with zkl_participants_count / zkl_participants_get, free it with
/// zkl_participants_free.
///
/// On ZKL_OK *out owns the snapshot; on any other status it is left unchanged.
/// ZKL_INVALID_ARGUMENT for a NULL argument; ZKL_CONNECTION_LOSS or ZKL_SESSION_EXPIRED when
/// the server could not be read. Blocks at most the session timeout. Any thread, even while
/// another thread uses the handle.
///
/// ```c
/// zkl_participants *ps;
/// if (zkl_lock_participants(lock, &ps) == ZKL_OK) {
///     zkl_participant p;
///     for (size_t i = 0; zkl_participants_get(ps, i, &p) == ZKL_OK; i++)
///         printf("%s %s\n", p.is_holder ? "holder" : "waiter", p.holder_id);
///     zkl_participants_free(ps);
/// }
/// ```
///
/// Pointers: lock is NULL or a live zkl_lock, not freed during the call; out is NULL or valid
/// for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_lock_participants(
    lock: *const zkl_lock,
    out: *mut *mut zkl_participants,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `lock`; listing reads only the server and the
        // recipe's internally synchronised state.
        let handle = unsafe { try_ref(lock, "lock") }?;
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let participants = handle.run(|r| Ok(r.participants()?))?;
        // Text from the server may hold a NUL, which C text cannot: it is dropped.
        let c_text = |s: &str| CString::new(s.replace('\0', "")).unwrap_or_default();
        let items = participants
            .into_iter()
            .map(|p| {
                let (node, holder) = (c_text(&p.node), c_text(&p.holder_id));
                (p, node, holder)
            })
            .collect();
        out.write(box_into_ptr::<zkl_participants>(Box::new(ParticipantsHandle { items })));
        Ok(())
    })
}

/// How many participants the snapshot holds (0 for NULL). Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_count(participants: *const zkl_participants) -> usize {
    ffi_boundary!(value {
        // SAFETY: the caller's contract for `participants`.
        unsafe { try_ref(participants, "participants") }.map_or(0, |h| h.items.len())
    })
}

/// Writes participant number index (from 0, holders first) of the snapshot to *out. Its strings
/// are owned by the snapshot: valid until zkl_participants_free.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument or an index past the last participant (then *out
/// is left unchanged). Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants; out is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_get(
    participants: *const zkl_participants,
    index: usize,
    out: *mut zkl_participant,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `participants`.
        let handle = unsafe { try_ref(participants, "participants") }?;
        // SAFETY: the caller's contract for `out`.
        let out = unsafe { Out::new(out, "out") }?;
        let (p, node, holder) = handle.items.get(index).ok_or_else(|| {
            Failure::invalid(format!("`index` {index} is past the last of {} participants", handle.items.len()))
        })?;
        out.write(zkl_participant {
            node: node.as_ptr(),
            holder_id: holder.as_ptr(),
            sequence: p.sequence,
            is_holder: i32::from(p.is_holder),
            is_reader: i32::from(p.is_reader),
        });
        Ok(())
    })
}

/// Writes to *out_ms when participant number index's node was created, by the server's clock,
/// in milliseconds since the Unix epoch: how long it has been queued or holding.
///
/// ZKL_INVALID_ARGUMENT for a NULL argument or an index past the last participant (then
/// *out_ms is left unchanged). Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants; out_ms is NULL or valid for
/// writing.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_created_ms(
    participants: *const zkl_participants,
    index: usize,
    out_ms: *mut i64,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `participants`.
        let handle = unsafe { try_ref(participants, "participants") }?;
        // SAFETY: the caller's contract for `out_ms`.
        let out = unsafe { Out::new(out_ms, "out_ms") }?;
        let (p, _, _) = handle.items.get(index).ok_or_else(|| {
            Failure::invalid(format!("`index` {index} is past the last of {} participants", handle.items.len()))
        })?;
        out.write(p.created_ms);
        Ok(())
    })
}

/// Frees a snapshot of participants. NULL is a no-op; must not be called twice for one
/// snapshot. Never blocks. Any thread.
///
/// Pointers: participants is NULL or a live zkl_participants that no other thread uses during
/// or after the call.
#[no_mangle]
pub unsafe extern "C" fn zkl_participants_free(participants: *mut zkl_participants) {
    ffi_boundary!(value {
        // SAFETY: the caller's contract: NULL or a live snapshot freed only now.
        drop(unsafe { box_take(participants) });
    })
}
