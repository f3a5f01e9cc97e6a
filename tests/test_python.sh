#!/usr/bin/env bash
# The Python package (python/sgrad) against the build's libsgrad.so: pytest over
# python/tests (ops and optimizers against PyTorch's values in python/tests/fixtures, no
# PyTorch needed here; zero-copy tensors, lifetimes, errors). Skips (exit 77) when python3,
# numpy or pytest is missing (apt-get install python3-numpy python3-pytest), and in a
# sanitizer build (its libsgrad.so needs the sanitizer runtime preloaded into Python).
# `pip install ./python` is tested by tests/test_python_install.sh.
# usage: tests/test_python.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import numpy, pytest' 2>/dev/null; then
    echo "SKIP test_python: /usr/bin/python3 with numpy and pytest is not installed (apt-get install python3-numpy python3-pytest)"
    exit 77
fi
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "SKIP test_python: sanitizer build (the Python tests run in the normal build)"
    exit 77
fi
lib=$build/libsgrad.so
[ -e "$lib" ] || { echo "test_python: no $lib"; exit 1; }
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo/python"
SGRAD_LIBRARY=$lib PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1 \
    "$py" -m pytest -q -p no:cacheprovider tests
