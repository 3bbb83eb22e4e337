#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, then runs every test
# against real ZooKeeper servers that the tests start themselves. `.ci/run` runs exactly this.
#
# Named steps, run in the order of the plan at the end. On 2 cores the compiles are most of the
# time, so nothing is compiled twice and the CPU is never idle while tests wait on servers: the
# Python package's release build (target/pkg: cargo locks a target directory per build) runs
# beside the tests' build, and the other languages' tests and the soak run beside the Rust
# tests (all of them wait on servers more than on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
# One feature set for every build of the run (a second set recompiles the crate and its tests).
features=testing,cli,header
export ZKL_FEATURES=$features
# The release builds of the packages and of the packaging test, all with Kerberos (one set of
# the dependencies' features: the later builds reuse the first's dependencies).
pkg="$PWD/target/pkg"
export ZKLOCK_CARGO_FEATURES=sasl-gssapi
mkdir -p "$pkg"
# Where the time goes: each step's end, in seconds since the start, and the CPU it used.
say() { echo "test.sh: +$SECONDS s: $*" >&2; }
# CPU: the CPU seconds (user + system) of this shell's ended children so far, set by `cpu`
# run in this very shell (in a $(...), `times` would ask a new process with no children yet).
cpu() {
    local f=target/.test-sh-times.$BASHPID
    times >"$f"
    CPU=$(awk 'NR == 2 { gsub(/[ms]/, " "); split($0, t, " "); printf "%.0f", t[1] * 60 + t[2] + t[3] * 60 + t[4] }' "$f")
}

# --- the steps -----------------------------------------------------------------------------

install() {
    scripts/install-deps.sh
    scripts/install-peers.sh # the real Curator and kazoo of the interop tests
}

