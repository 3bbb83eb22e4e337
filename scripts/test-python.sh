#!/usr/bin/env bash
# Installs the Python package from the checkout into a virtual environment (pip builds the
# C library with cargo and bundles it) and runs the package's pytest suite.
#   scripts/test-python.sh [install|test]   one half only (scripts/test.sh installs while the
#                                           Rust tests build, and tests once they are built)
#   ZKL_PYENV        the virtual environment (default target/pyenv; made if missing)
#   ZKLOCK_CARGO_FEATURES    the library's extra cargo features (default sasl-gssapi: the
#                    Kerberos tests, tests/test_kerberos.py; "" builds without it)
#   ZKL_TESTING_SERVER_BIN   the testing_server tool (tools/testing_server.rs), which starts
#                    the secured servers of tests/test_secured.py (default: conftest.py
#                    builds it with cargo, as the example target testing_server)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
PYENV=${ZKL_PYENV:-target/pyenv}
if [ "$what" != test ]; then
    if [ ! -x "$PYENV/bin/python" ]; then
        python3 -m venv "$PYENV"
    fi
    "$PYENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip pytest build
    # A fresh build of the package every time (not a cached wheel of older sources), with
    # Kerberos (the Rust crate's sasl-gssapi: scripts/install-deps.sh installs what it needs).
    ZKLOCK_CARGO_FEATURES=${ZKLOCK_CARGO_FEATURES-sasl-gssapi} "$PYENV/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir \
        --force-reinstall ./bindings/python
fi
if [ "$what" != install ]; then
    # From outside the source tree, so `import zklock` is the installed package.
    cd bindings/python/tests
    "../../../$PYENV/bin/python" -m pytest -q -p no:cacheprovider .
fi
