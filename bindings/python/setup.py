"""Builds the zklock C library from the crate two directories up and bundles it as
zklock/_native*.so (setuptools-rust, Binding.NoBinding: a plain cdylib that ctypes loads)."""

import os

from setuptools import setup
from setuptools_rust import Binding, RustExtension

HERE = os.path.dirname(os.path.abspath(__file__))

setup(
    rust_extensions=[
        RustExtension(
            "zklock._native",
            path=os.path.join(HERE, "..", "..", "Cargo.toml"),
            binding=Binding.NoBinding,
            debug=False,
        )
    ],
)
