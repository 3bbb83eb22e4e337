#!/usr/bin/env bash
# The nemesis soak (tools/soak/): a three-member ensemble, client processes each behind
# proxies of their own, every recipe at once, and a nemesis that kills and restarts members,
# partitions a follower (the partition holds bytes and delivers them at the heal; the clients
# on it are cut off, or moved to other members), cuts off the leader from its quorum with its
# clients, pauses, cuts off and kills clients, every fault kind at once; every hold is checked,
# and so is every acquire's success (Held at the holder's first look).
#   scripts/soak.sh [minutes]     (default 5; CI runs 1; an hour: scripts/soak.sh 60)
# Prints one summary line; exits 1 on any violation (each printed, evidence kept under
# target/soak/<time>/, with who removed each lock node from the members' transaction logs).
# More knobs: SOAK_ARGS="--clients 8 --session-ms 4000 --seed 42"; one fault of each side at a
# time instead of all at once: SOAK_ARGS="--all-at-once false".
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
scripts/install-deps.sh >/dev/null
export CARGO_TERM_COLOR=never
# ZKL_FEATURES: the features of the caller's build (scripts/test.sh), not to compile twice.
cargo build --quiet --features "${ZKL_FEATURES:-testing}" --example soak
# shellcheck disable=SC2086
exec target/debug/examples/soak --minutes "$minutes" --all-at-once true ${SOAK_ARGS:-}
