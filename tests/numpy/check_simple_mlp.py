#!/usr/bin/env python3
"""Runs examples/simple-mlp (built as build/bin/example-simple-mlp) and checks
its output against the same network computed by numpy in float64.
Usage: check_simple_mlp.py PATH_TO_BINARY
Without numpy it exits 77, which ctest reports as skipped (SKIP_RETURN_CODE);
KILN_REQUIRE_NUMPY=1 (the CI) makes that a failure instead."""
import os, subprocess, sys
try:
    import numpy as np
except ImportError:
    print("numpy_simple_mlp: SKIPPED: python3-numpy is not installed (apt-get install python3-numpy)")
    sys.exit(1 if os.environ.get("KILN_REQUIRE_NUMPY") == "1" else 77)

def fill(shape, a, b):
    # kiln's element order: ne0 fastest; numpy array [ne1, ne0]
    n = int(np.prod(shape))
    v = a * np.sin(b * np.arange(n, dtype=np.float32) + np.float32(0.5), dtype=np.float32)
    return v.astype(np.float64).reshape(shape[::-1])

x  = fill((8, 5), 1.0, 0.37)   # [5, 8]
w1 = fill((8, 16), 0.5, 0.11)  # [16, 8]
b1 = fill((16,), 0.1, 0.7)
w2 = fill((16, 4), 0.8, 0.23)  # [4, 16]
b2 = fill((4,), 0.2, 1.3)

def gelu(z):  # tanh approximation, as ggml
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z ** 3)))

h = gelu(x @ w1.T + b1)        # [5, 16]
z = h @ w2.T + b2              # [5, 4]
z = z - z.max(axis=1, keepdims=True)
ref = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)

out = subprocess.run([sys.argv[1]], capture_output=True, text=True, check=True).stdout
got = np.array([[float(v) for v in line.split()] for line in out.strip().splitlines()])
err = np.abs(got - ref).max()
ok = got.shape == ref.shape and err < 1e-5
print(f"max abs error vs numpy: {err:.3g}")
print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
sys.exit(0 if ok else 1)
