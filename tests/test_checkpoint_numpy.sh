#!/usr/bin/env bash
# tools/checkpoint/read_safetensors.py (numpy only) reads an sgrad checkpoint: every tensor
# written by `test_checkpoint --write-sample` comes back by name with its dtype, shape and
# values (compared with the text dump the C side wrote, exactly), and the user metadata.
# Skips (exit 77) when python3 or numpy is missing (apt-get install python3-numpy).
# usage: tests/test_checkpoint_numpy.sh BUILD_DIR
set -euo pipefail
build=${1:-build}
py=/usr/bin/python3
if [ ! -x "$py" ] || ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP test_checkpoint_numpy: python3 with numpy is not installed (apt-get install python3-numpy)"
    exit 77
fi
bin=$build/tests/test_checkpoint
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" --write-sample "$tmp/sample.safetensors"
"$py" - "$tmp/sample.safetensors" tools/checkpoint <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import numpy as np
from read_safetensors import read
path = sys.argv[1]
tensors, meta = read(path)
dtypes = {0: np.float32, 1: np.float64, 2: np.int32, 3: np.int64}
want = {}
for line in open(path + ".txt").read().splitlines():
    name, dt, shape, values = line.split("\t")
    shape = tuple(int(s) for s in shape.split(",")) if shape else ()
    vals = [float(v) if dt in "01" else int(float(v)) if dt == "2" else int(v)
            for v in values.split(",")] if values else []
    want[name] = np.array(vals, dtype=dtypes[int(dt)]).reshape(shape)
assert set(tensors) == set(want), (sorted(tensors), sorted(want))
for name, w in want.items():
    a = tensors[name]
    assert a.dtype == w.dtype and a.shape == w.shape, (name, a.dtype, a.shape, w.dtype, w.shape)
    assert np.array_equal(a, w), (name, a, w)
assert meta.get("epoch") == "4", meta
assert meta["sgrad.checksum"].startswith("fnv1a64:"), meta
print(f"{len(want)} tensors read back by numpy, values equal")
PY
