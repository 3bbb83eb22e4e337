#!/usr/bin/env bash
# Issue 30's scale benchmark: zklock beside Curator (benches/peers/curator), kazoo and
# zookeeper-client's own recipe (benches/peers/zkclient-lock), in one run, against ONE ZooKeeper
# this script starts: benches/peers/zk.sh with ZK_TICK=2000 (tickTime 2 s, so sessions may ask
# 4-40 s), on 127.0.0.1:2183 (ZK_PORT) with its data under $TMPDIR/peerbench-scale (ZK_BASE), so it
# never meets bench.sh's server on 2182; `4lw.commands.whitelist=*`, forceSync=no. Stopped at the end.
#
# What it measures (every driver takes the session timeout from BENCH_SESSION_MS):
#   c. W8: acquires per second on distinct locks from 1, 8 and 32 threads sharing ONE session
#      (SCALE_W8_THREADS; zklock: one Client; Curator: one CuratorFramework; kazoo: one
#      KazooClient; zkclient-lock: one Client, tasks instead of threads), BENCH_DURATION (10 s;
#      quick 3 s) each, with the server's CPU meanwhile (utime+stime of its JVM, % of one core).
#      32 threads find the server's ceiling: past it more threads add nothing, so the speed-up
#      any client can show is at most the ceiling ÷ its own one-thread rate.
#   a. requests per session per minute, idle (connected, nothing held) and holding (one lock held),
#      at T = 4, 10 and 30 s (SCALE_TS): for each T, the 8 processes (4 impls x idle/hold; workload W7,
#      one session each) run at once; once all have logged "W7 READY" and SCALE_SETTLE_S (3) passed,
#      benches/scale.py samples the server's `cons` before and after BENCH_WINDOW_S (60; quick 20)
#      and takes, per process, the delta of `recved` on its own connection (found by the local
#      port of its socket to the server: /proc/<pid>/fd and /proc/net/tcp). A row whose connection
#      changed in the window (a reconnect) shows "–".
#   d. memory and threads, at T = 10 s, 16 processes at once (4 impls x): 1 session holding 1 lock,
#      1 session holding SCALE_LOCKS (1,000; quick 200) locks on distinct paths, 1 idle session,
#      SCALE_SESSIONS (101; quick 21) idle sessions; VmRSS and Threads of /proc/<pid>/status after
#      a 5 s window. Per hold = (many locks - 1 lock) / (locks - 1); per session likewise.
#   b. W6 with SCALE_W6_SIZES (10 100 1000 3000; quick 10 100) waiters, one session each, T = 10 s,
#      interleaved (all impls at one size, then the next size): handoff p50 over BENCH_W6_HANDOFFS
#      (300; quick 100), and the server's load: CPU (utime+stime of the ZooKeeper JVM,
#      /proc/<pid>/stat, in % of one core) and mntr zk_packets_received per second, while the
#      formed queue stands still for BENCH_W6_QUIET_S (10 s; quick 5; the holder holds: what N
#      queued sessions cost the server) and during the handoffs. At SCALE_W6_FLOOR (1000; quick 100)
#      waiters the raw floor (benches/peers/raw-java) runs too: zklock's p50 ÷ the floor's.
#      SCALE_W6_SKIP ("kazoo:3000": see below) lists impl:size pairs not run.
# Then it prints one table (benches/scale.py report): every measure per impl, zklock ÷ Curator and
# issue 30's "Done when" goal where one applies.
#
# Where a run goes: target/bench/<date>-<HHMM>.scale/ (<CARGO_TARGET_DIR>/bench/... if set; out of
# git): rate.jsonl (a), mem.jsonl (d), w6.jsonl (b), w8.jsonl (c), run.log, table.md; each
# process's stderr under logs/.
#
# Environment: SCALE_PARTS (cadb: which of c, a, d, b run), BENCH_SCALE_QUICK=1 (a ~5 min smoke: T = 10 s only, shorter windows, fewer sizes),
# SCALE_IMPLS ("zklock curator kazoo zkclient-lock"; an absolute path names a plug-in executable, such
# as the baseline driver bench.sh keeps in target/bench-baseline/zklock@<rev>/bench), SCALE_TS, BENCH_WINDOW_S, SCALE_W6_SIZES,
# SCALE_W6_FLOOR, SCALE_W6_SKIP, SCALE_LOCKS, SCALE_SESSIONS, BENCH_DURATION, BENCH_W6_HANDOFFS, BENCH_W6_QUIET_S, ZK_PORT,
# BENCH_SKIP_BUILD=1. A full run takes about 20-25 min on 2 cores (W6 at 3,000 waiters is most of it).
#   scripts/bench-scale.sh                  # full
#   BENCH_SCALE_QUICK=1 scripts/bench-scale.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=$ROOT/benches/peers
QUICK=${BENCH_SCALE_QUICK:-0}
q() { if [ "$QUICK" = 1 ]; then echo "$2"; else echo "$1"; fi; }
IMPLS=(${SCALE_IMPLS:-zklock curator kazoo zkclient-lock})
TS=(${SCALE_TS:-$(q "4 10 30" "10")})
WINDOW=${BENCH_WINDOW_S:-$(q 60 20)}
SETTLE=${SCALE_SETTLE_S:-3}
W6_SIZES=(${SCALE_W6_SIZES:-$(q "10 100 1000 3000" "10 100")})
W6_FLOOR=${SCALE_W6_FLOOR:-$(q 1000 100)}
# kazoo cannot hold 3,000 sessions in one Python process: each KazooClient has its own connection
# thread under the GIL, connects time out after 30 s from about 1,400 sessions on, and the process
# spins (a load average in the hundreds on 2 cores). Set SCALE_W6_SKIP="" to try anyway.
W6_SKIP=${SCALE_W6_SKIP-kazoo:3000}
NLOCKS=${SCALE_LOCKS:-$(q 1000 200)}
# Which parts run (letters as below: c W8, a requests, d memory, b W6), e.g. SCALE_PARTS=b.
PARTS=${SCALE_PARTS:-cadb}
part() { [[ $PARTS == *$1* ]]; }
NSESS=${SCALE_SESSIONS:-$(q 101 21)}
DURATION=${BENCH_DURATION:-$(q 10 3)}
export BENCH_W6_HANDOFFS=${BENCH_W6_HANDOFFS:-$(q 300 100)}
export BENCH_W6_QUIET_S=${BENCH_W6_QUIET_S:-$(q 10 5)}
export ZK_PORT=${ZK_PORT:-2183}
export ZK_BASE=${TMPDIR:-/tmp}/peerbench-scale ZK_TICK=2000
export ZK_CONNECT=127.0.0.1:$ZK_PORT
say() { echo "bench-scale: $*" >&2; }
T0=$(date +%s)
REV=$(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && [ -z "$(git status --porcelain -- benches scripts src 2>/dev/null)" ] || echo ' (uncommitted changes)')

