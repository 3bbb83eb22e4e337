#!/usr/bin/env python3
"""zklock's lines of the benchmark report (scripts/bench.sh): the issue's targets with the measured
values, then W1 through the C ABI, W4 per recipe, W6 scale and client memory.

Usage: benches/summary.py <main.jsonl> <extras.jsonl>
  main.jsonl:   peers/run-all.sh rows (zklock, raw-java, curator, kazoo; run_id "repN-...") and, with
                BENCH_BASELINE_REV, the baseline's rows (impl "zklock@<short>"): then a "before → after"
                table comes first (current ÷ baseline per repeat, median over repeats).
  extras.jsonl: zklock-only rows of the same repeats (run_id "repN-..."): W1 lock/ffi/lease rows,
                W2 through the C ABI (from Rust: zklock:ffi; from Python: zklock-py:lock),
                W4 per recipe, W6.
Ratios are taken within a repeat, then the median over repeats (as peers/summarize.py does)."""
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    rows = []
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                if r.get("metrics"):
                    rows.append(r)
    except FileNotFoundError:
        pass
    return rows


def rep(r):
    return r.get("run_id", "").split("-")[0]


def key(r):
    return "%s:%s" % (r["impl"], r["recipe"])


def clients(r):
    return r["params"].get("clients", 1)


main_rows = load(sys.argv[1])
extra_rows = load(sys.argv[2]) if len(sys.argv) > 2 else []


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def per_rep(rows, w, impl, metric, c=None):
    """{rep: [values]} of one metric."""
    out = defaultdict(list)
    for r in rows:
        if r["workload"] == w and key(r) == impl and (c is None or clients(r) == c):
            v = r["metrics"].get(metric)
            if v is not None:
                out[rep(r)].append(v)
    return out


def ratio(w, impl, metric, c=None, floor="raw-java:lock", rows=None):
    rows = main_rows if rows is None else rows
    a, f = per_rep(rows, w, impl, metric, c), per_rep(rows, w, floor, metric, c)
    xs = [statistics.mean(a[k]) / statistics.mean(f[k]) for k in a if k in f and statistics.mean(f[k])]
    return med(xs), len(xs)


def fmt(x, nd=2, unit=""):
    if x is None:
        return "–"
    return ("{:,.%df}" % nd).format(x) + unit


def verdict(x, ok):
    if x is None:
        return "not measured"
    return "**met**" if ok(x) else "**missed**"


# ---------------------------------------------------------------- before → after (BENCH_BASELINE_REV)
BEFORE_AFTER = (  # workload, clients, metric, label, which way is better
    ("W1", 1, "cycle_p50_us", "W1 uncontended: cycle p50 µs", "lower"),
    ("W1", 1, "cycle_p99_us", "W1 uncontended: cycle p99 µs", "lower"),
    ("W2", 2, "acq_per_s", "W2 2 clients: acq/s", "higher"),
    ("W2", 8, "acq_per_s", "W2 8 clients: acq/s", "higher"),
    ("W2", 32, "acq_per_s", "W2 32 clients: acq/s", "higher"),
    ("W3", 1, "handoff_p50_us", "W3 handoff p50 µs", "lower"),
    ("W3", 1, "handoff_p99_us", "W3 handoff p99 µs", "lower"),
    ("W4", 1, "notifications_per_release", "W4 client notifications/release", "lower"),
    ("W4", 1, "server_triggers_per_release", "W4 server triggers/release", "lower"),
    ("W4", 1, "mean_handoff_us", "W4 mean handoff µs", "lower"),
    ("W5", 8, "ops_per_s", "W5 8 clients r/w: ops/s", "higher"),
    ("W5", 8, "write_wait_max_us", "W5 write wait max µs", "lower"),
)


