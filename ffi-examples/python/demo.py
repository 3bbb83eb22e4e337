#!/usr/bin/env python3
"""The Python package (bindings/python) against a real server, straight from the checkout;
exit code 0 when every check passed.

    demo.py                         run the checks
    demo.py contend FILE ROUNDS     the two-process contention loop (same lock path as the C
                                    mutex example, so C and Python processes can contend)

Environment: ZKL_HOSTS (default 127.0.0.1:2181), ZKL_PATH (lock path prefix), ZKLOCK_LIBRARY
(default: the build tree's target/{debug,release}/libzklock.so).
"""
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("ZKLOCK_LIBRARY"):
    for target in (os.environ.get("CARGO_TARGET_DIR"), os.path.join(ROOT, "target")):
        for profile in ("debug", "release"):
            lib = os.path.join(target or "", profile, "libzklock.so")
            if target and os.path.exists(lib) and not os.environ.get("ZKLOCK_LIBRARY"):
                os.environ["ZKLOCK_LIBRARY"] = lib
# The package's own source: the same binding `pip install bindings/python` installs.
sys.path.insert(0, os.path.join(ROOT, "bindings", "python", "src"))
import zklock  # noqa: E402

HOSTS = os.environ.get("ZKL_HOSTS") or "127.0.0.1:2181"
BASE = os.environ.get("ZKL_PATH") or "/zklock-examples"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(status, fn, *args):
    try:
        fn(*args)
    except zklock.ZklError as e:
        check(e.status == status, "expected %s, got %s" % (zklock.status_name(status), e))
        return e
    raise AssertionError("expected ZklError %s" % zklock.status_name(status))


def test_mutex():
    with zklock.Client(HOSTS, 5.0) as a, zklock.Client(HOSTS, 5.0) as b:
        ma, mb = a.mutex(BASE + "/py/mutex"), b.mutex(BASE + "/py/mutex")
        with ma:
            first = ma.fencing_token
            check(ma.is_held, "held inside with")
            check(not mb.acquire(0), "busy: try once")
            t = time.monotonic()
            check(not mb.acquire(0.3), "busy: bounded wait")
            check(time.monotonic() - t >= 0.3, "waited the timeout")
        check(not ma.is_held, "released after with")
        with mb.hold(2.0):
            check(mb.fencing_token > first, "tokens increase")
        ma.close()
        ma.close()  # idempotent


def test_acquire_in_one_thread_release_in_another():
    """The handle is the participant: a thread pool may acquire on one thread and release on
    another."""
    with zklock.Client(HOSTS, 5.0) as a, zklock.Client(HOSTS, 5.0) as b:
        m, other = a.mutex(BASE + "/py/threads"), b.mutex(BASE + "/py/threads")
        seen = {}

        def acquire():
            seen["acquired"] = m.acquire(2.0)
            seen["acquired_on"] = threading.get_ident()

        t = threading.Thread(target=acquire)
        t.start()
        t.join()
        check(seen["acquired"], "acquired on a worker thread")
        check(seen["acquired_on"] != threading.get_ident(), "on another thread")
        check(m.is_held and m.hold_state == "held", "held, seen from the main thread")
        check(0 < m.lease_remaining <= 5.0, "a running lease")
        check(not other.acquire(0), "another client cannot take it")
        m.release()  # on the main thread
        check(not m.is_held and m.hold_state == "none", "released from the main thread")
        check(other.acquire(2.0), "now the other client gets it")
        other.release()


def test_context_manager_on_a_temporary():
    with zklock.Client(HOSTS, 5.0) as c:
        with c.mutex(BASE + "/py/temp") as lock:
            check(lock.is_held, "held")


def test_errors():
    with zklock.Client(HOSTS, 5.0) as c:
        e = expect_error(zklock.INVALID_ARGUMENT, c.mutex, "relative")
        check("not absolute" in e.message, e.message)
        check(str(e).startswith("ZKL_INVALID_ARGUMENT: "), str(e))
        expect_error(zklock.NOT_HELD, c.mutex(BASE + "/py/nh").release)
        expect_error(zklock.INVALID_ARGUMENT, c.set_protocol, 7)
        expect_error(zklock.INVALID_ARGUMENT, c.semaphore, BASE + "/py/sem0", 0)
        check(zklock.status_name(1) == "ZKL_TIMEOUT", "status names")
        check(zklock.status_name(99) == "ZKL_UNKNOWN_STATUS", "unknown status")
    expect_error(zklock.INVALID_ARGUMENT, zklock.Client, "127.0.0.1:notaport")


