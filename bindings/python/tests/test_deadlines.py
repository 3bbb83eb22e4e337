"""A deadline that runs out inside a request is a timeout, not a lost connection (issue 28):
on a healthy server, a tiny timeout acquires (its one round trip found the lock free) or
gives False; it never raises ConnectionLoss, and nothing of the tries is left behind."""

import time

import zklock


def test_a_tiny_timeout_acquires_or_times_out_never_connection_loss(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        lock, holder = a.mutex(path), b.mutex(path)
        for busy in (False, True):
            if busy:
                assert holder.acquire(5.0)
            for _ in range(5):
                for timeout in (0.000001, 0.001, 0.01):
                    # Before: zklock.ConnectionLoss ("could not look for our node before the
                    # deadline").
                    got = lock.acquire(timeout)
                    assert not (got and busy), "held while another client holds it"
                    if got:
                        lock.release()
            if busy:
                holder.release()
        # An attempt given up with its create in flight is forgotten in the background.
        end = time.monotonic() + 30
        while lock.participants() and time.monotonic() < end:
            time.sleep(0.05)
        assert lock.participants() == []
