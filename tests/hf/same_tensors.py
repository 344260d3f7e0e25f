#!/usr/bin/env python3
"""same_tensors.py A B — exit 0 when two safetensors files hold the same
tensors: same names, dtypes, shapes and bytes (the order in the file and the
metadata may differ). Standard library only (CI has no torch)."""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n :]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0] : v["data_offsets"][1]]) for k, v in header.items()}


a, b = read(sys.argv[1]), read(sys.argv[2])
bad = sorted(set(a) ^ set(b))
if bad:
    sys.exit("tensors in only one file: %s" % ", ".join(bad))
for k in sorted(a):
    if a[k][:2] != b[k][:2]:
        sys.exit("%s: %s %s vs %s %s" % (k, a[k][0], a[k][1], b[k][0], b[k][1]))
    if a[k][2] != b[k][2]:
        sys.exit("%s: the values differ" % k)
print("%d tensors identical (names, dtypes, shapes, bytes)" % len(a))