def test_cancel_from_another_thread():
    with zklock.Client(HOSTS, 5.0) as a, zklock.Client(HOSTS, 5.0) as b:
        ma, mb = a.mutex(BASE + "/py/cancel"), b.mutex(BASE + "/py/cancel")
        result = {}

        def wait():
            try:
                mb.acquire()
                result["status"] = zklock.OK
            except zklock.ZklError as e:
                result["status"] = e.status

        with ma:
            t = threading.Thread(target=wait)
            t.start()
            time.sleep(0.2)  # the waiter is blocked in C with the GIL released
            mb.cancel()
            t.join(5)
        check(result.get("status") == zklock.CANCELLED, "cancelled: %r" % result)


def test_rwlock_semaphore_multi():
    with zklock.Client(HOSTS, 5.0) as a, zklock.Client(HOSTS, 5.0) as b:
        r1, r2, w = a.read_lock(BASE + "/py/rw"), b.read_lock(BASE + "/py/rw"), b.write_lock(BASE + "/py/rw")
        with r1, r2:
            check(not w.acquire(0), "writer waits for readers")
        with w.hold(2.0):
            check(not r1.acquire(0), "readers wait for the writer")
        # Both halves of one lock: write -> read downgrade works, read -> write fails at once.
        rd, wr = a.rwlock(BASE + "/py/rw2")
        check(wr.acquire(0) and rd.acquire(0), "downgrade: write, then read")
        wr.release()
        check(rd.is_held, "still reading after the write half is released")
        try:
            wr.acquire(5.0)
            check(False, "an upgrade must fail")
        except zklock.ZklError as e:
            # ZKL_WOULD_DEADLOCK (11): an upgrade could only wait for this very read hold.
            check(e.status == getattr(zklock, "WOULD_DEADLOCK", 11), "upgrade refused: %s" % e)
        rd.release()
        s1, s2 = a.semaphore(BASE + "/py/sem", 2), b.semaphore(BASE + "/py/sem", 2)
        check(s1.acquire(1) and s1.acquire(1), "two leases")
        check(not s2.acquire(0), "no third lease")
        s1.release()
        check(s2.acquire(1), "a lease came back")
        parts = [a.mutex(BASE + "/py/multi/x"), a.write_lock(BASE + "/py/multi/y")]
        both = zklock.multi_lock(parts)
        check(all(p._ptr is None for p in parts), "parts taken over")
        with both:
            check(both.is_held, "multi held")
            check(not b.mutex(BASE + "/py/multi/x").acquire(0), "component busy")


def contend(path, counter_file, rounds):
    with zklock.Client(HOSTS, 5.0) as c:
        lock = c.mutex(path)
        last = 0
        for _ in range(rounds):
            with lock.hold(30):
                token = lock.fencing_token
                check(token > last, "fencing token %d after %d" % (token, last))
                last = token
                try:
                    with open(counter_file) as f:
                        value = int(f.read().strip() or 0)
                except FileNotFoundError:
                    value = 0
                time.sleep(0.002)
                with open(counter_file, "w") as f:
                    f.write("%d\n" % (value + 1))
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "contend":
        return contend(BASE + "/mutex/contend", argv[2], int(argv[3]))
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print("demo.py: zklock %s, ZooKeeper at %s" % (zklock.version(), HOSTS))
    failed = 0
    for test in [
        test_mutex,
        test_acquire_in_one_thread_release_in_another,
        test_context_manager_on_a_temporary,
        test_errors,
        test_cancel_from_another_thread,
        test_rwlock_semaphore_multi,
    ]:
        try:
            test()
            print("ok   " + test.__name__)
        except Exception as e:  # noqa: BLE001 - report every failure, run every test
            failed += 1
            print("FAIL %s: %s: %s" % (test.__name__, type(e).__name__, e))
    if failed:
        print("demo.py: %d tests FAILED" % failed)
        return 1
    print("demo.py: all tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
