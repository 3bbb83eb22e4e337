//! ACLs of lock nodes (real server, digest authentication), and a holder whose node someone
//! else deleted.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::*;
use zklock::testing::Admin;
use zklock::{Acl, Client, Error, Lockable, Mutex, Options};

fn authed(hosts: &str, acl: Acl) -> Client {
    Client::connect(hosts, opts(4000).auth("digest", "app:s3cret").acl(acl))
        .expect("connect with digest auth")
}

/// With creator-all + world-read, anyone can see the queue, nobody else can delete a holder's
/// node or join the queue; clients with the same credentials still queue as usual.
#[test]
fn creator_all_read_all_lets_others_list_but_not_touch_the_queue() {
    let hosts = hosts();
    let a = authed(&hosts, Acl::CreatorAllReadAll);
    let b = authed(&hosts, Acl::CreatorAllReadAll);
    let path = &unique_root("acl-orders");
    let ma = Mutex::new(&a, path).unwrap();
    let ga = ma.lock().unwrap();
    let node = ma.participants().unwrap()[0].node.clone();

    // An unauthenticated client lists the queue...
    let stranger = connect(&hosts, 4000);
    let seen = Mutex::new(&stranger, path).unwrap().participants().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].is_holder);
    // ...but cannot join it (no create right under the lock path)...
    let ms = Mutex::new(&stranger, path).unwrap();
    match ms.try_lock() {
        Err(Error::ZooKeeper(m)) => assert!(m.to_lowercase().contains("auth"), "{m}"),
        other => panic!("a stranger created a node under a protected lock: {other:?}"),
    }
    // ...nor delete the holder's node.
    let admin = Admin::connect(&hosts).unwrap();
    assert!(admin.delete(&format!("{path}/{node}")).is_err());
    assert_eq!(admin.children(path).unwrap(), vec![node.clone()]);
    assert!(ga.is_held());

    // The same credentials queue as usual.
    let mb = Mutex::new(&b, path).unwrap();
    assert!(mb.try_lock().unwrap().is_none(), "b got in while a holds");
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            mb.try_lock_for(Duration::from_secs(10))
                .unwrap()
                .map(|g| g.fencing_token())
        });
        std::thread::sleep(Duration::from_millis(300));
        let first = ga.fencing_token();
        drop(ga);
        let second = w.join().unwrap().expect("b gets it when a releases");
        assert!(second > first);
    });
    assert!(admin.children(path).unwrap().is_empty());
}

/// A creator-only ACL without authentication is refused up front, not met as `InvalidACL`
/// deep inside an acquire.
#[test]
fn creator_only_acl_without_authentication_is_an_invalid_argument() {
    let hosts = hosts();
    let later = unique_root("acl-later");
    for acl in [Acl::CreatorAll, Acl::CreatorAllReadAll] {
        match Client::connect(&hosts, Options::default().acl(acl)) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("auth"), "{m}"),
            other => panic!("{acl:?} without auth: {other:?}"),
        }
        let c = connect(&hosts, 4000);
        assert!(matches!(c.set_acl(acl), Err(Error::InvalidArgument(_))));
        assert_eq!(c.acl(), Acl::Open);
        c.add_auth("digest", b"app:s3cret").unwrap();
        c.set_acl(acl).unwrap();
        let m = Mutex::new(&c, &format!("{later}/{acl:?}")).unwrap();
        assert!(m.try_lock().unwrap().is_some());
    }
    unsafe {
        use zklock::testing::ffi::zkl_status::*;
        use zklock::testing::ffi::*;
        let h = std::ffi::CString::new(hosts).unwrap();
        let mut c = std::ptr::null_mut();
        assert_eq!(zkl_client_connect(h.as_ptr(), 4000, &mut c), ZKL_OK);
        assert_eq!(zkl_client_set_acl(c, 1), ZKL_INVALID_ARGUMENT);
        assert_eq!(zkl_client_set_acl(c, 7), ZKL_INVALID_ARGUMENT);
        assert_eq!(
            zkl_client_set_acl(std::ptr::null_mut(), 0),
            ZKL_INVALID_ARGUMENT
        );
        assert_eq!(zkl_client_set_acl(c, 0), ZKL_OK);
        assert_eq!(
            zkl_client_add_auth(c, c"digest".as_ptr(), c"app:s3cret".as_ptr()),
            ZKL_OK
        );
        assert_eq!(zkl_client_set_acl(c, 2), ZKL_OK);
        zkl_client_free(c);
    }
}

/// A holder whose node was deleted by someone else (the next waiter then holds) learns it at
/// the latest on release: `LockLost`, not `Ok`.
#[test]
fn a_holder_whose_node_someone_deleted_learns_it_on_release() {
    let hosts = hosts();
    let c = connect(&hosts, 4000);
    let path = unique_path("acl-deleted");
    let m = Mutex::new(&c, &path).unwrap();
    let g = m.lock().unwrap();
    let node = m.participants().unwrap()[0].node.clone();
    Admin::connect(&hosts)
        .unwrap()
        .delete(&format!("{path}/{node}"))
        .unwrap();
    assert_eq!(g.unlock(), Err(Error::LockLost));
    assert_eq!(m.release(), Err(Error::NotHeld));
}

/// A server's refusal reaches the user as `Error::ZooKeeper` with zklock's words, and the
/// ZooKeeper client's own error stays reachable through `source()` (an error chain a logger or
/// `anyhow` prints whole).
#[test]
fn a_refusal_by_the_server_keeps_the_clients_error_as_its_source() {
    use std::error::Error as _;
    let hosts = hosts();
    let a = authed(&hosts, Acl::CreatorAllReadAll);
    let path = &unique_root("acl-source");
    let ma = Mutex::new(&a, path).unwrap();
    let _ga = ma.lock().unwrap();
    let stranger = connect(&hosts, 4000);
    let e = match Mutex::new(&stranger, path).unwrap().try_lock() {
        Err(e @ Error::ZooKeeper(_)) => e,
        other => panic!("a stranger created a node under a protected lock: {other:?}"),
    };
    let source = e.source().expect("the client's error is the source");
    assert!(source.to_string().contains("not authorized"), "{source}");
    assert!(e.to_string().starts_with("ZooKeeper error: "), "{e}");
    // A hold's own errors have no deeper cause.
    assert!(Error::NotHeld.source().is_none());
}

/// A lock whose parent another identity made creator-only cannot be queued for, and the error
/// says so (which node, whom the servers take the client for), not "node not exists" (the
/// parent's refused create used to be passed over, and the lock node's create then found no
/// parent).
#[test]
fn a_parent_made_creator_only_by_another_identity_is_reported_as_not_authorized() {
    let hosts = hosts();
    let owner = authed(&hosts, Acl::CreatorAll);
    let base = unique_root("acl-parent");
    let m = Mutex::new(&owner, &format!("{base}/a")).unwrap();
    assert!(m.try_lock().unwrap().is_some());
    let other = Client::connect(&hosts, opts(4000).auth("digest", "other:pw")).unwrap();
    match Mutex::new(&other, &format!("{base}/b")).unwrap().try_lock() {
        Err(Error::ZooKeeper(msg)) => {
            assert!(msg.contains(&format!("cannot create {base}/b")), "{msg}");
            assert!(msg.contains("not authorized"), "{msg}");
            assert!(msg.contains("digest:other"), "{msg}");
        }
        other => panic!("a lock under another identity's creator-only parent: {other:?}"),
    }
}
