#!/bin/sh
# Bit-for-bit comparison of the llama graph's ops with llama.cpp's CPU build
# (developer check, not CI; AVX2 machines). Uses the prebuilt libggml that
# node-llama-cpp ships (npm install; offline is fine):
#   scripts/ggml-op-compare/run.sh [DIR_WITH_libggml-base.so]   GGML_CPU=haswell (default)
# Prints, per op and shape, how many output values differ from ggml's.
# arm64 (qemu): run-arm.sh.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 --target kiln >/dev/null
for t in ops rope encoder; do
  cc -O2 -o "/tmp/kiln-ggml-$t" "$root/scripts/ggml-op-compare/$t.c" -I"$root/src/include" "$root/build/libkiln.a" -ldl -lm -lpthread
  "/tmp/kiln-ggml-$t" "$dir" || true
done
