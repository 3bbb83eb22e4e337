#!/usr/bin/env bash
# Installs the C library: shared (with its SONAME links) and static libraries, the header and a
# pkg-config file, under PREFIX (default /usr/local).
#   scripts/install.sh [PREFIX]        e.g. scripts/install.sh "$HOME/.local"
# Then: cc app.c $(pkg-config --cflags --libs zklock)            (dynamic)
#       cc app.c $(pkg-config --cflags --libs --static zklock)   (static: add -static-pic or link the .a)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-${PREFIX:-/usr/local}}"
libdir="${LIBDIR:-$prefix/lib}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --lib
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
major=${version%%.*}
# Exactly what the static library needs from the system, as rustc reports it.
static_libs=$(cargo rustc --release --lib --crate-type staticlib -- --print native-static-libs 2>&1 \
  | sed -n 's/.*native-static-libs: //p' | tail -1)
install -d "$libdir/pkgconfig" "$prefix/include"
install -m 0755 "$target/release/libzklock.so" "$libdir/libzklock.so.$version"
ln -sfn "libzklock.so.$version" "$libdir/libzklock.so.$major"
ln -sfn "libzklock.so.$major" "$libdir/libzklock.so"
install -m 0644 "$target/release/libzklock.a" "$libdir/libzklock.a"
install -m 0644 include/zklock.h "$prefix/include/zklock.h"
cat > "$libdir/pkgconfig/zklock.pc" <<PC
prefix=$prefix
libdir=$libdir
includedir=\${prefix}/include

Name: zklock
Description: Distributed locks on Apache ZooKeeper (C API)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lzklock
Libs.private: $static_libs
PC
echo "installed zklock $version under $prefix (lib: $libdir)"
