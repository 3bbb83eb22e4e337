#!/usr/bin/env bash
# zklock side by side with the raw floor, Curator and kazoo, in one interleaved run:
#   1. installs what the peers need if it is missing (Curator jars, netcat, javac, kazoo),
#   2. builds zklock's benchmark driver (benches/peerbench, a workspace member) in release,
#   3. runs REPEATS (3) interleaved repeats: peers/run-all.sh (W1, W2 C=2/8/32, W3, W4, W5) over
#      zklock + raw-java + curator:lock + kazoo:lock + zkclient-lock:lock (the zookeeper-client
#      crate's own recipe, `Client::lock`: what a Rust user would pick instead; no W5), then in the same repeat the zklock-only
#      rows: W1 through the C ABI and of Semaphore(1) against the Rust API's mutex (mirrored),
#      W2 at 8 clients through the C ABI (from Rust, and from Python: benches/zklock-py), W4
#      for the read-write lock and the semaphores, W6
#      (10 / 100 / 1,000 queued waiters) and client memory,
#      and, in every repeat (with BENCH_ONLY_CORE=1 too), TLS beside plaintext (issue 27):
#      `zklock-peerbench TLS` starts two zklock::testing servers with the same settings, one
#      plaintext and one TLS-only (server-authenticated), and runs the connect time, W1 and W2
#      at 8 clients against each, two rounds alternating which goes first (about 45 s),
#   4. prints the ratio table.
#
# Where a run goes: everything of it is under target/bench/<date>-<HHMM>[.vs-<short>][.core]/
# (<CARGO_TARGET_DIR>/bench/... when that is set; out of git): the raw rows (rows.jsonl: the
# harness's rows of every impl; zklock.jsonl: the zklock-only rows; tls.jsonl), run.log, the
# whole report (report.md, printed at the end) and entry.md, the run's section of
# benches/RESULTS.md made by benches/record.py. The script prints where. To keep a run (by hand):
# name the milestone in entry.md's heading and anchor, put it at the top of benches/RESULTS.md's
# sections (newest first), and commit it with the change it measured; several runs of one
# milestone make one section: benches/record.py <newest>/report.md <older>/report.md.
#
# Environment: PEERS_DIR (default <repo>/benches/peers, the project's own drivers), REPEATS (3), BENCH_DURATION (5 s for W2
# and W5 instead of the harness's 10, to finish in about 17 minutes on 2 cores), BENCH_SKIP_INSTALL=1,
# CARGO_TARGET_DIR (honoured), BENCH_W6_SIZES ("10 100 1000"), BENCH_TLS=0 (skips TLS beside plaintext).
#
# Before/after: BENCH_BASELINE_REV=<git rev> also builds the benchmark driver of that revision (in a
# detached worktree <target>/bench-baseline/<short>, with its own CARGO_TARGET_DIR
# <target>/bench-baseline/target; the binary is kept in <target>/bench-baseline/zklock@<short>/ and
# reused on later runs) and runs it as one more harness impl, zklock@<short>, in the same repeats as
# zklock (the two alternate which goes first from repeat to repeat). The report then adds a
# "before → after" table (per-repeat ratios, median over repeats). BENCH_ONLY_CORE=1 skips the
# zklock-only rows (C ABI, W4 for rw/semaphore/lease, W6, memory). Either option tags the run's
# directory (target/bench/<date>-<HHMM>[.vs-<short>][.core]/).
#   BENCH_BASELINE_REV=main~1 BENCH_ONLY_CORE=1 scripts/bench.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS_DIR=${PEERS_DIR:-$ROOT/benches/peers}
PEERS_DIR=$(cd "$PEERS_DIR" && pwd) || { echo "bench: no peers harness at $PEERS_DIR (set PEERS_DIR)" >&2; exit 2; }
REPEATS=${REPEATS:-3}
export BENCH_DURATION=${BENCH_DURATION:-5}
W6_SIZES=${BENCH_W6_SIZES:-10 100 1000}
BASE_REV=${BENCH_BASELINE_REV:-}
ONLY_CORE=${BENCH_ONLY_CORE:-0}
RUN_TLS=${BENCH_TLS:-1}
say() { echo "bench: $*" >&2; }
T0=$(date +%s)

