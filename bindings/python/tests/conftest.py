"""A real ZooKeeper server for the package's tests: Debian's zookeeper.jar on a free loopback
port with a temporary data directory, started once per test session, or the server that
ZKLOCK_TEST_SERVER names (127.0.0.1:PORT; scripts/test.sh runs one for all its tests).

Secured servers (a TLS-only port, with or without client certificates; SASL DIGEST-MD5
required) come from the crate's own starter, tools/testing_server.rs, which makes their
certificates at start: ZKL_TESTING_SERVER_BIN names its binary, else it is built here with
cargo from the checkout."""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

JAR = "/usr/share/java/zookeeper.jar"
CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _four_letters(port: int, word: bytes) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(word)
            return s.recv(4096)
    except OSError:
        return b""


@pytest.fixture(scope="session")
def zk_hosts():
    # scripts/test.sh runs one server for the Rust and the Python tests alike.
    shared = os.environ.get("ZKLOCK_TEST_SERVER")
    if shared:
        port = int(shared.rsplit(":", 1)[1])
        if _four_letters(port, b"ruok") != b"imok":
            pytest.fail("ZKLOCK_TEST_SERVER=%s does not answer ruok" % shared)
        yield shared
        return
    if not os.path.exists(JAR):
        pytest.fail("%s is missing: run scripts/install-deps.sh" % JAR)
    workdir = tempfile.mkdtemp(prefix="zklock-py-zk-")
    port = _free_port()
    cfg = os.path.join(workdir, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write(
            "tickTime=500\ninitLimit=10\nsyncLimit=5\nminSessionTimeout=1000\n"
            "maxSessionTimeout=60000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
            "4lw.commands.whitelist=*\nadmin.enableServer=false\nforceSync=no\n"
            % (os.path.join(workdir, "data"), port)
        )
    cp = JAR + (":/usr/share/java/slf4j-simple.jar" if os.path.exists("/usr/share/java/slf4j-simple.jar") else "")
    log = open(os.path.join(workdir, "server.log"), "ab")
    server = subprocess.Popen(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
         "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
         "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while _four_letters(port, b"ruok") != b"imok":
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail("ZooKeeper did not start; see %s/server.log" % workdir)
            time.sleep(0.1)
        yield "127.0.0.1:%d" % port
    finally:
        server.kill()
        server.wait()
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)


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


class SecuredServer:
    """A server started by tools/testing_server.rs with ``args``: ``hosts`` is its connect
    string (``tcp+tls://127.0.0.1:PORT`` for TLS), ``address`` the same without the scheme,
    ``files`` what else it printed (``ca``, ``cert``, ``key``: PEM files of the run's CA and of
    a client certificate with CN "client")."""

    def __init__(self, args):
        self._workdir = tempfile.mkdtemp(prefix="zklock-py-secured-")
        self._log = open(os.path.join(self._workdir, "starter.log"), "w+b")
        self._proc = subprocess.Popen([_testing_server_bin()] + list(args),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log)
        lines = []
        # Certificates are made and a JVM started: a minute is plenty, even on a busy machine.
        result = {}

        def read():
            for raw in self._proc.stdout:
                line = raw.decode().rstrip("\n")
                if not line:
                    break
                lines.append(line)
            result["done"] = True

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(120)
        if not result or not lines:
            self.close()
            pytest.fail("testing_server %s did not start: %s" % (" ".join(args), self.log()))
        self.hosts = lines[0]
        self.address = self.hosts.split("://", 1)[-1]
        self.files = dict(line.split("=", 1) for line in lines[1:])

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    def close(self):
        """Closing its stdin ends it (it kills its server); killed if it lingers."""
        try:
            self._proc.stdin.close()
            self._proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        self._log.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def secured_server():
    """Starts secured servers (``secured_server("--tls", "need")``), each once per session."""
    started = {}

    def start(*args) -> SecuredServer:
        if args not in started:
            started[args] = SecuredServer(args)
        return started[args]

    yield start
    for server in started.values():
        server.close()
