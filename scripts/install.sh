#!/usr/bin/env bash
# Installs the C library under PREFIX (default /usr/local) as C libraries are installed, with
# the layout cargo-c's `cargo cinstall` gives (the crate keeps its [package.metadata.capi] for
# packagers who use cargo-c), from one `cargo build --release --lib` and no tool to compile
# first (cargo-c takes 6.5 minutes on 2 cores to build):
#   lib/libzklock.so.X.Y.Z, its SONAME link libzklock.so.0.Y (while the major version is 0, each
#   minor version may break the ABI; build.rs sets the SONAME) and libzklock.so, lib/libzklock.a,
#   include/zklock.h, the C++ layer include/zklock.hpp, and lib/pkgconfig/zklock.pc whose
#   Libs.private are the system libraries the static library needs (rustc's native-static-libs).
#
#   scripts/install.sh [PREFIX]        e.g. scripts/install.sh "$HOME/.local"
#   LIBDIR, INCLUDEDIR                 default PREFIX/lib, PREFIX/include
#   DESTDIR                            staged install for packagers (not written into zklock.pc)
# Then: cc app.c $(pkg-config --cflags --libs zklock)                            (dynamic)
#       cc app.c $(pkg-config --cflags zklock) PREFIX/lib/libzklock.a \
#          $(pkg-config --libs-only-l --static zklock | sed 's/-lzklock//')      (static)
# tests/packaging.rs installs into a temporary prefix and builds and runs C and C++ programs
# both ways against a real server.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-${PREFIX:-/usr/local}}"
libdir="${LIBDIR:-$prefix/lib}"
includedir="${INCLUDEDIR:-$prefix/include}"
dest="${DESTDIR:-}"

cargo build --release --lib --locked
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
release="$target_dir/release"
[ -f "$release/libzklock.so" ] && [ -f "$release/libzklock.a" ] ||
    { echo "install.sh: no libzklock.so/.a under $release" >&2; exit 1; }

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
soname=$(objdump -p "$release/libzklock.so" | sed -n 's/^ *SONAME *//p')
case "$soname" in
    libzklock.so.*) ;;
    *) echo "install.sh: libzklock.so has SONAME '$soname', expected libzklock.so.*" >&2; exit 1 ;;
esac

# What a program linking libzklock.a statically needs besides it: rustc prints it for a static
# library; an empty one has the same needs as ours (no dependency links a system library of
# its own, and tests/packaging.rs links statically with exactly this list).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
: >"$probe/empty.rs"
private=$(rustc --crate-type staticlib --crate-name probe --print native-static-libs \
    -o "$probe/libprobe.a" "$probe/empty.rs" 2>&1 | sed -n 's/.*native-static-libs: *//p')
[ -n "$private" ] || { echo "install.sh: rustc printed no native-static-libs" >&2; exit 1; }

install -d "$dest$libdir/pkgconfig" "$dest$includedir"
install -m 755 "$release/libzklock.so" "$dest$libdir/libzklock.so.$version"
ln -sfn "libzklock.so.$version" "$dest$libdir/$soname"
ln -sfn "$soname" "$dest$libdir/libzklock.so"
install -m 644 "$release/libzklock.a" "$dest$libdir/libzklock.a"
install -m 644 include/zklock.h ffi-examples/cpp/zklock.hpp "$dest$includedir/"
cat >"$dest$libdir/pkgconfig/zklock.pc" <<EOF
prefix=$prefix
libdir=$libdir
includedir=$includedir

Name: zklock
Description: Distributed locks on Apache ZooKeeper (C API)
Version: $version
Libs: -L\${libdir} -lzklock
Libs.private: $private
Cflags: -I\${includedir}
EOF
echo "installed zklock $version under $dest$prefix (lib: $libdir, SONAME $soname)"
