#![cfg(feature = "testing")]
//! Guarded writes (`docs/guarded-writes.md`) against a real ZooKeeper server: a hold writes to
//! ZooKeeper only while it holds. A paused holder (its connection black-holed until its session
//! expired and another client took the lock) is refused with LockLost and writes nothing; a
//! hold whose node went is refused; the writes of one `multi` are all applied or none.

use std::time::Duration;

use crate::common::*;
use zklock::testing::{Admin, TcpProxy};
use zklock::{CreateMode, Error, Lockable, Mutex, Op, OpResult, SimpleLock};

fn data(admin: &Admin, path: &str) -> Option<Vec<u8>> {
    admin.node(path).unwrap().map(|n| n.data)
}

/// The test of the issue: the holder is paused (its server connection black-holed), its
/// session expires, another client takes the lock and writes; the old holder's guarded write,
/// once it can reach the servers again, is refused with LockLost and the data is unchanged.
#[test]
fn a_paused_holders_write_is_refused_after_another_client_took_the_lock() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let lock_path = unique_path("fenced-paused");
    let target = format!("{lock_path}-data");
    let proxy = TcpProxy::start(&hosts).unwrap();
    let a = connect(&proxy.connect_string(), 2000);
    let b = connect(&hosts, 4000);

    let la = Mutex::per_handle(&a, &lock_path).unwrap();
    let ga = la.lock().unwrap();
    admin.create(&target, b"v0").unwrap();
    assert_eq!(ga.set_data(&target, b"a1").unwrap(), 1);
    assert_eq!(data(&admin, &target).unwrap(), b"a1");

    // Paused: nothing reaches the holder or leaves it.
    proxy.set_blackhole(true);
    let lb = Mutex::per_handle(&b, &lock_path).unwrap();
    let gb = lb
        .try_lock_for(Duration::from_secs(60))
        .unwrap()
        .expect("the lock once the paused holder's session expired");
    assert!(gb.fencing_token() > ga.fencing_token());
    gb.set_data(&target, b"b1").unwrap();

    // Resumed: the old holder writes as if it still held.
    proxy.set_blackhole(false);
    assert_eq!(ga.set_data(&target, b"a2"), Err(Error::LockLost));
    assert_eq!(
        ga.multi(&[
            Op::set_data(target.clone(), "a3"),
            Op::create(format!("{target}-a"), "a")
        ]),
        Err(Error::LockLost)
    );
    assert_eq!(ga.delete(&target), Err(Error::LockLost));
    assert_eq!(
        ga.create(&format!("{target}-a"), b"a", CreateMode::Persistent),
        Err(Error::LockLost)
    );
    assert_eq!(
        data(&admin, &target).unwrap(),
        b"b1",
        "the old holder wrote"
    );
    assert!(admin.node(&format!("{target}-a")).unwrap().is_none());
    assert!(gb.is_held());
    gb.set_data(&target, b"b2").unwrap();
    assert_eq!(data(&admin, &target).unwrap(), b"b2");
}

/// A hold whose node went (deleted by hand, as an expired session's would be) cannot write,
/// whether its node is unique to it (the mutex) or its path is shared by successive holders
/// (the simple lock: its witness is checked, never the node at the path, which may be the
/// next holder's).
#[test]
fn a_hold_whose_node_went_cannot_write() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let (c1, c2) = (connect(&hosts, 4000), connect(&hosts, 4000));

    let path = unique_path("fenced-gone");
    let target = format!("{path}-data");
    let m = Mutex::new(&c1, &path).unwrap();
    let g = m.lock().unwrap();
    g.create(&target, b"m1", CreateMode::Persistent).unwrap();
    admin.delete(&g.node()).unwrap();
    assert_eq!(g.set_data(&target, b"m2"), Err(Error::LockLost));
    assert_eq!(data(&admin, &target).unwrap(), b"m1");
    drop(g);

    let path = unique_path("fenced-simple");
    let target = format!("{path}-data");
    let s1 = SimpleLock::new(&c1, &path).unwrap();
    let g1 = s1.lock().unwrap();
    g1.create(&target, b"s1", CreateMode::Persistent).unwrap();
    // The node and its witness go (as with the session), the next holder takes the path.
    let dir = path.rsplit_once('/').unwrap().0;
    let witness = admin
        .children(dir)
        .unwrap()
        .into_iter()
        .map(|c| format!("{dir}/{c}"))
        .find(|c| {
            c.starts_with(&format!("{path}.witness-"))
                && admin.node(c).unwrap().map(|n| n.czxid) == Some(g1.fencing_token())
        })
        .expect("the hold's witness");
    admin.delete(&path).unwrap();
    admin.delete(&witness).unwrap();
    let s2 = SimpleLock::new(&c2, &path).unwrap();
    let g2 = s2.try_lock().unwrap().expect("free");
    assert_eq!(g1.set_data(&target, b"s-old"), Err(Error::LockLost));
    g2.set_data(&target, b"s2").unwrap();
    assert_eq!(data(&admin, &target).unwrap(), b"s2");
}

