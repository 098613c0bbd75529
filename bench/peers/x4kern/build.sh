#!/usr/bin/env bash
# x4kern.wasm (standalone, no JS glue) against build-wasm-st-relaxed's
# libkiln.a (scripts/test-wasm.sh's st-relaxed build, or its kiln target):
# writes build/x4kern/x4kern.wasm.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/wasm-env.sh
kiln_wasm_relaxed_env
cmake --build build-wasm-st-relaxed -j2 --target kiln >/dev/null
mkdir -p build/x4kern
emcc -O3 -msimd128 -mrelaxed-simd -Isrc/include -Isrc -Isrc/core -Isrc/quant -c bench/peers/x4kern/x4kern.c -o build/x4kern/x4kern.o
emcc -O3 -sWASM_BIGINT -sSTANDALONE_WASM --no-entry -sERROR_ON_UNDEFINED_SYMBOLS=0 -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=64MB \
  build/x4kern/x4kern.o build-wasm-st-relaxed/libkiln.a -o build/x4kern/x4kern.wasm 2>&1 | grep -v "undefined symbol" || true
test -s build/x4kern/x4kern.wasm
