#!/usr/bin/env python3
"""Writes the small Fashion-MNIST subset the tests use (tests/data/fashion-mnist/):
the first N training and M test images and labels as uncompressed IDX files,
taken from Debian's dataset-fashion-mnist package."""
import gzip, struct, sys, os

SRC = "/usr/share/datasets/fashion-mnist"
DST = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fashion-mnist")
N_TRAIN, N_TEST = 1000, 500

def subset(name, n):
    with gzip.open(os.path.join(SRC, name + ".gz"), "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = list(struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims]))
    item = 1
    for d in dims[1:]:
        item *= d
    dims[0] = n
    hdr = data[:4] + struct.pack(">" + "I" * ndims, *dims)
    body = data[4 + 4 * ndims: 4 + 4 * ndims + n * item]
    with open(os.path.join(DST, name), "wb") as f:
        f.write(hdr + body)

os.makedirs(DST, exist_ok=True)
subset("train-images-idx3-ubyte", N_TRAIN)
subset("train-labels-idx1-ubyte", N_TRAIN)
subset("t10k-images-idx3-ubyte", N_TEST)
subset("t10k-labels-idx1-ubyte", N_TEST)
