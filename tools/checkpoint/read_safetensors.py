#!/usr/bin/env python3
"""Reads an sgrad checkpoint (a safetensors file) with numpy alone.

read(path) -> (tensors, metadata): tensors maps each name to a numpy array (parameters
under their own names, optimizer state under "optim/<param>/<state>"), metadata is the
"__metadata__" string map. Usage: read_safetensors.py FILE prints name, dtype and shape."""
import json, struct, sys
import numpy as np

DTYPES = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}

def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])            # header length, little-endian
    header = json.loads(blob[8:8 + n])
    data = memoryview(blob)[8 + n:]                  # offsets are relative to this
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=DTYPES[t["dtype"]])
        tensors[name] = a.reshape(t["shape"])
    return tensors, meta

if __name__ == "__main__":
    tensors, meta = read(sys.argv[1])
    for name, a in tensors.items():
        print(name, a.dtype, a.shape)
