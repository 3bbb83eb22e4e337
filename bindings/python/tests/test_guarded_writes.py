"""Guarded writes: Lock.multi / set_data / create / delete, applied only while the hold
exists (against a real ZooKeeper server, see conftest.py)."""

import pytest

import zklock
from zklock import Op


def test_a_cut_off_holders_write_is_refused_after_another_client_took_the_lock(
        zk_hosts, path, proxy):
    relay = proxy()
    with zklock.Client(relay.hosts, 2.0) as a, \
            zklock.Client(zk_hosts, 5.0) as b:
        old, new = a.semaphore_mutex(path), b.semaphore_mutex(path)
        target = path + "-data"
        assert old.acquire(5.0)
        old.create(target, b"a0")
        old.set_data(target, "a1")                                  # version 1
        relay.cut()                                                 # the holder is cut off
        assert new.acquire(30.0), "the lock once the old holder's session expired"
        new.set_data(target, b"b1")                                 # version 2
        with pytest.raises(zklock.LockLost):
            old.set_data(target, b"a2")
        with pytest.raises(zklock.LockLost):
            old.multi([Op.set_data(target, b"a3"), Op.create(target + "-a")])
        with pytest.raises(zklock.LockLost):
            old.delete(target)
        # Nothing of the old holder's was written: the data is at the new holder's version.
        new.multi([Op.check(target, version=2)])
        with pytest.raises(zklock.ZooKeeperError):
            new.multi([Op.check(target + "-a")])
        new.delete(target)


def test_guarded_writes_are_all_or_nothing_and_need_a_hold(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as c:
        lock = c.mutex(path)
        x, y = path + "-x", path + "-y"
        with pytest.raises(zklock.NotHeld):
            lock.set_data(x, b"0")
        with lock:
            lock.multi([Op.create(x, b"x0"), Op.set_data(x, b"x1"), Op.check(x, 1),
                        Op.create(path + "-e", mode=zklock.NODE_EPHEMERAL)])
            with pytest.raises(zklock.ZooKeeperError) as e:
                lock.multi([Op.create(y, "y"), Op.delete(x, version=5)])
            assert "operation 1" in str(e.value)
            lock.multi([Op.check(x, 1)])                 # unchanged
            with pytest.raises(zklock.ZooKeeperError):
                lock.multi([Op.check(y)])                # not made
            with pytest.raises(zklock.InvalidArgument):
                lock.multi([])
            with pytest.raises(zklock.InvalidArgument):
                lock.multi(["not an op"])
            lock.delete(x)
            assert lock.is_held
