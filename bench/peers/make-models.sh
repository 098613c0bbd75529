#!/usr/bin/env bash
# The synthetic llama GGUFs of the generation benchmark (perf's
# bench-make_synthetic: 2048 wide, 8 layers, 16/4 heads, ff 5632, 32000
# vocab): bench/peers/data/synth-{q4_0,q8_0}.gguf (~277 / ~523 MB, ignored),
# and synth-q4_K_M.gguf / synth-q5_K_M.gguf: the same model written in F16,
# then kiln-quantize's q4_K_M / q5_K_M mix (llama-quantize's per-tensor
# recipe; the F16 file is removed).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/bin/bench-make_synthetic ] || cmake --build build -j2 --target bench-make_synthetic
[ -x build/bin/kiln-quantize ] || cmake --build build -j2 --target kiln-quantize
mkdir -p bench/peers/data
for t in q4_0 q8_0; do
  f=bench/peers/data/synth-$t.gguf
  [ -s "$f" ] || build/bin/bench-make_synthetic "$f" --type "$t"
done
for mix in q4_K_M q5_K_M; do
  f=bench/peers/data/synth-$mix.gguf
  if [ ! -s "$f" ]; then
    [ -s bench/peers/data/synth-f16.tmp.gguf ] || build/bin/bench-make_synthetic bench/peers/data/synth-f16.tmp.gguf --type f16
    build/bin/kiln-quantize bench/peers/data/synth-f16.tmp.gguf "$f" $mix >/dev/null
  fi
done
rm -f bench/peers/data/synth-f16.tmp.gguf
