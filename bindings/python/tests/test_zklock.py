"""The zklock package against a real ZooKeeper server (see conftest.py)."""

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time

import pytest

import zklock


def test_acquire_in_one_thread_release_in_another(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        lock, other = a.mutex(path), b.mutex(path)
        done = {}
        t = threading.Thread(target=lambda: done.update(got=lock.acquire(2.0)))
        t.start()
        t.join()
        assert done["got"]
        assert lock.is_held and lock.hold_state == "held"
        assert 0 < lock.lease_remaining <= 5.0
        token = lock.fencing_token
        assert not other.acquire(0), "another client got in while it is held"
        lock.release()  # on this thread: the handle is the participant
        assert lock.hold_state == "none"
        with other.hold(2.0):
            assert other.fencing_token > token


def test_asyncio_to_thread_acquire_is_cancelled(zk_hosts, path):
    async def main():
        with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
            holder, waiter = a.mutex(path), b.mutex(path)
            assert holder.acquire(2.0)
            task = asyncio.create_task(asyncio.to_thread(waiter.acquire))
            await asyncio.sleep(0.3)  # the event loop runs while the acquire blocks
            assert not task.done()
            started = time.monotonic()
            waiter.cancel()
            with pytest.raises(zklock.Cancelled):
                await task
            assert time.monotonic() - started < 1.0
            assert not waiter.is_held
            holder.release()
            assert await asyncio.to_thread(waiter.acquire, 2.0)
            await asyncio.to_thread(waiter.release)

    asyncio.run(main())


CONTENDER = r"""
import sys, zklock
hosts, path, counter, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with zklock.Client(hosts, 10.0) as c:
    lock = c.mutex(path)
    for _ in range(rounds):
        with lock:
            n = int(open(counter).read() or 0)
            open(counter, "w").write(str(n + 1))
"""


def test_two_processes_contending_never_overlap(zk_hosts, path, tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    rounds = 30
    procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, zk_hosts, path, str(counter), str(rounds)])
             for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    # A read-modify-write that only mutual exclusion keeps exact.
    assert int(counter.read_text()) == 2 * rounds


def test_every_status_has_its_exception(zk_hosts, path):
    assert issubclass(zklock.Timeout, zklock.ZklError)
    with pytest.raises(zklock.InvalidArgument):
        zklock.Client("", 1.0)
    with zklock.Client(zk_hosts, 5.0) as c:
        with pytest.raises(zklock.InvalidArgument):
            c.mutex("relative/path")
        lock = c.semaphore_mutex(path)
        with pytest.raises(zklock.NotHeld):
            lock.release()
        with pytest.raises(zklock.NotHeld):
            lock.fencing_token
        other = zklock.Client(zk_hosts, 5.0).semaphore_mutex(path)
        with lock.hold(1.0):
            with pytest.raises(zklock.Timeout):
                with other.hold(0.2):
                    pass
        with pytest.raises(zklock.InvalidArgument):
            c.set_acl(zklock.ACL_CREATOR_ALL)  # no authentication
    with pytest.raises(zklock.ConnectionLoss):
        zklock.Client("127.0.0.1:1", 1.0)


