//! The testing cluster's quorum partitions: `TestingCluster::start_partitionable`, `isolate`,
//! `heal`, on real ZooKeeper servers.
#![cfg(feature = "testing")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect, unique_path};
use zklock::testing::{eventually, Admin, TcpProxy, TestingCluster};
use zklock::{Deadline, Lockable, SimpleLock};

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

/// Issue 26, item 1. A releases a simple lock through a follower F that a partition cuts off
/// from its leader: the release's delete is held in the partition, A's connection to F is cut
/// (F revalidates A's moving session through the held link too), A's session moves to another
/// member, and A's release retries and completes there. B then takes the lock at the same path.
/// When the partition heals, the held delete reaches the leader: it must not remove B's node.
/// After the heal B's node is still there, B holds, and C cannot take the lock.
///
/// F also carries other clients' writes, held ahead of A's delete: at the heal the leader's
/// request pipeline is busy with them when it reaches the delete, and by then it has read F's
/// revalidation of A's session (held after the delete), which makes F A's server again, so
/// ZooKeeper's session-moved check passes the stale delete (without that traffic it does
/// about half of the time). Seen in the leader's transaction log: A's session's retried delete,
/// B's create, the busy writes, then A's first delete.
#[test]
fn a_release_delete_held_in_a_partition_never_deletes_the_next_holders_node() {
    let cluster = TestingCluster::start_partitionable(3).expect("start ensemble");
    let leader = cluster.leader().expect("a leader");
    let (f, o) = ((leader + 1) % 3, (leader + 2) % 3);
    let proxies: Vec<TcpProxy> = (0..3)
        .map(|i| TcpProxy::start(&cluster.member_connect_string(i)).unwrap())
        .collect();
    // A's host list names every member, each through a proxy; it starts on F (the others
    // refuse it for now).
    proxies[leader].refuse_new(true);
    proxies[o].refuse_new(true);
    let a_hosts = [f, leader, o]
        .map(|i| proxies[i].connect_string())
        .join(",");
    let a = connect(&a_hosts, 4000);
    let b = connect(&cluster.member_connect_string(leader), 4000);
    let c = connect(
        &format!(
            "{},{}",
            cluster.member_connect_string(leader),
            cluster.member_connect_string(o)
        ),
        4000,
    );
    let path = unique_path("held-release-delete");
    let la = Arc::new(SimpleLock::new(&a, &path).unwrap());
    let lb = SimpleLock::new(&b, &path).unwrap();
    let lc = SimpleLock::new(&c, &path).unwrap();
    let token_a = la
        .acquire(Deadline::Forever)
        .unwrap()
        .expect("A takes the free lock");
    assert_eq!(cluster.member_of_session(a.session_id()), Some(f));

    // Other clients of F write too, so that F's stream to the leader carries their writes
    // ahead of A's delete (a follower with traffic): at the heal the leader reads them all.
    let busy_proxy = TcpProxy::start(&cluster.member_connect_string(f)).unwrap();
    let busy = Arc::new(Admin::connect(&busy_proxy.connect_string()).unwrap());

    cluster.isolate(f);
    let isolated_at = Instant::now();
    const BUSY: usize = 200;
    let writers: Vec<_> = (0..BUSY)
        .map(|i| {
            let (busy, path) = (busy.clone(), format!("{path}-busy-{i}"));
            std::thread::spawn(move || busy.create(&path, b"w"))
        })
        .collect();
    assert!(
        eventually(Duration::from_secs(2), || busy_proxy.creates_seen() >= BUSY),
        "the busy writes did not reach F"
    );
    // The release's write: a delete (op 2), or a multi (op 14) holding one.
    let releases = || proxies[f].requests_seen(2) + proxies[f].requests_seen(14);
    let deletes = releases();
    let held = cluster.held_from(f);
    let la2 = la.clone();
    let releaser = std::thread::spawn(move || la2.release());
    // The release's delete reaches F, which forwards it to the leader: the partition holds it.
    assert!(
        eventually(Duration::from_secs(2), || releases() > deletes
            && cluster.held_from(f) > held),
        "A's delete was not held in the partition"
    );
    // A's connection to F is cut. A comes back to F (the others still refuse): F asks the
    // leader to revalidate A's session, and the partition holds that too.
    let (connects, held) = (proxies[f].connects_seen(), cluster.held_from(f));
    proxies[f].cut_all();
    assert!(
        eventually(Duration::from_secs(2), || proxies[f].connects_seen()
            > connects
            && cluster.held_from(f) > held),
        "A did not come back to F"
    );
    // Cut again, F refusing now: A's session moves to another member, where the release's
    // retry completes.
    proxies[f].refuse_new(true);
    proxies[leader].refuse_new(false);
    proxies[o].refuse_new(false);
    proxies[f].cut_all();
    let released = releaser.join().unwrap();
    let token_b = lb
        .acquire(Deadline::after(Duration::from_secs(10)))
        .unwrap()
        .expect("B takes the lock A released");
    assert!(token_b > token_a);
    let partition = isolated_at.elapsed();
    cluster.heal(f);
    eprintln!(
        "A's release: {released:?}; B took the lock {partition:?} after the partition began \
         (the members give up on each other after 2.5 s)"
    );
    for w in writers {
        let _ = w.join();
    }
    assert!(
        eventually(Duration::from_secs(30), || (0..3)
            .all(|i| cluster.serving(i))
            && cluster.held_from(f) == 0),
        "the ensemble did not settle after the heal"
    );
    // What a user would check, for a while after the heal: B's node is still there, B holds,
    // nobody else gets the lock.
    let admin = Admin::connect(&cluster.member_connect_string(leader)).unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let node = admin.node(&path).unwrap();
        assert_eq!(
            node.as_ref().map(|n| n.czxid),
            Some(token_b),
            "B's node (czxid {token_b}) is gone after the heal: the held delete removed it \
             (at the path now: {node:?})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(lb.is_held(), "B no longer holds after the heal");
    assert!(
        lc.try_lock().unwrap().is_none(),
        "C took the lock while B said it held"
    );
}
