"""Real ZooKeeper servers for the tests of programs that use zklock, as ``kazoo.testing`` is
for kazoo's users: a server of its own on a free loopback port with a temporary data
directory, for pytest (the fixtures :func:`zookeeper_server` and
:func:`zookeeper_server_factory`) or unittest (:class:`ZkLockTestCase`, or the
:class:`ZkLockTestHarness` it is made of, as kazoo's ``KazooTestCase`` /
``KazooTestHarness``).

    from zklock.testing import ZooKeeperServer
    with ZooKeeperServer() as server:                       # serving when this returns
        with server.client() as client:                     # zklock.Client(server.hosts, ...)
            with client.mutex("/locks/x").hold(timeout=5.0):
                ...
    # here the server's process has ended and its directory is gone

The server is Apache ZooKeeper itself (Java): Debian's ``zookeeper`` package
(``apt-get install zookeeper default-jre-headless``: ``/usr/share/java/zookeeper.jar``), or
the classpath ``ZOOKEEPER_CLASSPATH`` names; the ``java`` of ``ZOOKEEPER_JAVA``, else of
``JAVA_HOME``, else the ``PATH``'s. A plain server and one that requires SASL DIGEST-MD5
(``sasl_users=``) are started from Python. A TLS-only server (``tls=``) needs certificates
made at start, which Python's standard library cannot make: it is started by zklock's own
starter, ``tools/testing_server.rs`` of the zklock repository (built with
``cargo build --features testing --example testing_server``), whose path
``ZKL_TESTING_SERVER_BIN`` (or ``starter=``) gives; so is a Kerberos server (``kerberos=``,
with a KDC of its own). Without the starter they raise :class:`ServerUnavailable` saying so.

Every server is stopped by its process id: :meth:`ZooKeeperServer.stop` (also at the end of a
``with`` block, of a fixture, of the harness's process) kills it and waits for it. If the test
process dies first (SIGKILL, a crash), the server goes too: a small watchdog process reads a
pipe that only the test process writes to; the pipe closes when that process ends, however it
ends, and the watchdog then kills the server (checking first that the process id is still that
server's) and removes its directory. A process forked from the test process (``os.fork``)
holds the pipe too: the server then outlives the test process until that child ends as well.
A server started by the starter is ended the same way: the starter reads such a pipe as its
standard input.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from typing import Dict, List, Mapping, Optional, Sequence

__all__ = [
    "ServerUnavailable",
    "ZooKeeperServer",
    "ZkLockTestCase",
    "ZkLockTestHarness",
    "shared_server",
]

DEBIAN_JAR = "/usr/share/java/zookeeper.jar"
# A simple slf4j binding, so the server writes its log instead of NOP warnings; the Netty
# jars that Debian's zookeeper.jar manifest omits (the TLS port needs them).
_EXTRA_JARS = (
    "/usr/share/java/slf4j-simple.jar",
    "/usr/share/java/netty-codec.jar",
    "/usr/share/java/netty-resolver.jar",
    "/usr/share/java/netty-transport-native-unix-common.jar",
)
_INSTALL_HINT = "apt-get install zookeeper default-jre-headless (Debian, Ubuntu)"
_TLS_MODES = ("need", "want", "none")

# The watchdog: reads its standard input (a pipe whose only writer is the test process) to
# the end, which comes when that process ends or stops the server; then kills the server if
# the process id is still the server's (its command line names the server's zoo.cfg, or the
# starter) and it has not ended by itself within a grace time (a starter ends its server
# when its own standard input closes, as this one does), waits until it is gone and removes
# the server's directory.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
pid, token, workdir, grace = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3], float(sys.argv[4])
while sys.stdin.buffer.read(4096):
    pass
def alive():
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return not os.path.isdir("/proc") and _signal0()
def _signal0():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
def ours():
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return token in f.read()
    except OSError:
        return not os.path.isdir("/proc")
end = time.monotonic() + grace
while alive() and time.monotonic() < end:
    time.sleep(0.02)
if alive() and ours():
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    end = time.monotonic() + 10
    while alive() and time.monotonic() < end:
        time.sleep(0.02)
shutil.rmtree(workdir, ignore_errors=True)
"""


class ServerUnavailable(RuntimeError):
    """A testing server could not be started: what is missing (Java, ZooKeeper, the starter
    for TLS and Kerberos) or why it did not serve, with the end of its log."""