# ---------------------------------------------------------------- build
TD=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TD" in /*) ;; *) TD=$ROOT/$TD ;; esac
export ZKLOCK_BENCH_BIN=$TD/release/zklock-peerbench
if [ "${BENCH_SKIP_BUILD:-0}" != 1 ]; then
  say "building zklock's driver (benches/peerbench, release) and the zkclient-lock peer"
  (cd "$ROOT" && nice cargo build --release -p zklock-peerbench >&2)
  "$PEERS/zkclient-lock/bench" W5 >/dev/null 2>&1 || [ $? = 3 ] || { say "zkclient-lock: build failed"; exit 1; }
fi
bench_of() { # the plug-in executable of an impl
  case "$1" in zklock) echo "$ROOT/benches/zklock-bench" ;; /*) echo "$1" ;; *) echo "$PEERS/$1/bench" ;; esac
}
# W6 at 3,000 waiters: one socket per session (and one thread per waiter in the Java/Python drivers)
ulimit -n 65536 2>/dev/null || ulimit -n 16384 2>/dev/null || true

# ---------------------------------------------------------------- the server
RES=$TD/bench/$(date +%Y-%m-%d-%H%M).scale
mkdir -p "$RES/logs"
LOG=$RES/run.log
exec 2> >(tee -a "$LOG" >&2)
say "this run's directory: $RES"
"$PEERS/zk.sh" stop >/dev/null 2>&1 || true
rm -rf "$ZK_BASE/data"
"$PEERS/zk.sh" start >&2
ZKPID=$(cat "$ZK_BASE/zk.pid")
export BENCH_ZK_PID=$ZKPID
echo conf | nc -q1 127.0.0.1 "$ZK_PORT" | grep -E '^(tickTime|minSessionTimeout|maxSessionTimeout)' | sed 's/^/bench-scale: server /' >&2
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  "$PEERS/zk.sh" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
# The freshly started server's JIT warms up on a run that is not kept, whichever part comes
# first (the first impl measured on a cold server was a fifth slower at W8, and three times at W6
# with 10 waiters).
say "warm-up of the server: ${IMPLS[0]} W8, 8 threads, 5 s (not kept)"
BENCH_DURATION=5 BENCH_SESSION_MS=10000 timeout 120 "$(bench_of "${IMPLS[0]}")" W8 8 >/dev/null 2>&1 || true
export BENCH_RUN_ID="scale-$(date +%s)"

# starts one W7 process in the background: w7 <label> <impl> <sessions> <locks> <hold_s> [env ...]
LABELS=() LPIDS=()
w7() {
  local label=$1 impl=$2 sessions=$3 locks=$4 hold=$5; shift 5
  local err=$RES/logs/w7-${label//\//-}.err
  env "$@" BENCH_W7_LOCKS="$locks" BENCH_W7_HOLD_S="$hold" BENCH_JAVA_OPTS=-Xmx1g \
    "$(bench_of "$impl")" W7 "$sessions" > /dev/null 2> "$err" &
  PIDS+=($!)
  LABELS+=("$label") LPIDS+=("$err")
}
# waits until every started W7 process logged READY (at most 300 s); prints label=pid ...
ready() {
  local i pid args=() t=$(date +%s)
  for i in "${!LABELS[@]}"; do
    until pid=$(grep -m1 -o 'W7 READY pid=[0-9]*' "${LPIDS[$i]}" 2>/dev/null | cut -d= -f2) && [ -n "$pid" ]; do
      if [ $(( $(date +%s) - t )) -gt 300 ]; then say "${LABELS[$i]}: not ready after 300 s"; break; fi
      sleep 0.5
    done
    [ -z "$pid" ] || args+=("${LABELS[$i]}=$pid")
  done
  echo "${args[@]}"
}
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=() LABELS=() LPIDS=()
}

# ---------------------------------------------------------------- c. W8
jiffies() { awk '{print $14 + $15}' "/proc/$ZKPID/stat"; }
for t in $(part c && echo "${SCALE_W8_THREADS:-1 8 32}"); do
  for impl in "${IMPLS[@]}"; do
    say "W8 $impl, $t thread(s) on one session, ${DURATION} s  $(date +%T) load=$(cut -d' ' -f1 /proc/loadavg)"
    j0=$(jiffies) s0=$(date +%s.%N)
    BENCH_DURATION=$DURATION BENCH_SESSION_MS=10000 timeout 300 "$(bench_of "$impl")" W8 "$t" \
      > "$RES/w8.last" 2> "$RES/logs/w8-${impl//\//-}-$t.err" || say "  failed rc=$?"
    j1=$(jiffies) s1=$(date +%s.%N)
    # The server's CPU over the driver's whole run (its connect and set-up too: a little low),
    # in % of one core, added to the row's metrics.
    python3 - "$RES/w8.last" "$(( j1 - j0 ))" "$(getconf CLK_TCK)" "$s0" "$s1" >> "$RES/w8.jsonl" <<'PY'
import json, sys
path, ticks, hz, s0, s1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
for line in open(path):
    try:
        row = json.loads(line)
    except ValueError:
        continue
    if isinstance(row.get("metrics"), dict):
        row["metrics"]["server_cpu_pct"] = round(100.0 * ticks / hz / (s1 - s0), 1)
    print(json.dumps(row))
PY
  done
done

# ---------------------------------------------------------------- a. requests per session per minute
part a || TS=()
for T in ${TS[@]+"${TS[@]}"}; do
  say "requests per session per minute at T = $T s: ${#IMPLS[@]} impls x idle/hold at once, window $WINDOW s  $(date +%T)"
  for impl in "${IMPLS[@]}"; do
    w7 "$impl/idle" "$impl" 1 0 $((WINDOW + 400)) BENCH_SESSION_MS=$((T * 1000))
    w7 "$impl/hold" "$impl" 1 1 $((WINDOW + 400)) BENCH_SESSION_MS=$((T * 1000))
  done
  read -r -a ARGS <<< "$(ready)"
  sleep "$SETTLE"
  SCALE_TAGS="{\"T\": $T}" python3 "$ROOT/benches/scale.py" window "$WINDOW" "$ZK_CONNECT" "${ARGS[@]}" >> "$RES/rate.jsonl"
  stop_all
done

# ---------------------------------------------------------------- d. memory and threads
if part d; then
say "memory and threads: 1 lock vs $NLOCKS locks on one session, 1 vs $NSESS idle sessions, T = 10 s  $(date +%T)"
for impl in "${IMPLS[@]}"; do
  w7 "$impl/1lock" "$impl" 1 1 400 BENCH_SESSION_MS=10000
  w7 "$impl/nlocks" "$impl" 1 "$NLOCKS" 400 BENCH_SESSION_MS=10000
  w7 "$impl/idle1" "$impl" 1 0 400 BENCH_SESSION_MS=10000
  w7 "$impl/idleN" "$impl" "$NSESS" 0 400 BENCH_SESSION_MS=10000
done
read -r -a ARGS <<< "$(ready)"
sleep "$SETTLE"
SCALE_TAGS="{\"T\": 10, \"locks\": $NLOCKS, \"sessions\": $NSESS}" \
  python3 "$ROOT/benches/scale.py" window 5 "$ZK_CONNECT" "${ARGS[@]}" >> "$RES/mem.jsonl"
stop_all
sleep 12   # the killed processes' sessions expire (T = 10 s) before the W6 rows measure the server
fi

# ---------------------------------------------------------------- b. W6 handoff and server load
part b || W6_SIZES=()
for n in ${W6_SIZES[@]+"${W6_SIZES[@]}"}; do
  W6_IMPLS=("${IMPLS[@]}")
  # the raw floor (raw-java: the recipe of the ZooKeeper docs on the bare Java client) at the size
  # of issue 30's "W6 at 1,000 waiters at most 0.40x the raw floor"
  for f in $W6_FLOOR; do [ "$f" != "$n" ] || W6_IMPLS+=(raw-java); done
  for impl in "${W6_IMPLS[@]}"; do
    if [[ " $W6_SKIP " == *" $impl:$n "* ]]; then say "W6 $impl, $n waiters: skipped (SCALE_W6_SKIP)"; continue; fi
    say "W6 $impl, $n waiters (one session each), T = 10 s  $(date +%T) load=$(cut -d' ' -f1 /proc/loadavg)"
    jo=-Xmx1g; [ "$n" -lt 1000 ] || jo=-Xmx3g
    BENCH_SESSION_MS=10000 BENCH_JAVA_OPTS=$jo timeout 900 "$(bench_of "$impl")" W6 "$n" \
      >> "$RES/w6.jsonl" 2> "$RES/logs/w6-${impl//\//-}-$n.err" || say "  failed rc=$?"
    sleep 2
  done
done

# ---------------------------------------------------------------- the table
{
  echo "# Scale: zklock beside Curator, kazoo and zookeeper-client's recipe — $(date +%Y-%m-%d)"
  echo
  echo "Command: \`$([ "$QUICK" != 1 ] || echo 'BENCH_SCALE_QUICK=1 ')scripts/bench-scale.sh\`. One ZooKeeper"
  echo "$(echo srvr | nc -q1 127.0.0.1 "$ZK_PORT" 2>/dev/null | awk -F': ' '/version/{print $2}' | cut -d- -f1) standalone (tickTime 2 s, forceSync=no) on $ZK_CONNECT;"
  echo "$(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg); zklock at $REV (when the run started)."
  [ -z "$W6_SKIP" ] || echo "W6 not run: $W6_SKIP (SCALE_W6_SKIP: kazoo's connects time out past ~1,400 sessions in one process)."
  echo "Windows: requests ${WINDOW} s per T (T = ${TS[*]} s); W8 ${DURATION} s; W6 ${BENCH_W6_HANDOFFS} handoffs, the standing queue ${BENCH_W6_QUIET_S} s."
  echo
  python3 "$ROOT/benches/scale.py" report "$RES"
  echo
  echo "Raw rows: \`$RES\`/{rate,mem,w6,w8}.jsonl. Wall time: $(( ($(date +%s) - T0) / 60 )) min."
} > "$RES/table.md"
cat "$RES/table.md"
say "wrote $RES/table.md"