/// The writes of one guarded multi are applied together or not at all; an operation's failure
/// says which one, and writes nothing.
#[test]
fn a_guarded_multi_is_all_or_nothing() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let c = connect(&hosts, 4000);
    let path = unique_path("fenced-multi");
    let (x, y) = (format!("{path}-x"), format!("{path}-y"));
    let m = Mutex::new(&c, &path).unwrap();
    let g = m.lock().unwrap();
    let r = g
        .multi(&[
            Op::create(x.clone(), "x0"),
            Op::set_data(x.clone(), "x1"),
            Op::check(x.clone()).version(1),
            Op::Create {
                path: format!("{path}-seq-"),
                data: b"s".to_vec(),
                mode: CreateMode::EphemeralSequential,
            },
        ])
        .unwrap();
    assert_eq!(r[0], OpResult::Created { path: x.clone() });
    assert_eq!(r[1], OpResult::DataSet { version: 1 });
    assert_eq!(r[2], OpResult::Checked);
    let OpResult::Created { path: seq } = &r[3] else {
        panic!("{r:?}")
    };
    assert!(seq.starts_with(&format!("{path}-seq-")) && seq.len() > path.len() + 5);
    assert_eq!(
        admin.node(seq).unwrap().unwrap().ephemeral_owner,
        admin.node(&g.node()).unwrap().unwrap().ephemeral_owner,
        "an ephemeral node of the holder's session"
    );

    // The second op fails (y's parent is there, x has version 1): nothing is written.
    let e = g
        .multi(&[Op::create(y.clone(), "y"), Op::delete(x.clone()).version(7)])
        .unwrap_err();
    assert!(matches!(&e, Error::ZooKeeper(_)), "{e:?}");
    assert!(e.to_string().contains("operation 1"), "{e}");
    assert!(admin.node(&y).unwrap().is_none());
    assert_eq!(data(&admin, &x).unwrap(), b"x1");

    assert!(matches!(g.multi(&[]), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        g.set_data("no-slash", b""),
        Err(Error::InvalidArgument(_))
    ));
    g.delete(&x).unwrap();
    assert!(admin.node(&x).unwrap().is_none());
    // Still held: the checks touched nothing of the hold.
    assert!(g.is_held() && m.is_held());
}

/// An owned guard (the async acquire's) writes the same way.
#[test]
fn an_owned_guard_writes_while_it_holds() {
    let hosts = hosts();
    let admin = admin(&hosts);
    let c = connect(&hosts, 4000);
    let path = unique_path("fenced-owned");
    let target = format!("{path}-data");
    let m = Mutex::new(&c, &path).unwrap();
    let g = futures::executor::block_on(m.lock_async()).unwrap();
    g.create(&target, b"o1", CreateMode::Persistent).unwrap();
    assert_eq!(g.set_data(&target, b"o2").unwrap(), 1);
    admin.delete(&g.node()).unwrap();
    assert_eq!(g.delete(&target), Err(Error::LockLost));
    assert_eq!(data(&admin, &target).unwrap(), b"o2");
}
