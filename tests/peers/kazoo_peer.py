"""A peer process for tests/it/interop.rs: Python kazoo locks on the same paths as zklock.

Usage: kazoo_peer.py <connect> <path> <lock> <action> <ms> <history> <who> <read_fraction>
  lock:   mutex (Lock) | read (ReadLock) | write (WriteLock) | rw (ReadLock or WriteLock, read
          with probability read_fraction) | semaphore:N (Semaphore(max_leases=N)) | election
          (Election: held = leading; kazoo's election is its lock, taken as Election.run does)
  action: load (hold repeatedly for <ms>) | hold (once, <ms> long) | try (wait at most <ms>)
          | count (the mutex <ms> times, each enter line ending with the node's czxid)
Every hold appends "enter <R|W|S> <who>" after acquiring and "exit <R|W|S> <who>" before
releasing to <history>, one os.write per line on an O_APPEND descriptor (so the file order is a
valid order of the real events). Prints HELD / RELEASED / ACQUIRED / NOT_ACQUIRED / DONE n.
"""
import os
import random
import sys
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout


def main():
    connect, path, lock, action, ms, history, who, read_fraction = sys.argv[1:9]
    ms = int(ms)
    read_fraction = float(read_fraction)
    fd = os.open(history, os.O_WRONLY | os.O_APPEND)

    def append(event, kind):
        line = f"{event} {kind} {who}\n".encode()
        assert os.write(fd, line) == len(line)

    def say(s):
        print(s, flush=True)

    zk = KazooClient(hosts=connect, timeout=6.0)
    zk.start(timeout=15)
    if lock.startswith("semaphore:"):
        sem = zk.Semaphore(path, who, max_leases=int(lock.split(":")[1]))
        locks = {"S": sem}
        fixed = "S"
    elif lock == "mutex":
        locks = {"W": zk.Lock(path, who)}
        fixed = "W"
    elif lock == "election":
        locks = {"W": zk.Election(path, who).lock}
        fixed = "W"
    else:
        # One object per kind, reused (kazoo's locks are not reentrant).
        locks = {"R": zk.ReadLock(path, who), "W": zk.WriteLock(path, who)}
        fixed = "R" if lock == "read" else "W"

    def hold(kind, wait_ms, sleep_ms, announce):
        l = locks[kind]
        try:
            got = l.acquire(timeout=None if wait_ms is None else wait_ms / 1000.0)
        except LockTimeout:
            got = False
        if not got:
            return False
        append("enter", kind)
        if announce:
            say("HELD")
        time.sleep(sleep_ms / 1000.0)
        append("exit", kind)
        l.release()
        return True

    if action == "load":
        rnd = random.Random(who)
        end = time.monotonic() + ms / 1000.0
        n = 0
        while time.monotonic() < end:
            kind = ("R" if rnd.random() < read_fraction else "W") if lock == "rw" else fixed
            assert hold(kind, None, 3 if kind == "W" else 20, False)
            n += 1
        say(f"DONE {n}")
    elif action == "count":
        # <ms> holds of the mutex, each enter line carrying its node's czxid (zklock's fencing
        # token is its node's czxid: comparable across clients).
        l = locks["W"]
        say("READY")
        while not os.path.exists(history + ".go"):
            time.sleep(0.005)
        for _ in range(ms):
            l.acquire()
            czxid = zk.exists(path + "/" + l.node).czxid
            line = f"enter W {who} {czxid}\n".encode()
            assert os.write(fd, line) == len(line)
            time.sleep(0.005)
            append("exit", "W")
            l.release()
        say(f"DONE {ms}")
    elif action == "hold":
        assert hold(fixed, None, ms, True)
        say("RELEASED")
    elif action == "try":
        say("ACQUIRED" if hold(fixed, ms, 10, False) else "NOT_ACQUIRED")
    else:
        raise SystemExit(f"unknown action {action}")
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
