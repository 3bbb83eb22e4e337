#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, then runs every test
# against real ZooKeeper servers that the tests start themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The real Curator and kazoo of the interop tests.
scripts/install-peers.sh
export CARGO_TERM_COLOR=never
# Where the time goes: each step's end, in seconds since the start.
step() { echo "test.sh: +$SECONDS s: $*" >&2; }
step "installed what was missing"
# Every script parses (a quote in a comment once ended run-tests.sh's inline Python early).
for f in scripts/*.sh .ci/run; do bash -n "$f"; done
# cargo-c, for the packaging test, compiles while the suite builds and runs (the test waits for
# it if it is not done: scripts/install-cargo-c.sh takes a lock); a no-op once installed.
mkdir -p target
scripts/install-cargo-c.sh --debug > target/install-cargo-c.log 2>&1 &
cargo_c=$!
cargo fmt --all --check
cargo clippy --all-targets --features testing,cli,header -- -D warnings
# The library as a dependent builds it (no features): no warning either.
cargo clippy --lib -- -D warnings
# The benchmark driver, a workspace member of its own.
cargo clippy -p zklock-peerbench --all-targets -- -D warnings
step "formatting and clippy"
# Builds the library (cdylib + staticlib), the examples and the command the tests run.
cargo build --all-targets --features testing,cli,header
step "build"
# The checked-in header must be what build.rs generates now.
if git rev-parse --git-dir >/dev/null 2>&1; then
  git diff --exit-code -- include/zklock.h || { echo "include/zklock.h is stale: commit the regenerated header" >&2; exit 1; }
fi
# The API docs build as docs.rs builds them (no broken links), and the crate packages and
# builds from its published files alone.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --features testing,cli --quiet
cargo publish --dry-run --allow-dirty --quiet
step "docs and the packaged crate"
# Every Rust test binary (scripts/run-tests.sh: the heavy ones last, ZKL_TEST_LANES light ones
# at once, default 1; ZKL_TEST_THREADS tests at once in each, default 6).
scripts/run-tests.sh testing,cli
step "Rust tests"
# The Python package as its users get it: `pip install bindings/python` (into a venv, which
# builds and bundles the library), then its pytest suite against a server it starts itself.
scripts/test-python.sh
step "Python tests"
if ! wait "$cargo_c"; then
  cat target/install-cargo-c.log >&2
  exit 1
fi
# One minute of the nemesis soak: every recipe under killed members, partitions, paused, cut
# off and killed clients, every hold checked (scripts/soak.sh 60 runs an hour).
scripts/soak.sh 1
step "soak"
