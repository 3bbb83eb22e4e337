"""A real ZooKeeper server for the package's tests: Debian's zookeeper.jar on a free loopback
port with a temporary data directory, started once per test session."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

JAR = "/usr/share/java/zookeeper.jar"


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
