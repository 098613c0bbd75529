#!/usr/bin/env bash
# The JS package's engines, all Release:
#   wasm/dist/st/kiln-st.{js,wasm}                 SIMD128, one thread
#   wasm/dist/mt/kiln-mt.{js,wasm,worker.js}       SIMD128 + pthreads
#   wasm/dist/st-relaxed/, wasm/dist/mt-relaxed/   the same with relaxed-SIMD
#                                                  kernels (clang 16, wasm-env.sh)
# The JS side picks relaxed where the engine supports it (KilnOptions.simd).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wasm-env.sh
J="$(nproc)"
for v in st mt st-relaxed mt-relaxed; do
  threads=OFF; case "$v" in mt*) threads=ON ;; esac
  relaxed=OFF; case "$v" in *-relaxed) relaxed=ON ;; esac
  (
    [ "$relaxed" = ON ] && kiln_wasm_relaxed_env
    emcmake cmake -S . -B "build-wasm-$v" -DCMAKE_BUILD_TYPE=Release \
      -DKILN_WASM_THREADS="$threads" -DKILN_WASM_RELAXED="$relaxed" -DKILN_BUILD_TOOLS=OFF >/dev/null
    cmake --build "build-wasm-$v" -j"$J" --target kiln-wasm
  )
done
ls -l wasm/dist/*/*.wasm
