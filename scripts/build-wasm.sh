#!/usr/bin/env bash
# The JS package's engines: wasm/dist/st/kiln-st.{js,wasm} and
# wasm/dist/mt/kiln-mt.{js,wasm,worker.js} (Release, SIMD128; mt + pthreads).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wasm-env.sh
J="$(nproc)"
for v in st mt; do
  threads=OFF; [ "$v" = mt ] && threads=ON
  emcmake cmake -S . -B "build-wasm-$v" -DCMAKE_BUILD_TYPE=Release \
    -DKILN_WASM_THREADS="$threads" -DKILN_BUILD_TOOLS=OFF >/dev/null
  cmake --build "build-wasm-$v" -j"$J" --target kiln-wasm
done
ls -l wasm/dist/st wasm/dist/mt
