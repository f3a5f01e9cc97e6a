#!/usr/bin/env bash
# `pip install ./python` as a user runs it: a copy of the source tree (git's tracked and
# untracked-but-not-ignored files, so no build directory of the checkout is reused) is
# installed, offline, into a fresh `python3 -m venv --system-site-packages`; setup.py builds
# libsgrad.so with CMake into the package. Then, with SGRAD_LIBRARY, LD_LIBRARY_PATH and
# PYTHONPATH unset and from an unrelated directory, the README's Python example (the
# ```python block under "## Python" in README.md, read from it here) must print what the
# README says, the package must be the venv's and the library it loaded the package's own
# copy; SGRAD_LIBRARY must still override it; and a copy of python/ alone must fail with a
# message naming the missing C sources. About a minute on 2 cores (the library's compile).
# Skips (exit 77) without /usr/bin/python3 with numpy and venv, cmake or a C compiler, and
# in a sanitizer build (the install builds its own library; the normal build tests it).
# usage: tests/test_python_install.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
repo=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3
skip() { echo "SKIP test_python_install: $*"; exit 77; }
if grep -q '^SGRAD_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    skip "sanitizer build (the pip install is tested in the normal build)"
fi
[ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null ||
    skip "/usr/bin/python3 with numpy is not installed (apt-get install python3-numpy)"
command -v cmake >/dev/null || skip "cmake is not installed"
command -v "${CC:-cc}" >/dev/null || skip "no C compiler (${CC:-cc})"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages "$tmp/venv" >/dev/null 2>&1 ||
    skip "python3 -m venv failed (apt-get install python3-venv)"
start=$SECONDS

# The README's example and what it says the example prints.
example=$(awk '/^## Python/ {s = 1; next} s && /^## / {exit}
               s && /^```python$/ {c = 1; next} c && /^```$/ {exit} c' "$repo/README.md")
[ -n "$example" ] || { echo "test_python_install: no \`\`\`python block under '## Python' in README.md"; exit 1; }
want='[[ 7 42  7]] (3, 16)'
grep -qF "prints \`$want\`" "$repo/README.md" ||
    { echo "test_python_install: README.md no longer says the example prints \`$want\`"; exit 1; }

# The source tree as git sees it (deleted files left out), or its build inputs without git.
mkdir "$tmp/src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$repo" && git ls-files -z -co --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$tmp/src" -xf -
else
    cp -r "$repo"/{CMakeLists.txt,cmake,include,src,models,python} "$tmp/src/"
    rm -rf "$tmp/src/python/build" "$tmp/src/python"/*.egg-info
fi

clean=(env -u SGRAD_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH -u PYTHONHOME
       PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1)
pip=("${clean[@]}" "$tmp/venv/bin/python" -m pip install --no-index --no-build-isolation
     --no-cache-dir)
if ! "${pip[@]}" "$tmp/src/python" >"$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log"; echo "test_python_install: pip install ./python failed"; exit 1
fi
built=$SECONDS

mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
got=$("${clean[@]}" "$tmp/venv/bin/python" -c "$example")
[ "$got" = "$want" ] ||
    { echo "test_python_install: the README example printed '$got', not '$want'"; exit 1; }
version=$(sed -n 's/^project(sgrad VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
"${clean[@]}" "$tmp/venv/bin/python" - "$tmp/venv" "$version" <<'EOF'
import glob, os, sys
import sgrad
venv, version = os.path.realpath(sys.argv[1]), sys.argv[2]
pkg = os.path.dirname(os.path.realpath(sgrad.__file__))
assert pkg.startswith(venv + os.sep), f"sgrad imported from {pkg}, not from {venv}"
lib = os.path.join(pkg, "libsgrad.so")
assert sgrad._lib.path == lib, f"loaded {sgrad._lib.path}, not the package's {lib}"
assert os.path.isfile(lib) and not os.path.islink(lib), f"{lib} is not one plain file"
assert sgrad.__version__ == version, f"version {sgrad.__version__}, CMakeLists.txt {version}"
# The trainers' library beside it, trained with in-process (its build tree is gone).
m = sgrad.Word2Vec(sentences=[["a", "b", "c"]] * 50, vector_size=4, min_count=1, sample=0)
models = os.path.join(pkg, "libsgrad_models.so")
assert sgrad._models.path == models, f"loaded {sgrad._models.path}, not the package's {models}"
assert os.path.isfile(models) and not os.path.islink(models), f"{models} is not one plain file"
assert m.wv.vectors.shape == (3, 4) and m.wv.vectors.any()
# A platform wheel (where pip built a wheel: with python3-wheel), not py3-none-any.
for w in glob.glob(os.path.join(os.path.dirname(pkg), "sgrad-*.dist-info", "WHEEL")):
    text = open(w).read()
    assert "Root-Is-Purelib: false" in text and "py3-none-any" not in text, text
print(f"pip install: sgrad {sgrad.__version__} at {pkg}, library {sgrad._lib.path}")
EOF
# SGRAD_LIBRARY still wins, and is not second-guessed.
if out=$("${clean[@]}" SGRAD_LIBRARY="$tmp/none/libsgrad.so" "$tmp/venv/bin/python" \
        -c 'import sgrad' 2>&1) || ! grep -qF "$tmp/none/libsgrad.so (absent)" <<<"$out"; then
    echo "test_python_install: SGRAD_LIBRARY=$tmp/none/libsgrad.so did not override:"
    echo "$out"; exit 1
fi

# python/ without the C sources next to it: a clear error, before any compile.
mkdir "$tmp/alone"
cp -r "$tmp/src/python" "$tmp/alone/"
rm -rf "$tmp/alone/python/build"
if "${pip[@]}" "$tmp/alone/python" >"$tmp/alone.log" 2>&1; then
    echo "test_python_install: pip install of python/ alone succeeded"; exit 1
fi
grep -q "the C sources are not next to this package" "$tmp/alone.log" ||
    { cat "$tmp/alone.log"; echo "test_python_install: no clear error for python/ alone"; exit 1; }
echo "test_python_install: ok (install $((built - start)) s, all $((SECONDS - start)) s)"