def before_after(base, after="zklock:lock"):
    """The baseline (impl zklock@<short>) against the current zklock, same repeats of main.jsonl."""
    print("### Before → after: %s → zklock (after ÷ before within each repeat, median over repeats)\n" % base)
    print("| workload: metric | better | n | before (%s) | after (zklock) | after ÷ before | per-repeat ÷ (min–max) |"
          % base)
    print("|---|---|---|---|---|---|---|")
    for w, c, metric, label, better in BEFORE_AFTER:
        cw = None if w in ("W1", "W3", "W4") else c
        b = per_rep(main_rows, w, base + ":lock", metric, cw)
        a = per_rep(main_rows, w, after, metric, cw)
        if not a and not b:
            continue
        bm = {k: statistics.mean(v) for k, v in b.items()}
        am = {k: statistics.mean(v) for k, v in a.items()}
        xs = [am[k] / bm[k] for k in am if k in bm and bm[k]]
        print("| %s | %s | %d | %s | %s | %s | %s |" % (
            label, better, len(xs), fmt(med(bm.values()), 2 if "per_release" in metric else 0),
            fmt(med(am.values()), 2 if "per_release" in metric else 0), fmt(med(xs)),
            "%s–%s" % (fmt(min(xs)), fmt(max(xs))) if xs else "–"))
    print()


for base in sorted({r["impl"] for r in main_rows if r["impl"].startswith("zklock@")}):
    before_after(base)

# ---------------------------------------------------------------- the targets
w1, n1 = ratio("W1", "zklock:lock", "cycle_p50_us")
w2, n2 = ratio("W2", "zklock:lock", "acq_per_s", 8)
w3, n3 = ratio("W3", "zklock:lock", "handoff_p50_us")
w4 = {}
for rec in ("lock", "rw", "semaphore", "lease"):
    xs = [r["metrics"]["notifications_per_release"] for r in main_rows + extra_rows
          if r["workload"] == "W4" and key(r) == "zklock:" + rec]
    if xs:
        w4[rec] = (med(xs), min(xs), max(xs), len(xs))
w4_all = [v for v in w4.values()]


def w6_rows(mode="requeue", sessions="per-waiter"):
    return [r for r in extra_rows if r["workload"] == "W6" and r["metrics"].get("mode", "requeue") == mode
            and r["metrics"].get("sessions") == sessions]


def w6_ratio(mode="requeue", sessions="per-waiter", n=1000, base=10, metric="handoff_p50_us"):
    rows = w6_rows(mode, sessions)
    a = {rep(r): r["metrics"][metric] for r in rows if r["metrics"]["waiters"] == n}
    b = {rep(r): r["metrics"][metric] for r in rows if r["metrics"]["waiters"] == base}
    xs = [a[k] / b[k] for k in a if k in b and b[k]]
    return med(xs), len(xs)


w6, n6 = w6_ratio()
mem_rows = [r for r in extra_rows if r["workload"] == "W6" and r["metrics"]["waiters"] == 1000
            and r["metrics"].get("sessions") == "shared"]
mem = med([r["metrics"]["rss_per_waiter_kib"] for r in mem_rows])
abi, nabi = ratio("W1", "zklock:ffi", "cycle_p50_us", floor="zklock:lock", rows=extra_rows)

# through the C ABI: zklock:ffi rows (extras) against the floor's rows (main) of the same repeat
both = main_rows + extra_rows
w1_abi, n1_abi = ratio("W1", "zklock:ffi", "cycle_p50_us", rows=both)
w2_abi, n2_abi = ratio("W2", "zklock:ffi", "acq_per_s", 8, rows=both)
# ... and from Python (benches/zklock-py: bindings/python under the peers' Python driver)
w1_py, n1_py = ratio("W1", "zklock-py:lock", "cycle_p50_us", rows=both)
w2_py, n2_py = ratio("W2", "zklock-py:lock", "acq_per_s", 8, rows=both)
# Semaphore(1) (zklock:lease) against the mutex, W1 p50, both in the extras of the same repeat
lease, nlease = ratio("W1", "zklock:lease", "cycle_p50_us", floor="zklock:lock", rows=extra_rows)
w5, n5 = ratio("W5", "zklock:lock", "ops_per_s", 8)
# CPU per W1 cycle (user+sys of the client process), median over every W1 mutex row
cpu = med([r["metrics"].get("cpu_us_per_cycle") for r in both
           if r["workload"] == "W1" and key(r) == "zklock:lock"])

