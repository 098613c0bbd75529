#!/usr/bin/env bash
# The C test suite (tests/c) built to WebAssembly and run under Node with
# ctest: st (SIMD128, one thread), mt (SIMD128 + pthreads), and st-relaxed
# (SIMD128 + relaxed SIMD; Node 20 needs --experimental-wasm-relaxed-simd,
# which the ctest commands pass). st-relaxed differs from st only in the
# kernel table, so it runs the tests that reach kernels (RELAXED_TESTS:
# every kernel against scalar, the ops that call them, training, generation);
# mt-relaxed differs from mt the same way and runs in the JS suite.
# Each variant links the tests into one program (build-wasm-<v>/tests/
# kiln-tests.js, see CMakeLists.txt); ctest runs each test in its own
# Node process: `node kiln-tests.js test_core`.
# Needs emscripten (Debian: apt-get install emscripten; scripts/setup-wasm.sh)
# and for relaxed clang-16/lld-16/llvm-16 + npm binaryen (scripts/wasm-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/wasm-env.sh
J="$(nproc)"
RELAXED_TESTS="test_kernels test_quant_dot test_repack test_repack_q4_K test_repack_q56_K test_repack_q6_K test_ops_matmul test_ops_attn test_ops_softmax
  test_ops_unary test_ops_conv test_backward test_opt test_mnist test_generate test_llama_ref"

for v in st mt st-relaxed; do
  echo "== wasm C tests ($v)"
  threads=OFF; case "$v" in mt*) threads=ON ;; esac
  relaxed=OFF; case "$v" in *-relaxed) relaxed=ON ;; esac
  (
    [ "$relaxed" = ON ] && kiln_wasm_relaxed_env
    only=""; [ "$relaxed" = ON ] && only="$(echo $RELAXED_TESTS | tr ' ' ';')"
    emcmake cmake -S . -B "build-wasm-$v" -DCMAKE_BUILD_TYPE=Release \
      -DKILN_WASM_THREADS="$threads" -DKILN_WASM_RELAXED="$relaxed" -DKILN_BUILD_TOOLS=OFF \
      -DKILN_WASM_TEST_ONLY="$only" >/dev/null
    # the test program only: the default target would also link bench/*.c
    # (-O3, wasm-opt: CPU the tests do not need) and the package engine
    # (scripts/build-wasm.sh builds it for the JS suite)
    cmake --build "build-wasm-$v" -j"$J" --target kiln-tests
    if [ "$relaxed" = ON ]; then
      ctest --test-dir "build-wasm-$v" --output-on-failure -j"$J" -R "^($(echo $RELAXED_TESTS | tr ' ' '|'))\$"
    else
      ctest --test-dir "build-wasm-$v" --output-on-failure -j"$J"
    fi
  )
done
