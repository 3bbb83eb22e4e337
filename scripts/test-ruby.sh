#!/usr/bin/env bash
# The Ruby gem (bindings/ruby): runs its minitest files against real ZooKeeper servers, then
# builds the gem with the C library bundled (gem build), installs it into a fresh GEM_HOME and
# takes a lock with it (bindings/ruby/test/support/gem_check.rb).
#   scripts/test-ruby.sh [test|gem]     one half only (default: both)
#   ZKLOCK_LIBRARY          the C library to test (default: target/release/libzklock.so, built
#                           with the capi features each time: the target directory is shared,
#                           and a build with other features leaves a library without TLS there;
#                           a no-op when it is up to date); it is also the one bundled into the gem
#   ZKL_TESTING_SERVER_BIN  tools/testing_server.rs's binary (default: its debug build in
#                           target/, built if missing), which starts the tests' servers
#   ZKLOCK_TEST_SERVER      127.0.0.1:PORT of a shared server for the plain tests and the gem's
#                           check (default: a server of their own)
#   ZKL_GSSAPI_LIBRARY      a C library built with sasl-gssapi, for test/test_kerberos.rb (real
#                           KDC; skipped when the library has no GSSAPI, as capi's has not)
#   TESTOPTS                passed to minitest (e.g. TESTOPTS="-v -n /interrupt/")
# Needs ruby (Debian's ruby; scripts/install-deps.sh installs it): Fiddle and minitest come
# with it.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
features=${ZKL_FEATURES:-testing,cli,header}

command -v ruby >/dev/null && command -v gem >/dev/null ||
    { echo "test-ruby.sh: ruby and gem are missing: run scripts/install-deps.sh" >&2; exit 1; }

if [ -z "${ZKLOCK_LIBRARY:-}" ]; then
    ZKLOCK_LIBRARY=$target/release/libzklock.so
    nice -n 10 cargo build --release --locked --quiet --features capi --lib
fi
export ZKLOCK_LIBRARY
if [ -z "${ZKL_TESTING_SERVER_BIN:-}" ]; then
    ZKL_TESTING_SERVER_BIN=$target/debug/examples/testing_server
    if [ ! -x "$ZKL_TESTING_SERVER_BIN" ]; then
        nice -n 10 cargo build --locked --quiet --features "$features" --example testing_server
    fi
fi
export ZKL_TESTING_SERVER_BIN

cd bindings/ruby
if [ "$what" != gem ]; then
    # Every test file in one process (the servers start once), in minitest's random order.
    # shellcheck disable=SC2086
    ruby -w -Ilib -Itest -e 'Dir.glob("test/test_*.rb").sort.each { |f| require File.expand_path(f) }' \
        -- ${TESTOPTS:-}
fi

if [ "$what" != test ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/zklock-ruby-gem.XXXXXX")
    server_pid=
    cleanup() {
        if [ -n "$server_pid" ]; then
            kill "$server_pid" 2>/dev/null || true
            wait "$server_pid" 2>/dev/null || true
        fi
        rm -rf "$work"
    }
    trap cleanup EXIT
    # The gem's files and the library, in a staging copy: the checkout's bindings/ruby stays as
    # it is (no .gem, no library in it).
    mkdir -p "$work/stage" "$work/gems" "$work/app"
    cp -r zklock.gemspec README.md LICENSE-MIT LICENSE-APACHE lib "$work/stage/"
    cp "$ZKLOCK_LIBRARY" "$work/stage/lib/zklock/libzklock.so"
    (cd "$work/stage" && gem build --quiet zklock.gemspec >/dev/null 2>"$work/build.log") ||
        { cat "$work/build.log" >&2; echo "test-ruby.sh: gem build failed" >&2; exit 1; }
    gemfile=$(ls "$work"/stage/zklock-*.gem)
    echo "test-ruby.sh: built $(basename "$gemfile") ($(du -h "$gemfile" | cut -f1))"
    # A fresh GEM_HOME, nothing else on the gem path, no ZKLOCK_LIBRARY: the gem's own library.
    env -u ZKLOCK_LIBRARY GEM_HOME="$work/gems" GEM_PATH="$work/gems" \
        gem install --local --no-document --quiet "$gemfile" >/dev/null
    hosts=${ZKLOCK_TEST_SERVER:-}
    if [ -z "$hosts" ]; then
        # Serves until this script ends (the starter polls its parent), killed by pid before.
        "$ZKL_TESTING_SERVER_BIN" --until-parent-exits >"$work/server.out" 2>"$work/server.log" &
        server_pid=$!
        for _ in $(seq 1200); do
            grep -qx '' "$work/server.out" 2>/dev/null && break
            kill -0 "$server_pid" 2>/dev/null ||
                { cat "$work/server.log" >&2; echo "test-ruby.sh: testing_server failed" >&2; exit 1; }
            sleep 0.1
        done
        hosts=$(head -n 1 "$work/server.out")
        [ -n "$hosts" ] || { cat "$work/server.log" >&2; echo "test-ruby.sh: no server" >&2; exit 1; }
    fi
    (cd "$work/app" && env -u ZKLOCK_LIBRARY -u RUBYLIB -u RUBYOPT GEM_HOME="$work/gems" \
        GEM_PATH="$work/gems" ruby "$root/bindings/ruby/test/support/gem_check.rb" "$hosts")
fi
