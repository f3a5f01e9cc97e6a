#!/usr/bin/env bash
# tools/checkpoint/read_safetensors.py (numpy only) reads an sgrad checkpoint: every tensor
# written by `test_checkpoint --write-sample` comes back by name with its dtype, shape and
# values (compared with the text dump the C side wrote, exactly), and the user metadata;
# its FNV-1a agrees with the published test vectors, and damaged files (truncated, a byte
# changed in the header or the data, overlapping tensors, a format-1 file whose data-only
# checksum is wrong) raise FormatError, while a valid format-1 file reads.
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

import json, struct
from read_safetensors import FormatError, fnv1a64
# FNV-1a 64 test vectors (Fowler, Noll, Vo: the reference's published values)
for s, h in ((b"", 0xcbf29ce484222325), (b"a", 0xaf63dc4c8601ec8c), (b"foobar", 0x85944171f73967e8)):
    assert fnv1a64([s]) == h, (s, hex(fnv1a64([s])))
blob = open(path, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
def refused(b, what):
    bad = path + ".bad"
    open(bad, "wb").write(b)
    try:
        read(bad)
    except FormatError as e:
        return str(e)
    raise AssertionError("accepted: " + what)
for cut in (0, 7, 8, 9, 8 + n - 1, 8 + n, len(blob) - 1):
    refused(blob[:cut], "truncated at %d" % cut)
for at in list(range(8, 8 + n, max(1, n // 97))) + [8 + n, len(blob) - 1]:
    b = bytearray(blob)
    b[at] ^= 0x01
    refused(bytes(b), "byte %d changed" % at)
def rebuild(hdr, data, version):
    """A file of hdr and data with a valid checksum of that format version."""
    hdr["__metadata__"]["sgrad.format"] = version
    hdr["__metadata__"]["sgrad.checksum"] = "fnv1a64:" + "0" * 16
    hb = json.dumps(hdr).encode()
    body = struct.pack("<Q", len(hb)) + hb + data
    h = fnv1a64([data] if version == "1" else [body])
    return body.replace(b"fnv1a64:" + b"0" * 16, b"fnv1a64:%016x" % h, 1)
data = blob[8 + n:]
v1 = path + ".v1"
open(v1, "wb").write(rebuild(json.loads(blob[8:8 + n]), data, "1"))
t1, _ = read(v1)
assert all(np.array_equal(t1[k], tensors[k]) for k in tensors), "format 1 reads the same tensors"
b = bytearray(open(v1, "rb").read())
b[-1] ^= 0x01
refused(bytes(b), "format 1 with a changed data byte")
hdr = json.loads(blob[8:8 + n])
span = lambda k: hdr[k]["data_offsets"][1] - hdr[k]["data_offsets"][0]
names = sorted((k for k in hdr if k != "__metadata__" and span(k) > 0), key=lambda k: hdr[k]["data_offsets"])
a, b2 = names[0], names[-1]                    # the last tensor moved onto the first's bytes
size = span(b2)
assert len(names) >= 2 and hdr[a]["data_offsets"][0] == 0
hdr[b2]["data_offsets"] = [0, size]
msg = refused(rebuild(hdr, data, "2"), "two tensors on the same bytes")
assert "overlapping" in msg or "cover" in msg, msg
hdr = json.loads(blob[8:8 + n])
hdr[a]["shape"] = hdr[a]["shape"] + [2]
assert "expected" in refused(rebuild(hdr, data, "2"), "a shape that disagrees with the bytes")
print("damaged files refused; format 1 read")
PY
if "$py" tools/checkpoint/read_safetensors.py "$tmp/sample.safetensors.bad" 2>"$tmp/err"; then
    echo "FAIL: the command line accepted a damaged file"; exit 1
fi
grep -q '^read_safetensors: ' "$tmp/err" || { echo "FAIL: no message for a damaged file"; cat "$tmp/err"; exit 1; }
