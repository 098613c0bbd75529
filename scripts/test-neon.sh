#!/bin/sh
# Builds the C tests for arm64 (NEON kernels) with the aarch64 cross
# compiler and runs the kernel, matmul, attention, norm, quantized-dot and repack tests under
# qemu-aarch64-static (test_repack three times: on qemu's max CPU, on
# neoverse-n1 and on cortex-a53, for the i8mm, dotprod and baseline builds
# of the NEON x4 kernels; CMakeLists.txt; test_quant_dot on max and on
# cortex-a53; test_repack_q56_K on neoverse-n1 and on cortex-a53).
# Needs: apt-get install -y qemu-user-static gcc-aarch64-linux-gnu
# Usage: scripts/test-neon.sh [ctest -R regex]   (default: kernels|ops_matmul|ops_attn|ops_norm|repack|quant_dot)
set -eu
cd "$(dirname "$0")/.."
for tool in aarch64-linux-gnu-gcc qemu-aarch64-static; do
  command -v "$tool" >/dev/null 2>&1 || { echo "test-neon: $tool not found (apt-get install -y qemu-user-static gcc-aarch64-linux-gnu)" >&2; exit 1; }
done
BUILD=build-aarch64
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" \
  -DKILN_BUILD_TOOLS=OFF >/dev/null
# build only the test targets that will run (the whole suite is slow under qemu)
REGEX="${1:-test_kernels|test_ops_matmul|test_ops_attn|test_ops_norm|test_repack|test_quant_dot}"
# (test_repack_q6_K is a wasm build's test: CMakeLists.txt)
TARGETS=$(cd tests/c && ls test_*.c | sed 's/\.c$//' | grep -E "$REGEX" | grep -v '^test_repack_q6_K$' || true)
[ -n "$TARGETS" ] || { echo "test-neon: no test matches '$REGEX'" >&2; exit 1; }
for t in $TARGETS; do cmake --build "$BUILD" -j2 --target "$t"; done
# each test one qemu process: two side by side on two cores
ctest --test-dir "$BUILD" --output-on-failure -j2 -R "$REGEX"
