#!/usr/bin/env bash
# Installs what zklock's build and tests need on Debian/Ubuntu, and only what is missing:
#   - zookeeper             (the server for `--features testing`: /usr/share/java/zookeeper.jar)
#   - libnetty-java         (a dependency of zookeeper; checked on its own because the TLS test
#                            servers need its netty-codec.jar, netty-resolver.jar and
#                            netty-transport-native-unix-common.jar, which zookeeper.jar's
#                            manifest does not list)
#   - default-jre-headless  (only if `java` is missing)
#   - gcc, g++              (only if `cc` / `c++` are missing; for the C examples and tests)
#   - python3, python3-venv (only if missing; the Python package is built and tested in a venv)
#   - pkg-config, binutils, valgrind (only if missing; the C library's packaging and memory tests)
#   - openssl               (only if missing; the TLS tests encrypt a client key with it)
#   - libkrb5-dev, libclang-dev (only if missing; `testing` builds SASL GSSAPI: the Kerberos
#                            headers, and libclang for the bindings' generator)
#   - krb5-kdc, krb5-admin-server, krb5-user (only if missing; the Kerberos tests' KDC:
#                            krb5kdc, kdb5_util, kadmin.local, kinit)
#   - nodejs, npm           (only if missing; the Node.js package and its tests)
#   - ruby                  (only if missing; the Ruby gem and its tests: Fiddle, minitest and
#                            the gem command come with Debian's ruby; the gem has no C extension)
#   - clippy, rustfmt       (rustup components, only if missing)
#   - cargo-nextest         (only if missing: scripts/run-tests.sh runs the tests with it; plain
#                            `cargo test --features testing` runs them too, one binary at a time)
# Idempotent: runs `apt-get update` only when something has to be installed. Uses sudo only
# when not root and sudo exists.
set -euo pipefail

missing=()

[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
for jar in netty-codec netty-resolver netty-transport-native-unix-common; do
    if [ ! -f "/usr/share/java/$jar.jar" ]; then
        missing+=(libnetty-java)
        break
    fi
done
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v nm >/dev/null 2>&1 || missing+=(binutils)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
[ -f /usr/include/gssapi/gssapi_krb5.h ] || missing+=(libkrb5-dev)
# bindgen loads libclang.so or libclang-<version>.so* (libclang-cpp, which other packages bring,
# is not it).
ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang.so* /usr/lib/*/libclang-[0-9]*.so* \
    >/dev/null 2>&1 || missing+=(libclang-dev)
[ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
command -v kinit >/dev/null 2>&1 || missing+=(krb5-user)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v ruby >/dev/null 2>&1 || missing+=(ruby)

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: everything is already installed"
else
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-deps: apt-get not found; install these by hand: ${missing[*]}" >&2
        exit 1
    fi
    SUDO=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            SUDO=(sudo)
        else
            echo "install-deps: not root and no sudo; install these by hand: ${missing[*]}" >&2
            exit 1
        fi
    fi
    echo "install-deps: installing ${missing[*]}"
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get update
    ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# Sanity checks.
[ -f /usr/share/java/zookeeper.jar ] || { echo "install-deps: /usr/share/java/zookeeper.jar still missing" >&2; exit 1; }
[ -f /usr/share/java/netty-codec.jar ] || { echo "install-deps: /usr/share/java/netty-codec.jar still missing" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "install-deps: java still missing" >&2; exit 1; }
if command -v cargo >/dev/null 2>&1; then
    for component in clippy rustfmt; do
        command -v rustup >/dev/null 2>&1 || break
        if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
            echo "install-deps: rustup component add $component"
            rustup component add "$component"
        fi
    done
    if ! cargo nextest --version >/dev/null 2>&1; then
        echo "install-deps: installing cargo-nextest (compiles once)"
        cargo install cargo-nextest --locked
    fi
fi
echo "install-deps: ok"
