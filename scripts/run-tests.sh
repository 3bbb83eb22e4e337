#!/usr/bin/env bash
# Runs every Rust test of the crate (and its doc tests) against real ZooKeeper servers, with
# cargo-nextest: each test in a process of its own, many at once across all the test binaries
# (they wait on servers far more than on the CPU; one binary after the other took 4.5 minutes).
# One server serves the whole run (tools/testing_server.rs, handed to every test as
# ZKLOCK_TEST_SERVER); a test that kills, pauses or restarts a server starts its own.
#   scripts/run-tests.sh [FEATURES]      default $ZKL_FEATURES (scripts/test.sh's), else testing,cli,header
#   ZKL_TEST_THREADS                     tests at once (default: .config/nextest.toml's 8)
# Two passes: the tests that wait on servers, then the ones that load the CPU themselves
# (C and C++ under valgrind and the sanitizers, the release build of the packaging test),
# a few at a time (.config/nextest.toml): beside many others, a C example under valgrind
# was slowed past its session's lease and saw its own hold as no longer believed.
# Prints nextest's summary of each pass, the doc tests' result, then one line for all.
set -euo pipefail
cd "$(dirname "$0")/.."
features=${1:-${ZKL_FEATURES:-testing,cli,header}}
out=target/test-runs
rm -rf "$out"
mkdir -p "$out"
threads=()
[ -n "${ZKL_TEST_THREADS:-}" ] && threads=(--test-threads "$ZKL_TEST_THREADS")

cargo build --quiet --features "$features" --example testing_server
# The run's server. Its life depends on no descriptor a test's child could inherit (a pipe
# to its stdin kept it up for half an hour after the run, held open by a stray child of a
# failed test): it ends when this script does (it watches its parent), and the trap kills
# it by pid at once.
target/debug/examples/testing_server --until-parent-exits </dev/null >"$out/server" 2>"$out/server.log" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 300); do
    [ -s "$out/server" ] && break
    sleep 0.1
done
[ -s "$out/server" ] || { echo "run-tests: the test server did not start:" >&2; cat "$out/server.log" >&2; exit 1; }
export ZKLOCK_TEST_SERVER
ZKLOCK_TEST_SERVER=$(cat "$out/server")

heavy='binary(ffi_examples) | binary(packaging)'
# The writes held in a partition must go through every step of their fault within the 2.5 s
# before the members give up on each other: beside many other tests they missed that window,
# so they run last, one at a time (from their own binary alone: nextest lists every binary it
# is given, and listing them all took 20 of the pass's 28 s).
alone_bin=partition
alone="binary($alone_bin) & test(/held_in_a_partition/)"
status=0
pass() {
    local name=$1
    shift
    local t0=$SECONDS rc=0
    cargo nextest run --features "$features" --no-fail-fast ${threads[@]+"${threads[@]}"} "$@" \
        >"$out/$name.log" 2>&1 || rc=$?
    grep -E "^\s+(FAIL|SIGSEGV|SIGABRT|TIMEOUT|SLOW)|Summary" "$out/$name.log" || true
    echo "run-tests: $name: $((SECONDS - t0)) s, exit $rc"
    if [ "$rc" != 0 ]; then
        grep -q "Summary" "$out/$name.log" || tail -n 40 "$out/$name.log"
        # The failures' output, whole (nextest prints it as each ends).
        sed -n '/^\s*\(FAIL\|SIGSEGV\|SIGABRT\|TIMEOUT\) \[/,/^\s*\(PASS\|Summary\)/p' "$out/$name.log"
        status=1
    fi
}
# The model check (tests/model.rs) keeps both cores busy for about 40 s: beside the timing
# tests it starved them, so it runs last, after them.
pass servers -E "not ($heavy | $alone | binary(model))"
# ZKL_PKG_TARGET_DIR (scripts/test.sh: target/pkg): where the packaging test's
# scripts/install.sh builds the release library (the tests' CARGO_TARGET_DIR; nextest builds
# in target/ either way).
CARGO_TARGET_DIR=${ZKL_PKG_TARGET_DIR:-$PWD/target} pass heavy --target-dir "$PWD/target" -E "$heavy"
threads=(--test-threads 1)
pass alone --test "$alone_bin" -E "$alone"
threads=()
pass model --test model

t0=$SECONDS
rc=0
cargo test --doc --features "$features" >"$out/doc.log" 2>&1 || rc=$?
grep -E "^test result:" "$out/doc.log" || cat "$out/doc.log"
echo "run-tests: doc tests: $((SECONDS - t0)) s, exit $rc"
[ "$rc" = 0 ] || status=1

# One line for all: nextest's and the doc tests' own counts.
count() {
    grep -hE "Summary|^test result:" "$out/servers.log" "$out/heavy.log" "$out/alone.log" "$out/model.log" "$out/doc.log" |
        grep -oE "[0-9]+ $1" | awk '{s+=$1} END {print s+0}'
}
echo "tests: $(count passed) passed, $(count failed) failed"
exit "$status"
