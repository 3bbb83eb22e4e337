#![cfg(feature = "testing")]
//! The benchmark's peer drivers are the project's own (benches/peers): from a clone, the raw
//! ZooKeeper Java client, Curator and kazoo each run a small W1 against a real server and print
//! the result line `scripts/bench.sh` reads. (`scripts/install-peers.sh` installs the peers.)

use std::path::Path;
use std::process::Command;

#[test]
fn every_peer_driver_in_the_repository_runs_a_workload() {
    let server = crate::common::shared();
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/peers/run.sh");
    for spec in ["raw-java", "curator:lock", "kazoo:lock"] {
        let out = Command::new(&run)
            .args(["W1", spec, "ITERS=20", "WARMUP=5"])
            .env("ZK_CONNECT", server.connect_string())
            .env_remove("BENCH_OUT")
            .output()
            .expect("run benches/peers/run.sh");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{spec}: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        let line: serde_json::Value =
            serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("one JSON line");
        assert_eq!(line["workload"], "W1", "{line}");
        assert_eq!(line["params"]["iters"], 20, "{line}");
        let p50 = line["metrics"]["cycle_p50_us"].as_f64().unwrap_or(0.0);
        assert!(p50 > 0.0, "{spec}: {line}");
    }
}