def _free_port() -> int:
    """A loopback TCP port free now (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _four_letters(port: int, word: str, timeout: float = 3.0) -> str:
    """``word``'s whole answer from the plain port ``port`` of 127.0.0.1, "" if none."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(65536)
                if not data:
                    return b"".join(chunks).decode("utf-8", "replace")
                chunks.append(data)
    except OSError:
        return ""


def _classpath() -> str:
    cp = os.environ.get("ZOOKEEPER_CLASSPATH", "").strip()
    if cp:
        return cp
    if not os.path.exists(DEBIAN_JAR):
        raise ServerUnavailable("ZooKeeper is not installed: %s is missing (%s, or set "
                                "ZOOKEEPER_CLASSPATH)" % (DEBIAN_JAR, _INSTALL_HINT))
    return ":".join([DEBIAN_JAR] + [j for j in _EXTRA_JARS if os.path.exists(j)])


def _java() -> str:
    java = os.environ.get("ZOOKEEPER_JAVA")
    if java:
        return java
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise ServerUnavailable("no java: %s, or set ZOOKEEPER_JAVA or JAVA_HOME"
                                % _INSTALL_HINT)
    return found


def _jaas(users: Mapping[str, str]) -> str:
    """A JAAS ``Server`` section that knows ``users`` (DIGEST-MD5)."""
    lines = ["Server {", "  org.apache.zookeeper.server.auth.DigestLoginModule required"]
    for user, password in users.items():
        if not user or not all(c.isascii() and (c.isalnum() or c in "._-@") for c in user):
            raise ValueError("SASL user %r: a name is letters, digits and ._-@" % (user,))
        if any(c in password for c in '"\\\n'):
            raise ValueError("SASL user %r: a password without quotes, backslashes or "
                             "newlines" % (user,))
        lines.append('  user_%s="%s"' % (user, password))
    return "\n".join(lines) + ";\n};\n"


