#!/usr/bin/env python3
"""A run's section of benches/RESULTS.md, from the report(s) scripts/bench.sh wrote.

Usage: benches/record.py REPORT [REPORT ...] > entry.md
  REPORT: a report.md of scripts/bench.sh (target/bench/<run>/report.md), or COMMIT:PATH for a
          report kept in git's history (how RESULTS.md's older sections were made, from the
          benches/results/*.md files that were tracked until issue 29).
Several reports (the runs of one milestone, newest first) make one section with one column
per run: A, B, ... The section is a draft: name the milestone in its heading (and its anchor),
then put it at the top of benches/RESULTS.md (newest first) and commit it with the change.

The table keeps the figures that matter: the "before → after" ratios (with BENCH_BASELINE_REV),
the targets against the raw floor, TLS ÷ plaintext (issue 27, when measured); then the side
by side of the newest run (zklock, the raw floor, Curator, kazoo, and the baseline)."""
import os
import re
import subprocess
import sys
from collections import OrderedDict


def read(src):
    """A report's text, and how to find the whole report again."""
    if ':' in src and not os.path.exists(src):
        commit, path = src.split(':', 1)
        text = subprocess.run(["git", "show", src], capture_output=True, text=True, check=True).stdout
        return text, f"`git show {commit}:{path}`"
    return open(src).read(), f"`{os.path.dirname(os.path.abspath(src))}/` (raw rows beside it; not kept)"


def tables(md):
    """Each markdown table under its heading: heading -> rows of cells (header row first)."""
    out = OrderedDict()
    head = rows = None
    for line in md.splitlines():
        if line.startswith('#'):
            head, rows = line.lstrip('#').strip(), None
        elif line.startswith('|'):
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            if rows is None:
                rows = out[head] = [cells]
            elif not set(''.join(cells)) <= set('-: '):
                rows.append(cells)
        elif line.strip():
            rows = None
    return out


def find(t, prefix):
    return next((v for k, v in t.items() if k.startswith(prefix)), None)


def meta(md):
    cmd = re.search(r"^Command: `([^`]*)` \(REPEATS=(\d+)", md, re.M)
    at = re.search(r"^zklock (\S+) at (\w+|\?)( \(uncommitted changes\))?\.", md, re.M)
    wall = re.search(r"^Wall time: (\d+) min", md, re.M)
    env = cmd.group(1).replace('scripts/bench.sh', '').split()
    if int(cmd.group(2)) != 3:  # scripts/bench.sh's default
        env.append(f"REPEATS={cmd.group(2)}")
    return {
        'date': re.search(r"^# zklock vs the peers — (\S+)", md, re.M).group(1),
        'command': ' '.join(env + ['scripts/bench.sh']),
        'version': at.group(1),
        'at': at.group(2) + (' + uncommitted changes' if at.group(3) else ''),
        'load': re.search(r"Load average at the end: ([\d. ]+?)\s*$", md, re.M).group(1),
        'wall': wall.group(1) if wall else None,
    }


def figures(md):
    """(block, figure) -> (value, goal), in the report's order."""
    t = tables(md)
    out = OrderedDict()
    ba = find(t, 'Before → after')
    for r in (ba or [])[1:]:
        out[('ba', r[0])] = (f"{r[5]} ({r[6]})", r[1])
    for r in (find(t, 'Targets') or [])[1:]:
        v = re.sub(r" \((min [\d.]+, max [\d.]+, )?n=\d+\)", "", r[1])
        if v.startswith('–'):
            continue  # not run (BENCH_ONLY_CORE=1)
        if 'missed' in r[3]:
            v += ' **missed**'
        out[('tg', r[0].replace(' (Rust API)', ''))] = (v, r[2])
    for r in (find(t, 'TLS beside plaintext') or [])[1:]:
        v = f"{r[4]} ({r[5]})" if r[4] else r[3]
        if 'missed' in r[7]:
            v += ' **missed**'
        out[('tls', r[0])] = (v, r[6])
    return out