# ---------------------------------------------------------------- 1. prerequisites
install_prereqs() {
  local apt=() sudo=()
  for jar in curator-recipes curator-framework curator-client; do
    [ -f "/usr/share/java/$jar.jar" ] || apt+=("lib$jar-java")
  done
  [ -f /usr/share/java/zookeeper.jar ] || apt+=(zookeeper)
  # the TLS test server (TLS beside plaintext) needs Netty's codec, which zookeeper.jar does not list
  [ -f /usr/share/java/netty-codec.jar ] || apt+=(libnetty-java)
  command -v javac >/dev/null 2>&1 || apt+=(openjdk-17-jdk-headless)
  command -v nc >/dev/null 2>&1 || apt+=(netcat-openbsd)
  command -v python3 >/dev/null 2>&1 || apt+=(python3 python3-pip)
  if [ ${#apt[@]} -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null 2>&1 && sudo=(sudo); }
    say "installing ${apt[*]}"
    ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${apt[@]}" >&2
  fi
  if ! python3 -c 'import kazoo' >/dev/null 2>&1; then
    say "pip install kazoo"
    python3 -m pip install -q kazoo >&2 || python3 -m pip install -q --break-system-packages kazoo >&2
  fi
}
if [ "${BENCH_SKIP_INSTALL:-0}" != 1 ]; then install_prereqs; fi
# zookeeper-client's recipe is a Cargo project of its own (tokio; outside the workspace): its bench
# builds itself on first use; build it here so that no timed row pays for it (W5 builds, then exits 3)
if [ -x "$PEERS_DIR/zkclient-lock/bench" ]; then
  say "building the zkclient-lock peer (benches/peers/zkclient-lock, cargo build --release)"
  "$PEERS_DIR/zkclient-lock/bench" W5 >/dev/null 2>&1 || [ $? = 3 ] || { say "zkclient-lock: build failed"; exit 1; }
fi

# ---------------------------------------------------------------- 2. build
say "building the benchmark driver (benches/peerbench) and the cdylib in release"
(cd "$ROOT" && cargo build --release --lib && cargo build --release -p zklock-peerbench >&2)
TD=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TD" in /*) ;; *) TD=$ROOT/$TD ;; esac
export ZKLOCK_BENCH_BIN=$TD/release/zklock-peerbench
export ZKLOCK_LIBRARY=$TD/release/libzklock.so
ZKB=$ROOT/benches/zklock-bench
ZKPY=$ROOT/benches/zklock-py/bench

# the baseline revision's peerbench, behind a wrapper that relabels its rows zklock@<short>
BASE_BENCH="" TAG=""
if [ -n "$BASE_REV" ]; then
  BASE_SHA=$(git -C "$ROOT" rev-parse --verify -q "$BASE_REV^{commit}") \
    || { say "BENCH_BASELINE_REV=$BASE_REV is not a commit"; exit 2; }
  # The driver was examples/peerbench.rs before it became the workspace member benches/peerbench.
  if git -C "$ROOT" cat-file -e "$BASE_SHA:benches/peerbench/Cargo.toml" 2>/dev/null; then
    BASE_BUILD=(cargo build --release -p zklock-peerbench) BASE_BIN=release/zklock-peerbench
  elif git -C "$ROOT" cat-file -e "$BASE_SHA:examples/peerbench.rs" 2>/dev/null; then
    BASE_BUILD=(cargo build --release --example peerbench) BASE_BIN=release/examples/peerbench
  else
    say "$BASE_REV has no benchmark driver"; exit 2
  fi
  BASE_SHORT=$(git -C "$ROOT" rev-parse --short "$BASE_SHA")
  BASE_LABEL=zklock@$BASE_SHORT
  BDIR=$TD/bench-baseline
  BWT=$BDIR/$BASE_SHORT
  BOUT=$BDIR/$BASE_LABEL
  if [ -x "$BOUT/peerbench" ] && [ "$(cat "$BOUT/rev" 2>/dev/null)" = "$BASE_SHA" ]; then
    say "baseline $BASE_LABEL: reusing $BOUT/peerbench"
  else
    say "baseline $BASE_LABEL: building the benchmark driver of $BASE_SHA in $BWT"
    mkdir -p "$BDIR" "$BOUT"
    if [ ! -f "$BWT/.git" ] || [ "$(git -C "$BWT" rev-parse HEAD)" != "$BASE_SHA" ]; then
      git -C "$ROOT" worktree prune
      [ ! -e "$BWT" ] || git -C "$ROOT" worktree remove --force "$BWT" 2>/dev/null || rm -rf "$BWT"
      git -C "$ROOT" worktree add -q --detach "$BWT" "$BASE_SHA" >&2
    fi
    (cd "$BWT" && CARGO_TARGET_DIR=$BDIR/target "${BASE_BUILD[@]}" >&2)
    cp "$BDIR/target/$BASE_BIN" "$BOUT/peerbench.tmp"
    mv "$BOUT/peerbench.tmp" "$BOUT/peerbench"
    echo "$BASE_SHA" > "$BOUT/rev"
  fi
  # run.sh names a path impl after its folder (zklock@<short>); the rows get that name too
  cat > "$BOUT/bench" <<WRAPPER
#!/usr/bin/env bash
# generated by scripts/bench.sh: zklock at $BASE_SHA through the current adapter, rows relabelled $BASE_LABEL
set -o pipefail
ZKLOCK_BENCH_BIN='$BOUT/peerbench' '$ZKB' "\$@" | sed -u 's/"impl": *"zklock"/"impl": "$BASE_LABEL"/'
WRAPPER
  chmod +x "$BOUT/bench"
  BASE_BENCH=$BOUT/bench
  TAG=.vs-$BASE_SHORT
fi
[ "$ONLY_CORE" != 1 ] || TAG=$TAG.core

# ---------------------------------------------------------------- 3. run
export ZK_CONNECT=127.0.0.1:2182
"$PEERS_DIR/zk.sh" start >&2
DAY=$(date +%Y-%m-%d)
RES=$TD/bench/$DAY-$(date +%H%M)$TAG
mkdir -p "$RES"
MAIN=$RES/rows.jsonl
EXTRA=$RES/zklock.jsonl
LOG=$RES/run.log
TLSJ=$RES/tls.jsonl
: > "$MAIN"; : > "$EXTRA"; : > "$TLSJ"
say "this run's directory: $RES (raw rows: rows.jsonl, zklock.jsonl, tls.jsonl; log: run.log)"
one() { # one zklock-only row into $EXTRA: [PLUGIN=$ZKPY] one W[..] recipe [clients] [KEY=VAL ...]
  local plugin=${PLUGIN:-$ZKB} w=$1 rec=${2:-lock} label=zklock
  local spec=$plugin; [ -n "$2" ] && spec=$plugin:$2; shift 2
  [ "$plugin" = "$ZKB" ] || label=$(basename "$(dirname "$plugin")")
  echo "[rep $r] $w $label:$rec $*  $(date +%T) load=$(cut -d' ' -f1 /proc/loadavg)" >&2
  BENCH_OUT=$EXTRA "$PEERS_DIR/run.sh" "$w" "$spec" "$@" > /dev/null || echo "  failed rc=$?" >&2
}
{
  for r in $(seq 1 "$REPEATS"); do
    ZK=("$ZKB")   # with a baseline: zklock and zklock@<short> side by side, alternating which goes first
    if [ -n "$BASE_BENCH" ]; then
      if [ $((r % 2)) = 1 ]; then ZK=("$ZKB" "$BASE_BENCH"); else ZK=("$BASE_BENCH" "$ZKB"); fi
    fi
    BENCH_OUT=$MAIN REP_START=$r "$PEERS_DIR/run-all.sh" 1 "${ZK[@]}" raw-java curator:lock kazoo:lock zkclient-lock:lock
    # TLS beside plaintext: the driver starts its own two servers; which goes first alternates
    # within the run and from repeat to repeat
    if [ "$RUN_TLS" = 1 ]; then
      first=plain; [ $((r % 2)) = 1 ] || first=tls
      echo "[rep $r] TLS beside plaintext (zklock-peerbench TLS, $first first)  $(date +%T) load=$(cut -d' ' -f1 /proc/loadavg)" >&2
      BENCH_RUN_ID="rep$r-$(date +%s)" BENCH_TLS_FIRST=$first "$ZKLOCK_BENCH_BIN" TLS 8 >> "$TLSJ" \
        || echo "  failed rc=$?" >&2
    fi
    [ "$ONLY_CORE" != 1 ] || continue
    export BENCH_RUN_ID="rep$r-$(date +%s)"
    # W1: the C ABI and Semaphore(1) vs the Rust API's mutex, mirrored so that drift cancels;
    # W2 at 8 clients through the C ABI (its floor is in run-all's rows of this repeat)
    one W1 "" ; one W1 ffi ; one W1 lease ; one W1 lease ; one W1 ffi ; one W1 ""
    one W2 ffi 8
    # the C ABI from Python (bindings/python under the peers' Python driver, as kazoo runs)
    PLUGIN=$ZKPY one W1 lock ; PLUGIN=$ZKPY one W2 lock 8
    # W4 for the other herd-free recipes (zklock:lock is in run-all's rows)
    for rec in rw semaphore lease; do one W4 "$rec"; done
    # W6: steady queue of N, one session per waiter; then memory with all waiters on one client;
    # then the draining queue (diagnostic: which part of a handoff grows with N)
    for n in $W6_SIZES; do one W6 "" "$n"; done
    BENCH_W6_SESSIONS=shared one W6 "" 1000
    for n in 10 1000; do BENCH_W6_MODE=drain BENCH_W6_HANDOFFS=200 one W6 "" "$n"; done
    unset BENCH_RUN_ID
  done
} 2> >(tee "$LOG" >&2)

# ---------------------------------------------------------------- 4. report
MD=$RES/report.md
{
  echo "# zklock vs the peers — $DAY"
  echo
  ENVS="${BASE_REV:+BENCH_BASELINE_REV=$BASE_REV }$([ "$ONLY_CORE" != 1 ] || echo 'BENCH_ONLY_CORE=1 ')$([ "$RUN_TLS" = 1 ] || echo 'BENCH_TLS=0 ')"
  echo "Command: \`${ENVS}scripts/bench.sh\` (REPEATS=$REPEATS, BENCH_DURATION=${BENCH_DURATION}s for W2/W5 —"
  echo "the harness default is 10 s; shortened so the whole run fits in ~17 min on 2 cores). Every"
  echo "ratio is taken within one interleaved repeat, then the median over repeats."
  echo
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')),"
  echo "$(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, $(uname -sr), host $(hostname);"
  echo "ZooKeeper $(echo srvr | nc -q1 127.0.0.1 2182 2>/dev/null | awk -F': ' '/version/{print $2}' | cut -d- -f1) standalone on"
  echo "127.0.0.1:2182 (peers/zk.sh: forceSync=no). Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "(the cores are shared with other jobs: absolute numbers are noisy, ratios are what count)."
  echo "zklock $(grep -m1 '^version' "$ROOT/Cargo.toml" | cut -d'"' -f2) at $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$ROOT" && [ -n "$(git status --porcelain -- src Cargo.toml 2>/dev/null)" ] && echo ' (uncommitted changes)')."
  if [ -n "$BASE_REV" ]; then
    echo "Baseline (\"before\"): $BASE_LABEL = $BASE_SHA \"$(git -C "$ROOT" log -1 --format=%s "$BASE_SHA" | cut -c1-100)\","
    echo "built from its own worktree and run through the same adapter, interleaved with zklock in every repeat."
  fi
  [ "$ONLY_CORE" != 1 ] || echo "BENCH_ONLY_CORE=1: the zklock-only rows (C ABI, W4 per recipe, W6, memory) were not run."
  echo
  python3 "$ROOT/benches/summary.py" "$MAIN" "$EXTRA"
  echo
  [ "$RUN_TLS" != 1 ] || python3 "$ROOT/benches/tls_summary.py" "$TLSJ"
  echo "## Side by side (peers/summarize.py: W1–W5, raw floor = raw-java:lock)"
  python3 "$PEERS_DIR/summarize.py" "$MAIN"
  echo
  RAW="\`$MAIN\`, \`$EXTRA\`"
  [ "$RUN_TLS" != 1 ] || RAW="$RAW, \`$TLSJ\`"
  echo "Raw rows: $RAW."
  echo "Wall time: $(( ($(date +%s) - T0) / 60 )) min."
} > "$MD"
cat "$MD"
python3 "$ROOT/benches/record.py" "$MD" > "$RES/entry.md" || say "benches/record.py failed on $MD"
say "wrote $MD"
say "its section for benches/RESULTS.md (to keep the run: see RESULTS.md, \"Adding a run\"): $RES/entry.md"
