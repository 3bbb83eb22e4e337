#!/usr/bin/env bash
# Installs the C library as C libraries are installed, with cargo-c (`cargo cinstall`, the
# convention of Rust libraries with a C ABI): the shared library with its SONAME link, the
# static library, zklock.h and the C++ layer zklock.hpp, and lib/pkgconfig/zklock.pc, under
# PREFIX (default /usr/local). Installs cargo-c first when it is missing
# (scripts/install-cargo-c.sh: it compiles from crates.io, about 6.5 minutes on 2 cores, once;
# newer releases need a newer rustc).
#   scripts/install.sh [PREFIX]        e.g. scripts/install.sh "$HOME/.local"
# Then: cc app.c $(pkg-config --cflags --libs zklock)                            (dynamic)
#       cc app.c $(pkg-config --cflags zklock) PREFIX/lib/libzklock.a \
#          $(pkg-config --libs-only-l --static zklock | sed 's/-lzklock//')      (static)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-${PREFIX:-/usr/local}}"
libdir="${LIBDIR:-$prefix/lib}"
scripts/install-cargo-c.sh
cargo cinstall --release --prefix "$prefix" --libdir "$libdir"
echo "installed zklock under $prefix (lib: $libdir)"
