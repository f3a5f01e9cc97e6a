#!/usr/bin/env bash
# The Python package (python/sgrad) against the build's libsgrad.so: pytest over
# python/tests (ops and optimizers against PyTorch's values in python/tests/fixtures, no
# PyTorch needed here; zero-copy tensors, lifetimes, errors). Skips (exit 77) when python3,
# numpy or pytest is missing (apt-get install python3-numpy python3-pytest), and in a
# sanitizer build (its libsgrad.so needs the sanitizer runtime preloaded into Python).
# Then, where python3-venv is installed, `pip install --no-index` of a copy of python/ into
# a fresh venv (--system-site-packages, offline) and an import of it outside the tree.
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
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -m venv --system-site-packages "$tmp/venv" >/dev/null 2>&1; then
    echo "test_python: pip install not tested (python3-venv is not installed)"
    exit 0
fi
mkdir "$tmp/src"
cp -r "$repo/python" "$repo/CMakeLists.txt" "$tmp/src/"
"$tmp/venv/bin/pip" install -q --no-index "$tmp/src/python"
cd "$tmp"
got=$(SGRAD_LIBRARY=$lib "$tmp/venv/bin/python" -c 'import sgrad; print(sgrad.__version__, sgrad.__file__)')
case "$got" in
    "$(sed -n 's/^project(sgrad VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt") $tmp/venv/"*) echo "pip install: $got" ;;
    *) echo "test_python: the installed package gave '$got'"; exit 1 ;;
esac
