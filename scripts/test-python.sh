#!/usr/bin/env bash
# Installs the Python package from the checkout into a virtual environment (pip builds the
# C library with cargo and bundles it) and runs the package's pytest suite.
#   ZKL_PYENV        the virtual environment (default target/pyenv; made if missing)
#   ZKL_BUILD_NICE   the niceness of the install's build (scripts/test.sh: 10, beside the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
PYENV=${ZKL_PYENV:-target/pyenv}
if [ ! -x "$PYENV/bin/python" ]; then
    python3 -m venv "$PYENV"
fi
"$PYENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip pytest build
# A fresh build of the package every time (not a cached wheel of older sources).
nice -n "${ZKL_BUILD_NICE:-0}" "$PYENV/bin/python" -m pip install -q --disable-pip-version-check \
    --no-cache-dir --force-reinstall ./bindings/python
# From outside the source tree, so `import zklock` is the installed package.
cd bindings/python/tests
"../../../$PYENV/bin/python" -m pytest -q -p no:cacheprovider .