BLOCKS = [('ba', 'after ÷ before, median over repeats (per-repeat range)'),
          ('tg', 'targets, median of per-repeat ratios'),
          ('tls', 'TLS ÷ plaintext, median over pairs (per-pair range)')]

SIDE = [('W1 uncontended', 'p50 µs', 'W1 p50 µs'), ('W2 contended, C=2 ', 'acq/s', 'W2 2 clients acq/s'),
        ('W2 contended, C=8 ', 'acq/s', 'W2 8 clients acq/s'), ('W2 contended, C=32 ', 'acq/s', 'W2 32 clients acq/s'),
        ('W3 handoff', 'p50 µs', 'W3 handoff p50 µs'), ('W4 herd: 50', 'client notif./release', 'W4 notif./release'),
        ('W5 read/write', 'ops/s', 'W5 ops/s')]


def side_by_side(md, label):
    t = tables(md)
    impls = OrderedDict()
    for prefix, col, name in SIDE:
        tb = find(t, prefix)
        if not tb:
            continue
        ci = tb[0].index(col)
        for r in tb[1:]:
            ratio = '' if prefix.startswith('W4') else f" ({r[-1]})"
            impls.setdefault(r[0], {})[name] = r[ci] + ratio
    rt = find(t, 'RT:')
    rt = f"; one plain round trip (raw client `exists`) p50 {rt[1][2]} µs" if rt else ''
    out = [f"Side by side in run {label} (medians over repeats; in brackets × the raw floor, raw-java:lock, "
           f"within each repeat){rt}:",
           '', '| impl | ' + ' | '.join(s[2] for s in SIDE) + ' |', '|---|' + '---|' * len(SIDE)]
    for impl, d in impls.items():
        out.append(f'| {impl} | ' + ' | '.join(d.get(s[2], '–') for s in SIDE) + ' |')
    return out


def section(sources, anchor='TODO', title=None, text=None, notes=None):
    runs = []
    for i, src in enumerate(sources):
        md, where = read(src)
        runs.append((chr(ord('A') + i), md, meta(md), figures(md), where))
    first = runs[0][2]
    base = re.search(r"BENCH_BASELINE_REV=(\S+)", first['command'])
    title = title or f"{first['date']}: TODO what changed" + (f", before → after {base.group(1)}" if base else '')
    out = [f'<a id="{anchor}"></a>', '', f'## {title}', '']
    if text:
        out += [text, '']
    for label, md, m, _, where in runs:
        note = (notes or {}).get(label)
        out.append(f"- **{label}**: {m['date']}, zklock {m['version']} at {m['at']}" + (f" ({note})" if note else '')
                   + f": `{m['command']}`; load at the end {m['load']}" + (f", {m['wall']} min" if m['wall'] else '')
                   + f". Report: {where}.")
    out += ['', '| figure | goal | ' + ' | '.join(r[0] for r in runs) + ' |', '|---|---|' + '---|' * len(runs)]
    goals = OrderedDict()
    for *_, figs, _ in runs:
        for k, (_, g) in figs.items():
            goals.setdefault(k, g)
    present = {k[0] for k in goals}
    for block, caption in BLOCKS:
        keys = [k for k in goals if k[0] == block]
        if not keys:
            continue
        if len(present) > 1:
            out.append(f'| *{caption}* | |' + ' |' * len(runs))
        for k in keys:
            cells = []
            for *_, figs, _ in runs:
                v, g = figs.get(k, ('–', goals[k]))
                cells.append(v + (f" (goal then {g})" if g != goals[k] else ''))
            out.append(f"| {k[1]} | {goals[k]} | " + ' | '.join(cells) + ' |')
    out += [''] + side_by_side(runs[0][1], runs[0][0]) + ['']
    return '\n'.join(out)


if __name__ == '__main__':
    if len(sys.argv) < 2 or sys.argv[1] in ('-h', '--help'):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    print(section(sys.argv[1:]))
