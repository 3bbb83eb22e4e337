"""asyncio that composes, against a real server: a cancelled acquire_async ends only when its C
acquire has ended and given back what it took (so the next acquire on the handle works, and no
node lingers), waits never occupy the loop's default executor, a cancel that comes before the C
call starts is not lost, nothing blocking runs on the loop's thread (leaving ``hold_async``
during an outage), and a watcher thread never keeps a session open past the interpreter's
exit."""

import asyncio
import os
import subprocess
import sys
import threading
import time

import pytest

import zklock


def _wait_for(pred, what, timeout=10.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, what
        time.sleep(0.02)


class _Contended:
    """``holder`` (client a) holds ``path``; ``waiter`` (client b) and ``third`` (client c)
    want it."""

    def __init__(self, zk_hosts, path):
        self.clients = [zklock.Client(zk_hosts, 5.0) for _ in range(3)]
        a, b, c = self.clients
        self.holder, self.waiter, self.third = a.mutex(path), b.mutex(path), c.mutex(path)
        assert self.holder.acquire(2.0)

    def queued(self) -> int:
        return len(self.holder.participants())

    def close(self):
        for c in self.clients:
            c.close()


@pytest.fixture
def contended(zk_hosts, path):
    made = _Contended(zk_hosts, path)
    yield made
    made.close()


def _run(main, within=60.0):
    """asyncio.run(main) on a thread of its own, failing the test if it has not returned
    within ``within`` s (the fixtures' clients are closed then, which ends what it waits
    for). An error of ``main`` is raised even if asyncio.run() did not return after it."""
    out = {}

    async def watched():
        try:
            return await main
        except BaseException as e:  # noqa: BLE001 - raised on the test's thread
            out["error"] = e
            raise

    def run():
        try:
            asyncio.run(watched())
        except BaseException as e:  # noqa: BLE001
            out.setdefault("error", e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(within)
    if "error" in out:
        raise out["error"]
    if t.is_alive():
        pytest.fail("asyncio.run() did not return within %g s" % within)


async def _ended(task, within=5.0):
    """Waits for a cancelled task to end (at most ``within`` s): True if it did."""
    done, _ = await asyncio.wait({task}, timeout=within)
    return bool(done)


def test_an_acquire_right_after_an_asyncio_timeout_works(contended):
    if not hasattr(asyncio, "timeout"):
        pytest.skip("asyncio.timeout needs Python 3.11")
    waiter = contended.waiter

    async def main():
        for _ in range(10):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await waiter.acquire_async()
            # Over: the C acquire has ended, so a retry at once waits its own timeout (the
            # lock is busy) instead of being refused, and the cancelled one's node is gone.
            assert await waiter.acquire_async(0.1) is False
            assert contended.queued() == 1, "the cancelled acquire is still queued"
        contended.holder.release()
        async with asyncio.timeout(5.0):
            assert await waiter.acquire_async()
        waiter.release()

    _run(main())


def test_waiting_acquires_leave_the_loops_default_executor_free(zk_hosts, path, contended):
    # More waits than the default executor has threads (min(32, cpus + 4)).
    n = min(32, (os.cpu_count() or 1) + 4) + 2
    client = contended.clients[1]
    waiters = [client.mutex(path) for _ in range(n)]

    async def main():
        tasks = [asyncio.create_task(w.acquire_async()) for w in waiters]
        try:
            end = time.monotonic() + 10.0
            while contended.queued() < n + 1:
                assert time.monotonic() < end, \
                    "%d of %d waits queued" % (contended.queued() - 1, n)
                await asyncio.sleep(0.05)
            ran = await asyncio.wait_for(asyncio.to_thread(lambda: "ran"), 2.0)
            assert ran == "ran"
        finally:
            for t in tasks:
                t.cancel()
            ended = await asyncio.wait(tasks, timeout=10.0)
        assert not ended[1], "cancelled acquires did not end"
        assert contended.queued() == 1

    _run(main())


def test_a_cancel_before_the_c_acquire_starts_is_not_lost_with_the_executor_busy(contended):
    waiter = contended.waiter

    async def main():
        loop = asyncio.get_running_loop()
        blocked = threading.Event()
        # Every thread of the default executor busy (as other to_thread work would keep it).
        busy = [loop.run_in_executor(None, blocked.wait, 30.0) for _ in range(40)]
        try:
            task = asyncio.create_task(waiter.acquire_async())
            await asyncio.sleep(0.05)
            task.cancel()
            ended = await _ended(task)
        finally:
            blocked.set()
            await asyncio.gather(*busy)
        assert ended and task.cancelled()
        # Nothing of it runs later by itself.
        for _ in range(10):
            assert contended.queued() == 1, "the cancelled acquire started later"
            await asyncio.sleep(0.1)
        assert not waiter.is_held

    _run(main())
    contended.holder.release()
    assert contended.third.acquire(5.0), "a third client was refused"
    contended.third.release()


def test_a_cancel_at_any_moment_of_the_start_ends_the_acquire_and_leaves_no_node(contended):
    waiter = contended.waiter

    async def main():
        for i in range(40):
            task = asyncio.create_task(waiter.acquire_async())
            for _ in range(i % 4):
                await asyncio.sleep(0)  # cancel at a different point of the start each time
            if i % 5 == 4:
                await asyncio.sleep(0.001 * (i % 7))
            task.cancel()
            if not await _ended(task):
                contended.holder.release()  # unblocks it, so the test ends
                pytest.fail("round %d: a cancelled acquire did not end in 5 s" % i)
            assert task.cancelled()
            assert contended.queued() == 1, "round %d: a node lingers" % i
        assert await waiter.acquire_async(0.05) is False
        assert not waiter.is_held

    _run(main())


def test_a_cancelled_acquire_that_got_the_lock_gives_it_back_before_the_cancel_ends(contended):
    waiter = contended.waiter

    async def main():
        for _ in range(10):
            task = asyncio.create_task(waiter.acquire_async())
            end = time.monotonic() + 10.0
            while contended.queued() < 2:
                assert time.monotonic() < end
                await asyncio.sleep(0.01)
            contended.holder.release()  # the waiter gets it about now ...
            task.cancel()  # ... and is cancelled about now
            assert await _ended(task)
            # Whatever won, the waiter holds nothing (a task that got it returned True).
            if not task.cancelled():
                assert task.result() is True
                waiter.release()
            assert not waiter.is_held
            assert contended.holder.acquire(5.0), "the lock was kept by a cancelled acquire"

    _run(main())


def test_leaving_hold_async_during_an_outage_never_blocks_the_loop(zk_hosts, proxy, path):
    relay = proxy()
    client = zklock.Client(relay.hosts, 2.0)
    lock = client.mutex(path)
    gaps = []

    async def main():
        stop = False

        async def tick():
            last = time.monotonic()
            while not stop:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        try:
            async with lock.hold_async(timeout=2.0):
                relay.cut()  # the server is gone: the release cannot be sent
                gaps.clear()
        except zklock.ZklError:
            pass  # the release says the hold was lost, or the connection: either is fine
        stop = True
        await ticker

    started = time.monotonic()
    _run(main())
    took = time.monotonic() - started
    client.close()
    assert gaps, "the ticker never ran"
    assert max(gaps) < 0.5, "the loop stalled %.2f s (of %.2f s) leaving hold_async" % (
        max(gaps), took)


HOLDS_WITH_A_WATCHER_AND_EXITS = r"""
import sys, zklock
hosts, path, watcher = sys.argv[1], sys.argv[2], sys.argv[3]
c = zklock.Client(hosts, 10.0)
m = c.mutex(path)
assert m.acquire(5.0)
if watcher == "on_lost":
    m.on_lost(lambda lk: None)
elif watcher == "add_listener":
    c.add_listener(lambda state: None)
elif watcher == "make_revocable":
    m.make_revocable(lambda lk: None)
print("HELD", flush=True)
"""


@pytest.mark.parametrize("watcher", ["none", "on_lost", "add_listener", "make_revocable"])
def test_a_process_that_exits_holding_with_a_watcher_leaves_no_node(zk_hosts, path, watcher):
    _exits_holding_and_leaves_no_node(zk_hosts, HOLDS_WITH_A_WATCHER_AND_EXITS, [path, watcher],
                                      path)


def _exits_holding_and_leaves_no_node(zk_hosts, script, args, mutex_path):
    """Runs ``script`` (which prints HELD holding the mutex at ``mutex_path``, then exits) in
    a child interpreter; the mutex's node must go at once with it."""
    with zklock.Client(zk_hosts, 5.0) as other:
        child = subprocess.Popen([sys.executable, "-c", script, zk_hosts, *args],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = child.communicate(timeout=60)
        finally:
            child.kill()
            child.wait()
        assert out.strip() == "HELD" and child.returncode == 0, err[-3000:]
        exited = time.monotonic()
        lock = other.mutex(mutex_path)
        # The session's timeout is 10 s: its node goes at once, or not for 10 s.
        assert lock.acquire(5.0), "the exited process's node is still there after 5 s"
        took = time.monotonic() - exited
        assert took < 3.0, "the node went %.1f s after the exit" % took
        lock.release()


HOLDS_WITH_A_WAITER_AND_EXITS = r"""
import sys, threading, time, zklock
hosts, path = sys.argv[1], sys.argv[2]
c = zklock.Client(hosts, 10.0)
lease = c.semaphore(path + "/sem", 1)
second = c.semaphore(path + "/sem", 1)
m = c.mutex(path + "/mutex")
assert lease.acquire(5.0) and m.acquire(5.0)
waiting = threading.Thread(target=lambda: second.acquire(60.0), daemon=True)
waiting.start()
while len(lease.participants()) < 2:
    time.sleep(0.02)
print("HELD", flush=True)
"""


def test_a_process_that_exits_holding_while_a_thread_waits_on_another_handle_leaves_no_node(
        zk_hosts, path):
    """Issue 37, item 5: a process holds a semaphore lease and a mutex while a thread of it
    waits on a second handle of the semaphore, and exits. Its nodes go at once (before: the
    waiting handle could not be freed once the interpreter finalized, the session stayed open,
    and the mutex's node stayed for the whole session timeout, 10 s)."""
    _exits_holding_and_leaves_no_node(zk_hosts, HOLDS_WITH_A_WAITER_AND_EXITS, [path],
                                      path + "/mutex")


def test_cancelling_one_acquire_leaves_the_handles_other_acquires_under_way(zk_hosts, path):
    """Issue 37, item 6: two tasks acquire leases of one semaphore handle while a holder keeps
    it full; one task is cancelled (asyncio.wait_for gives up on it). The other acquire goes on
    and gets its lease once the holder lets go: it is not cancelled with its sibling (before,
    the give-up cancelled the whole handle: the sibling raised Cancelled)."""
    a, b = zklock.Client(zk_hosts, 5.0), zklock.Client(zk_hosts, 5.0)
    try:
        # Two leases, both held by `full`: `sem` may have two acquires under way.
        full = a.semaphore(path, 2)
        assert full.acquire(2.0) and full.acquire(2.0)
        sem = b.semaphore(path, 2)

        async def main():
            sibling = asyncio.ensure_future(sem.acquire_async(30.0))
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sem.acquire_async(30.0), 0.5)
            await asyncio.sleep(0.5)
            assert not sibling.done(), "the sibling acquire ended with the cancelled one"
            full.release()
            assert await asyncio.wait_for(sibling, 10.0) is True
            sem.release()
            full.release()

        _run(main())
    finally:
        a.close()
        b.close()