print("### Targets (medians of per-repeat ratios)\n")
print("| target | measured | goal | |")
print("|---|---|---|---|")
print("| W1 uncontended p50, × raw floor (Rust API) | %s (n=%d) | ≤ 0.80 | %s |" % (fmt(w1), n1, verdict(w1, lambda x: x <= 0.80)))
print("| W1 uncontended p50, × raw floor (C ABI from Rust) | %s (n=%d) | ≤ 0.80 | %s |" % (fmt(w1_abi), n1_abi, verdict(w1_abi, lambda x: x <= 0.80)))
print("| W2 8 clients acq/s, × raw floor (Rust API) | %s (n=%d) | ≥ 1.30 | %s |" % (fmt(w2), n2, verdict(w2, lambda x: x >= 1.30)))
print("| W2 8 clients acq/s, × raw floor (C ABI from Rust) | %s (n=%d) | ≥ 1.30 | %s |" % (fmt(w2_abi), n2_abi, verdict(w2_abi, lambda x: x >= 1.30)))
print("| W1 uncontended p50, × raw floor (C ABI from Python) | %s (n=%d) | ≤ 0.80 | %s |" % (fmt(w1_py), n1_py, verdict(w1_py, lambda x: x <= 0.80)))
print("| W2 8 clients acq/s, × raw floor (C ABI from Python) | %s (n=%d) | ≥ 1.30 | %s |" % (fmt(w2_py), n2_py, verdict(w2_py, lambda x: x >= 1.30)))
print("| W1 p50 of `Semaphore(1)` ÷ the mutex's | %s (n=%d) | ≤ 2 | %s |" % (fmt(lease), nlease, verdict(lease, lambda x: x <= 2)))
print("| CPU per W1 cycle (user+sys, whole client process) | %s | reported | |" % fmt(cpu, 0, " µs"))
print("| W3 handoff p50, × raw floor | %s (n=%d) | no worse than 0.52 (issue 11) | %s |" % (fmt(w3, 2), n3, verdict(w3, lambda x: x <= 0.52 * 1.1)))
print("| W5 8 clients r/w ops/s, × raw floor | %s (n=%d) | no worse than 1.58 (issue 11) | %s |" % (fmt(w5, 2), n5, verdict(w5, lambda x: x >= 1.58 / 1.1)))
for rec, (m, lo, hi, n) in w4.items():
    print("| W4 notifications/release, zklock:%s | %s (min %s, max %s, n=%d) | 1.00 | %s |"
          % (rec, fmt(m), fmt(lo), fmt(hi), n, verdict(hi, lambda x: lo == 1.0 and x == 1.0)))
print("| W6 handoff p50 at 1,000 waiters ÷ at 10 (steady queue, one session per waiter) | %s (n=%d) | ≤ 1.3 | %s |"
      % (fmt(w6), n6, verdict(w6, lambda x: x <= 1.3)))
print("| client RSS per waiting acquire, 1,000 waiters on one client (thread incl.) | %s | ≤ 32 KiB | %s |"
      % (fmt(mem, 1, " KiB"), verdict(mem, lambda x: x <= 32)))
print("| C ABI W1 p50 ÷ Rust API W1 p50 | %s (n=%d) | ≤ 1.05 | %s |" % (fmt(abi), nabi, verdict(abi, lambda x: x <= 1.05)))
print("\n(\"no worse\" allows 10 % for the noise of a shared 2-core VM.)\n")

# ---------------------------------------------------------------- zklock vs zookeeper-client's own recipe
ZKC = "zkclient-lock:lock"
VS_ZKC = (  # workload, clients, metric, label, which way is better
    ("W1", None, "cycle_p50_us", "W1 uncontended: cycle p50 µs", "lower"),
    ("W1", None, "cycle_p99_us", "W1 uncontended: cycle p99 µs", "lower"),
    ("W2", 2, "acq_per_s", "W2 2 clients: acq/s", "higher"),
    ("W2", 8, "acq_per_s", "W2 8 clients: acq/s", "higher"),
    ("W2", 32, "acq_per_s", "W2 32 clients: acq/s", "higher"),
    ("W3", None, "handoff_p50_us", "W3 handoff p50 µs", "lower"),
    ("W3", None, "handoff_p99_us", "W3 handoff p99 µs", "lower"),
)
if any(key(r) == ZKC for r in main_rows):
    print("### zklock vs `zookeeper-client`'s own recipe (`Client::lock`, `LockPrefix::new_curator`; "
          "zklock ÷ zkclient-lock within each repeat, median over repeats)\n")
    print("| workload: metric | better | n | zkclient-lock | zklock | zklock ÷ zkclient-lock | zklock ahead |")
    print("|---|---|---|---|---|---|---|")
    for w, c, metric, label, better in VS_ZKC:
        z = {k: statistics.mean(v) for k, v in per_rep(main_rows, w, "zklock:lock", metric, c).items()}
        p = {k: statistics.mean(v) for k, v in per_rep(main_rows, w, ZKC, metric, c).items()}
        xs = [z[k] / p[k] for k in z if k in p and p[k]]
        m = med(xs)
        ahead = None if m is None else (m < 1 if better == "lower" else m > 1)
        print("| %s | %s | %d | %s | %s | %s | %s |" % (
            label, better, len(xs), fmt(med(p.values()), 0), fmt(med(z.values()), 0), fmt(m),
            "–" if ahead is None else ("yes" if ahead else "**no**")))
    print("\n(zkclient-lock's release is `drop(LockClient)`: the delete is sent by a background task and not "
          "awaited, so its W1 cycle does not wait for the delete's reply; W3's t0 is taken just before the drop, "
          "so its handoff includes the delete.)\n")

