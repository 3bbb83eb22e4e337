//! Faults injected into real processes: a holder paused with SIGSTOP past its session's expiry.
#![cfg(feature = "testing")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::Mutex;

#[test]
fn holder_paused_past_expiry_waiter_gets_it_and_resumed_holder_knows_it_lost() {
    // The fault is the holder process's (SIGSTOP), not the server's: the shared server.
    let hosts = hosts();
    let path = unique_path("paused");
    let mut holder = Command::new(demo_binary())
        .args([
            "worker", "--hosts", &hosts, "--path", &path, "--rounds", "1",
        ])
        .args(["--hold-ms", "500", "--session-ms", "1500", "--report-loss"])
        .stdout(Stdio::piped())
        .spawn_guarded();
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("HOLD"), "{line}");
    let pid = holder.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let c = connect(&hosts, 5000);
    let m = Mutex::new(&c, &path).unwrap();
    let t = Instant::now();
    let g = m
        .try_lock_for(Duration::from_secs(10))
        .unwrap()
        .expect("the waiter gets the lock after the paused holder's session expires");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    let mut rest = String::new();
    for l in out.lines().map_while(Result::ok) {
        rest.push_str(&l);
        rest.push('\n');
    }
    assert!(holder.wait().unwrap().success(), "{rest}");
    assert!(rest.contains("LOST lost=true is_held=false"), "{rest}");
    assert!(rest.contains("UNLOCK Err(LockLost)"), "{rest}");
    assert!(g.is_held(), "the new holder keeps it");
}
