#!/usr/bin/env bash
# The synthetic llama GGUFs of the generation benchmark (perf's
# bench-make_synthetic: 2048 wide, 8 layers, 16/4 heads, ff 5632, 32000
# vocab): bench/peers/data/synth-{q4_0,q8_0}.gguf (~277 / ~523 MB, ignored),
# and synth-q4_K_M.gguf: llama-quantize's Q4_K_M mix where kiln-quantize
# knows it (from an f16 synthetic model), else every matrix plain Q4_K
# (~300 MB; the benchmark prints which, from the file's tensor types).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/bin/bench-make_synthetic ] || cmake --build build -j2 --target bench-make_synthetic
mkdir -p bench/peers/data
for t in q4_0 q8_0; do
  f=bench/peers/data/synth-$t.gguf
  [ -s "$f" ] || build/bin/bench-make_synthetic "$f" --type "$t"
done
f=bench/peers/data/synth-q4_K_M.gguf
if [ ! -s "$f" ]; then
  [ -x build/bin/kiln-quantize ] || cmake --build build -j2 --target kiln-quantize
  if build/bin/kiln-quantize --help 2>&1 | grep -qi 'q4_k_m'; then
    build/bin/bench-make_synthetic bench/peers/data/synth-f16.gguf --type f16
    build/bin/kiln-quantize bench/peers/data/synth-f16.gguf "$f" q4_K_M
    rm -f bench/peers/data/synth-f16.gguf
  else
    echo "make-models: kiln-quantize has no Q4_K_M mix here: synth-q4_K_M.gguf is plain Q4_K" >&2
    build/bin/bench-make_synthetic "$f" --type q4_K
  fi
fi