def _tail(path: str, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# Servers running, stopped at exit: a server runs until stop() or the end of the process,
# whether or not anything still refers to it.
_live: "set[ZooKeeperServer]" = set()
_live_mu = threading.Lock()


def _key(options: Mapping[str, object]) -> str:
    """One text per set of options of :class:`ZooKeeperServer`."""
    return repr(sorted((k, sorted(v.items()) if isinstance(v, Mapping) else v)
                       for k, v in options.items()))


class ZooKeeperServer:
    """One real ZooKeeper server, started (and serving) when the constructor returns.

    ``sasl_users``: ``{name: password}``; the server then requires SASL DIGEST-MD5 of every
    session (``enforce.auth.enabled``), from one of them. ``tls``: ``"need"`` (mutual TLS: a
    client certificate is required), ``"want"`` or ``"none"``: a TLS-only client port, with a
    CA, a server certificate and a client certificate made for the run (``files["ca"]``,
    ``files["cert"]``, ``files["key"]``: PEM files). ``kerberos``: names of principals of a
    Kerberos server with a KDC of its own (``files`` then has ``krb5_conf``, ``realm``,
    ``kdc_dir`` and ``keytab.NAME``). At most one of the three. ``tls`` and ``kerberos`` need
    zklock's starter (``starter=``, else ``ZKL_TESTING_SERVER_BIN``). ``config``: more
    ``zoo.cfg`` settings (``{"maxClientCnxns": 10}``), for a server started from Python.
    ``start_timeout``: seconds to wait for it to serve.

    Raises :class:`ServerUnavailable` when it cannot start (what is missing, or its log)."""

    def __init__(self, *, sasl_users: Optional[Mapping[str, str]] = None,
                 tls: Optional[str] = None, kerberos: Sequence[str] = (),
                 starter: Optional[str] = None, config: Optional[Mapping[str, object]] = None,
                 start_timeout: float = 60.0):
        if isinstance(kerberos, str):
            kerberos = [kerberos]
        if sum(map(bool, (sasl_users, tls, kerberos))) > 1:
            raise ValueError("sasl_users, tls and kerberos: one of them")
        if tls is not None and tls not in _TLS_MODES:
            raise ValueError("tls is one of %s, not %r" % (", ".join(_TLS_MODES), tls))
        if sasl_users is not None and not sasl_users:
            raise ValueError("a SASL server needs at least one user")
        self.sasl_users: Dict[str, str] = dict(sasl_users or {})
        self.tls = tls
        #: What the starter printed (TLS and Kerberos servers): file paths and names.
        self.files: Dict[str, str] = {}
        self._proc: Optional[subprocess.Popen] = None
        self._watchdog: Optional[subprocess.Popen] = None
        self._log = None
        self._mu = threading.Lock()
        self.workdir = tempfile.mkdtemp(prefix="zklock-testing-")
        try:
            if tls or kerberos:
                if config:
                    raise ValueError("config= is for servers started from Python, "
                                     "not TLS or Kerberos ones")
                args = ["--tls", tls] if tls else [a for n in kerberos for a in ("--kerberos", n)]
                self._start_starter(starter or os.environ.get("ZKL_TESTING_SERVER_BIN"),
                                    args, start_timeout)
            else:
                self._start_java(config or {}, start_timeout)
        except BaseException:
            self.stop()
            raise
        with _live_mu:
            _live.add(self)

    # ------------------------------------------------------------------ what a test uses

    #: The connect string: ``127.0.0.1:PORT``; ``tcp+tls://127.0.0.1:PORT`` for TLS;
    #: ``localhost:PORT`` for Kerberos (the host of the server's principal).
    hosts: str
    #: ``hosts`` without its ``tcp+tls://``.
    address: str
    #: The client port.
    port: int

    @property
    def pid(self) -> Optional[int]:
        """The server's process id (the starter's, for TLS and Kerberos: it ends its server
        when it ends); None once stopped."""
        proc = self._proc
        return proc.pid if proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the server's process is still there (False once stopped or dead)."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def client_options(self, username: Optional[str] = None) -> dict:
        """The keywords of :class:`zklock.Client` for this server: ``ca``, ``certfile`` and
        ``keyfile`` for TLS, ``sasl_options`` for SASL (``username``'s, default the first
        user's); none for a plain server."""
        if self.tls:
            return {"ca": self.files["ca"], "certfile": self.files["cert"],
                    "keyfile": self.files["key"]}
        if self.sasl_users:
            user = username if username is not None else next(iter(self.sasl_users))
            return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user,
                                     "password": self.sasl_users[user]}}
        return {}

    def client(self, session_timeout: float = 10.0, **options):
        """A :class:`zklock.Client` connected to this server, with :meth:`client_options` and
        ``options`` (which win)."""
        import zklock

        return zklock.Client(self.hosts, session_timeout, **{**self.client_options(), **options})

    def four_letter(self, word: str) -> str:
        """The answer to a four-letter word (``"ruok"``, ``"stat"``, ``"cons"``...); "" if
        none. Not for a TLS port (its words go over TLS)."""
        if self.tls:
            raise ValueError("four-letter words go over TLS to a TLS port: use a client")
        return _four_letters(self.port, word)

    def log(self) -> str:
        """The end of the server's log (of the starter's, for TLS and Kerberos)."""
        return _tail(self._log_path) if self._log_path else ""

    def stop(self) -> None:
        """Kills the server by its process id, waits for it and removes its directory.
        Idempotent; also at exit for servers still running."""
        with self._mu:
            proc, self._proc = self._proc, None
            watchdog, self._watchdog = self._watchdog, None
            if proc is not None:
                if self._starter:
                    # The starter ends its server when its standard input closes.
                    try:
                        proc.stdin.close()
                        proc.wait(30)
                    except (OSError, subprocess.TimeoutExpired):
                        pass
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                if proc.stdin is not None:
                    proc.stdin.close()
            if watchdog is not None:
                watchdog.stdin.close()  # its end: it finds the server gone and ends too
                try:
                    watchdog.wait(15)
                except subprocess.TimeoutExpired:
                    watchdog.kill()
                    watchdog.wait()
            if self._log is not None:
                self._log.close()
                self._log = None
            shutil.rmtree(self.workdir, ignore_errors=True)
        with _live_mu:
            _live.discard(self)

    close = stop

    def __enter__(self) -> "ZooKeeperServer":
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False

    def __repr__(self) -> str:
        kind = ("tls=%r" % self.tls if self.tls else "sasl" if self.sasl_users
                else "kerberos" if "krb5_conf" in self.files else "plain")
        return "<ZooKeeperServer %s %s pid=%s>" % (getattr(self, "hosts", "?"), kind, self.pid)

    # ------------------------------------------------------------------ starting

    _starter = False
    _log_path: Optional[str] = None

    def _start_java(self, config: Mapping[str, object], start_timeout: float) -> None:
        java, cp = _java(), _classpath()
        jvm = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Djava.net.preferIPv4Stack=true", "-Dzookeeper.admin.enableServer=false",
               "-Dzookeeper.jmx.log4j.disable=true"]
        settings = {"tickTime": 500, "initLimit": 10, "syncLimit": 5,
                    "minSessionTimeout": 1000, "maxSessionTimeout": 60000,
                    "dataDir": os.path.join(self.workdir, "data"),
                    "clientPortAddress": "127.0.0.1", "4lw.commands.whitelist": "*",
                    "admin.enableServer": "false", "forceSync": "no"}
        if self.sasl_users:
            jaas = os.path.join(self.workdir, "jaas.conf")
            with open(jaas, "w") as f:
                f.write(_jaas(self.sasl_users))
            jvm.append("-Djava.security.auth.login.config=" + jaas)
            settings.update({
                "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                "enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"})
        settings.update(config)
        cfg = os.path.join(self.workdir, "zoo.cfg")
        self._log_path = os.path.join(self.workdir, "server.log")
        self._log = open(self._log_path, "ab")
        deadline = time.monotonic() + start_timeout
        # The port is free when chosen but may be taken before the server binds it: then
        # again on another.
        for attempt in range(3):
            self.port = _free_port()
            settings["clientPort"] = self.port
            with open(cfg, "w") as f:
                f.writelines("%s=%s\n" % kv for kv in settings.items())
            try:
                self._proc = subprocess.Popen(
                    [java] + jvm + ["-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain",
                                    cfg],
                    stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                    start_new_session=True)  # a Ctrl-C at the terminal is the test's alone
            except OSError as e:
                raise ServerUnavailable("cannot run %s: %s (%s)" % (java, e, _INSTALL_HINT))
            self._watch(cfg, 0)
            # ruok answers imok before the server serves: srvr names its mode once it does.
            while "\nMode: " not in _four_letters(self.port, "srvr", 1.0):
                if self._proc.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    raise ServerUnavailable("ZooKeeper did not serve within %g s; its log "
                                            "ends:\n%s" % (start_timeout, self.log()))
                time.sleep(0.05)
            else:
                self.hosts = self.address = "127.0.0.1:%d" % self.port
                return
            in_use = "Address already in use" in self.log()
            self._proc.wait()
            self._unwatch()
            if not in_use or attempt == 2:
                raise ServerUnavailable("ZooKeeper exited with status %s before serving; its "
                                        "log ends:\n%s" % (self._proc.returncode, self.log()))

    def _watch(self, token: str, grace: float) -> None:
        """Starts the watchdog of the server (or starter) just started: see the module's
        docs."""
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(self._proc.pid), token,
             self.workdir, str(grace)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def _unwatch(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()
            watchdog.stdin.close()

    def _start_starter(self, starter: Optional[str], args: List[str],
                       start_timeout: float) -> None:
        what = "a TLS server" if args[0] == "--tls" else "a Kerberos server"
        if not starter:
            raise ServerUnavailable(
                "%s needs zklock's starter (tools/testing_server.rs in the zklock repository: "
                "cargo build --features testing --example testing_server): give its path as "
                "ZKL_TESTING_SERVER_BIN or starter=. Python's standard library cannot make "
                "the certificates; plain and SASL DIGEST-MD5 servers need no starter" % what)
        self._starter = True
        self._log_path = os.path.join(self.workdir, "starter.log")
        self._log = open(self._log_path, "ab")
        try:
            # Its standard input is the pipe that ends it: when this process closes it or ends.
            self._proc = subprocess.Popen([starter] + args, stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._log,
                                          start_new_session=True)
        except OSError as e:
            raise ServerUnavailable("cannot run the starter %s: %s" % (starter, e))
        self._watch(starter, 30)
        lines: List[str] = []
        done = threading.Event()

        def read(out):
            # Its stdout is left to this thread (closed here): it ends at the empty line, or
            # at the end of the output when the starter fails or is stopped.
            try:
                with out:
                    for raw in out:
                        line = raw.decode("utf-8", "replace").rstrip("\n")
                        if not line:
                            break
                        lines.append(line)
            except (OSError, ValueError):
                pass
            finally:
                done.set()

        threading.Thread(target=read, args=(self._proc.stdout,), name="zklock-testing-starter",
                         daemon=True).start()
        # It makes certificates (or a KDC) and starts a JVM first.
        if not done.wait(start_timeout) or not lines:
            raise ServerUnavailable("%s %s did not start within %g s; its log ends:\n%s"
                                    % (starter, " ".join(args), start_timeout, self.log()))
        self.hosts = lines[0]
        self.address = self.hosts.split("://", 1)[-1]
        self.port = int(self.address.rsplit(":", 1)[1])
        self.files = dict(line.split("=", 1) for line in lines[1:] if "=" in line)


@atexit.register
def _stop_all() -> None:
    with _live_mu:
        running = list(_live)
    for server in running:
        server.stop()


_shared: Dict[str, ZooKeeperServer] = {}
_shared_mu = threading.Lock()


def shared_server(**options) -> ZooKeeperServer:
    """One server per set of :class:`ZooKeeperServer` options for the whole process: started
    on first use, stopped at exit (or by :meth:`~ZooKeeperServer.stop`; a stopped one is
    started again on next use). The harness's servers."""
    key = _key(options)
    with _shared_mu:
        server = _shared.get(key)
        if server is None or not server.running:
            if server is not None:
                server.stop()
            server = _shared[key] = ZooKeeperServer(**options)
        return server


# ---------------------------------------------------------------------------------- unittest

class ZkLockTestHarness(unittest.TestCase):
    """A ``unittest.TestCase`` with a real ZooKeeper server, as kazoo's ``KazooTestHarness``:
    :meth:`setup_zookeeper` connects ``self.client`` (a :class:`zklock.Client`) and gives
    ``self.path``, a ZooKeeper path of this test alone; :meth:`teardown_zookeeper` closes the
    client. The server is :func:`shared_server`'s for ``server_options`` (a class attribute:
    ``{"sasl_users": {"bob": "pw"}}``, ``{"tls": "need"}``...): one per process, started by
    the first test that needs it, stopped at exit. ``client_options``: more keywords of the
    client."""

    server_options: Mapping[str, object] = {}
    client_options: Mapping[str, object] = {}

    @property
    def server(self) -> ZooKeeperServer:
        return shared_server(**self.server_options)

    @property
    def hosts(self) -> str:
        """The server's connect string."""
        return self.server.hosts

    def setup_zookeeper(self, **client_options) -> None:
        self.path = "/zklock-testing/%s-%s" % (self.id().rsplit(".", 1)[-1], uuid.uuid4().hex)
        self.client = self.server.client(**{**self.client_options, **client_options})

    def teardown_zookeeper(self) -> None:
        client = self.__dict__.pop("client", None)
        if client is not None:
            client.close()


class ZkLockTestCase(ZkLockTestHarness):
    """:class:`ZkLockTestHarness` with ``setUp`` and ``tearDown`` calling
    :meth:`~ZkLockTestHarness.setup_zookeeper` and
    :meth:`~ZkLockTestHarness.teardown_zookeeper` (call them from yours if you override
    them), as kazoo's ``KazooTestCase``."""

    def setUp(self) -> None:
        self.setup_zookeeper()

    def tearDown(self) -> None:
        self.teardown_zookeeper()


# ---------------------------------------------------------------------------------- pytest

try:
    import pytest
except ImportError:  # unittest alone
    pytest = None

if pytest is not None:
    __all__ += ["zookeeper_server", "zookeeper_server_factory"]

    @pytest.fixture(scope="session")
    def zookeeper_server():
        """A plain :class:`ZooKeeperServer` for the whole test session, stopped at its end.
        In a ``conftest.py``: ``from zklock.testing import zookeeper_server``."""
        with ZooKeeperServer() as server:
            yield server

    @pytest.fixture(scope="session")
    def zookeeper_server_factory():
        """Starts servers for the whole session: ``zookeeper_server_factory(**options)`` (the
        options of :class:`ZooKeeperServer`) starts one the first time it is called with those
        options and returns the same one after; all are stopped at the session's end."""
        started: Dict[str, ZooKeeperServer] = {}

        def start(**options) -> ZooKeeperServer:
            key = _key(options)
            if key not in started:
                started[key] = ZooKeeperServer(**options)
            return started[key]

        yield start
        for server in started.values():
            server.stop()
