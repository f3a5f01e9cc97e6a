# Rewrites a sgrad-fasttext model into a hostile one whose checksum is valid (so only the
# loader's own checks can refuse it), for tests/test_fasttext_bad_input.sh.
# usage: fasttext_craft.py IN.bin OUT.bin CASE   (Debian's python3, standard library only)
#   bucket0      fasttext.bucket 0 (no bucket row) although the model has word n-grams
#   minn-gt-maxn fasttext.minn 5 with fasttext.maxn 3
#   hs-counts    every label count 2^62: their sum passes 2^63 - 1
#   nan          a NaN in output
#   inf          an infinity in input/words
#   big-dim      fasttext.dim 2^20, the tensors unchanged
#   big-bucket   fasttext.bucket 2^31 - 1, the tensors unchanged
import json
import struct
import sys
import os

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "checkpoint"))
from read_safetensors import fnv1a64  # noqa: E402  (the checksum the C loader checks)

src, dst, case = sys.argv[1:4]
blob = open(src, "rb").read()
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
meta = header.pop("__metadata__")
data = blob[8 + n:]
order = sorted(header, key=lambda k: header[k]["data_offsets"][0])
tensors = {k: [v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]]
           for k, v in header.items()}
if case == "bucket0":
    meta["fasttext.bucket"] = "0"
    meta["fasttext.bucket_rows"] = "0"
    tensors["input/bucket_rows"] = ["I64", [0], b""]
    tensors["input/bucket_values"] = ["F32", [0, int(meta["fasttext.dim"])], b""]
elif case == "minn-gt-maxn":
    meta["fasttext.minn"], meta["fasttext.maxn"] = "5", "3"
elif case == "hs-counts":
    t = tensors["labels/counts"]
    t[2] = struct.pack("<%dq" % t[1][0], *[2 ** 62] * t[1][0])
elif case in ("nan", "inf"):
    t = tensors["output" if case == "nan" else "input/words"]
    t[2] = struct.pack("<f", float(case)) + t[2][4:]
elif case == "big-dim":
    meta["fasttext.dim"] = str(1 << 20)
elif case == "big-bucket":
    meta["fasttext.bucket"] = str(2 ** 31 - 1)
else:
    sys.exit("fasttext_craft.py: unknown case " + case)
out, new_header = b"", {}
for k in order:
    dtype, shape, raw = tensors[k]
    new_header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [len(out), len(out) + len(raw)]}
    out += raw
# the checksum: format 1 hashes the data section; format 2 the whole file, its own 16
# digits read as "0"
zeros = "fnv1a64:" + "0" * 16
meta["sgrad.checksum"] = zeros
text = json.dumps(dict([("__metadata__", meta)] + list(new_header.items())), separators=(",", ":")).encode()
text += b" " * ((8 - (8 + len(text)) % 8) % 8)
body = struct.pack("<Q", len(text)) + text + out
h = fnv1a64([out if meta.get("sgrad.format") == "1" else body])
open(dst, "wb").write(body.replace(zeros.encode(), b"fnv1a64:%016x" % h, 1))
