"""The package as the package index would carry it: an sdist that builds outside the checkout
(it carries the crate), into one wheel for any CPython 3 on the platform, bundling a stripped
library, under the free distribution name ``pyzklock`` (the import name stays ``zklock``)."""

import glob
import os
import struct
import subprocess
import sys
import tarfile
import zipfile

import pytest

import zklock

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BINDING = os.path.join(REPO, "bindings", "python")


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


@pytest.mark.skipif(not os.path.exists(os.path.join(REPO, "Cargo.toml")),
                    reason="runs in the zklock checkout")
def test_the_sdist_builds_outside_the_checkout_into_one_stripped_wheel_for_any_cpython(
        tmp_path, zk_hosts):
    env = dict(os.environ)
    # The crate's release dependencies compiled once for every run of this test (scripts/test.sh
    # gives the target directory of its release builds, which `pip install` used already).
    env["CARGO_TARGET_DIR"] = (os.environ.get("CARGO_TARGET_DIR")
                               or os.path.join(REPO, "target", "python-sdist"))
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path), BINDING],
                   check=True, env=env, capture_output=True)
    sdists = glob.glob(str(tmp_path / "*.tar.gz"))
    assert [os.path.basename(p) for p in sdists] == ["pyzklock-%s.tar.gz" % zklock.__version__]
    with tarfile.open(sdists[0]) as t:
        names = t.getnames()
    top = "pyzklock-%s/" % zklock.__version__
    for needed in ("rust/Cargo.toml", "rust/Cargo.lock", "rust/src/lib.rs", "rust/build.rs",
                   "setup.py", "src/zklock/__init__.py"):
        assert top + needed in names, needed
    assert not any("/rust/src/bin/" in n for n in names), "the command is not carried"

    # Built from the sdist alone, somewhere the checkout is not.
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    sdists[0]], check=True, env=env, cwd=str(tmp_path), capture_output=True)
    built = [os.path.basename(p) for p in glob.glob(str(wheels / "*.whl"))]
    assert len(built) == 1, built
    assert built[0].startswith("pyzklock-%s-py3-none-" % zklock.__version__), built

    with zipfile.ZipFile(str(wheels / built[0])) as z:
        libs = [n for n in z.namelist() if n.startswith("zklock/_native") and ".so" in n]
        assert len(libs) == 1, z.namelist()
        lib = z.read(libs[0])
    sections = _elf_sections(lib)
    assert ".dynsym" in sections, sections
    assert ".debug_info" not in sections and ".symtab" not in sections, sections
    # Stripped: 5.9 MB with TLS (rustls on aws-lc) and SASL, which the wheel's library ships
    # with (capi); under 4 MB without them.
    assert len(lib) < 8_000_000, len(lib)

    # Installed from that wheel, it locks.
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheels / built[0])], check=True, capture_output=True)
    code = ("import sys, zklock; c = zklock.Client(sys.argv[1], 5.0); m = c.mutex('/pkg/sdist');"
            "print(zklock.__version__, m.acquire(5.0), zklock.__file__)")
    clean = {k: v for k, v in env.items() if k != "ZKLOCK_LIBRARY"}
    clean["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", code, zk_hosts], check=True, env=clean,
                         cwd=str(tmp_path), capture_output=True, text=True).stdout.split()
    assert out[:2] == [zklock.__version__, "True"], out
    assert out[2].startswith(str(site)), out
