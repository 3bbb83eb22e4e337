#!/usr/bin/env bash
# The Node.js package (bindings/node): installs its one dependency, koffi, from the committed
# package-lock.json (npm ci), builds what is missing (the C library, the testing server), runs
# its tests with node's own runner against real servers, then packs it with the library
# bundled (npm pack), installs the tarball in a fresh directory and takes a lock with it.
#   scripts/test-node.sh [test|pack]     one half only (default: both)
#   ZKLOCK_LIBRARY          the C library to test (default: target/release/libzklock.so,
#                           built if missing); it is also the one bundled into the tarball
#   ZKL_TESTING_SERVER_BIN  tools/testing_server.rs's binary (default: its debug build in
#                           target/, built if missing)
#   ZKLOCK_TEST_SERVER      127.0.0.1:PORT of a shared server for the plain tests (default:
#                           each test file starts its own)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
features=${ZKL_FEATURES:-testing,cli,header}

if [ -z "${ZKLOCK_LIBRARY:-}" ]; then
    ZKLOCK_LIBRARY=$target/release/libzklock.so
    if [ ! -e "$ZKLOCK_LIBRARY" ]; then
        nice -n 10 cargo build --release --locked --quiet --features capi --lib
    fi
fi
export ZKLOCK_LIBRARY
if [ -z "${ZKL_TESTING_SERVER_BIN:-}" ]; then
    ZKL_TESTING_SERVER_BIN=$target/debug/examples/testing_server
    if [ ! -x "$ZKL_TESTING_SERVER_BIN" ]; then
        nice -n 10 cargo build --locked --quiet --features "$features" --example testing_server
    fi
fi
export ZKL_TESTING_SERVER_BIN

cd bindings/node
npm ci --no-audit --no-fund --loglevel=error

if [ "$what" != pack ]; then
    node --test --test-reporter=spec
fi

if [ "$what" != test ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/zklock-node-pack.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    # The package's files (package.json's "files") and the library, in a staging copy: the
    # checkout's bindings/node stays as it is.
    mkdir -p "$work/stage/native" "$work/app"
    cp -r package.json package-lock.json README.md LICENSE-MIT LICENSE-APACHE index.d.ts lib \
        "$work/stage/"
    cp "$ZKLOCK_LIBRARY" "$work/stage/native/libzklock.so"
    tarball=$(cd "$work/stage" && npm pack --silent --pack-destination "$work")
    echo "test-node.sh: packed $tarball ($(du -h "$work/$tarball" | cut -f1))"
    (cd "$work/app" && npm init -y >/dev/null &&
        npm install --no-audit --no-fund --loglevel=error "$work/$tarball")
    node test-support/pack-check.js "$work/app"
fi
