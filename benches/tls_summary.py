#!/usr/bin/env python3
"""The "TLS beside plaintext" lines of the benchmark report (scripts/bench.sh; issue 27).

Usage: benches/tls_summary.py <tls.jsonl>
  tls.jsonl: the rows of `zklock-peerbench TLS` (one run per repeat, run_id "repN-..."): CONNECT, W1
             and W2 rows with params transport (plain | tls) and round, then one TLS row per run.
A pair is one round of one run: both transports measured back to back (the order alternates from
round to round). Each ratio is TLS ÷ plaintext within a pair, then the median over every pair; the
plaintext and TLS columns are medians over the pairs too. The handshake cost per connect is the TLS
connect time less the plaintext one, within a pair, median over pairs."""
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


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=2, unit=""):
    if x is None:
        return "–"
    return ("{:,.%df}" % nd).format(x) + unit


def verdict(x, ok):
    if x is None:
        return "not measured"
    return "**met**" if ok(x) else "**missed**"


rows = load(sys.argv[1]) if len(sys.argv) > 1 else []
# (run, round) -> workload -> transport -> metrics
pairs = defaultdict(lambda: defaultdict(dict))
clients = set()
for r in rows:
    p = r["params"]
    if r["workload"] in ("CONNECT", "W1", "W2") and p.get("transport") in ("plain", "tls"):
        w = r["workload"] + ("-given" if p.get("tick") == "given" else "")
        pairs[(r.get("run_id", ""), p.get("round", 1))][w][p["transport"]] = r["metrics"]
        if r["workload"] == "W2":
            clients.add(p.get("clients"))
runs = sorted({k[0] for k in pairs})

print("### TLS beside plaintext (issue 27)\n")
if not pairs:
    print("Not measured: no rows of `zklock-peerbench TLS`.\n")
    sys.exit(0)


def both(w, metric, scale=1.0):
    """Per pair (plain, tls) of one metric, over the pairs that have both."""
    out = []
    for k in sorted(pairs):
        a, b = pairs[k][w].get("plain", {}).get(metric), pairs[k][w].get("tls", {}).get(metric)
        if a is not None and b is not None:
            out.append((a / scale, b / scale))
    return out


def line(label, w, metric, nd, target=None, ok=None, scale=1.0):
    ps = both(w, metric, scale)
    rs = [b / a for a, b in ps if a]
    r = med(rs)
    print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
        label, len(ps), fmt(med([a for a, _ in ps]), nd), fmt(med([b for _, b in ps]), nd), fmt(r),
        "%s–%s" % (fmt(min(rs)), fmt(max(rs))) if rs else "–", target or "reported",
        verdict(r, ok) if ok else ""))
    return r


c = "/".join(str(x) for x in sorted(clients, key=str)) or "8"
print("`zklock-peerbench TLS`: one process starts two `zklock::testing` servers with the same settings, a")
print("plaintext one and a TLS-only one (server-authenticated: the client has the CA, no certificate of its")
print("own), and runs against each, back to back, the connect time (`Client::connect` until the session is")
print("established), W1 and W2 with %s clients; the order alternates from round to round. %d run(s), %d pair(s)."
      % (c, len(runs), len(pairs)))
print("Every ratio is TLS ÷ plaintext within a pair, then the median over pairs.\n")
print("| measure | pairs | plaintext | TLS | TLS ÷ plaintext | per pair (min–max) | target | |")
print("|---|---|---|---|---|---|---|---|")
line("W1 uncontended cycle p50 µs", "W1", "cycle_p50_us", 0, "≤ 1.25", lambda x: x <= 1.25)
line("W1 uncontended cycle p99 µs", "W1", "cycle_p99_us", 0)
line("W2 %s clients acq/s" % c, "W2", "acq_per_s", 0, "≥ 0.85", lambda x: x >= 0.85)


def extra(label, w):
    hs = [b - a for a, b in both(w, "connect_p50_us", 1e3)]
    if hs:
        print("| %s | %d | | %s | | %s | stated | |" % (label, len(hs), fmt(med(hs), 2), "%s–%s" % (fmt(min(hs)), fmt(max(hs)))))


line("connect ms (`Client::connect`, default options: asks the server's tick with `conf` first)", "CONNECT",
     "connect_p50_us", 2, scale=1e3)
extra("**TLS cost per connect** ms (TLS − plaintext connect, default options)", "CONNECT")
if both("CONNECT-given", "connect_p50_us"):
    line("connect ms with `Options::server_tick_time` given (no `conf` ask)", "CONNECT-given", "connect_p50_us", 2,
         scale=1e3)
    extra("TLS cost per connect ms, tick given (the session's handshake alone)", "CONNECT-given")
print()
print("A connect's time is the median of each run's connects (after two unrecorded ones), each client closed")
print("before the next. With default options a TLS connect makes two TLS handshakes: the `conf` four-letter")
print("word that reads the server's tick, and the session's own; with the tick given only the latter.\n")
