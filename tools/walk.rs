//! One uncontended acquire from Rust (`Mutex::lock`) and one through the C ABI
//! (`zkl_lock_acquire`), for `scripts/walk.sh`: run under gdb, it shows the chain of zklock's
//! own calls from each entry to the wait for the server's reply (how far a reader must follow
//! one acquire). Run alone, it just locks twice against a server it starts.

use std::ffi::CString;
use std::ptr::null_mut;

use zklock::testing::ffi::*;
use zklock::testing::TestingServer;
use zklock::{Client, Mutex, Options};

/// gdb stops here first: the walk starts after the connects (which also wait for replies).
#[inline(never)]
#[no_mangle]
pub extern "C" fn zklock_walk_begin() {
    std::hint::black_box(());
}

fn main() {
    let server = TestingServer::start().expect("start ZooKeeper (scripts/install-deps.sh)");
    let hosts = server.connect_string();
    let client = Client::connect(&hosts, Options::default()).unwrap();
    let mutex = Mutex::new(&client, "/walk/rust").unwrap();

    let c_hosts = CString::new(hosts).unwrap();
    let c_path = CString::new("/walk/c").unwrap();
    let mut c_client = null_mut();
    let mut c_lock = null_mut();
    // SAFETY: valid NUL-terminated strings and out-pointers, as a C program passes them.
    unsafe {
        assert_eq!(
            zkl_client_connect(c_hosts.as_ptr(), 10_000, &mut c_client),
            zkl_status::ZKL_OK
        );
        assert_eq!(
            zkl_mutex_new(c_client, c_path.as_ptr(), &mut c_lock),
            zkl_status::ZKL_OK
        );
    }

    zklock_walk_begin();
    let guard = mutex.lock().unwrap();
    drop(guard);
    // SAFETY: the handles made above, each freed once, lock before client.
    unsafe {
        assert_eq!(zkl_lock_acquire(c_lock, -1), zkl_status::ZKL_OK);
        assert_eq!(zkl_lock_release(c_lock), zkl_status::ZKL_OK);
        zkl_lock_free(c_lock);
        zkl_client_free(c_client);
    }
    println!("walk: locked from Rust and from C");
}
