"""The package as the package index would carry it, built by the project's own script
(scripts/build-wheel.sh): an sdist that builds outside the checkout (it carries the crate), into
one manylinux wheel for any CPython 3 on the platform that auditwheel accepts and a fresh
virtual environment installs, bundling a stripped library, under the free distribution name
``pyzklock`` (the import name stays ``zklock``), with the crate's version and license texts."""

import glob
import importlib.metadata
import os
import re
import struct
import subprocess
import sys
import tarfile
import zipfile

import pytest

import zklock

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BINDING = os.path.join(REPO, "bindings", "python")
IN_CHECKOUT = os.path.exists(os.path.join(REPO, "Cargo.toml"))
LICENSES = ("LICENSE-MIT", "LICENSE-APACHE")


def _package_files() -> list:
    """The files of the checkout's package (src/zklock): its modules and py.typed."""
    src = os.path.join(BINDING, "src", "zklock")
    return sorted(n for n in os.listdir(src) if os.path.isfile(os.path.join(src, n))
                  and not n.endswith((".pyc", ".so")))


def _crate_version() -> str:
    with open(os.path.join(REPO, "Cargo.toml")) as f:
        return re.search(r'(?m)^version = "([^"]+)"', f.read()).group(1)


def _elf_sections(data: bytes) -> set:
    """The section names of a 64-bit little-endian ELF file."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, offset, size
    _, str_off, _ = header(shstrndx)
    names = set()
    for i in range(shnum):
        name, _, _ = header(i)
        end = data.index(b"\0", str_off + name)
        names.add(data[str_off + name:end].decode())
    return names


@pytest.mark.skipif(not IN_CHECKOUT, reason="runs in the zklock checkout")
def test_the_version_is_the_crates():
    version = _crate_version()
    assert zklock.__version__ == version  # the loaded library's zkl_version()
    assert importlib.metadata.version("pyzklock") == version


@pytest.mark.skipif(not IN_CHECKOUT, reason="runs in the zklock checkout")
def test_the_build_script_makes_an_sdist_and_a_manylinux_wheel_a_fresh_venv_installs(
        tmp_path, zk_hosts):
    env = dict(os.environ)
    # The crate's release dependencies compiled once for every run of this test (scripts/test.sh
    # gives the target directory of its release builds, which `pip install` used already).
    env["CARGO_TARGET_DIR"] = (os.environ.get("CARGO_TARGET_DIR")
                               or os.path.join(REPO, "target", "python-sdist"))
    wheelenv = env.get("ZKL_WHEELENV") or os.path.join(REPO, "target", "wheelenv")
    env["ZKL_WHEELENV"] = wheelenv
    dist = tmp_path / "dist"
    built = subprocess.run([os.path.join(REPO, "scripts", "build-wheel.sh"), str(dist)],
                           env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    version = _crate_version()
    assert zklock.__version__ == version

    sdists = glob.glob(str(dist / "*.tar.gz"))
    assert [os.path.basename(p) for p in sdists] == ["pyzklock-%s.tar.gz" % version]
    with tarfile.open(sdists[0]) as t:
        names = t.getnames()
        top = "pyzklock-%s/" % version
        pkg_info = t.extractfile(top + "PKG-INFO").read().decode()
        for lic in LICENSES:
            member = t.getmember(top + lic)
            assert member.isfile(), "%s is a link in the sdist" % lic
            assert t.extractfile(member).read() == open(os.path.join(REPO, lic), "rb").read()
    for needed in ("rust/Cargo.toml", "rust/Cargo.lock", "rust/src/lib.rs", "rust/build.rs",
                   "rust/LICENSE-MIT", "rust/LICENSE-APACHE",
                   "setup.py", "src/zklock/__init__.py"):
        assert top + needed in names, needed
    for module in _package_files():
        assert top + "src/zklock/" + module in names, "%s is not in the sdist" % module
    assert not any("/rust/src/bin/" in n for n in names), "the command is not carried"
    assert "\nVersion: %s\n" % version in pkg_info, pkg_info
    assert "\nLicense-Expression: MIT OR Apache-2.0\n" in pkg_info, pkg_info

    # Built from the sdist alone (the script builds the wheel from it), retagged by auditwheel.
    wheels = [os.path.basename(p) for p in glob.glob(str(dist / "*.whl"))]
    assert len(wheels) == 1, wheels
    assert re.fullmatch(r"pyzklock-%s-py3-none-manylinux_2_\d+_x86_64(\.manylinux\w+)*\.whl"
                        % re.escape(version), wheels[0]), wheels
    wheel = str(dist / wheels[0])
    show = subprocess.run([os.path.join(wheelenv, "bin", "auditwheel"), "show", wheel],
                          check=True, capture_output=True, text=True).stdout
    assert 'consistent with the following platform tag: "manylinux_2_' in " ".join(show.split()), show

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        libs = [n for n in names if n.startswith("zklock/_native") and ".so" in n]
        assert len(libs) == 1, names
        for module in _package_files():
            assert "zklock/" + module in names, "%s is not in the wheel" % module
        assert "zklock/testing.py" in names, "zklock.testing is not in the wheel"
        lib = z.read(libs[0])
        info = "pyzklock-%s.dist-info/" % version
        metadata = z.read(info + "METADATA").decode()
        assert "\nVersion: %s\n" % version in metadata, metadata
        assert "\nLicense-Expression: MIT OR Apache-2.0\n" in metadata, metadata
        for lic in LICENSES:
            assert z.read(info + "licenses/" + lic) == open(os.path.join(REPO, lic), "rb").read()
        assert "Root-Is-Purelib: false" in z.read(info + "WHEEL").decode()
    assert not [n for n in names if ".libs/" in n], "auditwheel bundled a library: %s" % names
    sections = _elf_sections(lib)
    assert ".dynsym" in sections, sections
    assert ".debug_info" not in sections and ".symtab" not in sections, sections
    # Stripped: 5.9 MB with TLS (rustls on aws-lc) and SASL, which the wheel's library ships
    # with (capi); under 4 MB without them.
    assert len(lib) < 8_000_000, len(lib)

    # Installed from that wheel into a fresh virtual environment (its own pip judges the
    # manylinux tag), it locks.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
                    wheel], check=True, capture_output=True)
    code = ("import sys, zklock; c = zklock.Client(sys.argv[1], 5.0); m = c.mutex('/pkg/wheel');"
            "print(zklock.__version__, m.acquire(5.0), zklock.__file__)")
    clean = {k: v for k, v in env.items() if k not in ("ZKLOCK_LIBRARY", "PYTHONPATH")}
    out = subprocess.run([python, "-c", code, zk_hosts], check=True, env=clean,
                         cwd=str(tmp_path), capture_output=True, text=True).stdout.split()
    assert out[:2] == [version, "True"], out
    assert out[2].startswith(str(venv)), out

    # Its zklock.testing starts a server of its own there, which locks and is gone after.
    code = ("import os, zklock.testing as t\n"
            "with t.ZooKeeperServer() as s, s.client() as c:\n"
            "    print(c.mutex('/pkg/testing').acquire(5.0), s.pid, s.workdir, t.__file__)\n")
    out = subprocess.run([python, "-c", code], check=True, env=clean, cwd=str(tmp_path),
                         capture_output=True, text=True).stdout.split()
    assert out[0] == "True", out
    assert not os.path.exists("/proc/" + out[1]), out  # killed and reaped by stop()
    assert not os.path.exists(out[2]), out
    assert out[3].startswith(str(venv)), out
