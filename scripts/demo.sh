#!/usr/bin/env bash
# The demo: several processes take turns on one ZooKeeper lock; one is killed while holding.
# Uses the ZooKeeper at $1 (default 127.0.0.1:2181) or starts a local one if none answers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cargo run --quiet --release --features testing --example demo -- "$@"
