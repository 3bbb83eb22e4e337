"""The library's log records reach `logging` without ever running Python code where it could
hurt the process: not on the library's I/O threads (issue 16, item 11), not during interpreter
finalization (item 10)."""

import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import zklock

# An ordinary script: it holds a lock and stops "the server" in `finally`, so the library
# logs (its session is suspended) from its I/O thread while the interpreter finalizes.
STOPS_THE_SERVER_IN_FINALLY = r"""
import logging, socket, sys, zklock
logging.basicConfig(level=logging.INFO)
hosts, path, cut_port, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
client = zklock.Client(hosts, 2.0)
lock = client.mutex(path)
lock.acquire(5.0)
try:
    print("holding", lock.fencing_token)
finally:
    with socket.create_connection(("127.0.0.1", cut_port)) as s:
        s.sendall(delay.encode())
"""


def test_logging_while_the_interpreter_finalizes_never_aborts(proxy, path):
    # The relay is cut at once or a few milliseconds later: the session's suspension is then
    # logged while the interpreter finalizes (the old package aborted in most such runs).
    for i, delay in enumerate(["0", "0.002", "0.005", "0.01"] * 2):
        relay = proxy()
        run = subprocess.run(
            [sys.executable, "-c", STOPS_THE_SERVER_IN_FINALLY, relay.hosts, "%s/%d" % (path, i),
             str(relay.cut_port), delay],
            capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and "FATAL" not in run.stderr, \
            "run %d (cut after %s s) exited with %d:\n%s" % (i, delay, run.returncode, run.stderr)


def test_a_log_handler_that_blocks_never_stalls_zookeeper_io(zk_hosts, proxy, path):
    """A handler that blocks for three session timeouts on a record logged by the library's
    I/O (a session suspended) holds up no other session: its lock operations go on and its
    session does not expire."""
    timeout = 2.0
    blocking = threading.Event()

    class Blocking(logging.Handler):
        def emit(self, record):
            if "Suspended" in record.getMessage() and not blocking.is_set():
                blocking.set()
                time.sleep(3 * timeout)

    logger = logging.getLogger("zklock")
    handler, level = Blocking(logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        relay = proxy()
        with zklock.Client(zk_hosts, timeout) as b, zklock.Client(relay.hosts, timeout):
            held, other = b.mutex(path + "/held"), b.mutex(path + "/other")
            assert held.acquire(5.0)
            relay.cut()  # the other session is suspended: the library logs it from its I/O
            assert blocking.wait(10.0), "the suspension was not logged"
            started, rounds = time.monotonic(), 0
            while time.monotonic() - started < 3 * timeout:
                t = time.monotonic()
                assert other.acquire(timeout), "round %d: not acquired" % rounds
                other.release()
                assert time.monotonic() - t < timeout / 2, "round %d took %.1f s" % (
                    rounds, time.monotonic() - t)
                assert held.hold_state == "held", "round %d" % rounds
                rounds += 1
                time.sleep(0.05)
            assert held.hold_state == "held"
            held.release()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


# Which of the package's log threads run after `import zklock`, and after the first client.
LOG_THREADS_BY_STEP = r"""
import sys, threading, zklock
def log_threads():
    return sorted(t.name for t in threading.enumerate() if t.name == "zklock-log")
print("import", log_threads())
with zklock.Client(sys.argv[1], 5.0) as client:
    print("client", log_threads())
"""


def test_log_delivery_starts_with_the_first_client_not_at_import(zk_hosts):
    run = subprocess.run([sys.executable, "-c", LOG_THREADS_BY_STEP, zk_hosts],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["import []", "client ['zklock-log']"], run.stdout


def test_a_release_that_raised_lock_lost_logs_no_warning_of_it(zk_hosts, path, proxy, caplog):
    # Issue 40: release() raised LockLost, and then the library logged a WARNING saying the
    # same ("releasing ...: the lock was lost before release").
    relay = proxy()
    with zklock.Client(relay.hosts, 2.0) as c:
        m = c.mutex(path)
        assert m.acquire(5.0)
        relay.cut()
        deadline = time.monotonic() + 30
        while m.hold_state != zklock.HoldState.LOST and time.monotonic() < deadline:
            time.sleep(0.05)
        caplog.set_level(logging.WARNING, logger="zklock")
        caplog.clear()
        with pytest.raises(zklock.LockLost):
            m.release()
        time.sleep(0.5)  # the log thread's delivery
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
            and "releasing" in r.getMessage()]
    assert said == [], said
