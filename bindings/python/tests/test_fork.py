"""Issue 26, item 2: fork() after a client exists. A child forked from a process that holds a
lock inherits the client and the lock; whatever the child does with them (exit and let the
interpreter finalize them, close them), nothing of the parent's is released, and the child
exits at once. Each case runs in a process of its own (a fork inside pytest would run pytest
twice): it holds, forks, waits for the child (killing it past a bound), and reports."""

import json
import subprocess
import sys

import pytest

import zklock

# The holder: acquires, says so, forks; its child only lets go of what it inherited and exits
# through the interpreter's normal exit (sys.exit), so the handles are finalized there; the
# parent waits for the child (10 s at most, then kills it), reports, and releases when told.
HOLDER = r"""
import json, os, sys, time, zklock
hosts, path, kind, how = sys.argv[1:5]
client = zklock.Client(hosts, 10.0)
lock = getattr(client, kind)(path)
assert lock.acquire(10.0)
print("holding", flush=True)
sys.stdin.readline()
started = time.monotonic()
pid = os.fork()
if pid == 0:
    if how == "close":
        lock.close()
        client.close()
    elif how == "calls":
        # Every call on an inherited handle says it was made before fork.
        assert not lock.is_held
        for call in (lambda: lock.acquire(0), lock.release, lambda: zklock.Client(hosts, 10.0)):
            try:
                call()
            except zklock.Closed as e:
                assert "fork" in str(e), str(e)
            else:
                raise AssertionError("no error from %r" % call)
    sys.exit(0)
status, took = None, None
while time.monotonic() - started < 10.0:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        took = time.monotonic() - started
        break
    time.sleep(0.01)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(json.dumps({"exit": os.waitstatus_to_exitcode(status) if took is not None else None,
                  "took": took, "held": lock.is_held}), flush=True)
sys.stdin.readline()
lock.release()
client.close()
"""

CHILD_BOUND = 5.0


def _nodes(observer, kind, path):
    return sorted(p.node for p in getattr(observer, kind)(path).participants())


@pytest.mark.parametrize("how", ["exit", "close", "calls"])
@pytest.mark.parametrize("kind", ["mutex", "simple_lock"])
def test_a_forked_child_releases_nothing_of_the_parents_and_exits_at_once(zk_hosts, path, kind, how):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, zk_hosts, path, kind, how],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with zklock.Client(zk_hosts, 10.0) as observer:
            assert holder.stdout.readline().strip() == "holding"
            before = _nodes(observer, kind, path)
            assert len(before) == 1
            holder.stdin.write("fork\n")
            holder.stdin.flush()
            report = json.loads(holder.stdout.readline())
            failures = []
            if report["took"] is None or report["took"] > CHILD_BOUND or report["exit"] != 0:
                failures.append("the child did not exit promptly with 0: %r" % report)
            after = _nodes(observer, kind, path)
            if after != before:
                failures.append("the parent's node went: %r, then %r" % (before, after))
            if not report["held"]:
                failures.append("the parent no longer says it holds")
            other = getattr(observer, kind)(path)
            if other.acquire(0):
                other.release()
                failures.append("another client acquired while the parent says held: %r"
                                % report["held"])
            holder.stdin.write("release\n")
            holder.stdin.flush()
            code = holder.wait(timeout=60)
            if code != 0:
                failures.append("the holder's own release after the fork failed (exit %d)" % code)
            assert not failures, "\n".join(failures)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


# Clients made after fork work in the child when the forking process made none; in a child of
# a process that had made one, connecting is refused at once (the library's I/O is the
# parent's), with a message that says so.
AFTER_FORK = r"""
import os, sys, zklock
hosts, path = sys.argv[1:3]
pid = os.fork()
if pid == 0:
    with zklock.Client(hosts, 10.0) as c:
        with c.mutex(path).hold(10.0):
            pass
    sys.exit(0)
assert os.waitpid(pid, 0)[1] == 0, "the child could not use a client of its own"
client = zklock.Client(hosts, 10.0)
pid = os.fork()
if pid == 0:
    try:
        zklock.Client(hosts, 10.0)
    except zklock.Closed as e:
        sys.exit(0 if "fork" in str(e) else 3)
    sys.exit(4)
assert os.waitpid(pid, 0)[1] == 0, "a child of a process with a client connected"
client.close()
"""


def test_clients_made_after_fork_work_unless_the_parent_made_one(zk_hosts, path):
    run = subprocess.run([sys.executable, "-c", AFTER_FORK, zk_hosts, path], timeout=60,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
