#!/usr/bin/env bash
# x4kern.wasm (standalone, no JS glue) against a wasm build's libkiln.a:
#   bash bench/peers/x4kern/build.sh            build-wasm-st-relaxed (relaxed SIMD) -> build/x4kern/x4kern.wasm
#   bash bench/peers/x4kern/build.sh st         build-wasm-st (SIMD128 only, its own compiler) -> build/x4kern/x4kern-st.wasm
# (the build directory as scripts/test-wasm.sh configures it; its kiln target is built here)
set -euo pipefail
cd "$(dirname "$0")/../../.."
source scripts/wasm-env.sh
v="${1:-st-relaxed}"
out=build/x4kern/x4kern.wasm
flags="-msimd128 -mrelaxed-simd"
if [ "$v" = st ]; then
  out=build/x4kern/x4kern-st.wasm
  flags="-msimd128"
else
  kiln_wasm_relaxed_env
fi
cmake --build "build-wasm-$v" -j2 --target kiln >/dev/null
mkdir -p build/x4kern
emcc -O3 $flags -Isrc/include -Isrc -Isrc/core -Isrc/quant -c bench/peers/x4kern/x4kern.c -o "${out%.wasm}.o"
emcc -O3 -sWASM_BIGINT -sSTANDALONE_WASM --no-entry -sERROR_ON_UNDEFINED_SYMBOLS=0 -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=64MB \
  "${out%.wasm}.o" "build-wasm-$v/libkiln.a" -o "$out" 2>&1 | grep -v "undefined symbol" || true
test -s "$out"
