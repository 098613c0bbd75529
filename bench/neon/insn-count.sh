#!/usr/bin/env bash
# Instructions the arm64 quant kernels execute per block, counted under
# qemu-aarch64 -singlestep (one translated block per instruction, each
# logged): a stand-in for speed where no arm64 machine is at hand. Each
# kernel runs at two sizes; the difference is one block (32 values; a
# 256-value super-block for Q4_K). Prints one JSON line per kernel and
# column count: insns per block for the whole call, and per weight row and
# activation row (plain kernels: 1 row; x4: 4 rows; K-quant x8: 8 rows).
# Needs: gcc-aarch64-linux-gnu, qemu-user-static; uses build-aarch64/ (made
# by scripts/test-neon.sh, or here).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build-aarch64
if [ ! -f "$BUILD/libkiln.a" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchain-aarch64.cmake" \
    -DKILN_BUILD_TOOLS=OFF >/dev/null
fi
cmake --build "$BUILD" -j2 --target kiln >/dev/null
OUT="$BUILD/insn_count"
aarch64-linux-gnu-gcc -O2 -no-pie -o "$OUT" bench/neon/insn_count.c "$BUILD/libkiln.a" -lm -lpthread
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT

# instructions executed at addresses inside function $1 (inlined helpers
# included), n=$2, ncols=$3; qemu's PCs are 16 hex digits, compared as strings
count() {
  local lo size hi
  read -r lo size < <(aarch64-linux-gnu-nm -S "$OUT" | awk -v f="$1" '$4 == f { print $1, $2 }')
  hi=$(printf '%016x' $((16#$lo + 16#$size)))
  QEMU_CPU=max qemu-aarch64-static -L /usr/aarch64-linux-gnu -singlestep -d exec,nochain -D "$LOG" "$OUT" "$1" "$2" "$3" >/dev/null
  awk -v lo="$lo" -v hi="$hi" 'match($0, /\[[0-9a-f]+\/[0-9a-f]+\//) {
      pc = substr($0, RSTART + 1, RLENGTH - 2); sub(/^[0-9a-f]+\//, "", pc); if (pc >= lo && pc < hi) c++ }
      END { print c + 0 }' "$LOG"
}

one() { # kernel rows ncols small big
  local a b
  a=$(count "$1" "$4" "$3"); b=$(count "$1" "$5" "$3")
  awk -v k="$1" -v r="$2" -v c="$3" -v d=$((b - a)) \
    'BEGIN { printf "{\"kernel\":\"%s\",\"ncols\":%d,\"insns_per_block\":%d,\"per_row_col\":%.2f}\n", k, c, d, d / (r * c) }'
}

for S in neon neon_dotprod; do
  for t in q4_0_q8_0 q8_0_q8_0 iq4_nl_q8_0; do one "${t}_vec_dot__$S" 1 1 64 96; done
  for t in q4_0x4_q8_0 q8_0x4_q8_0 iq4_nlx4_q8_0; do
    # q8_0 x4: dotprod only (the baseline NEON table has none)
    [ "$t" = q8_0x4_q8_0 ] && [ "$S" = neon ] && continue
    one "${t}_vec_dot__$S" 4 1 64 96
    one "${t}_gemm__$S" 4 2 64 96
    one "${t}_gemm__$S" 4 4 64 96
  done
  one "q4_K_q8_K_vec_dot__$S" 1 1 256 512
  one "q4_Kx8_q8_K_vec_dot__$S" 8 1 256 512
  one "q4_Kx8_q8_K_gemm__$S" 8 1 256 512
  one "q4_Kx8_q8_K_gemm__$S" 8 2 256 512
done
# Q5_K / Q6_K: plain (their NEON dotprod dots) and x8 (llama.cpp arm64's orders; dotprod only)
for t in q5_K q6_K; do
  one "${t}_q8_K_vec_dot__neon_dotprod" 1 1 256 512
  one "${t}x8_q8_K_vec_dot__neon_dotprod" 8 1 256 512
  one "${t}x8_q8_K_gemm__neon_dotprod" 8 2 256 512
done
for t in q4_0x4_q8_0 iq4_nlx4_q8_0; do
  one "${t}_gemm__neon_i8mm" 4 2 64 96
  one "${t}_gemm__neon_i8mm" 4 4 64 96
done
