//! Lock directories made under the Curator protocol are container nodes, which the server
//! reaps once they are empty; an acquire must get its lock even when the reaper deletes a
//! parent it has just made (or found) before its node's create arrives.
#![cfg(feature = "testing")]

use std::time::Duration;

use crate::common::*;
use zklock::testing::TestingServer;
use zklock::{Lockable, Mutex};

#[test]
fn an_acquire_racing_with_the_container_reaper_still_gets_its_lock() {
    // The reaper looks every 10 ms (ZooKeeper's default: every minute).
    let zk = TestingServer::start_with_config(&["-Dznode.container.checkIntervalMs=10"]).unwrap();
    let hosts = zk.connect_string();
    std::thread::scope(|s| {
        for t in 0..4 {
            let hosts = &hosts;
            s.spawn(move || {
                let c = connect(hosts, 6000);
                for i in 0..400 {
                    // Each lock empties its directories on release: the reaper then removes
                    // them, racing with the next lock's creates under the same top directory.
                    let m = Mutex::new(&c, &format!("/reaped-{t}/{}/lock", i % 2)).unwrap();
                    match m.acquire(zklock::Deadline::after(Duration::from_secs(20))) {
                        Ok(Some(_)) => m.release().unwrap(),
                        other => panic!("thread {t}, lock {i}: {other:?}"),
                    }
                    // Let the reaper see the directories empty now and then.
                    if i % 3 == 0 {
                        std::thread::sleep(Duration::from_millis(i as u64 % 13));
                    }
                }
            });
        }
    });
    // The reaper did run: the emptied directories are gone.
    let admin = admin(&hosts);
    assert!(
        eventually(Duration::from_secs(10), || admin
            .children("/")
            .unwrap()
            .iter()
            .all(|c| !c.starts_with("reaped-"))),
        "the reaper never removed the lock directories: {:?}",
        admin.children("/")
    );
}