def test_every_recipe_is_a_context_manager(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as c:
        read, write = c.rwlock(path + "/rw")
        with write:
            with read:  # downgrade within one participant
                assert read.is_held and write.is_held
        with c.semaphore(path + "/sem", 2) as lease:
            assert lease.is_held
        with c.simple_lock(path + "/simple") as simple:
            assert simple.is_held
        both = zklock.multi_lock([c.mutex(path + "/a"), c.mutex(path + "/b")])
        with both:
            assert both.is_held
        assert not both.is_held


def test_the_library_logs_to_python_logging(zk_hosts, path, caplog):
    # Each acquire and release is a DEBUG line (INFO is for what an operator acts on).
    zklock.set_log_level(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="zklock"):
            with zklock.Client(zk_hosts, 5.0) as c:
                with c.mutex(path).hold(2.0):
                    pass
            # Lines reach `logging` from the package's own thread, a moment later.
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline:
                ours = [r for r in caplog.records if r.name.startswith("zklock")]
                messages = [r.getMessage() for r in ours]
                if any("released " + path in m for m in messages):
                    break
                time.sleep(0.01)
    finally:
        zklock.set_log_level(logging.INFO)
    assert any("acquired " + path in m for m in messages), messages
    assert any("released " + path in m for m in messages), messages
    assert {r.threadName for r in ours} == {"zklock-log"}


def test_close_from_another_thread_cancels_a_waiting_acquire_and_waits_for_it(zk_hosts, path):
    """Lock.close() while another thread waits in acquire() on the same lock: the acquire is
    cancelled (it raises Cancelled), close() returns once it has, and only then is the handle
    freed; later calls raise ValueError."""
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        holder, waiter = a.mutex(path), b.mutex(path)
        assert holder.acquire(2.0)
        for round in range(5):
            outcome = {}

            def wait():
                try:
                    outcome["acquired"] = waiter.acquire(30.0)
                except zklock.ZklError as e:
                    outcome["error"] = e

            t = threading.Thread(target=wait)
            t.start()
            time.sleep(0.2)  # the acquire now waits in the library
            started = time.monotonic()
            waiter.close()
            assert time.monotonic() - started < 2.0
            assert waiter._calls == 0, "close() returned while the acquire was still in the library"
            t.join(5.0)
            assert not t.is_alive()
            assert isinstance(outcome.get("error"), zklock.Cancelled), outcome
            assert "closed" in str(outcome["error"])
            with pytest.raises(ValueError):
                waiter.acquire(0)
            waiter.close()  # idempotent
            waiter = b.mutex(path)
        # The cancelled attempts left nothing behind: the next in line gets it at once.
        holder.release()
        assert waiter.acquire(2.0)
        waiter.release()


CLOSES_WHILE_ACQUIRES_START = r"""
import sys, threading, time, zklock
hosts, path = sys.argv[1], sys.argv[2]
with zklock.Client(hosts, 5.0) as a, zklock.Client(hosts, 5.0) as b:
    holder = a.mutex(path)
    assert holder.acquire(2.0)
    for round in range(40):
        waiter, ended = b.mutex(path), []

        def wait():
            try:
                waiter.acquire(10.0)
            except (zklock.Cancelled, ValueError) as e:  # cancelled by close, or closed
                ended.append(e)

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(0.0005 * (round % 8))
        waiter.close()
        t.join(5.0)
        assert not t.is_alive() and len(ended) == 1, (round, ended)
    holder.release()
print("ok")
"""


def test_close_racing_with_an_acquire_that_starts_never_crashes(zk_hosts, path):
    """close() at any moment of an acquire starting in another thread on the same lock: the
    acquire ends (cancelled, or refused as closed), never on a freed handle. In a process of
    its own: a use after free would crash it."""
    run = subprocess.run([sys.executable, "-c", CLOSES_WHILE_ACQUIRES_START, zk_hosts, path],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", \
        "exited with %d:\n%s" % (run.returncode, run.stderr[-3000:])


CLOSES_DURING_SHUTDOWN = r"""
import sys, threading, time, zklock
hosts, path = sys.argv[1], sys.argv[2]
holder = zklock.Client(hosts, 5.0).mutex(path)
assert holder.acquire(2.0)
client = zklock.Client(hosts, 5.0)

class ClosesItsLock:  # in a reference cycle: collected while the interpreter shuts down
    def __init__(self, lock):
        self.lock, self.me = lock, self

    def __del__(self):
        self.lock.close()

def start():
    lock = client.mutex(path)
    ClosesItsLock(lock)
    threading.Thread(target=lambda: lock.acquire(60.0), daemon=True).start()

start()
time.sleep(0.3)  # the daemon thread now waits in the acquire
"""


def test_close_during_interpreter_shutdown_with_an_acquire_under_way_never_stalls_the_exit(zk_hosts, path):
    """close() waits for the calls under way, but not while the interpreter shuts down: the
    thread of a call may then be ended before it can say it is done. The handle is left to
    the process's exit, neither freed under the call nor waited for."""
    for i in range(3):
        run = subprocess.run([sys.executable, "-c", CLOSES_DURING_SHUTDOWN, zk_hosts, "%s/%d" % (path, i)],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, "exited with %d:\n%s" % (run.returncode, run.stderr[-3000:])


def test_server_tick_is_the_tick_the_lease_reckons_with(zk_hosts, path):
    # A 1 s session on servers said to tick every 6 s can never prove its lease renewed: the
    # hold is not believed after its first 0.9 s; with the servers' real tick (0.5 s) it is.
    for tick, believed in ((6.0, False), (0.5, True), (None, True)):
        with zklock.Client(zk_hosts, 1.0, connect_timeout=15.0, server_tick=tick) as c:
            lock = c.mutex(path)
            assert lock.acquire(5.0)
            time.sleep(1.5)
            deadline = time.monotonic() + 3.0
            while not lock.is_held and time.monotonic() < deadline:
                time.sleep(0.01)
            assert lock.is_held == believed, tick
            lock.release()
    with pytest.raises(zklock.InvalidArgument):
        zklock.Client(zk_hosts, 1.0, server_tick=0)


def test_a_multi_lock_gives_each_locks_own_token(zk_hosts, path):
    # Issue 26 item 3: each lock's own token (what fences what that lock guards), in the order
    # given or by path; the single token is the largest of them. Two locks on one path would
    # wait for each other: refused.
    with zklock.Client(zk_hosts, 5.0) as c:
        b, a = c.mutex(path + "/b"), c.mutex(path + "/a")
        both = zklock.multi_lock([b, a])
        with both:
            tb, ta = both.tokens
            assert both.token(path + "/a") == ta and both.token(path + "/b") == tb
            assert both.fencing_token == max(ta, tb)
            with pytest.raises(zklock.InvalidArgument):
                both.token(path + "/elsewhere")
        with pytest.raises(zklock.NotHeld):
            both.tokens
        with pytest.raises(zklock.InvalidArgument):
            c.mutex(path + "/a").tokens
        with pytest.raises(zklock.InvalidArgument):
            zklock.multi_lock([c.mutex(path + "/same"), c.mutex(path + "/same")])


def test_a_session_state_prints_its_name():
    # An IntEnum printed as its number ("1") since Python 3.11: a state says what it is.
    s = zklock.SessionState.SUSPENDED
    assert str(s) == "SessionState.SUSPENDED"
    assert "%s" % s == "SessionState.SUSPENDED"
    assert f"{s}" == "SessionState.SUSPENDED"
    assert s == 1 and int(s) == 1  # still the C value


def test_a_negative_timeout_waits_forever_as_in_c(zk_hosts, path):
    # zkl_lock_acquire(l, -1) waits forever; so does acquire(-1) (as
    # threading.Lock.acquire(timeout=-1)): never a try-once that returns False at once.
    with zklock.Client(zk_hosts, holder_id="first") as a, zklock.Client(zk_hosts) as b:
        first, second = a.mutex(path), b.mutex(path)
        assert first.acquire(0)
        got = []
        waiter = threading.Thread(target=lambda: got.append(second.acquire(-1)))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive() and got == [], "acquire(-1) returned %r at once" % got
        first.release()
        waiter.join(10)
        assert got == [True]
        second.release()


def test_a_cancel_before_acquire_ends_it_at_once(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as c:
        lock = c.mutex(path)
        # No acquire under way: remembered (twice is once), and the next acquire raises at once,
        # though the lock is free; on this (main) thread and on another.
        lock.cancel()
        lock.cancel()
        started = time.monotonic()
        with pytest.raises(zklock.Cancelled):
            lock.acquire()
        assert time.monotonic() - started < 2.0
        assert not lock.is_held
        lock.cancel()
        outcome = {}

        def other():
            try:
                outcome["got"] = lock.acquire(30.0)
            except zklock.Cancelled:
                outcome["cancelled"] = time.monotonic() - started

        started = time.monotonic()
        t = threading.Thread(target=other)
        t.start()
        t.join(10.0)
        assert outcome.get("cancelled", 99.0) < 2.0, outcome
        # Forgotten by the acquire it ended.
        assert lock.acquire()
        lock.release()
        # reset_cancel forgets a remembered cancel.
        assert not lock.reset_cancel()
        lock.cancel()
        assert lock.reset_cancel()
        assert lock.acquire(0)
        lock.release()


def test_a_leader_election_has_one_leader_and_terms_that_grow(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        first, second = a.leader_election(path), b.leader_election(path)
        assert first.acquire(5.0), "the first participant leads"
        assert first.is_held
        term = first.fencing_token
        assert not second.acquire(0), "a second leader while the first leads"
        done = {}
        t = threading.Thread(target=lambda: done.update(led=second.acquire(10.0)))
        t.start()
        queue = []
        deadline = time.monotonic() + 10
        while len(queue) < 2 and time.monotonic() < deadline:
            queue = first.participants()
        assert [p.is_holder for p in queue] == [True, False], queue
        assert all("-latch-" in p.node for p in queue), "not LeaderLatch's names"
        first.release()
        t.join()
        assert done["led"] and second.is_held and not first.is_held
        assert second.fencing_token > term
        second.release()
