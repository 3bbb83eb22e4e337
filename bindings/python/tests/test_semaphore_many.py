"""Lock.acquire_many: a semaphore's n leases at once, all or none (against a real ZooKeeper
server, see conftest.py)."""

import threading

import pytest

import zklock


def test_acquire_many_takes_n_leases_or_none(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        sa, sb = a.semaphore(path, 3), b.semaphore(path, 3)
        leases = sa.acquire_many(2, timeout=5.0)
        assert isinstance(leases, zklock.LeaseSet)
        assert len(leases) == 2 and len(set(leases.tokens)) == 2
        assert sa.is_held
        # Two more of three: none (now, and within a timeout), nothing left taken.
        assert sb.acquire_many(2, 0) is None
        assert sb.acquire_many(2, 0.3) is None
        assert sb.acquire(0), "the one free lease is still free"
        sb.release()
        # This handle's own two leave one: it could only wait for itself.
        with pytest.raises(zklock.WouldDeadlock):
            sa.acquire_many(2, 1.0)
        leases.release()
        leases.release()  # once only
        assert not sa.is_held
        with sb.acquire_many(3, 0) as all_three:
            assert all(t > max(leases.tokens) for t in all_three)
            assert sa.acquire(0) is False
        assert sa.acquire(0)
        sa.release()


def test_acquire_many_refuses_bad_counts_and_other_locks(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as c:
        sem = c.semaphore(path, 2)
        for n in (0, 3, -1, 2 ** 40, "2"):
            with pytest.raises(zklock.InvalidArgument):
                sem.acquire_many(n, 0)
        with pytest.raises(zklock.InvalidArgument) as e:
            c.mutex(path + "-m").acquire_many(1, 0)
        assert "semaphore" in str(e.value)


def test_a_waiting_acquire_many_takes_all_when_returned(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        holder, waiter = a.semaphore(path, 2), b.semaphore(path, 2)
        assert holder.acquire(5.0)
        got = {}
        t = threading.Thread(target=lambda: got.update(leases=waiter.acquire_many(2, 30.0)))
        t.start()
        holder.release()
        t.join()
        assert got["leases"] is not None and len(got["leases"]) == 2
        assert holder.acquire(0) is False
        got["leases"].release()
        assert holder.acquire(0)
        holder.release()