# ---------------------------------------------------------------- W1 C ABI (not run with BENCH_ONLY_CORE=1)
if any(r["workload"] == "W1" for r in extra_rows):
    print("\n### W1 through the C ABI, and `Semaphore(1)`, vs the Rust API's mutex (same process image, alternated ABBA in each repeat)\n")
    print("| recipe | n | p50 µs | p99 µs | mean µs | × Rust API (p50) |")
    print("|---|---|---|---|---|---|")
for rec in ("lock", "ffi", "lease"):
    rs = [r for r in extra_rows if r["workload"] == "W1" and key(r) == "zklock:" + rec]
    if rs:
        rr = ratio("W1", "zklock:" + rec, "cycle_p50_us", floor="zklock:lock", rows=extra_rows)[0]
        print("| zklock:%s | %d | %s | %s | %s | %s |" % (
            rec, len(rs), fmt(med([r["metrics"]["cycle_p50_us"] for r in rs]), 0),
            fmt(med([r["metrics"]["cycle_p99_us"] for r in rs]), 0),
            fmt(med([r["metrics"]["cycle_mean_us"] for r in rs]), 0), fmt(rr)))

# ---------------------------------------------------------------- W4 per recipe
if w4:
    print("\n### W4 herd, zklock recipes (50 waiters, 20 releases)\n")
    print("| recipe | n | client notif./release | server triggers/release | mean handoff µs |")
    print("|---|---|---|---|---|")
    for rec in w4:
        rs = [r for r in main_rows + extra_rows if r["workload"] == "W4" and key(r) == "zklock:" + rec]
        print("| zklock:%s | %d | %s | %s | %s |" % (
            rec, len(rs), fmt(med([r["metrics"]["notifications_per_release"] for r in rs])),
            fmt(med([r["metrics"]["server_triggers_per_release"] for r in rs])),
            fmt(med([r["metrics"]["mean_handoff_us"] for r in rs]), 0)))

# ---------------------------------------------------------------- W6
for mode, sessions, title in (
        ("requeue", "per-waiter", "steady queue of N (every waiter queues again after its release), one session per waiter"),
        ("requeue", "shared", "steady queue of N, all waiters on one client (one session)"),
        ("drain", "per-waiter", "draining a queue of N (each waiter acquires once), one session per waiter")):
    rows = w6_rows(mode, sessions)
    if not rows:
        continue
    print("\n### W6 scale: %s\n" % title)
    print("| waiters | n | handoff p50 µs | p99 µs | mean µs | × N=10 (p50) | acq/s | RSS/waiting acquire KiB | RSS/session KiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sorted({r["metrics"]["waiters"] for r in rows}):
        rs = [r for r in rows if r["metrics"]["waiters"] == n]
        m = lambda k: med([r["metrics"].get(k) for r in rs])
        print("| %d | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            n, len(rs), fmt(m("handoff_p50_us"), 0), fmt(m("handoff_p99_us"), 0), fmt(m("handoff_mean_us"), 0),
            fmt(w6_ratio(mode, sessions, n)[0]), fmt(m("acq_per_s"), 0), fmt(m("rss_per_waiter_kib"), 1),
            fmt(m("rss_per_session_kib"), 1) if sessions == "per-waiter" else "–"))
