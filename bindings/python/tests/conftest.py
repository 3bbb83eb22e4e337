"""A real ZooKeeper server for the package's tests: the package's own zklock.testing (Debian's
zookeeper.jar on a free loopback port with a temporary data directory), started once per test
session, or the server that ZKLOCK_TEST_SERVER names (127.0.0.1:PORT; scripts/test.sh runs one
for all its tests).

Secured servers: SASL DIGEST-MD5 ones from zklock.testing too; TLS-only ones (with or without
client certificates) and Kerberos ones through zklock.testing from the crate's own starter,
tools/testing_server.rs, which makes their certificates (or KDC) at start:
ZKL_TESTING_SERVER_BIN names its binary, else it is built here with cargo from the checkout."""

import os
import socket
import subprocess
import threading
import time
import uuid

import pytest

from zklock.testing import ServerUnavailable, ZooKeeperServer, _four_letters

CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


@pytest.fixture(scope="session")
def zk_hosts():
    # scripts/test.sh runs one server for the Rust and the Python tests alike.
    shared = os.environ.get("ZKLOCK_TEST_SERVER")
    if shared:
        port = int(shared.rsplit(":", 1)[1])
        if _four_letters(port, "ruok") != "imok":
            pytest.fail("ZKLOCK_TEST_SERVER=%s does not answer ruok" % shared)
        yield shared
        return
    try:
        server = ZooKeeperServer()
    except ServerUnavailable as e:
        pytest.fail("%s (scripts/install-deps.sh installs ZooKeeper)" % e)
    with server:
        yield server.hosts


@pytest.fixture
def path():
    """A lock path of this test alone."""
    return "/pytest/%s" % uuid.uuid4().hex


class Proxy:
    """A TCP relay to the real server that a test can cut, as if the server stopped: every
    relayed connection is closed and new ones are refused. ``cut_port`` is a control port for
    another process: whatever connects to it and sends a number of seconds ("0.05") has the
    relay cut that much later. ``bind``: the loopback address the relay listens on."""

    def __init__(self, target: str, bind: str = "127.0.0.1"):
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = self._listen(bind)
        self.hosts = "%s:%d" % (bind, self._listener.getsockname()[1])
        self._control = self._listen()
        self.cut_port = self._control.getsockname()[1]
        self._mu = threading.Lock()
        self._socks = []
        self._cut = False
        for loop in (self._accept, self._serve_control):
            threading.Thread(target=loop, daemon=True).start()

    @staticmethod
    def _listen(bind: str = "127.0.0.1") -> socket.socket:
        s = socket.socket()
        s.bind((bind, 0))
        s.listen(16)
        return s

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._target)
            except OSError:
                if self._cut:
                    return
                continue
            with self._mu:
                if self._cut:
                    client.close()
                    server.close()
                    return
                self._socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _serve_control(self):
        while True:
            try:
                conn, _ = self._control.accept()
            except OSError:
                return
            with conn:
                delay = float(conn.recv(64).decode() or 0)
            time.sleep(delay)
            self.cut()

    def cut(self):
        with self._mu:
            self._cut = True
            socks, self._socks = self._socks, []
        self._listener.close()
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.cut()
        self._control.close()


@pytest.fixture
def proxy(zk_hosts):
    """Makes relays to the test server (``proxy()``), cut at the end of the test."""
    made = []

    def make(target: str = zk_hosts, bind: str = "127.0.0.1") -> Proxy:
        made.append(Proxy(target, bind))
        return made[-1]

    yield make
    for p in made:
        p.close()


# ------------------------------------------------------------------------- secured servers

def _testing_server_bin() -> str:
    """tools/testing_server.rs (the example target testing_server): $ZKL_TESTING_SERVER_BIN,
    else built now (with the features of the checkout's usual build, so nothing else is
    rebuilt)."""
    explicit = os.environ.get("ZKL_TESTING_SERVER_BIN")
    if explicit:
        return explicit
    if not os.path.exists(os.path.join(CHECKOUT, "Cargo.toml")):
        pytest.skip("the secured servers are started by the zklock checkout's testing_server")
    features = os.environ.get("ZKL_FEATURES", "testing,cli,header")
    built = subprocess.run(["cargo", "build", "--quiet", "--features", features,
                            "--example", "testing_server"], cwd=CHECKOUT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if built.returncode != 0:
        pytest.fail("cargo build --example testing_server failed:\n" + built.stdout)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(CHECKOUT, "target"))
    return os.path.join(CHECKOUT, target, "debug", "examples", "testing_server")


@pytest.fixture(scope="session")
def testing_server_bin() -> str:
    """The path of tools/testing_server.rs's binary (the starter of TLS servers)."""
    return _testing_server_bin()


def _secured(args) -> ZooKeeperServer:
    """A server of zklock.testing for the starter's arguments (``--tls MODE``, ``--sasl
    USER:PW``..., ``--kerberos NAME``...): TLS and Kerberos ones are started by
    testing_server, SASL ones from Python."""
    options, users, names, rest = {}, {}, [], list(args)
    while rest:
        flag, value = rest.pop(0), rest.pop(0)
        if flag == "--tls":
            options["tls"] = value
        elif flag == "--sasl":
            user, password = value.split(":", 1)
            users[user] = password
        elif flag == "--kerberos":
            names.append(value)
        else:
            raise ValueError("unknown option %s" % flag)
    if users:
        options["sasl_users"] = users
    if names:
        options["kerberos"] = names
    if "tls" in options or names:
        options["starter"] = _testing_server_bin()
    try:
        return ZooKeeperServer(**options)
    except ServerUnavailable as e:
        pytest.fail("%s: %s" % (" ".join(args), e))


@pytest.fixture(scope="session")
def secured_server():
    """Starts secured servers (``secured_server("--tls", "need")``), each once per session:
    :class:`zklock.testing.ZooKeeperServer` (``hosts``, ``address``, ``files``: ``ca``,
    ``cert``, ``key`` of a TLS server, PEM files of the run's CA and of a client certificate
    with CN "client"; ``krb5_conf``, ``keytab.NAME``... of a Kerberos one)."""
    started = {}

    def start(*args) -> ZooKeeperServer:
        if args not in started:
            started[args] = _secured(args)
        return started[args]

    yield start
    for server in started.values():
        server.stop()
