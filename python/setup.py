"""Installs the sgrad package (pure Python over libsgrad.so, which it loads at import).

    pip install ./python        (offline: needs only Debian's python3-setuptools)

Without a pyproject.toml pip builds with the setuptools already installed, so no package
index is asked for a build backend. The version is the C library's (CMakeLists.txt).
"""
import os
import re

from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))
try:
    with open(os.path.join(here, "..", "CMakeLists.txt")) as f:
        version = re.search(r"project\(sgrad VERSION ([0-9.]+)", f.read()).group(1)
except (OSError, AttributeError):
    version = "0+unknown"

setup(
    name="sgrad",
    version=version,
    description="Python bindings (ctypes) of sgrad, reverse-mode autodiff with sparse gradients",
    packages=["sgrad"],
    python_requires=">=3.8",
    install_requires=["numpy"],
)
