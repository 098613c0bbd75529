#!/bin/sh
# The bit-for-bit op comparison (run.sh) for arm64, under qemu-user:
# Kiln's aarch64 build against llama.cpp's linux-arm64 CPU build (the
# package scripts/test-arm-oracle.sh fetches into build/arm-oracle/), one
# ggml CPU variant with the emulated CPU it goes with:
#   scripts/ggml-op-compare/run-arm.sh                   neoverse-n1 + armv8.2_1 (dotprod)
#   KILN_ARM_CPU=cortex-a53 KILN_ARM_GGML_CPU=armv8.0_1 scripts/ggml-op-compare/run-arm.sh
# (HD=64 etc. as for run.sh). Needs qemu-user-static gcc-aarch64-linux-gnu.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
cpu=${KILN_ARM_CPU:-neoverse-n1}
variant=${KILN_ARM_GGML_CPU:-armv8.2_1}
dir=$root/build/arm-oracle/llama/package/bins/linux-arm64
[ -f "$dir/libggml-cpu-$variant.so" ] || { echo "run-arm: $dir/libggml-cpu-$variant.so missing (run scripts/test-arm-oracle.sh once)" >&2; exit 1; }
B=$root/build-aarch64-tools
cmake -S "$root" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-aarch64.cmake" \
  -DKILN_BUILD_TOOLS=ON -DKILN_BUILD_TESTS=OFF >/dev/null
cmake --build "$B" -j2 --target kiln >/dev/null
echo "== qemu -cpu $cpu, llama.cpp ggml CPU variant $variant"
for t in ops rope encoder; do
  aarch64-linux-gnu-gcc -O2 -o "/tmp/kiln-ggml-arm-$t" "$root/scripts/ggml-op-compare/$t.c" -I"$root/src/include" "$B/libkiln.a" -ldl -lm -lpthread
  QEMU_LD_PREFIX=/usr/aarch64-linux-gnu GGML_CPU=$variant qemu-aarch64-static -cpu "$cpu" "/tmp/kiln-ggml-arm-$t" "$dir" || true
done
