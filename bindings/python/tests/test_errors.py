"""Errors that tell the truth: the library's own message reaches every exception, whichever
thread made the C call, and a text argument the library would cut short at a NUL is refused."""

import asyncio
import subprocess
import sys

import pytest

import zklock


def _real_message(err: zklock.ZklError) -> str:
    assert err.message and err.message != "no error", str(err)
    assert "no error" not in str(err), str(err)
    return err.message


def test_an_error_from_a_blocking_acquire_on_the_main_thread_carries_the_librarys_message(
        zk_hosts, path):
    # A timeout other than 0 runs the C acquire on a helper thread (Ctrl-C stays possible):
    # the message is that thread's, not the main thread's.
    with zklock.Client(zk_hosts, 5.0) as c:
        sem = c.semaphore(path, 1)
        assert sem.acquire(2.0)
        with pytest.raises(zklock.WouldDeadlock) as err:
            sem.acquire(2.0)
        assert "lease" in _real_message(err.value)
        with pytest.raises(zklock.WouldDeadlock) as err:
            with sem.hold(2.0):
                pass
        _real_message(err.value)
        sem.release()


def test_an_error_from_acquire_async_carries_the_librarys_message(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as c:
        sem = c.semaphore(path, 1)
        assert sem.acquire(2.0)

        async def main():
            with pytest.raises(zklock.WouldDeadlock) as err:
                await sem.acquire_async(2.0)
            assert "lease" in _real_message(err.value)
            with pytest.raises(zklock.WouldDeadlock) as err:
                async with sem.hold_async(2.0):
                    pass
            _real_message(err.value)

        asyncio.run(main())
        sem.release()


def test_a_release_in_another_thread_carries_its_own_message(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as c:
        m = c.mutex(path)

        async def main():
            with pytest.raises(zklock.NotHeld) as err:
                async with m.hold_async(2.0):
                    m.release()  # the block's exit then releases what is not held
            _real_message(err.value)

        asyncio.run(main())


@pytest.mark.parametrize("nul", ["\x00", b"\x00"])
def test_a_nul_in_a_path_is_refused_not_cut_short(zk_hosts, path, nul):
    with zklock.Client(zk_hosts, 5.0) as c:
        bad = path + "\x00alpha" if isinstance(nul, str) else path.encode() + b"\x00alpha"
        for make in (c.mutex, c.semaphore_mutex, c.read_lock, c.write_lock, c.rwlock,
                     c.simple_lock, lambda p: c.semaphore(p, 2)):
            with pytest.raises(zklock.InvalidArgument) as err:
                make(bad)
            assert "NUL" in str(err.value), str(err.value)
        with pytest.raises(zklock.InvalidArgument):
            c.request_revoke(path + "\x00beta")
        with pytest.raises(zklock.InvalidArgument):
            c.add_auth("digest\x00", "user:password")
        with pytest.raises(zklock.InvalidArgument):
            c.add_auth("digest", "user:pass\x00word")
        m = c.mutex(path)
        with pytest.raises(zklock.InvalidArgument):
            m.token(path + "\x00x")
        # Nothing was made at the shortened path either.
        assert m.participants() == []


def test_two_paths_that_differ_after_a_nul_are_not_the_same_lock(zk_hosts, path):
    with zklock.Client(zk_hosts, 5.0) as a, zklock.Client(zk_hosts, 5.0) as b:
        with pytest.raises(zklock.InvalidArgument):
            a.mutex(path + "/nul\x00alpha")
        with pytest.raises(zklock.InvalidArgument):
            b.mutex(path + "/nul\x00beta")


@pytest.mark.parametrize("kwargs", [
    {"hosts": "127.0.0.1:1\x00,127.0.0.1:2"},
    {"holder_id": "worker\x001"},
    {"auth_data": [("digest", "user:pass\x00word")]},
    {"auth_data": [("digest\x00x", "user:password")]},
    {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "bob\x00", "password": "pw"}},
    {"sasl_options": {"mechanism": "DIGEST-MD5", "username": "bob", "password": "p\x00w"}},
    {"ca": "/etc/ssl/ca.pem\x00x"},
    {"certfile": "/tmp/c.pem\x00", "keyfile": "/tmp/k.pem"},
    {"certfile": "/tmp/c.pem", "keyfile": b"/tmp/k.pem\x00"},
    {"certfile": "/tmp/c.pem", "keyfile": "/tmp/k.pem", "keyfile_password": "se\x00cret"},
])
def test_a_nul_in_any_connect_argument_is_refused_before_connecting(zk_hosts, kwargs):
    kwargs = dict(kwargs)
    hosts = kwargs.pop("hosts", zk_hosts)
    with pytest.raises(zklock.InvalidArgument) as err:
        zklock.Client(hosts, 5.0, connect_timeout=2.0, **kwargs).close()
    assert "NUL" in str(err.value), str(err.value)



def test_an_unresolvable_host_is_said_once_in_the_error_not_on_stderr():
    # Issue 40: a log line "cannot resolve ..." reached stderr (logging's last resort, in a
    # program that configures no logging) before ConnectionLoss said the same. A program of
    # its own: pytest's log capture would hide the line.
    program = (
        "import zklock\n"
        "try:\n"
        "    zklock.Client('no-such-host.invalid:2181', connect_timeout=1.0)\n"
        "except zklock.ConnectionLoss as e:\n"
        "    print(e.message)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert 'cannot resolve host "no-such-host.invalid"' in done.stdout, done
    assert done.stderr == "", done.stderr
