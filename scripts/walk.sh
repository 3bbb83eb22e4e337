#!/usr/bin/env bash
# How far a reader follows one acquire: runs tools/walk.rs under gdb and prints, for one
# uncontended acquire from Rust (Mutex::lock) and one through the C ABI (zkl_lock_acquire),
# the chain of zklock's own functions from the entry point down to the wait for the server's
# reply (closures and the standard library's frames are not counted), with the files they
# are in. Needs gdb (apt-get install -y gdb) and a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v gdb >/dev/null || { echo "walk.sh: needs gdb (apt-get install -y gdb)" >&2; exit 2; }
cargo build -q --features testing --example walk
bts=$(gdb -batch -ex 'set pagination off' -ex 'set print frame-arguments none' \
  -ex 'break zklock_walk_begin' -ex run \
  -ex 'break zklock::sys::wait_readable thread 1' -ex continue -ex 'echo @@rust\n' -ex bt \
  -ex 'delete 2' -ex 'break zkl_lock_acquire' -ex continue \
  -ex 'break zklock::sys::wait_readable thread 1' -ex continue -ex 'echo @@c\n' -ex bt \
  -ex kill target/debug/examples/walk 2>/dev/null)
python3 - "$bts" <<'PY'
import re, sys
text = sys.argv[1]
for part in text.split('@@')[1:]:
    name, _, bt = part.partition('\n')
    chain = []
    for line in bt.splitlines():
        m = re.match(r'#\d+\s+(?:0x[0-9a-f]+ in )?(.*?) \((?:[^()]|\([^()]*\))*\)(?: at (\S+):\d+)?$', line)
        if not m:
            continue
        fn, path = m.group(1), m.group(2) or ''
        # Generic arguments off, innermost first: Lock<Queue<Reentrant>>::lock -> Lock::lock.
        while re.search(r'<[^<>]*>', fn):
            fn = re.sub(r'<[^<>]*>', '', fn)
        if not fn.startswith('zklock::') or 'closure' in fn or not path.startswith('src/'):
            continue
        chain.append((fn, path))
    chain.reverse()
    files = []
    for _, f in chain:
        if f not in files:
            files.append(f)
    entry = 'Mutex::lock' if name == 'rust' else 'zkl_lock_acquire'
    print(f"{entry}: {len(chain)} calls in {len(files)} files")
    for fn, f in chain:
        print(f"  {fn:<60} {f}")
PY
