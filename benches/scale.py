#!/usr/bin/env python3
"""Helpers of scripts/bench-scale.sh (issue 30's scale benchmark).

  scale.py window <window_s> <host:port> <label>=<pid> ...
      Measures processes that hold sessions open (workload W7, "W7 READY" logged): the server's
      `cons` before and after a window of <window_s> seconds; for each process, its connections
      to the server are found by their local port (/proc/<pid>/fd -> socket inodes ->
      /proc/net/tcp{,6}), and `recved` (what the server received on that connection) is summed.
      At the end of the window, VmRSS and Threads of /proc/<pid>/status. One JSON line per label:
      {label, pid, conns, recved, window_s, req_per_min, req_per_session_per_min, timeout_ms,
       rss_kib, threads, stable} (stable = the same connections before and after: no reconnect),
      plus the fields of the JSON object in $SCALE_TAGS (e.g. {"T": 10}).
  scale.py report <run dir>
      The one table of the run (markdown) from the run's rows (rate.jsonl, mem.jsonl, w6.jsonl,
      w8.jsonl), with zklock ÷ Curator and issue 30's goals where one applies.
"""
import json
import os
import re
import socket
import statistics
import sys
import time

IMPLS = ("zklock", "curator", "kazoo", "zkclient-lock")
CONS = re.compile(r"/[0-9a-fA-F.:\[\]]+:(\d+)\[\d+\]\(([^)]*)\)")


def four_letter(hp, cmd):
    host, port = hp.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(cmd.encode())
        out = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    return out.decode(errors="replace")


def cons(hp):
    """{local port of the client: {recved, to, ...}} of every connection the server lists."""
    out = {}
    for m in CONS.finditer(four_letter(hp, "cons")):
        kv = dict(x.split("=", 1) for x in m.group(2).split(",") if "=" in x)
        out[int(m.group(1))] = kv
    return out


def ports_of(pid, server_port):
    """Local ports of pid's TCP connections to server_port."""
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if t.startswith("socket:["):
                inodes.add(t[8:-1])
    except OSError:
        return set()
    ports = set()
    for f in ("tcp", "tcp6"):
        try:
            lines = open("/proc/%d/net/%s" % (pid, f)).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            c = line.split()
            if len(c) > 9 and c[9] in inodes and int(c[2].rsplit(":", 1)[1], 16) == server_port:
                ports.add(int(c[1].rsplit(":", 1)[1], 16))
    return ports


def status(pid):
    rss = thr = None
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                thr = int(line.split()[1])
    except OSError:
        pass
    return rss, thr


def window(args):
    w = float(args[0])
    hp = args[1]
    sport = int(hp.rsplit(":", 1)[1])
    procs = [(a.split("=", 1)[0], int(a.split("=", 1)[1])) for a in args[2:]]
    p0 = {lab: ports_of(pid, sport) for lab, pid in procs}
    c0 = cons(hp)
    t0 = time.monotonic()
    time.sleep(w)
    c1 = cons(hp)
    dt = time.monotonic() - t0
    for lab, pid in procs:
        p1 = ports_of(pid, sport)
        ports = p0[lab] & p1
        got = [(int(c1[p]["recved"]) - int(c0[p]["recved"])) for p in ports if p in c0 and p in c1]
        tos = sorted({c1[p].get("to") for p in ports if p in c1})
        rss, thr = status(pid)
        n = len(got)
        rec = {"label": lab, "pid": pid, "conns": n, "recved": sum(got), "window_s": round(dt, 2),
               "req_per_min": round(sum(got) * 60 / dt, 1) if n else None,
               "req_per_session_per_min": round(sum(got) * 60 / dt / n, 1) if n else None,
               "timeout_ms": ",".join(str(t) for t in tos), "rss_kib": rss, "threads": thr,
               "stable": p0[lab] == p1 and n == len(p1)}
        rec.update(json.loads(os.environ.get("SCALE_TAGS") or "{}"))
        print(json.dumps(rec), flush=True)


