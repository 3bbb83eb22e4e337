#!/usr/bin/env python3
"""Print the import circles among the modules of src/ (one file = one module).

An arrow A -> B is a path to B in A's code: a `use` line (braces expanded) or an inline
`crate::`/`super::`/`self::` path outside comments. A path resolves to the deepest module file it
names. Arrows from a module root (lib.rs, mod.rs) down to its own submodules are the tree itself
(`mod x;`, `pub use x::Y;`) and are left out; arrows up to a parent are kept.

Usage: scripts/import-graph.py [src-dir] [--edges] [--up]   (exit status 1 when there is a circle)
  --edges  print every arrow;  --up  print the arrows back up (to a module's own ancestor).
"""
import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return tuple(rel)


def is_root(root, path):
    return os.path.basename(path) in ("lib.rs", "mod.rs") or os.path.relpath(path, root) == "lib.rs"


def expand(tree):
    """`a::{b, c::{d}}` -> ["a::b", "a::c::d"]."""
    tree = tree.replace(" ", "").replace("\n", "")
    i = tree.find("{")
    if i < 0:
        return [tree]
    depth, parts, start = 0, [], i + 1
    for j in range(i, len(tree)):
        ch = tree[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                parts.append(tree[start:j])
                end = j
                break
        elif ch == "," and depth == 1:
            parts.append(tree[start:j])
            start = j + 1
    out = []
    for p in parts:
        if p:
            out += [tree[:i] + q for q in expand(p)]
    return out


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(l.split("//")[0] if not l.strip().startswith("#") else l for l in text.split("\n"))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else "src"
    show_edges = "--edges" in sys.argv
    show_up = "--up" in sys.argv
    files = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith(".rs") and not d.startswith(os.path.join(root, "bin")):
                p = os.path.join(d, f)
                files[p] = module_of(root, p)
    mods = set(files.values())
    edges = {}
    for path, me in files.items():
        text = strip_comments(open(path).read())
        # An inline module (`mod tests { ... }`, at the end of a file): its `super` is this one.
        inline = re.search(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+) \{", text, flags=re.M)
        parts = [(me, text)]
        if inline:
            parts = [(me, text[: inline.start()]), (me + (inline.group(1),), text[inline.start() :])]
        paths = []
        for base0, part in parts:
            found = []
            for m in re.finditer(r"\buse\s+([^;]+);", part):
                found += expand(m.group(1))
            found += re.findall(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", part)
            paths += [(base0, f) for f in found]
        for base0, p in paths:
            seg = [s for s in p.split("::") if s]
            if not seg:
                continue
            if seg[0] == "crate":
                base, seg = (), seg[1:]
            elif seg[0] in ("super", "self"):
                base = base0
                while seg and seg[0] in ("super", "self"):
                    if seg[0] == "super":
                        base = base[:-1]
                    seg = seg[1:]
            else:
                continue
            target = base
            for s in seg:
                if base + (s,) in mods or target + (s,) in mods:
                    target = target + (s,)
                else:
                    break
            if target == me:
                continue
            if is_root(root, path) and target[: len(me)] == me:
                continue  # the tree itself
            edges.setdefault(me, set()).add(target)
    name = lambda m: "::".join(("crate",) + m)
    if show_edges:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{name(a)} -> {name(b)}")
    if show_up:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                if a[: len(b)] == b:
                    print(f"up: {name(a)} -> {name(b)}")
    # strongly connected components (Tarjan)
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    for v in sorted(mods):
        if v not in index:
            visit(v)
    for c in sorted(sccs):
        print("circle: " + " <-> ".join(name(m) for m in c))
    print(f"{len(mods)} modules, {sum(len(v) for v in edges.values())} arrows, {len(sccs)} circles")
    return 1 if sccs else 0


if __name__ == "__main__":
    sys.exit(main())
