//! The testing cluster's quorum partitions: `TestingCluster::start_partitionable`, `isolate`,
//! `heal`, on real ZooKeeper servers.
#![cfg(feature = "testing")]

use std::time::{Duration, Instant};

use zklock::testing::{eventually, Admin, TestingCluster};

#[test]
fn an_isolated_follower_stops_serving_the_leader_stays_and_the_healed_follower_rejoins() {
    let cluster = TestingCluster::start_partitionable(3).expect("start ensemble");
    let leader = cluster.leader().expect("a leader");
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    assert_eq!(cluster.mode(follower).as_deref(), Some("follower"));

    // Writes through the member we will isolate reach the others (the links work).
    let admin = Admin::connect(&cluster.member_connect_string(follower)).unwrap();
    admin.create("/before", b"x").unwrap();
    let other_admin = Admin::connect(&cluster.member_connect_string(other)).unwrap();
    assert!(eventually(Duration::from_secs(5), || other_admin
        .node("/before")
        .ok()
        .flatten()
        .is_some()));

    let cut = Instant::now();
    cluster.isolate(follower);
    assert_eq!(cluster.isolated(), vec![follower]);
    // syncLimit x tickTime = 5 x 500 ms: the follower's read of its leader times out, it goes
    // looking for a leader it cannot reach and stops serving.
    assert!(
        eventually(Duration::from_secs(15), || !cluster.serving(follower)),
        "isolated follower still serves: {:?}",
        cluster.four_letter(follower, "srvr")
    );
    let took = cut.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "stopped serving too soon for a partition ({took:?}): was it a close?"
    );
    let srvr = cluster.four_letter(follower, "srvr").unwrap_or_default();
    assert!(srvr.contains("not currently serving"), "srvr: {srvr}");
    // The partition is not a crash: the process runs, and the other two keep a quorum with
    // the same leader, which takes writes.
    assert!(cluster.pid(follower).is_some());
    for _ in 0..10 {
        assert_eq!(cluster.mode(leader).as_deref(), Some("leader"));
        assert_eq!(cluster.mode(other).as_deref(), Some("follower"));
        std::thread::sleep(Duration::from_millis(300));
    }
    other_admin.create("/during", b"y").unwrap();

    cluster.heal(follower);
    assert!(cluster.isolated().is_empty());
    assert!(
        eventually(Duration::from_secs(30), || cluster.serving(follower)),
        "healed follower did not rejoin; log {}",
        cluster.log_path(follower).display()
    );
    assert_eq!(cluster.mode(follower).as_deref(), Some("follower"));
    assert_eq!(cluster.leader(), Some(leader));
    // It caught up with what was written while it was cut off.
    let rejoined = Admin::connect(&cluster.member_connect_string(follower)).unwrap();
    assert!(eventually(Duration::from_secs(10), || rejoined
        .node("/during")
        .ok()
        .flatten()
        .is_some()));
}

#[test]
fn an_isolated_leader_loses_its_quorum_and_the_others_elect_a_new_one() {
    let cluster = TestingCluster::start_partitionable(3).expect("start ensemble");
    let old = cluster.leader().expect("a leader");
    cluster.isolate(old);
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    assert!(
        eventually(Duration::from_secs(30), || {
            !cluster.serving(old)
                && others
                    .iter()
                    .any(|&i| cluster.mode(i).as_deref() == Some("leader"))
                && others.iter().all(|&i| cluster.serving(i))
        }),
        "modes: {:?}",
        (0..3).map(|i| cluster.mode(i)).collect::<Vec<_>>()
    );
    cluster.heal(old);
    assert!(eventually(Duration::from_secs(30), || (0..3)
        .all(|i| cluster.serving(i))));
    assert_eq!(cluster.mode(old).as_deref(), Some("follower"));
}
