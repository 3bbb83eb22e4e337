//! Guarded writes through the C API (zkl_lock_multi, zkl_lock_set_data, zkl_lock_create,
//! zkl_lock_delete), called as a C program calls them, against a real ZooKeeper server: NULLs
//! and bad ops are ZKL_INVALID_ARGUMENT, a hold writes while it holds, a hold whose node went
//! gets ZKL_LOCK_LOST and writes nothing, a multi is all or nothing.
#![cfg(feature = "testing")]
// Every call here is to an `unsafe extern "C"` fn with valid or NULL pointers, which is
// exactly what the contract allows; one SAFETY note per test instead of per call.
#![allow(clippy::undocumented_unsafe_blocks)]

use crate::common::{admin, hosts, unique_path};

use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};

use zklock::testing::ffi::zkl_status::*;
use zklock::testing::ffi::*;

fn last_error() -> String {
    let p = zkl_last_error_message();
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

fn op(kind: u32, path: &CString, data: &[u8], version: i32, mode: u32) -> zkl_op {
    zkl_op {
        kind,
        path: path.as_ptr(),
        data: data.as_ptr(),
        len: data.len(),
        version,
        mode,
    }
}

#[test]
fn guarded_writes_through_the_c_api() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let path = unique_path("ffi-fenced");
    let (x, y) = (
        CString::new(format!("{path}-x")).unwrap(),
        CString::new(format!("{path}-y")).unwrap(),
    );
    let data = |p: &CString| admin.node(p.to_str().unwrap()).unwrap().map(|n| n.data);
    unsafe {
        let h = CString::new(hosts.as_str()).unwrap();
        let mut c = null_mut();
        assert_eq!(zkl_client_connect(h.as_ptr(), 5000, &mut c), ZKL_OK);
        let p = CString::new(path.as_str()).unwrap();
        let mut l = null_mut();
        assert_eq!(zkl_mutex_new(c, p.as_ptr(), &mut l), ZKL_OK);

        // Not held yet.
        assert_eq!(
            zkl_lock_set_data(l, x.as_ptr(), b"0".as_ptr(), 1),
            ZKL_NOT_HELD
        );
        assert_eq!(zkl_lock_acquire(l, 5000), ZKL_OK, "{}", last_error());

        // NULLs and bad ops: refused, nothing written.
        assert_eq!(zkl_lock_multi(null_mut(), null(), 1), ZKL_INVALID_ARGUMENT);
        assert_eq!(zkl_lock_multi(l, null(), 1), ZKL_INVALID_ARGUMENT);
        let ops = [op(ZKL_OP_CREATE, &x, b"x0", -1, ZKL_NODE_PERSISTENT)];
        assert_eq!(zkl_lock_multi(l, ops.as_ptr(), 0), ZKL_INVALID_ARGUMENT);
        assert_eq!(
            zkl_lock_set_data(l, null(), null(), 0),
            ZKL_INVALID_ARGUMENT
        );
        assert_eq!(zkl_lock_delete(l, null()), ZKL_INVALID_ARGUMENT);
        assert_eq!(
            zkl_lock_create(l, x.as_ptr(), null(), 3, 0),
            ZKL_INVALID_ARGUMENT
        );
        assert_eq!(
            zkl_lock_create(l, x.as_ptr(), null(), 0, 9),
            ZKL_INVALID_ARGUMENT
        );
        assert!(last_error().contains("mode"), "{}", last_error());
        let bad = [op(7, &x, b"", -1, 0)];
        assert_eq!(zkl_lock_multi(l, bad.as_ptr(), 1), ZKL_INVALID_ARGUMENT);
        assert!(last_error().contains("ops[0]"), "{}", last_error());
        assert_eq!(data(&x), None);

        // Held: written.
        assert_eq!(
            zkl_lock_create(l, x.as_ptr(), b"x0".as_ptr(), 2, ZKL_NODE_PERSISTENT),
            ZKL_OK,
            "{}",
            last_error()
        );
        assert_eq!(zkl_lock_set_data(l, x.as_ptr(), b"x1".as_ptr(), 2), ZKL_OK);
        assert_eq!(data(&x).unwrap(), b"x1");

        // All or nothing: the second op fails (x is at version 1), y is not made.
        let ops = [
            op(ZKL_OP_CREATE, &y, b"y", -1, ZKL_NODE_PERSISTENT),
            op(ZKL_OP_CHECK, &x, b"", 5, 0),
        ];
        assert_eq!(zkl_lock_multi(l, ops.as_ptr(), 2), ZKL_ZOOKEEPER_ERROR);
        assert!(last_error().contains("operation 1"), "{}", last_error());
        assert!(!last_error().contains("Op::"), "{}", last_error());
        assert_eq!(data(&y), None);
        let ops = [
            op(ZKL_OP_CREATE, &y, b"y", -1, ZKL_NODE_PERSISTENT),
            op(ZKL_OP_CHECK, &x, b"", 1, 0),
            op(ZKL_OP_DELETE, &x, b"", -1, 0),
        ];
        assert_eq!(
            zkl_lock_multi(l, ops.as_ptr(), 3),
            ZKL_OK,
            "{}",
            last_error()
        );
        assert_eq!(data(&y).unwrap(), b"y");
        assert_eq!(data(&x), None);

        // The hold's node goes (as with an expired session): refused, nothing written.
        let mut parts = null_mut();
        assert_eq!(zkl_lock_participants(l, &mut parts), ZKL_OK);
        let mut me = std::mem::zeroed::<zkl_participant>();
        assert_eq!(zkl_participants_get(parts, 0, &mut me), ZKL_OK);
        let node = format!("{path}/{}", CStr::from_ptr(me.node).to_str().unwrap());
        zkl_participants_free(parts);
        admin.delete(&node).unwrap();
        assert_eq!(
            zkl_lock_set_data(l, y.as_ptr(), b"late".as_ptr(), 4),
            ZKL_LOCK_LOST
        );
        assert_eq!(zkl_lock_delete(l, y.as_ptr()), ZKL_LOCK_LOST);
        assert_eq!(data(&y).unwrap(), b"y");

        zkl_lock_free(l);
        zkl_client_free(c);
    }
}
