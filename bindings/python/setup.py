"""Builds the zklock C library with cargo and bundles it as zklock/_native*.so
(setuptools-rust, Binding.NoBinding: a plain cdylib that ctypes loads).

From the checkout the crate is two directories up; an sdist carries its own copy under
``rust/`` (staged by the sdist command below), so ``pip install pyzklock-X.tar.gz`` builds
anywhere. The wheel is tagged ``py3-none-<platform>``: the package is ctypes, so one wheel
serves every CPython 3 on the platform; ``scripts/build-wheel.sh`` retags it manylinux with
auditwheel, as the package index wants.

The version is the crate's (``version`` of Cargo.toml's ``[package]``), read here: it is
written in one place for the crate, the C library, the header and this package."""

import os
import re
import shutil

from setuptools import setup
from setuptools.command.sdist import sdist
from setuptools_rust import Binding, RustExtension

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.normpath(os.path.join(HERE, "..", ".."))
STAGED = os.path.join(HERE, "rust")
# What the library needs to build (never the command, the examples or the tests).
CRATE_FILES = ["Cargo.toml", "Cargo.lock", "build.rs", "README.md", "LICENSE-MIT", "LICENSE-APACHE"]
CRATE_DIRS = ["src", "include"]


def crate_manifest() -> str:
    staged = os.path.join(STAGED, "Cargo.toml")
    return staged if os.path.exists(staged) else os.path.join(CHECKOUT, "Cargo.toml")


def crate_version(manifest: str) -> str:
    """``version`` of the crate's ``[package]`` table."""
    with open(manifest) as f:
        text = f.read()
    package = re.search(r"(?ms)^\[package\]\n(.*?)(?=^\[)", text)
    version = package and re.search(r'(?m)^version\s*=\s*"([^"]+)"', package.group(1))
    if not version:
        raise RuntimeError("no version in [package] of %s" % manifest)
    return version.group(1)


def library_only(manifest: str) -> str:
    """The crate's manifest without its command, examples, tests, workspace and the model
    check's crate, whose files an sdist does not carry (cargo refuses a manifest naming missing targets or members)."""
    out, skip = [], False
    for line in manifest.splitlines():
        if line.startswith("["):
            skip = line.strip() in ("[[bin]]", "[[example]]", "[[test]]", "[[bench]]", "[workspace]",
                                    "[profile.dev.package.zklock-model]")
        # The model check's crate (a path dev-dependency) is a workspace member it does not carry.
        if not skip and not line.startswith("zklock-model"):
            out.append(line)
    text = "\n".join(out) + "\n"
    return re.sub(r"(?m)^\[package\]\n",
                  "[package]\nautobins = false\nautoexamples = false\nautotests = false\n"
                  "autobenches = false\n", text, count=1)


class SdistWithCrate(sdist):
    """Puts the crate's library sources into the sdist as rust/."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        dest = os.path.join(base_dir, "rust")
        os.makedirs(dest, exist_ok=True)
        for name in CRATE_FILES:
            src = os.path.join(CHECKOUT, name)
            if os.path.exists(src):
                shutil.copy2(src, os.path.join(dest, name))
        for name in CRATE_DIRS:
            shutil.copytree(os.path.join(CHECKOUT, name), os.path.join(dest, name),
                            ignore=shutil.ignore_patterns("bin"))
        path = os.path.join(dest, "Cargo.toml")
        with open(path) as f:
            text = library_only(f.read())
        with open(path, "w") as f:
            f.write(text)


class AnyCPythonWheel(bdist_wheel):
    """py3-none-<platform>: a ctypes package with a native library, for any CPython 3."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(
    version=crate_version(crate_manifest()),
    cmdclass={"sdist": SdistWithCrate, "bdist_wheel": AnyCPythonWheel},
    rust_extensions=[
        RustExtension(
            "zklock._native",
            path=crate_manifest(),
            binding=Binding.NoBinding,
            debug=False,
            # The C library with TLS and SASL DIGEST-MD5 (Client's use_ssl, ca, certfile,
            # sasl_options, ...); ZKLOCK_CARGO_FEATURES adds more, e.g. "sasl-gssapi" for
            # Kerberos (it needs libkrb5-dev and libclang-dev to build, and links libgssapi_krb5).
            features=["capi"] + [f for f in os.environ.get("ZKLOCK_CARGO_FEATURES", "")
                                 .replace(",", " ").split() if f],
            args=["--locked"],
        )
    ],
)