# ---------------------------------------------------------------- report
def load(path):
    rows = []
    try:
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    except FileNotFoundError:
        pass
    return rows


def fmt(x, nd=0):
    if x is None:
        return "–"
    return ("{:,.%df}" % nd).format(x)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def report(d):
    rate = load(os.path.join(d, "rate.jsonl"))
    mem = load(os.path.join(d, "mem.jsonl"))
    w6 = load(os.path.join(d, "w6.jsonl"))
    w8 = load(os.path.join(d, "w8.jsonl"))
    rows = []  # (label, {impl: value}, nd, goal text, goal check on zklock ÷ curator or None)

    def lab(r):  # "impl/what"
        return r["label"].split("/", 1)

    # a. requests per session per minute
    for t in sorted({r["T"] for r in rate}):
        for mode, goal, ok in (("idle", "÷ Curator ≤ 1.00", lambda x: x <= 1.0),
                               ("hold", "÷ Curator ≤ 2.00", lambda x: x <= 2.0)):
            v = {}
            for r in rate:
                i, m = lab(r)
                if r["T"] == t and m == mode:
                    v[i] = r["req_per_session_per_min"] if r["stable"] else None
            rows.append(("requests/session/min, %s, T = %g s" % ("idle (nothing held)" if mode == "idle" else
                                                                   "holding 1 lock", t), v, 1, goal, ok))
    # b. W6: handoff p50 and server load per size
    sizes = sorted({r["params"]["waiters"] for r in w6 if r.get("metrics")})

    def w6v(n, metric):
        return {r["impl"]: r["metrics"].get(metric) for r in w6
                if r.get("metrics") and r["params"]["waiters"] == n}
    for n in sizes:
        rows.append(("W6 handoff p50 µs, %s waiters" % fmt(n), w6v(n, "handoff_p50_us"), 0, "", None))
    if len(sizes) > 1:
        a, z = sizes[0], sizes[-1]
        lo, hi = w6v(a, "handoff_p50_us"), w6v(z, "handoff_p50_us")
        g = {i: hi[i] / lo[i] for i in hi if hi.get(i) and lo.get(i)}
        rows.append(("W6 handoff p50 growth, %s → %s waiters (×)" % (fmt(a), fmt(z)), g, 2,
                     "zklock ≤ 3.00" if (a, z) == (10, 3000) else "", None))
    for n in sizes:
        raw = w6v(n, "handoff_p50_us").get("raw-java")
        if raw:
            v = {i: x / raw for i, x in w6v(n, "handoff_p50_us").items() if x is not None and i != "raw-java"}
            rows.append(("W6 handoff p50 ÷ the raw floor's (raw-java %s µs), %s waiters" % (fmt(raw), fmt(n)), v, 2,
                         "zklock ≤ 0.40" if n == 1000 else "", None))
    for n in sizes:
        v = w6v(n, "queued_server_cpu_pct")
        rows.append(("W6 server CPU %% of a core, %s waiters queued (standing)" % fmt(n), v, 1,
                     "÷ Curator ≤ 1.00" if n == 3000 else "", (lambda x: x <= 1.0) if n == 3000 else None))
        rows.append(("W6 server packets/s, %s waiters queued (standing)" % fmt(n),
                     w6v(n, "queued_server_pkts_per_s"), 0,
                     "÷ Curator ≤ 1.00" if n == 3000 else "", (lambda x: x <= 1.0) if n == 3000 else None))
        rows.append(("W6 server CPU %% / packets/s during the handoffs, %s waiters" % fmt(n),
                     {i: (w6v(n, "run_server_cpu_pct").get(i), w6v(n, "run_server_pkts_per_s").get(i))
                      for i in w6v(n, "run_server_cpu_pct")}, None, "", None))
    # c. W8
    thr = sorted({r["params"]["threads"] for r in w8 if r.get("metrics")})

    def w8v(t, metric="acq_per_s"):
        return {r["impl"]: r["metrics"].get(metric) for r in w8
                if r.get("metrics") and r["params"]["threads"] == t}
    for t in thr:
        rows.append(("W8 acquires/s, distinct locks, %d thread(s) on one session" % t, w8v(t), 0, "", None))
        rows.append(("W8 server CPU %% of a core, %d thread(s)" % t, w8v(t, "server_cpu_pct"), 0, "", None))
    one = w8v(thr[0]) if thr else {}
    for t in thr[1:]:
        z = w8v(t)
        rows.append(("W8 speed-up, %d threads ÷ %d (×)" % (t, thr[0]),
                     {i: z[i] / one[i] for i in z if one.get(i) and z[i]}, 2,
                     "zklock ≥ 4.00" if t == 8 else "", None))
    if len(thr) > 2:
        # The most threads measured find the server's ceiling (more add nothing): no client's
        # speed-up can pass the best rate any client reached ÷ its own one-thread rate.
        best = max((x for t in thr for x in w8v(t).values() if x), default=None)
        if best:
            rows.append(("W8 the most any speed-up can be here: the best rate seen (%s acq/s) ÷ 1 thread's (×)"
                         % fmt(best), {i: best / x for i, x in one.items() if x}, 2, "", None))
    # d. memory and threads
    def memv(what):
        return {lab(r)[0]: r for r in mem if lab(r)[1] == what}
    one_lock, many, idle1, many_s = memv("1lock"), memv("nlocks"), memv("idle1"), memv("idleN")
    nl = med([r.get("locks") for r in many.values()]) or 1000
    ns = med([r.get("sessions") for r in many_s.values()]) or 101

    def per(a, b, k, n):
        return {i: (b[i][k] - a[i][k]) / n for i in b if i in a and a[i].get(k) is not None
                and b[i].get(k) is not None}
    rows.append(("client RSS KiB, 1 session idle", {i: r["rss_kib"] for i, r in idle1.items()}, 0, "", None))
    rows.append(("client threads, 1 session idle", {i: r["threads"] for i, r in idle1.items()}, 0, "", None))
    rows.append(("client threads, 1 session holding %s locks" % fmt(nl), {i: r["threads"] for i, r in many.items()},
                 0, "", None))
    rows.append(("RSS KiB per hold (%s locks − 1, one session)" % fmt(nl), per(one_lock, many, "rss_kib", nl - 1),
                 1, "", None))
    rows.append(("threads per hold", per(one_lock, many, "threads", nl - 1), 3, "", None))
    rows.append(("RSS KiB per session (%s idle sessions − 1)" % fmt(ns), per(idle1, many_s, "rss_kib", ns - 1),
                 1, "", None))
    rows.append(("threads per session", per(idle1, many_s, "threads", ns - 1), 2, "", None))

    print("| measure | zklock | Curator | kazoo | zkclient-lock | zklock ÷ Curator | issue 30 goal |")
    print("|---|---|---|---|---|---|---|")
    for label, v, nd, goal, ok in rows:
        if nd is None:  # a pair (cpu %, pkts/s)
            cells = ["%s / %s" % (fmt(v[i][0], 1), fmt(v[i][1], 0)) if v.get(i) else "–" for i in IMPLS]
            print("| %s | %s | – | |" % (label, " | ".join(cells)))
            continue
        cells = [fmt(v.get(i), nd) for i in IMPLS]
        z, c = v.get("zklock"), v.get("curator")
        r = z / c if z is not None and c else None
        verdict = ""
        if goal:
            if ok is not None and r is not None:
                verdict = " **met**" if ok(r) else " **missed**"
            elif ok is None and goal.startswith("zklock") and z is not None:
                lim = float(goal.split()[-1])
                verdict = " **met**" if (z <= lim if "≤" in goal else z >= lim) else " **missed**"
        print("| %s | %s | %s | %s%s |" % (label, " | ".join(cells), fmt(r, 2), goal, verdict))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "window":
        window(sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "report":
        report(sys.argv[2])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
