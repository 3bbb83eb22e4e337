#!/usr/bin/env bash
# W1 (uncontended acquire + release) of one recipe, this checkout against a baseline revision,
# interleaved in one run on one fresh server; prints each pair and the ratio of the medians.
#   scripts/bench-w1.sh REV [RECIPE] [PAIRS]     RECIPE: lock | simple | semaphore | lease | rw
#                                                (default simple), PAIRS default 5
# The baseline's driver is the one `BENCH_BASELINE_REV=REV scripts/bench.sh` builds and keeps
# (target/bench-baseline/zklock@<short>/peerbench); this builds it the same way if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/bench-w1.sh REV [RECIPE] [PAIRS]}
recipe=${2:-simple}
pairs=${3:-5}
short=$(git rev-parse --short "$rev")
T=${CARGO_TARGET_DIR:-$PWD/target}
base=$T/bench-baseline/zklock@$short/peerbench
if [ ! -x "$base" ]; then
  echo "bench-w1: building the baseline driver of $short" >&2
  wt=$T/bench-baseline/$short
  [ -d "$wt" ] || git worktree add -q --detach "$wt" "$rev"
  (cd "$wt" && CARGO_TARGET_DIR=$T/bench-baseline/target cargo build -q --release -p zklock-peerbench)
  mkdir -p "$(dirname "$base")"
  cp "$T/bench-baseline/target/release/zklock-peerbench" "$base"
fi
cargo build -q --release -p zklock-peerbench
cargo build -q --features testing --example testing_server
new=$T/release/zklock-peerbench
out=$(mktemp -d)
trap 'exec 9>&- ; rm -rf "$out"' EXIT
# The server lives until this script's end closes its stdin.
exec 9> >(exec "$T/debug/examples/testing_server" >"$out/server" 2>/dev/null)
for _ in $(seq 300); do [ -s "$out/server" ] && break; sleep 0.1; done
zk=$(cat "$out/server")
p50() { BENCH_RECIPE=$recipe ZK_CONNECT=$zk "$1" W1 2>/dev/null | tail -1 |
  python3 -c 'import json,sys; m=json.load(sys.stdin)["metrics"]; print(m["cycle_p50_us"], m["cpu_us_per_cycle"])'; }
for i in $(seq "$pairs"); do
  # Alternate which goes first, so that drift cancels.
  if [ $((i % 2)) = 1 ]; then a=$(p50 "$new"); b=$(p50 "$base"); else b=$(p50 "$base"); a=$(p50 "$new"); fi
  echo "pair $i: W1 $recipe p50 µs, cpu µs/cycle: this checkout $a; $short $b"
  echo "$a $b" >>"$out/rows"
done
python3 - "$out/rows" "$short" "$recipe" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
r = [a / b for a, _, b, _ in rows]
c = [a / b for _, a, _, b in rows]
print(f"W1 {sys.argv[3]}: p50 this ÷ {sys.argv[2]} = {statistics.median(r):.2f} "
      f"(pairs {min(r):.2f}-{max(r):.2f}); cpu/cycle ÷ = {statistics.median(c):.2f}")
PY
