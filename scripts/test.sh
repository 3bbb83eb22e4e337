#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, then runs every test
# against real ZooKeeper servers that the tests start themselves.
#
# On 2 cores the compiles are most of the time, so nothing is compiled twice and the CPU is
# never idle while tests wait on servers:
#   - clippy lints every target of the workspace as it is built for the tests (its driver as
#     rustc's workspace wrapper, as `cargo clippy` runs it, but with code generation), and every
#     step builds with the same features;
#   - the release library (the Python package, the C packaging) builds in a target directory
#     of its own (cargo locks one per build) beside the tests' build, and the Python tests and
#     the soak run beside the Rust tests: all of them wait on servers more than on the CPU;
#   - the Rust tests run many at once (scripts/run-tests.sh: cargo-nextest, one server).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# Where the time goes: each step's end, in seconds since the start.
step() { echo "test.sh: +$SECONDS s: $*" >&2; }
scripts/install-deps.sh
# The real Curator and kazoo of the interop tests.
scripts/install-peers.sh
step "installed what was missing"
# Every script parses (a quote in a comment once ended run-tests.sh's inline Python early).
for f in scripts/*.sh .ci/run; do bash -n "$f"; done
cargo fmt --all --check

# Whatever runs in the background ends with this script (a failed step stops it all).
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

# One feature set for every build of the run (a second set recompiles the crate and its tests).
features=testing,cli,header
export ZKL_FEATURES=$features

# In the background, in target/pkg (cargo locks a target directory per build, so the tests'
# builds in target/ never wait for these): the Python package installed from the checkout into
# a venv (pip builds the release library with cargo and bundles it) while the tests build; its
# pytest suite once they are built, then the Node.js package's and the Ruby gem's tests. Beside that suite (it waits on servers, not on the CPU), at
# a lower priority: the packaged crate as a dependent builds it (its published files alone, no
# features: no warning either), the API docs as docs.rs builds them (no broken links), and the
# release build that the packaging
# test's scripts/install.sh makes (the same command: the test then finds it built, where its
# own build took a minute of the Rust tests' run).
pkg="$PWD/target/pkg"
built=target/.test-sh-built
rm -f "$built"
mkdir -p "$pkg"
(
  export CARGO_TARGET_DIR=$pkg
  scripts/test-python.sh install
  echo "test.sh: +$SECONDS s: Python package installed (background)"
  # First what a test waits for (the Rust tests' second pass, the Node.js package's tests).
  nice -n 10 cargo build --release --locked --quiet --features capi,cli --lib --bin zklock
  echo "test.sh: +$SECONDS s: the installed build, built ahead (background)"
  (
    # In the release profile, as the builds above: the dependencies' build scripts ran for them
    # already (aws-lc-sys's C build is half a minute of a core). Clippy lints the packaged
    # crate (the published files alone, no features: it builds as a dependent builds it).
    until [ -e "$built" ]; do sleep 1; done
    packaged=$pkg/packaged
    rm -rf "$packaged" && mkdir -p "$packaged"
    tar xzf target/package/zklock-"$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)".crate -C "$packaged"
    (cd "$packaged"/zklock-* && nice -n 10 cargo clippy --release --locked --lib --quiet -- -D warnings)
    RUSTDOCFLAGS="-D warnings" nice -n 10 cargo doc --release --no-deps --features testing --quiet
    echo "test.sh: +$SECONDS s: the packaged crate built and linted without features, docs (background)"
  ) &
  lints=$!
  until [ -e "$built" ]; do sleep 1; done
  # The secured servers of the Python tests: the starter the build above made.
  py=0
  ZKL_TESTING_SERVER_BIN=$PWD/target/debug/examples/testing_server scripts/test-python.sh test || py=$?
  echo "test.sh: +$SECONDS s: Python tests (background), exit $py"
  # The Node.js package, over the release library built above.
  nd=0
  ZKLOCK_LIBRARY=$pkg/release/libzklock.so \
    ZKL_TESTING_SERVER_BIN=$PWD/target/debug/examples/testing_server scripts/test-node.sh || nd=$?
  echo "test.sh: +$SECONDS s: Node.js tests (background), exit $nd"
  # The Ruby gem, over the same library.
  rb=0
  ZKLOCK_LIBRARY=$pkg/release/libzklock.so \
    ZKL_TESTING_SERVER_BIN=$PWD/target/debug/examples/testing_server scripts/test-ruby.sh || rb=$?
  echo "test.sh: +$SECONDS s: Ruby tests (background), exit $rb"
  wait "$lints"
  [ "$py" = 0 ] && [ "$nd" = 0 ] && [ "$rb" = 0 ]
) >target/test-background.log 2>&1 &
background=$!

# Clippy's lints, warnings denied, on every workspace crate that any step below compiles
# (dependencies are built by plain rustc, as under `cargo clippy`). CLIPPY_ARGS is how
# `cargo clippy` hands its arguments to the driver.
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
[ -x "$RUSTC_WORKSPACE_WRAPPER" ] || RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver)
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# The gate itself: a clippy warning must fail a compile (were the driver to stop reading
# CLIPPY_ARGS, the build below would pass with warnings).
mkdir -p target/clippy-gate
printf 'pub fn empty(v: &[u8]) -> bool {\n    v.len() == 0\n}\n' >target/clippy-gate/probe.rs
if "$RUSTC_WORKSPACE_WRAPPER" rustc --edition 2021 --crate-type lib --emit metadata \
    -o target/clippy-gate/probe.rmeta target/clippy-gate/probe.rs >target/clippy-gate/out 2>&1 ||
    ! grep -q "^error: length comparison to zero" target/clippy-gate/out; then
  cat target/clippy-gate/out >&2
  echo "test.sh: clippy's driver did not deny a warning: the lint gate is off" >&2
  exit 1
fi
cargo build --workspace --all-targets --features "zklock/${features//,/,zklock/}"
step "build, with clippy"
# The checked-in header must be what build.rs generates now.
if git rev-parse --git-dir >/dev/null 2>&1; then
  git diff --exit-code -- include/zklock.h || { echo "include/zklock.h is stale: commit the regenerated header" >&2; exit 1; }
fi
# The crate as it would be published (its files and manifest; `cargo package` checks what
# `cargo publish` checks before it builds). That it builds from those files alone, without
# features, is the background's clippy below (in the packaged copy).
cargo package --no-verify --allow-dirty --quiet
step "the packaged crate"
touch "$built"

# One minute of the nemesis soak, beside the tests (it waits on its own ensemble's faults far
# more than on the CPU): every recipe under killed members, partitions, paused, cut off and
# killed clients, every hold checked (scripts/soak.sh 60 runs an hour).
scripts/soak.sh 1 >target/test-soak.log 2>&1 &
soak=$!

# Every Rust test, and the doc tests. The packaging test installs with scripts/install.sh,
# which builds in target/pkg, beside the Python package's build.
rc=0
ZKL_PKG_TARGET_DIR=$pkg scripts/run-tests.sh || rc=$?
step "Rust tests"

sk=0
wait "$soak" || sk=$?
tail -n 3 target/test-soak.log >&2
step "soak (beside the tests)"
bg=0
wait "$background" || bg=$?
cat target/test-background.log >&2
step "the background: Python, Node.js and Ruby tests, clippy without features, docs, the installed build"
if [ "$rc" != 0 ] || [ "$sk" != 0 ] || [ "$bg" != 0 ]; then
  echo "test.sh: failed (Rust tests exit $rc, soak exit $sk, background exit $bg)" >&2
  [ "$sk" = 0 ] || cat target/test-soak.log >&2
  exit 1
fi
echo "test.sh: all passed in $SECONDS s"
