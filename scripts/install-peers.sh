#!/usr/bin/env bash
# Installs the real peer clients of zklock's interop tests (tests/it/interop.rs), only what is missing:
#   - Apache Curator 5.x from Debian: libcurator-{recipes,framework,client}-java (/usr/share/java/curator-*.jar)
#   - a JDK (javac) to compile the small Java peer in tests/peers/: default-jdk-headless
#   - Python kazoo from PyPI (pip install kazoo), and python3/pip if missing
# Idempotent: apt-get update runs only when a Debian package has to be installed.
# Uses sudo only when not root and sudo exists.
set -euo pipefail

apt_missing=()
for jar in curator-recipes curator-framework curator-client; do
    [ -f "/usr/share/java/$jar.jar" ] || apt_missing+=("lib$jar-java")
done
command -v javac >/dev/null 2>&1 || apt_missing+=(default-jdk-headless)
[ -f /usr/share/java/zookeeper.jar ] || apt_missing+=(zookeeper)
# The peers' zk.sh asks the server "ruok" with nc.
command -v nc >/dev/null 2>&1 || apt_missing+=(netcat-openbsd)
command -v python3 >/dev/null 2>&1 || apt_missing+=(python3)
if command -v python3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1; then
    apt_missing+=(python3-pip)
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); fi
fi

if [ ${#apt_missing[@]} -eq 0 ]; then
    echo "install-peers: Debian packages already installed"
else
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-peers: apt-get not found; install by hand: ${apt_missing[*]}" >&2
        exit 1
    fi
    echo "install-peers: installing ${apt_missing[*]}"
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${apt_missing[@]}"
fi

if python3 -c 'import kazoo' >/dev/null 2>&1; then
    echo "install-peers: kazoo $(python3 -c 'import kazoo; print(kazoo.__version__)') already installed"
else
    echo "install-peers: pip install kazoo"
    # Debian's system python refuses user installs without this flag (PEP 668); harmless elsewhere.
    python3 -m pip install kazoo || python3 -m pip install --break-system-packages kazoo
fi

# Sanity checks.
for jar in curator-recipes curator-framework curator-client zookeeper; do
    [ -f "/usr/share/java/$jar.jar" ] || { echo "install-peers: /usr/share/java/$jar.jar still missing" >&2; exit 1; }
done
command -v javac >/dev/null 2>&1 || { echo "install-peers: javac still missing" >&2; exit 1; }
python3 -c 'import kazoo' || { echo "install-peers: kazoo still missing" >&2; exit 1; }
echo "install-peers: ok"
