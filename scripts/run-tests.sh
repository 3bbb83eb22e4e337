#!/usr/bin/env bash
# Runs every Rust test of the crate (and its doc tests) against real ZooKeeper servers, with
# cargo-nextest: each test in a process of its own, many at once (they wait on servers far
# more than on the CPU; one test after the other took 4.5 minutes).
# One server serves the whole run (tools/testing_server.rs, handed to every test as
# ZKLOCK_TEST_SERVER); a test that kills, pauses or restarts a server starts its own.
#   scripts/run-tests.sh [FEATURES]      default $ZKL_FEATURES (scripts/test.sh's), else testing,cli,header
#   ZKL_TEST_THREADS                     tests at once (default: .config/nextest.toml's 8)
# Prints nextest's summary, the doc tests' result, then one line for all.
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

# One pass: .config/nextest.toml's ci profile runs what loads the CPU a few at a time and
# what must run alone alone. ZKL_PKG_TARGET_DIR (scripts/test.sh: target/pkg): where the
# packaging test's scripts/install.sh builds the release library.
status=0
t0=$SECONDS
rc=0
cargo nextest run --features "$features" --profile ci ${threads[@]+"${threads[@]}"} \
    >"$out/tests.log" 2>&1 || rc=$?
grep -E "^\s+(FAIL|SIGSEGV|SIGABRT|TIMEOUT|SLOW)|Summary" "$out/tests.log" || true
echo "run-tests: tests: $((SECONDS - t0)) s, exit $rc"
# Where the run's time goes: its ten slowest tests (nextest's JUnit report of the ci profile).
# awk reads the whole list: a `head` would end first, and sort's write into the closed pipe
# (SIGPIPE, status 141) would fail this script under pipefail.
junit=target/nextest/ci/junit.xml
if [ -f "$junit" ]; then
    echo "run-tests: the slowest tests (seconds):"
    grep -oE '<testcase name="[^"]*"[^>]* time="[0-9.]+"' "$junit" |
        sed -E 's/<testcase name="([^"]*)".* time="([0-9.]+)"/\2 \1/' | sort -rn |
        awk 'NR <= 10 { printf "  %7.1f  %s\n", $1, $2 }'
fi
if [ "$rc" != 0 ]; then
    # The failures' output, whole (the ci profile prints it after the summary).
    grep -q "Summary" "$out/tests.log" && sed -n '/Summary \[/,$p' "$out/tests.log" || tail -n 40 "$out/tests.log"
    status=1
fi

t0=$SECONDS
rc=0
cargo test --doc --features "$features" >"$out/doc.log" 2>&1 || rc=$?
grep -E "^test result:" "$out/doc.log" || cat "$out/doc.log"
echo "run-tests: doc tests: $((SECONDS - t0)) s, exit $rc"
[ "$rc" = 0 ] || status=1

# One line for all: nextest's and the doc tests' own counts.
count() {
    grep -hE "Summary|^test result:" "$out/tests.log" "$out/doc.log" |
        grep -oE "[0-9]+ $1" | awk '{s+=$1} END {print s+0}'
}
echo "tests: $(count passed) passed, $(count failed) failed"
exit "$status"
