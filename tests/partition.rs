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

/// A partition holds bytes, as a real one does: a write that an isolated follower forwarded to
/// its leader is not lost but arrives, and is applied, once the partition heals (before the
/// members' own timeouts, syncLimit × tickTime, give up on each other).
#[test]
fn a_write_forwarded_during_a_partition_is_held_and_applied_after_the_heal() {
    let cluster = TestingCluster::start_partitionable(3).expect("start ensemble");
    let leader = cluster.leader().expect("a leader");
    let follower = (leader + 1) % 3;
    let through_follower = Admin::connect(&cluster.member_connect_string(follower)).unwrap();
    let at_leader = Admin::connect(&cluster.member_connect_string(leader)).unwrap();
    through_follower.create("/held-before", b"x").unwrap();

    cluster.isolate(follower);
    let cut = Instant::now();
    let writer = std::thread::spawn(move || {
        let r = through_follower.create("/held-during", b"y");
        (r, Instant::now())
    });
    // The follower forwards the create to the leader: the partition keeps it.
    assert!(
        eventually(Duration::from_secs(2), || cluster.held_from(follower) > 0),
        "nothing held from the isolated follower"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        at_leader.node("/held-during").unwrap().is_none(),
        "the create crossed the partition"
    );
    let held_for = cut.elapsed();
    cluster.heal(follower);
    let (created, at) = writer.join().unwrap();
    assert!(
        created.is_ok(),
        "the held create failed after a partition of {held_for:?}: {created:?}"
    );
    assert!(at > cut + Duration::from_millis(300));
    assert!(at_leader.node("/held-during").unwrap().is_some());
    assert_eq!(cluster.held_from(follower), 0);
}

/// `isolate_dropping` keeps the old black hole: what the isolated follower forwards is lost,
/// and the follower still rejoins after the heal.
#[test]
fn a_dropping_partition_loses_what_was_sent_and_the_follower_rejoins() {
    let cluster = TestingCluster::start_partitionable(3).expect("start ensemble");
    let leader = cluster.leader().expect("a leader");
    let follower = (leader + 1) % 3;
    let through_follower = Admin::connect(&cluster.member_connect_string(follower)).unwrap();
    let at_leader = Admin::connect(&cluster.member_connect_string(leader)).unwrap();
    cluster.isolate_dropping(follower);
    let writer = std::thread::spawn(move || through_follower.create("/dropped", b"y"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(cluster.held_from(follower), 0);
    cluster.heal(follower);
    let _ = writer.join().unwrap();
    assert!(eventually(Duration::from_secs(30), || cluster.serving(follower)));
    assert!(at_leader.node("/dropped").unwrap().is_none());
}
