"""zklock.testing as a user of the installed package meets it: a pytest session of theirs
(with the fixtures brought in either documented way) and a unittest program of theirs (with
ZkLockTestCase), each in its own process, get real servers that lock, and leave no server
process and no server directory once they end; a test process that is killed takes its
servers with it (plain, SASL and, through the starter, TLS); a TLS server without the starter
says what it needs."""

import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import zklock
import zklock.testing
from zklock.testing import ServerUnavailable, ZooKeeperServer

CHECKOUT_SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src"))


def _eventually(cond, timeout=30.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _gone(pid: int) -> bool:
    """The process has ended (a zombie whose new parent has not reaped it yet counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except OSError:
        return True


def _user_env() -> dict:
    """The environment of a user's process: the installed package, no server of ours."""
    return {k: v for k, v in os.environ.items()
            if k not in ("ZKLOCK_TEST_SERVER", "ZKLOCK_LIBRARY", "PYTHONPATH")}


def _servers_recorded(path) -> list:
    with open(path) as f:
        return [json.loads(line) for line in f]


def _assert_all_gone(servers):
    assert servers
    for s in servers:
        # Stopped before the process ended: nothing to wait for.
        assert _gone(s["pid"]), s
        assert not os.path.exists(s["workdir"]), s
        assert _refuses(s["port"]), s


def test_the_module_is_installed_with_the_package():
    files = [str(f) for f in importlib.metadata.files("pyzklock")]
    assert "zklock/testing.py" in files, files
    assert not zklock.testing.__file__.startswith(CHECKOUT_SRC), zklock.testing.__file__
    for name in zklock.testing.__all__:
        assert hasattr(zklock.testing, name), name


RECORD = """
import json, os

def record(server):
    with open(os.environ["RECORD"], "a") as f:
        f.write(json.dumps({"pid": server.pid, "workdir": server.workdir,
                            "port": server.port}) + "\\n")
"""

USERS_PYTEST = RECORD + """
import pytest
import zklock

def test_locks(zookeeper_server):
    record(zookeeper_server)
    assert zookeeper_server.running and zookeeper_server.four_letter("ruok") == "imok"
    with zookeeper_server.client() as client:
        with client.mutex("/app/orders").hold(timeout=5.0) as lock:
            assert lock.is_held

def test_sasl(zookeeper_server_factory):
    server = zookeeper_server_factory(sasl_users={"bob": "bobpw"})
    record(server)
    assert zookeeper_server_factory(sasl_users={"bob": "bobpw"}) is server
    with zklock.Client(server.hosts, **server.client_options()) as client:
        assert client.mutex("/app/orders").acquire(5.0)
    with pytest.raises(zklock.AuthFailed):
        zklock.Client(server.hosts, connect_timeout=5.0)
"""


@pytest.mark.parametrize("conftest", [
    "pytest_plugins = ['zklock.testing']\n",
    "from zklock.testing import zookeeper_server, zookeeper_server_factory  # noqa: F401\n",
], ids=["pytest_plugins", "import"])
def test_a_users_pytest_session_has_servers_and_leaves_none(tmp_path, conftest):
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_users.py").write_text(USERS_PYTEST)
    record = tmp_path / "servers.jsonl"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                         cwd=str(tmp_path), env=dict(_user_env(), RECORD=str(record)),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout, run.stdout
    servers = _servers_recorded(record)
    assert len(servers) == 2 and servers[0]["pid"] != servers[1]["pid"], servers
    _assert_all_gone(servers)


USERS_UNITTEST = RECORD + """
import unittest
import zklock
from zklock.testing import ZkLockTestCase

class Orders(ZkLockTestCase):
    def test_locks(self):
        record(self.server)
        lock = self.client.mutex(self.path)
        self.assertTrue(lock.acquire(5.0))
        self.assertTrue(lock.is_held)

    def test_has_a_path_of_its_own(self):
        record(self.server)
        self.assertTrue(self.path.startswith("/zklock-testing/test_has_a_path_of_its_own-"))
        with self.client.mutex(self.path).hold(timeout=5.0):
            pass

class SecuredOrders(ZkLockTestCase):
    server_options = {"sasl_users": {"bob": "bobpw"}}

    def test_locks_with_credentials(self):
        record(self.server)
        self.assertEqual(self.client_options, {})
        self.assertTrue(self.client.mutex(self.path).acquire(5.0))
        with self.assertRaises(zklock.AuthFailed):
            zklock.Client(self.hosts, connect_timeout=5.0)

if __name__ == "__main__":
    unittest.main()
"""


def test_a_users_unittest_program_has_servers_and_leaves_none(tmp_path):
    (tmp_path / "test_users.py").write_text(USERS_UNITTEST)
    record = tmp_path / "servers.jsonl"
    run = subprocess.run([sys.executable, "test_users.py", "-v"], cwd=str(tmp_path),
                         env=dict(_user_env(), RECORD=str(record)),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Ran 3 tests" in run.stderr and "OK" in run.stderr, run.stderr
    servers = _servers_recorded(record)
    # One server per set of options for the whole process: the two plain tests share one.
    assert len({s["pid"] for s in servers}) == 2, servers
    _assert_all_gone(servers)


KILLED = """
import json, sys
from zklock.testing import ZooKeeperServer
servers = [ZooKeeperServer(), ZooKeeperServer(sasl_users={"bob": "pw"})]
if sys.argv[1:] == ["tls"]:
    servers.append(ZooKeeperServer(tls="none"))
for s in servers:
    print(json.dumps({"pid": s.pid, "workdir": s.workdir, "port": s.port}), flush=True)
print(flush=True)
sys.stdin.read()
"""


def test_the_servers_go_when_the_test_process_is_killed(tmp_path, testing_server_bin):
    user = subprocess.Popen([sys.executable, "-c", KILLED, "tls"], cwd=str(tmp_path),
                            env=dict(_user_env(), ZKL_TESTING_SERVER_BIN=testing_server_bin),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    servers = []
    try:
        for line in user.stdout:
            if not line.strip():
                break
            servers.append(json.loads(line))
        assert len(servers) == 3, servers
        for s in servers:
            assert not _gone(s["pid"]) and not _refuses(s["port"]), s
    finally:
        user.send_signal(signal.SIGKILL)
        user.wait()
        user.stdin.close()
        user.stdout.close()
    for s in servers:
        assert _eventually(lambda: _gone(s["pid"])), s
        # The TLS server's JVM is the starter's child: its port is what shows it gone.
        assert _eventually(lambda: _refuses(s["port"])), s
        assert _eventually(lambda: not os.path.exists(s["workdir"])), s


def test_a_tls_server_through_the_starter_locks_and_stops(testing_server_bin):
    with ZooKeeperServer(tls="need", starter=testing_server_bin) as server:
        assert server.hosts == "tcp+tls://" + server.address
        assert set(server.client_options()) == {"ca", "certfile", "keyfile"}
        with server.client() as client:
            assert client.mutex("/tls/orders").acquire(5.0)
        pid, port = server.pid, server.port
    assert server.pid is None and not server.running
    assert _gone(pid) and _refuses(port)


def test_tls_without_the_starter_says_what_it_needs(monkeypatch):
    monkeypatch.delenv("ZKL_TESTING_SERVER_BIN", raising=False)
    with pytest.raises(ServerUnavailable) as caught:
        ZooKeeperServer(tls="need")
    message = str(caught.value)
    for needed in ("ZKL_TESTING_SERVER_BIN", "starter=", "testing_server", "certificates",
                   "SASL DIGEST-MD5"):
        assert needed in message, message


def test_stop_is_idempotent_and_options_are_checked():
    server = ZooKeeperServer(config={"maxClientCnxns": 7})
    try:
        assert "maxClientCnxns=7" in server.four_letter("conf"), server.four_letter("conf")
    finally:
        server.stop()
    server.stop()
    assert server.pid is None and not os.path.exists(server.workdir)
    with pytest.raises(ValueError):
        ZooKeeperServer(tls="need", sasl_users={"bob": "pw"})
    with pytest.raises(ValueError):
        ZooKeeperServer(tls="yes")
    with pytest.raises(ValueError):
        ZooKeeperServer(sasl_users={"bo b": "pw"})
