#!/usr/bin/env bash
# Installs cargo-c (`cargo cinstall`, what scripts/install.sh and the packaging test run) once,
# if it is missing; a second caller waits for an install already under way (flock) instead of
# starting its own.
#   scripts/install-cargo-c.sh [--debug]
# --debug builds it without optimisations: about half the compile time, for a tool that only
# drives one cargo build (scripts/test.sh runs it in the background while the suite builds).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_C_VERSION=0.10.24+cargo-0.98.0
mkdir -p target
exec 9>target/.install-cargo-c.lock
flock 9
if cargo cinstall --version >/dev/null 2>&1; then
    exit 0
fi
echo "install-cargo-c: installing cargo-c $CARGO_C_VERSION ${1:-} (once; a few minutes)" >&2
cargo install cargo-c --version "$CARGO_C_VERSION" --locked ${1:+"$1"}
