//! The leader election against real servers: one leader at a time, terms that only grow, a
//! leader cut off from the servers that stops leading before another leads, the hand-over on
//! relinquish, Curator's `LeaderLatch` node names.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::testing::TcpProxy;
use zklock::{Deadline, LeaderElection, Lockable, Protocol};

/// Participants in several processes' worth of sessions take turns leading: never two at once
/// (each leader looks at every other one's `is_leader` while it leads), and each term is
/// greater than the one before.
#[test]
fn one_leader_at_a_time_with_terms_that_only_grow() {
    let hosts = hosts();
    let path = unique_path("election");
    let clients: Vec<_> = (0..3).map(|_| connect(&hosts, 6000)).collect();
    let elections: Vec<_> = clients
        .iter()
        .map(|c| LeaderElection::new(c, &path).unwrap())
        .collect();
    let terms = StdMutex::new(Vec::new());
    let overlaps = StdMutex::new(Vec::new());
    std::thread::scope(|s| {
        for (i, e) in elections.iter().enumerate() {
            let (terms, overlaps, all) = (&terms, &overlaps, &elections);
            s.spawn(move || {
                for _ in 0..4 {
                    let term = e
                        .await_leadership(Deadline::after(Duration::from_secs(30)))
                        .unwrap()
                        .expect("leads within 30 s");
                    terms.lock().unwrap().push(term);
                    let until = Instant::now() + Duration::from_millis(40);
                    while Instant::now() < until {
                        for (j, other) in all.iter().enumerate() {
                            if j != i && other.is_leader() && e.is_leader() {
                                overlaps.lock().unwrap().push((i, j));
                            }
                        }
                    }
                    e.relinquish().unwrap();
                }
            });
        }
    });
    assert!(overlaps.lock().unwrap().is_empty(), "two leaders at once");
    let terms = terms.into_inner().unwrap();
    assert_eq!(terms.len(), 12);
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms out of order: {terms:?}"
    );
}

/// The leader's link to the servers goes silent: it must stop saying it leads before the
/// servers expire its session and another participant leads.
#[test]
fn a_leader_cut_off_stops_leading_before_another_leads() {
    let hosts = hosts();
    let proxy = TcpProxy::start(&hosts).unwrap();
    let a = connect(&proxy.connect_string(), 3000);
    let b = connect(&hosts, 3000);
    let path = unique_path("election-cut");
    let (ea, eb) = (
        LeaderElection::new(&a, &path).unwrap(),
        LeaderElection::new(&b, &path).unwrap(),
    );
    let term_a = ea.await_leadership(Deadline::Forever).unwrap().unwrap();
    assert!(ea.is_leader());
    let cut = Instant::now();
    proxy.set_blackhole(true);
    let (got, b_at, last_led) = watch_believer(
        || eb.await_leadership(Deadline::after(Duration::from_secs(30))),
        || ea.is_leader(),
    );
    let term_b = got.unwrap().expect("B leads once A's session expired");
    stopped_believing_in_time("the leader's link cut", cut, last_led, b_at);
    assert!(
        term_b > term_a,
        "the next term ({term_b}) is not above {term_a}"
    );
    eb.relinquish().unwrap();
    proxy.set_blackhole(false);
}

/// Relinquishing hands the leadership to the next in line; `leader()` and `participants()`
/// name the leader; the nodes are Curator's `LeaderLatch` names.
#[test]
fn relinquish_hands_over_and_the_queue_names_the_leader() {
    let hosts = hosts();
    let path = unique_path("election-queue");
    let (a, b) = (
        connect(&hosts, Protocol::Curator),
        connect(&hosts, Protocol::Curator),
    );
    let (ea, eb) = (
        Arc::new(LeaderElection::new(&a, &path).unwrap()),
        Arc::new(LeaderElection::new(&b, &path).unwrap()),
    );
    ea.await_leadership(Deadline::Forever).unwrap().unwrap();
    let waiter = {
        let eb = eb.clone();
        std::thread::spawn(move || eb.await_leadership(Deadline::after(Duration::from_secs(30))))
    };
    assert!(
        eventually(Duration::from_secs(10), || ea
            .participants()
            .is_ok_and(|p| p.len() == 2)),
        "B joined the queue"
    );
    let queue = ea.participants().unwrap();
    assert!(queue[0].is_holder && !queue[1].is_holder, "{queue:?}");
    assert!(
        queue
            .iter()
            .all(|p| p.node.starts_with("_c_") && p.node.contains("-latch-")),
        "not LeaderLatch's names: {queue:?}"
    );
    assert_eq!(
        ea.leader().unwrap().unwrap().holder_id,
        a.holder_id(),
        "the leader's id"
    );
    ea.relinquish().unwrap();
    assert!(!ea.is_leader());
    let term = waiter
        .join()
        .unwrap()
        .unwrap()
        .expect("B leads after A relinquished");
    assert!(eb.is_leader());
    assert_eq!(eb.term(), Some(term));
    assert_eq!(eb.leader().unwrap().unwrap().holder_id, b.holder_id());
    eb.relinquish().unwrap();
}
