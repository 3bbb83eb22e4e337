//! zkl_semaphore_acquire_many / zkl_semaphore_release_many, called as a C program calls them,
//! against a real ZooKeeper server: NULLs and bad counts are ZKL_INVALID_ARGUMENT with the out
//! array untouched, n leases or none, the tokens written on ZKL_OK only, released together.
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

fn connect(hosts: &str) -> *mut zkl_client {
    let h = CString::new(hosts).unwrap();
    let mut c = null_mut();
    assert_eq!(
        unsafe { zkl_client_connect(h.as_ptr(), 5000, &mut c) },
        ZKL_OK,
        "{}",
        last_error()
    );
    c
}

fn semaphore(c: *mut zkl_client, path: &str, max: u32) -> *mut zkl_lock {
    let p = CString::new(path).unwrap();
    let mut l = null_mut();
    assert_eq!(
        unsafe { zkl_semaphore_new(c, p.as_ptr(), max, &mut l) },
        ZKL_OK,
        "{}",
        last_error()
    );
    l
}

#[test]
fn n_leases_or_none_through_the_c_api() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let path = unique_path("ffi-sem-many");
    let lease_count = || {
        admin
            .children(&format!("{path}/leases"))
            .unwrap_or_default()
            .len()
    };
    let (c1, c2) = (connect(&hosts), connect(&hosts));
    let (a, b) = (semaphore(c1, &path, 3), semaphore(c2, &path, 3));
    let mut tokens = [7i64; 3];
    unsafe {
        // NULLs and bad counts: refused, the array untouched.
        assert_eq!(
            zkl_semaphore_acquire_many(null_mut(), 2, 0, tokens.as_mut_ptr()),
            ZKL_INVALID_ARGUMENT
        );
        assert_eq!(
            zkl_semaphore_acquire_many(a, 2, 0, null_mut()),
            ZKL_INVALID_ARGUMENT
        );
        assert!(last_error().contains("out_tokens"), "{}", last_error());
        assert_eq!(
            zkl_semaphore_acquire_many(a, 0, 0, tokens.as_mut_ptr()),
            ZKL_INVALID_ARGUMENT
        );
        assert_eq!(
            zkl_semaphore_acquire_many(a, 4, 0, tokens.as_mut_ptr()),
            ZKL_INVALID_ARGUMENT
        );
        assert!(!last_error().contains("Semaphore"), "{}", last_error());
        // Not a semaphore: refused as well.
        let mp = CString::new(format!("{path}-mutex")).unwrap();
        let mut m = null_mut();
        assert_eq!(zkl_mutex_new(c1, mp.as_ptr(), &mut m), ZKL_OK);
        assert_eq!(
            zkl_semaphore_acquire_many(m, 2, 0, tokens.as_mut_ptr()),
            ZKL_INVALID_ARGUMENT
        );
        zkl_lock_free(m);
        assert_eq!(tokens, [7; 3]);
        assert_eq!(
            zkl_semaphore_release_many(a, null(), 1),
            ZKL_INVALID_ARGUMENT
        );
        assert_eq!(
            zkl_semaphore_release_many(a, tokens.as_ptr(), 0),
            ZKL_INVALID_ARGUMENT
        );

        // Two of three; then two more are refused whole, nothing left behind.
        assert_eq!(
            zkl_semaphore_acquire_many(a, 2, 5000, tokens.as_mut_ptr()),
            ZKL_OK,
            "{}",
            last_error()
        );
        assert!(tokens[0] != 7 && tokens[1] != 7 && tokens[0] != tokens[1]);
        assert_eq!(tokens[2], 7, "only n tokens are written");
        assert_eq!(zkl_lock_is_held(a), 1);
        let mut other = [9i64; 2];
        assert_eq!(
            zkl_semaphore_acquire_many(b, 2, 0, other.as_mut_ptr()),
            ZKL_TIMEOUT
        );
        assert_eq!(
            zkl_semaphore_acquire_many(b, 2, 200, other.as_mut_ptr()),
            ZKL_TIMEOUT
        );
        assert_eq!(other, [9; 2]);
        assert_eq!(lease_count(), 2);
        // This handle's own two leave one: asking for two more could only wait for itself.
        assert_eq!(
            zkl_semaphore_acquire_many(a, 2, 1000, other.as_mut_ptr()),
            ZKL_WOULD_DEADLOCK
        );
        // Not a semaphore.
        let m = {
            let p = CString::new(unique_path("ffi-many-mutex")).unwrap();
            let mut l = null_mut();
            assert_eq!(zkl_mutex_new(c1, p.as_ptr(), &mut l), ZKL_OK);
            l
        };
        assert_eq!(
            zkl_semaphore_acquire_many(m, 1, 0, other.as_mut_ptr()),
            ZKL_INVALID_ARGUMENT
        );
        zkl_lock_free(m);

        // Returned together; then all three are free.
        assert_eq!(
            zkl_semaphore_release_many(a, tokens.as_ptr(), 2),
            ZKL_OK,
            "{}",
            last_error()
        );
        assert_eq!(zkl_lock_is_held(a), 0);
        assert_eq!(lease_count(), 0);
        assert_eq!(
            zkl_semaphore_release_many(a, tokens.as_ptr(), 1),
            ZKL_NOT_HELD
        );
        assert_eq!(
            zkl_semaphore_acquire_many(b, 3, 0, tokens.as_mut_ptr()),
            ZKL_OK,
            "{}",
            last_error()
        );
        assert_eq!(lease_count(), 3);
        // Freeing the handle returns them.
        zkl_lock_free(b);
        assert_eq!(lease_count(), 0);
        zkl_lock_free(a);
        zkl_client_free(c1);
        zkl_client_free(c2);
    }
}
