#![cfg(feature = "testing")]
//! One lock, every language: holders in Rust, C, Python, Node.js and Ruby, each in a process of
//! its own, with Curator (or kazoo) beside them, take one mutex path in turn. Each appends to one
//! history file as it enters (with its fencing token) and as it leaves; the history must show no
//! overlap, every holder's every hold, and tokens that increase in the order of the acquires.
//! Curator's and kazoo's node names differ, so each shares a path with zklock's doors in its own
//! protocol: two tests.
//!
//! Needs cc, python3, node and ruby (scripts/install-deps.sh), what the packages' tests set up:
//! `bindings/node/node_modules` (scripts/test-node.sh), and the peers (scripts/install-peers.sh).
//! Not in the default filter of any nextest profile: scripts/test.sh runs it after the Node.js
//! tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::ffi::{cdylib, repo};
use crate::common::history::*;
use crate::common::*;
use crate::interop::Peer;

/// Holds per holder.
const HOLDS: u64 = 6;

/// The C worker, compiled against the tests' build of the library (as the C examples are).
fn c_worker() -> PathBuf {
    crate::ffi_examples::compile(
        "cc",
        crate::ffi_examples::C_FLAGS,
        "tests/peers/every_language/worker.c",
        "every-language-worker",
    )
}

/// One zklock door's holder: `program` with `args` before the worker's own arguments.
fn door(
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&Path],
    worker: &[&str],
    env: &[(&str, &Path)],
    who: &str,
) -> Proc {
    let mut cmd = Command::new(program);
    cmd.args(args).args(worker);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env("ZKLOCK_LIBRARY", cdylib())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    Proc::spawn(cmd, who)
}

fn strs(a: &[String; 6]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

fn every_language_with(peer: Peer) {
    // A missing program fails here, naming what installs it, not as a bare "No such file"
    // at its spawn.
    for program in ["cc", "python3", "node", "ruby"] {
        assert!(
            crate::common::ffi::have(program),
            "{program} is not on PATH: run scripts/install-deps.sh first"
        );
    }
    let koffi = repo().join("bindings/node/node_modules/koffi");
    assert!(
        koffi.exists(),
        "{} is missing: run scripts/test-node.sh (or npm ci in bindings/node) first",
        koffi.display()
    );
    let hosts = hosts();
    let protocol = peer.proto_arg();
    let path = unique_path(&format!("every-language-{protocol}"));
    let hist = History::new();
    let holds = HOLDS.to_string();
    let worker = |who: &'static str| -> [String; 6] {
        [
            hosts.clone(),
            path.clone(),
            protocol.to_string(),
            holds.clone(),
            hist.path().display().to_string(),
            who.to_string(),
        ]
    };
    let peers = repo().join("tests/peers/every_language");
    let py_src = repo().join("bindings/python/src");
    let ruby_lib = repo().join("bindings/ruby/lib");
    let mut procs = vec![spawn_worker(
        "interop::worker_entry",
        &hosts,
        &path,
        protocol,
        "mutex",
        "count",
        HOLDS,
        hist.path(),
        "rust",
        0.0,
    )];
    let c = c_worker();
    let (w, py, node, rb) = (
        worker("c"),
        worker("python"),
        worker("node"),
        worker("ruby"),
    );
    procs.push(door(&c, &[], &strs(&w), &[], "the C holder"));
    procs.push(door(
        "python3",
        &[&peers.join("worker.py")],
        &strs(&py),
        &[("PYTHONPATH", &py_src)],
        "the Python holder",
    ));
    procs.push(door(
        "node",
        &[&peers.join("worker.mjs")],
        &strs(&node),
        &[],
        "the Node.js holder",
    ));
    procs.push(door(
        "ruby",
        &[Path::new("-I"), &ruby_lib, &peers.join("worker.rb")],
        &strs(&rb),
        &[],
        "the Ruby holder",
    ));
    procs.push(peer.spawn(&hosts, &path, "mutex", "count", HOLDS, &hist, protocol, 0.0));
    // Every holder connected and waits: they start at once.
    for p in &mut procs {
        p.expect_line("READY", Duration::from_secs(60));
    }
    let go = format!("{}.go", hist.path().display());
    std::fs::write(&go, b"").unwrap();
    for p in procs {
        p.wait_ok(Duration::from_secs(120));
    }
    let text = std::fs::read_to_string(hist.path()).unwrap();
    let st = check_history(&text);
    eprintln!("history: {st:?}");
    for who in ["rust", "c", "python", "node", "ruby", protocol] {
        assert_eq!(
            st.by_who.get(who).copied().unwrap_or(0),
            HOLDS as usize,
            "{who} did not hold the mutex {HOLDS} times: {st:?}"
        );
    }
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("enter W "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    eprintln!("holders in turn: {}", order.join(" "));
    let tokens = check_tokens(&text);
    assert_eq!(
        tokens,
        6 * HOLDS as usize,
        "every enter line carries a token"
    );
}

#[test]
fn rust_c_python_node_ruby_and_curator_hold_one_mutex_in_turn() {
    every_language_with(Peer::Curator);
}

#[test]
fn rust_c_python_node_ruby_and_kazoo_hold_one_mutex_in_turn() {
    every_language_with(Peer::Kazoo);
}
