#!/usr/bin/env bash
# Installs the C library under PREFIX (default /usr/local) as C libraries are installed, with
# the layout cargo-c's `cargo cinstall` gives (the crate keeps its [package.metadata.capi] for
# packagers who use cargo-c), and the `zklock` command with its manual pages, from one
# `cargo build --release` and no tool to compile first (cargo-c takes 6.5 minutes on 2 cores):
#   lib/libzklock.so.X.Y.Z, its SONAME link libzklock.so.0.Y (while the major version is 0, each
#   minor version may break the ABI; build.rs derives the SONAME from Cargo.toml's version) and
#   libzklock.so, lib/libzklock.a, include/zklock.h, the C++ layer include/zklock.hpp,
#   lib/pkgconfig/zklock.pc whose Libs.private are the system libraries the static library needs
#   (rustc's native-static-libs), bin/zklock and its manual pages share/man/man1/zklock*.1 (man/).
#   The library is built with the `capi` feature (TLS and SASL, as the Python package's), the
#   command with `cli`.
#
#   scripts/install.sh [PREFIX]        e.g. scripts/install.sh "$HOME/.local"
#   LIBDIR, INCLUDEDIR, BINDIR, MANDIR default PREFIX/lib, PREFIX/include, PREFIX/bin,
#                                      PREFIX/share/man
#   ZKLOCK_CARGO_FEATURES              more cargo features of the library, as the Python
#                                      package's build takes them (e.g. sasl-gssapi: Kerberos)
#   DESTDIR                            staged install for packagers (not written into zklock.pc;
#                                      no ldconfig: the package's own scripts run it)
# The loader: a LIBDIR of its configuration (/etc/ld.so.conf, e.g. /usr/local/lib on Debian) is
# searched only through its cache, so as root this runs ldconfig there (without it, programs
# fail with "libzklock.so.0.Y: cannot open shared object file"); for any other LIBDIR it says
# how programs find the library (-Wl,-rpath,LIBDIR, or LD_LIBRARY_PATH=LIBDIR).
# Then: cc app.c $(pkg-config --cflags --libs zklock)                            (dynamic)
#       cc app.c $(pkg-config --cflags zklock) PREFIX/lib/libzklock.a \
#          $(pkg-config --libs-only-l --static zklock | sed 's/-lzklock//')      (static)
# tests/it/packaging.rs installs into a temporary prefix and builds and runs C and C++ programs
# both ways against a real server, the README's C program as the README says.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-${PREFIX:-/usr/local}}"
libdir="${LIBDIR:-$prefix/lib}"
includedir="${INCLUDEDIR:-$prefix/include}"
bindir="${BINDIR:-$prefix/bin}"
mandir="${MANDIR:-$prefix/share/man}"
dest="${DESTDIR:-}"

extra=$(echo "${ZKLOCK_CARGO_FEATURES:-}" | tr ' ' ',')
cargo build --release --locked --features "capi,cli${extra:+,$extra}" --lib --bin zklock
target_dir=$(cargo metadata --format-version 1 --no-deps --locked |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
release="$target_dir/release"
[ -f "$release/libzklock.so" ] && [ -f "$release/libzklock.a" ] && [ -x "$release/zklock" ] ||
    { echo "install.sh: no libzklock.so/.a or zklock under $release" >&2; exit 1; }

# The version is Cargo.toml's alone; the SONAME is derived from it (build.rs).
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
case "$version" in
    0.*) want="libzklock.so.0.$(echo "$version" | cut -d. -f2)" ;;
    *) want="libzklock.so.${version%%.*}" ;;
esac
soname=$(objdump -p "$release/libzklock.so" | sed -n 's/^ *SONAME *//p')
[ "$soname" = "$want" ] ||
    { echo "install.sh: libzklock.so has SONAME '$soname', expected $want (version $version)" >&2; exit 1; }

# What a program linking libzklock.a statically needs besides it: rustc prints it for a static
# library; an empty one has the same needs as ours (no dependency links a system library of
# its own, and tests/it/packaging.rs links statically with exactly this list).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
: >"$probe/empty.rs"
private=$(rustc --crate-type staticlib --crate-name probe --print native-static-libs \
    -o "$probe/libprobe.a" "$probe/empty.rs" 2>&1 | sed -n 's/.*native-static-libs: *//p')
[ -n "$private" ] || { echo "install.sh: rustc printed no native-static-libs" >&2; exit 1; }
# rustc names the unwinder libgcc_s, which is a shared library only: `cc -static` cannot link
# it. libgcc_eh is the same unwinder as an archive (what gcc itself links with -static), and a
# program that links libzklock.a into a dynamic executable links it as well.
private=$(echo " $private " | sed 's/ -lgcc_s / -lgcc_eh /; s/^ //; s/ $//')
# Kerberos (sasl-gssapi) links the system's GSSAPI library.
case ",$extra," in *,sasl-gssapi,*) private="-lgssapi_krb5 $private" ;; esac

install -d "$dest$libdir/pkgconfig" "$dest$includedir" "$dest$bindir" "$dest$mandir/man1"
install -m 755 "$release/libzklock.so" "$dest$libdir/libzklock.so.$version"
ln -sfn "libzklock.so.$version" "$dest$libdir/$soname"
ln -sfn "$soname" "$dest$libdir/libzklock.so"
install -m 644 "$release/libzklock.a" "$dest$libdir/libzklock.a"
install -m 644 include/zklock.h include/zklock.hpp "$dest$includedir/"
install -m 755 "$release/zklock" "$dest$bindir/zklock"
install -m 644 man/*.1 "$dest$mandir/man1/"
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

# How programs find the library at run time.
[ -z "$dest" ] || exit 0
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
real_libdir=$(cd "$libdir" && pwd -P)
if "$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p' | grep -qxF "$real_libdir"; then
    if [ "$(id -u)" = 0 ]; then
        "$ldconfig"
        echo "ran ldconfig: programs find $soname in $libdir"
    else
        echo "$libdir is searched through the loader's cache: run 'sudo ldconfig' before running programs"
    fi
else
    echo "$libdir is not on the loader's search path: link programs with -Wl,-rpath,$libdir" \
        "(or run them with LD_LIBRARY_PATH=$libdir), or add it to /etc/ld.so.conf.d/ and run ldconfig"
fi
