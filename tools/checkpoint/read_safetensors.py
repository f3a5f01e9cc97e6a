#!/usr/bin/env python3
"""Reads an sgrad checkpoint (a safetensors file) with numpy alone.

read(path) -> (tensors, metadata): tensors maps each name to a numpy array (parameters
under their own names, optimizer state under "optim/<param>/<state>"), metadata is the
"__metadata__" string map. The file is checked as the C loader checks it before anything
is returned: the header's length and JSON, each tensor's dtype, shape and byte range (in
the data section, no overlap, no gap, sizes that match), and the checksum (pure Python,
about 17 MB/s here: read(path, verify=False) skips it for a large file); a file that
fails raises FormatError naming the fault. Usage: read_safetensors.py [--no-verify] FILE
prints name, dtype and shape (status 1 and a message for a bad file)."""
import json, struct, sys
import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


class FormatError(ValueError):
    """The file is not a valid sgrad checkpoint."""


def fnv1a64(chunks):
    h = FNV_OFFSET
    for chunk in chunks:
        for b in bytes(chunk):
            h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def _checked_tensor(name, t, data_len):
    if not isinstance(t, dict) or set(t) != {"dtype", "shape", "data_offsets"}:
        raise FormatError(f"tensor {name!r}: needs exactly dtype, shape and data_offsets")
    if t["dtype"] not in DTYPES:
        raise FormatError(f"tensor {name!r}: dtype {t['dtype']!r} is not one of {sorted(DTYPES)}")
    shape, offs = t["shape"], t["data_offsets"]
    ints = lambda v: isinstance(v, list) and all(type(x) is int and x >= 0 for x in v)
    if not ints(shape) or not ints(offs) or len(offs) != 2 or offs[0] > offs[1]:
        raise FormatError(f"tensor {name!r}: bad shape {shape!r} or data_offsets {offs!r}")
    if offs[1] > data_len:
        raise FormatError(f"tensor {name!r}: data_offsets {offs} past the data section ({data_len} bytes)")
    size = np.dtype(DTYPES[t["dtype"]]).itemsize * int(np.prod(shape, dtype=object))
    if offs[1] - offs[0] != size:
        raise FormatError(f"tensor {name!r}: {offs[1] - offs[0]} bytes for {t['dtype']} {shape} ({size} expected)")
    return offs


def read(path, verify=True):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise FormatError(f"{path}: {len(blob)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])            # header length, little-endian
    if n > len(blob) - 8:
        raise FormatError(f"{path}: header of {n} bytes in a file of {len(blob)}")
    try:
        header = json.loads(blob[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: the header is not a JSON object")
    data = memoryview(blob)[8 + n:]                  # offsets are relative to this
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise FormatError(f"{path}: __metadata__ is not a map of strings")
    spans = sorted((_checked_tensor(k, t, len(data)), k) for k, t in header.items())
    end = 0
    for (begin, stop), name in spans:                # the tensors tile the data section
        if begin != end:
            raise FormatError(f"{path}: tensor {name!r} starts at {begin}, {'overlapping' if begin < end else 'after a gap'} (previous end {end})")
        end = stop
    if end != len(data):
        raise FormatError(f"{path}: the tensors cover {end} bytes of a data section of {len(data)}")
    if verify:
        _check_checksum(path, meta, blob, n, data)
    tensors = {}
    for name, t in header.items():
        begin, stop = t["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:stop], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return tensors, meta


def _check_checksum(path, meta, blob, n, data):
    """Format 2: FNV-1a 64 of the whole file with the checksum's own 16 hex digits read
    as '0'; format 1 (read only): of the data section."""
    version, want = meta.get("sgrad.format"), meta.get("sgrad.checksum", "")
    if version not in ("1", "2"):
        raise FormatError(f"{path}: format version {version!r} (this reader reads 1 and 2)")
    digits = want[8:].encode()
    if not want.startswith("fnv1a64:") or len(digits) != 16 or digits.strip(b"0123456789abcdef"):
        raise FormatError(f"{path}: checksum {want!r} is not fnv1a64: and 16 hex digits")
    if version == "1":
        ok = fnv1a64([data]) == int(digits, 16)
    else:  # the value's place in the header: any spot holding exactly these digits
        token, ok, at = b"fnv1a64:" + digits, False, blob.find(b"fnv1a64:" + digits, 8, 8 + n)
        while at >= 0 and not ok:
            d = at + 8
            ok = fnv1a64([blob[:d], b"0" * 16, memoryview(blob)[d + 16:]]) == int(digits, 16)
            at = blob.find(token, at + 1, 8 + n)
    if not ok:
        raise FormatError(f"{path}: checksum mismatch (the file is damaged)")


if __name__ == "__main__":
    args = sys.argv[1:]
    verify = args[:1] != ["--no-verify"]
    if len(args) != 2 - verify:
        sys.exit("usage: read_safetensors.py [--no-verify] FILE")
    try:
        tensors, meta = read(args[-1], verify)
    except (OSError, FormatError) as e:
        sys.exit(f"read_safetensors: {e}")
    for name, a in tensors.items():
        print(name, a.dtype, a.shape)
