#!/usr/bin/env bash
# The C test suite (tests/c) built to WebAssembly and run under Node with
# ctest, twice: st (SIMD128, one thread) and mt (SIMD128 + pthreads).
# Needs emscripten (Debian: apt-get install emscripten; scripts/setup-wasm.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wasm-env.sh
J="$(nproc)"

for v in st mt; do
  echo "== wasm C tests ($v)"
  threads=OFF; [ "$v" = mt ] && threads=ON
  emcmake cmake -S . -B "build-wasm-$v" -DCMAKE_BUILD_TYPE=Release \
    -DKILN_WASM_THREADS="$threads" -DKILN_BUILD_TOOLS=OFF >/dev/null
  cmake --build "build-wasm-$v" -j"$J"
  ctest --test-dir "build-wasm-$v" --output-on-failure -j"$J"
done
