#!/usr/bin/env bash
# Fixtures for the llama.cpp cross-check (tests/oracle/): from
# models/stories260K.gguf, a copy whose feed-forward is zero-padded 172 -> 192
# (so every weight row fits 32-wide blocks), and quantized versions of it made
# with kiln-quantize. Outputs go to build/oracle/ (git-ignored); files that
# are newer than their inputs are kept.
#
#   scripts/make-oracle-fixtures.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-build}"
OUT=build/oracle
SRC=models/stories260K.gguf
for t in kiln-llama-pad kiln-quantize; do
  [ -x "$B/bin/$t" ] || { echo "make-oracle-fixtures: $B/bin/$t missing (build it first)" >&2; exit 1; }
done
mkdir -p "$OUT"

fresh() { # fresh OUT IN...: OUT exists and is newer than every IN
  local o="$1"; shift
  [ -s "$o" ] || return 1
  for i in "$@"; do [ "$o" -nt "$i" ] || return 1; done
}

PAD="$OUT/stories260K-pad-f32.gguf"
if ! fresh "$PAD" "$SRC" "$B/bin/kiln-llama-pad"; then
  "$B/bin/kiln-llama-pad" "$SRC" "$PAD.tmp" --multiple 32 >/dev/null
  mv "$PAD.tmp" "$PAD"
fi
for type in ${KILN_ORACLE_TYPES:-f16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl}; do
  o="$OUT/stories260K-pad-$type.gguf"
  if ! fresh "$o" "$PAD" "$B/bin/kiln-quantize"; then
    "$B/bin/kiln-quantize" "$PAD" "$o.tmp" "$type" >/dev/null
    mv "$o.tmp" "$o"
  fi
done
ls -1 "$OUT"/*.gguf
