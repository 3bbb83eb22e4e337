"""zklock behaving as Python users expect (kazoo is the bar), against a real server: Ctrl-C
during a blocking acquire, asyncio cancellation, range-checked integers, enums, repr,
identifiers, participants, stats, the on_lost and session listeners, revocation, ``with
Client`` ending the session, and logging."""

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import zklock

CHILD = r"""
import sys, time, zklock
c = zklock.Client(sys.argv[1], 10.0)
m = c.mutex(sys.argv[2])
print("WAITING", flush=True)
t = time.monotonic()
try:
    m.acquire()
    print("ACQUIRED %.2f" % (time.monotonic() - t), flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED %.2f held=%s" % (time.monotonic() - t, m.is_held), flush=True)
    print("PARTICIPANTS %d" % len(m.participants()), flush=True)
"""


def _wait_for(pred, what, timeout=10.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, what
        time.sleep(0.02)


def _ctrl_c_as_at_a_terminal():
    """In the child before it runs Python: SIGINT at its default, as in a terminal's program. A
    shell's background job (scripts/test.sh runs these tests in one) ignores SIGINT, and Python
    started with SIGINT ignored keeps ignoring it: no KeyboardInterrupt ever comes."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_blocking_acquire_interrupts_at_once_and_leaves_no_node(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a:
        holder = a.mutex(path)
        assert holder.acquire(2.0)
        child = subprocess.Popen([sys.executable, "-c", CHILD, zk_hosts, path],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 preexec_fn=_ctrl_c_as_at_a_terminal)
        try:
            assert child.stdout.readline().strip() == "WAITING"
            _wait_for(lambda: len(holder.participants()) == 2, "the child queued")
            sent = time.monotonic()
            child.send_signal(signal.SIGINT)
            line = child.stdout.readline().split()
            took = time.monotonic() - sent
            assert line[:1] == ["INTERRUPTED"], (line, child.stderr.read())
            assert line[2] == "held=False", line
            assert took < 2.0, "KeyboardInterrupt %.2f s after Ctrl-C" % took
            # The cancelled wait leaves nothing: only the holder stays queued (the child's node
            # goes in the background, after the interrupt: on a busy machine the child's own
            # look right after it may still list it).
            assert child.stdout.readline().split()[:1] == ["PARTICIPANTS"]
            _wait_for(lambda: len(holder.participants()) == 1, "the child's node gone")
            assert [p.is_holder for p in holder.participants()] == [True]
            assert child.wait(10) == 0
        finally:
            child.kill()
            child.wait()
        holder.release()


CHILD_SIGNALLED_ELSEWHERE = r"""
import signal, sys, threading, time, zklock
c = zklock.Client(sys.argv[1], 10.0)
m = c.mutex(sys.argv[2])

def ctrl_c_on_this_thread():
    time.sleep(0.5)
    # As the kernel may do with a Ctrl-C: delivered to a thread that is not the main one.
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)

threading.Thread(target=ctrl_c_on_this_thread, daemon=True).start()
t = time.monotonic()
try:
    m.acquire()
    print("ACQUIRED", flush=True)
except KeyboardInterrupt:
    print("INTERRUPTED %.2f" % (time.monotonic() - t), flush=True)
