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
    with caplog.at_level(logging.INFO, logger="zklock"):
        with zklock.Client(zk_hosts, 5.0) as c:
            with c.mutex(path).hold(2.0):
                pass
        # Lines reach `logging` from the package's own thread, a moment later.
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            messages = [r.getMessage() for r in caplog.records if r.name == "zklock"]
            if any("released " + path in m for m in messages):
                break
            time.sleep(0.01)
    assert any("acquired " + path in m for m in messages), messages
    assert any("released " + path in m for m in messages), messages
    assert {r.threadName for r in caplog.records if r.name == "zklock"} == {"zklock-log"}
