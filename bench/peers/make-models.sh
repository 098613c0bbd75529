#!/usr/bin/env bash
# The synthetic llama GGUFs of the generation benchmark (perf's
# bench-make_synthetic: 2048 wide, 8 layers, 16/4 heads, ff 5632, 32000
# vocab): bench/peers/data/synth-{q4_0,q8_0}.gguf (~277 / ~523 MB, ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x build/bin/bench-make_synthetic ] || cmake --build build -j2 --target bench-make_synthetic
mkdir -p bench/peers/data
for t in q4_0 q8_0; do
  f=bench/peers/data/synth-$t.gguf
  [ -s "$f" ] || build/bin/bench-make_synthetic "$f" --type "$t"
done