"""


def test_ctrl_c_delivered_to_another_thread_still_interrupts_a_blocking_acquire(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a:
        holder = a.mutex(path)
        assert holder.acquire(2.0)
        run = subprocess.run([sys.executable, "-c", CHILD_SIGNALLED_ELSEWHERE, zk_hosts, path],
                             capture_output=True, text=True, timeout=60,
                             preexec_fn=_ctrl_c_as_at_a_terminal)
        holder.release()
    assert run.stdout.split()[:1] == ["INTERRUPTED"], (run.stdout, run.stderr[-2000:])


def _contended(zk_hosts, path):
    a, b, c = (zklock.Client(zk_hosts, 5.0) for _ in range(3))
    holder = a.mutex(path)
    assert holder.acquire(2.0)
    return (a, b, c), holder, b.mutex(path), c.mutex(path)


def _after_cancel(clients, holder, waiter, third):
    """The holder lets go after the cancelled wait: nobody else holds, a third client gets it."""
    holder.release()
    time.sleep(0.5)
    assert not waiter.is_held, "a hold arrived after the cancel and was kept"
    assert third.acquire(0), "a third client was refused: the cancelled waiter holds"
    third.release()
    for cl in clients:
        cl.close()


@pytest.mark.parametrize("how", ["wait_for", "task.cancel", "asyncio.timeout"])
def test_a_cancelled_async_acquire_never_leaves_a_hold(zk_hosts, path, how):
    if how == "asyncio.timeout" and not hasattr(asyncio, "timeout"):
        pytest.skip("asyncio.timeout needs Python 3.11")
    clients, holder, waiter, third = _contended(zk_hosts, path)

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        if how == "wait_for":
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(waiter.acquire_async(), 0.5)
        elif how == "task.cancel":
            task = asyncio.create_task(waiter.acquire_async())
            await asyncio.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await waiter.acquire_async()
        ticker.cancel()
        assert ticks > 10, "the event loop was blocked"

    asyncio.run(main())
    _after_cancel(clients, holder, waiter, third)


def test_hold_async_holds_for_the_block_and_times_out_as_timeout(zk_hosts, path):
    clients, holder, waiter, third = _contended(zk_hosts, path)

    async def main():
        with pytest.raises(zklock.Timeout):
            async with waiter.hold_async(timeout=0.3):
                pass
        holder.release()
        async with waiter.hold_async(timeout=5.0) as lk:
            assert lk.is_held and not third.acquire(0)
        assert not waiter.is_held

    asyncio.run(main())
    for cl in clients:
        cl.close()


@pytest.mark.parametrize("seconds", [float("inf"), -1, 0.05, 3600.5, 1e30])
def test_a_session_timeout_out_of_range_says_the_range_it_takes(zk_hosts, seconds):
    # Issue 40: inf raised OverflowError, and -1 was said to be outside "0.1 to 4.29497e+06 s"
    # where the most is 3600 s.
    with pytest.raises(zklock.InvalidArgument) as caught:
        zklock.Client(zk_hosts, session_timeout=seconds)
    assert caught.value.message.endswith("out of range (0.1 to 3600 s)"), caught.value.message


def test_integers_are_checked_before_they_reach_ctypes(zk_hosts, path):
    with pytest.raises(ValueError):
        zklock.Client(zk_hosts, session_timeout=4294967.396)
    with pytest.raises(ValueError):
        zklock.Client(zk_hosts, session_timeout=0.05)
    with pytest.raises(TypeError):
        zklock.Client(zk_hosts, session_timeout="5")
    with zklock.Client(zk_hosts, 5.0) as c:
        for bad in (-1, 0, 2**32 + 1):
            with pytest.raises(ValueError):
                c.semaphore(path, bad)
        with pytest.raises(TypeError):
            c.semaphore(path, 2.0)
        with pytest.raises(ValueError):
            c.set_protocol(7)
        with pytest.raises(ValueError):
            c.set_acl(-1)
        m = c.mutex(path)
        with pytest.raises(ValueError):
            m.acquire(float("nan"))
        with pytest.raises(TypeError):
            m.acquire(True)
        assert m.acquire(1e300), "longer than the clock counts: forever, held at once"
        m.release()


def test_enums_errors_version_repr_identifier_participants_and_stats(zk_hosts, path):
    assert zklock.__version__ == zklock.version()
    assert zklock.Protocol.KAZOO == zklock.PROTOCOL_KAZOO == 1
    assert issubclass(zklock.Timeout, TimeoutError)
    assert issubclass(zklock.WouldDeadlock, zklock.ZklError)
    with zklock.Client(zk_hosts, 5.0, holder_id="py-worker-1", connect_timeout=2.0) as a, \
            zklock.Client(zk_hosts, 5.0) as b:
        m, other = a.mutex(path), b.mutex(path)
        assert m.identifier == a.holder_id == "py-worker-1"
        assert m.hold_state is zklock.HoldState.NONE and m.hold_state == "none"
        with m:
            assert m.hold_state is zklock.HoldState.HELD and m.hold_state == "held"
            assert repr(m) == "<zklock.Lock mutex %r held>" % path
            waiter = threading.Thread(target=lambda: other.acquire(5.0) and other.release())
            waiter.start()
            _wait_for(lambda: len(m.participants()) == 2, "the waiter queued")
            ps = m.participants()
            assert [(p.holder_id, p.is_holder) for p in ps][0] == ("py-worker-1", True)
            assert not ps[1].is_holder and ps[0].sequence < ps[1].sequence
            assert abs(ps[0].created_ms / 1000 - time.time()) < 60
            assert m.lease_holders() == ["py-worker-1"]
        waiter.join()
        assert not other.acquire(0) or other.release() is None
        st = m.stats()
        assert (st.acquisitions, st.releases, st.losses) == (1, 1, 0), st
        assert st.hold.count == 1 and st.hold.max > 0
        sem = a.semaphore(path + "-sem", 1)
        assert sem.acquire(2.0)
        with pytest.raises(zklock.WouldDeadlock):
            sem.acquire()
        assert sem.lease_holders() == ["py-worker-1"]
        sem.release()
        assert "Client" in repr(a)


def test_on_lost_and_the_session_listener_hear_the_session_end(zk_hosts, proxy, path):
    relay = proxy()
    c = zklock.Client(relay.hosts, 2.0)
    states = []
    listener = c.add_listener(states.append)
    m = c.mutex(path)
    lost = threading.Event()
    assert m.acquire(2.0)
    m.on_lost(lambda lk: lost.set())
    relay.cut()  # the server is gone for this client: the lease runs out, the hold is lost
    assert lost.wait(10), "on_lost never called"
    assert m.hold_state in (zklock.HoldState.UNCERTAIN, zklock.HoldState.LOST)
    _wait_for(lambda: zklock.SessionState.SUSPENDED in states, "SUSPENDED heard", 10)
    c.close()
    listener.join(5)
    assert states[-1] is zklock.SessionState.CLOSED, states
    assert not listener.is_alive()


def test_with_client_ends_the_session_so_others_get_the_lock_at_once(zk_hosts, path):
    with zklock.Client(zk_hosts, 20.0) as other:
        waiter = other.mutex(path)
        with zklock.Client(zk_hosts, 20.0) as c:
            held = c.mutex(path)
            assert held.acquire(2.0)
            # leaves the block holding the lock, the handle still referenced
        t = time.monotonic()
        assert waiter.acquire(5.0), "the ended session's lock was not freed"
        assert time.monotonic() - t < 3.0, "waited for the session timeout (20 s)"
        # The lock went with the session: it says so instead of acting.
        with pytest.raises(ValueError):
            held.acquire(0)
        assert not held.is_held
        waiter.release()


def test_revocation_asks_a_revocable_holder(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        holder, asker = a.semaphore_mutex(path), b.semaphore_mutex(path)
        asked = threading.Event()
        holder.make_revocable(lambda lk: (asked.set(), lk.release()))
        assert holder.acquire(2.0)
        assert asker.revoke_holders() == 1
        assert asked.wait(10), "the revocation callback was never called"
        assert asker.acquire(5.0), "the revoked holder let go"
        asker.release()


def test_logging_goes_to_child_loggers_and_debug_is_reachable(zk_hosts, path, caplog):
    def records_for(level, lines):
        with caplog.at_level(level, logger="zklock"):
            zklock.set_log_level(level)
            with zklock.Client(zk_hosts, 5.0) as c:
                with c.mutex(path).hold(2.0):
                    pass
            end = time.monotonic() + 3.0
            while time.monotonic() < end and not any(
                    lines in r.getMessage() for r in caplog.records):
                time.sleep(0.02)
            time.sleep(0.2)
            return [r for r in caplog.records if r.name.startswith("zklock")]

    try:
        debug = records_for(logging.DEBUG, "released " + path)
        acquired = [r for r in debug if ("acquired " + path) in r.getMessage()]
        assert acquired and acquired[0].levelno == logging.DEBUG
        assert acquired[0].name.startswith("zklock.") and acquired[0].name != "zklock"
        caplog.clear()
        info = records_for(logging.INFO, "no such line")
        assert not any(("acquired " + path) in r.getMessage() for r in info), \
            "INFO on every acquire"
    finally:
        zklock.set_log_level(logging.INFO)