# Every script parses (a quote in a comment once ended run-tests.sh's inline Python early), and
# the formatting.
fmt() {
    for f in scripts/*.sh .ci/run; do bash -n "$f"; done
    cargo fmt --all --check
}

# Every target of the workspace built for the tests, with clippy's lints, warnings denied:
# clippy's driver is rustc's workspace wrapper (as `cargo clippy` runs it, but with code
# generation), so one compile serves lints and tests. CLIPPY_ARGS is how `cargo clippy` hands
# its arguments to the driver.
# Every later cargo run on target/debug (the Rust tests, the every-language test) sets the same
# wrapper: without it, cargo compiles the crate and its tests again (75 s of CPU).
lints_on() {
    export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
    [ -x "$RUSTC_WORKSPACE_WRAPPER" ] || RUSTC_WORKSPACE_WRAPPER=$(command -v clippy-driver)
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
}
clippy_build() {
    lints_on
    # The gate itself: a clippy warning must fail a compile (were the driver to stop reading
    # CLIPPY_ARGS, the build would pass with warnings).
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
}

# The checked-in header is what build.rs generates now.
header() {
    git rev-parse --git-dir >/dev/null 2>&1 || return 0
    git diff --exit-code -- include/zklock.h ||
        { echo "include/zklock.h is stale: commit the regenerated header" >&2; exit 1; }
}

# The crate as it would be published (`cargo package` checks what `cargo publish` checks), then
# built and linted from its published files alone, without features, as a dependent builds it;
# and the API docs as docs.rs builds them (no broken links). Release profile, as the Python
# package's build: the dependencies' build scripts ran for it already.
package() {
    local packaged=$pkg/packaged version
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
    cargo package --no-verify --allow-dirty --quiet &&
        rm -rf "$packaged" && mkdir -p "$packaged" &&
        tar xzf target/package/zklock-"$version".crate -C "$packaged" &&
        (cd "$packaged"/zklock-* && CARGO_TARGET_DIR=$pkg nice -n 10 cargo clippy --release --locked --lib --quiet -- -D warnings)
}
docs() {
    RUSTDOCFLAGS="-D warnings" CARGO_TARGET_DIR=$pkg nice -n 10 cargo doc --release --no-deps --features testing --quiet
}

# Every Rust test and the doc tests (scripts/run-tests.sh: one nextest pass, one server). The
# packaging test's scripts/install.sh builds in target/pkg.
rust_tests() {
    lints_on
    ZKL_PKG_TARGET_DIR=$pkg scripts/run-tests.sh
}

# The Python package installed from the checkout into a venv (pip builds the release library
# with cargo and bundles it), then its pytest suite, with the secured servers of the starter
# the tests' build made.
python_install() {
    CARGO_TARGET_DIR=$pkg scripts/test-python.sh install
}
# The wheel test's release build (from its sdist) in target/pkg too: the dependencies pip's
# build compiled serve it (in a directory of its own it compiled them all again, 3 minutes of CPU).
python_tests() {
    CARGO_TARGET_DIR=$pkg ZKL_TESTING_SERVER_BIN=$PWD/target/debug/examples/testing_server scripts/test-python.sh test
}
# What the packaging test's scripts/install.sh builds (its default features: no Kerberos),
# built ahead (its own build took a minute of the Rust tests' run), at a lower priority.
installed_build() {
    CARGO_TARGET_DIR=$pkg nice -n 10 cargo build --release --locked --quiet \
        --features capi,cli --lib --bin zklock
}
# The library the Python package bundles: the Node.js package and the Ruby gem test the same
# release build (with Kerberos), rather than a build of their own.
bundled_library() {
    find target/pyenv -name '_native*.so' | head -n 1
}
node_tests() {
    ZKLOCK_LIBRARY=$PWD/$(bundled_library) \
        ZKL_TESTING_SERVER_BIN=$PWD/target/debug/examples/testing_server scripts/test-node.sh
}
ruby_tests() {
    ZKLOCK_LIBRARY=$PWD/$(bundled_library) \
        ZKL_TESTING_SERVER_BIN=$PWD/target/debug/examples/testing_server scripts/test-ruby.sh
}
# One lock, every language (tests/it/every_language.rs): Rust, C, Python, Node.js, Ruby and
# Curator or kazoo holders in turn on one mutex; after the Node.js tests, which install koffi.
every_language() {
    lints_on
    cargo nextest run -P ci --features "$features" --ignore-default-filter \
        -E 'test(/^every_language::/)'
}

# One minute of the nemesis soak (it waits on its own ensemble's faults far more than on the
# CPU): every recipe under killed members, partitions, paused, cut off and killed clients,
# every hold checked (scripts/soak.sh 60 runs an hour).
soak() {
    scripts/soak.sh 1
}

# --- the plan ------------------------------------------------------------------------------

# Whatever runs in the background ends with this script.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
# Runs step $1 with its output in target/test-$1.log (a step in the background runs so);
# prints its end, and its log on a failure; returns its status.
logged() {
    local rc=0
    (
        rc=0
        "$1" || rc=$?
        cpu
        echo "$CPU" >"target/test-$1.cpu"
        exit "$rc"
    ) >"target/test-$1.log" 2>&1 || rc=$?
    say "$1, exit $rc, $(cat "target/test-$1.cpu" 2>/dev/null || echo ?) s of CPU"
    [ "$rc" = 0 ] || { cat "target/test-$1.log" >&2; return 1; }
}
mkdir -p target
built=target/.test-sh-built
rm -f "$built"

install
say "installed what was missing"
fmt
say "fmt"
# Beside the build and then the Rust tests: the Python package's release build, then, once the
# tests' build made the testing server, the other languages' tests (Python beside Node.js and
# Ruby) and the published crate, its docs.
(
    rc=0
    logged python_install || exit 1
    logged installed_build &
    ib=$!
    until [ -e "$built" ]; do sleep 1; done
    logged python_tests &
    py=$!
    logged node_tests || rc=1
    logged ruby_tests || rc=1
    logged every_language || rc=1
    logged package || rc=1
    logged docs || rc=1
    wait "$py" || rc=1
    wait "$ib" || rc=1
    exit "$rc"
) &
languages=$!
cpu && c0=$CPU
clippy_build
cpu && say "build, with clippy, $((CPU - c0)) s of CPU"
header
touch "$built"
logged soak &
soaking=$!
failed=()
# In a subshell of its own, whose `times` counts only its own children (this shell's would
# count every background step that ended meanwhile).
(
    rc=0
    rust_tests || rc=$?
    cpu
    say "rust_tests, exit $rc, $CPU s of CPU"
    exit "$rc"
) || failed+=(rust_tests)
wait "$soaking" || failed+=(soak)
tail -n 2 target/test-soak.log >&2
wait "$languages" || failed+=("other languages, package or docs")
say "Python, Node.js and Ruby tests, every language, the published crate, docs"
if [ "${#failed[@]}" != 0 ]; then
    echo "test.sh: failed: ${failed[*]}" >&2
    exit 1
fi
cpu && echo "test.sh: all passed in $SECONDS s, $CPU s of CPU"
