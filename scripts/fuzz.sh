#!/usr/bin/env bash
# Fuzz the GGUF reader with libFuzzer + ASan + UBSan for SECONDS (default 60),
# then the GBNF parser / JSON Schema converter (fuzz_grammar) for
# KILN_FUZZ_GRAMMAR_SECONDS (default 30; seeds: tests/data/grammars and
# tests/data/json-schemas), then the LoRA adapter loader (fuzz_lora) for
# KILN_FUZZ_LORA_SECONDS (default 20; seeds: test_lora --write-seeds).
#
#   scripts/fuzz.sh [SECONDS]
#
# Seeds: the repository's real GGUF files (copied into a temporary directory)
# plus the small synthetic files test_gguf writes (every value and tensor
# type). Inputs are capped at KILN_FUZZ_MAX_LEN bytes (default 32768: the
# seeds' metadata fits, and small inputs run thousands of times faster).
# Exits non-zero on a crash, a leak, undefined behavior or a timeout; the
# reproducer is kept in build-fuzz/artifacts/ (rerun it with
# build-fuzz/bin/fuzz_gguf FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN="${1:-60}"
MAX_LEN="${KILN_FUZZ_MAX_LEN:-32768}"
J="${KILN_FUZZ_BUILD_JOBS:-2}"

command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (apt-get install -y clang libclang-rt-14-dev)" >&2; exit 2; }

# the fuzz build (library instrumented, only fuzz targets)
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$J" --target fuzz_gguf fuzz_grammar fuzz_lora >/dev/null
# the regular build, for test_gguf's synthetic seeds
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$J" --target test_gguf test_lora >/dev/null

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/corpus" build-fuzz/artifacts
cp models/*.gguf tests/data/vocab/*.gguf "$WORK/corpus/"
build/tests/test_gguf --write-seeds "$WORK/corpus" >/dev/null

# fuzz_run TARGET CORPUS SECONDS [libFuzzer flags...]: run one target, print
# its stats; on a failure its log's tail and the exit status
fuzz_run() {
  local target="$1" corpus="$2" secs="$3" st=0
  shift 3
  ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "build-fuzz/bin/$target" "$corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 "$@" >"$WORK/$target.log" 2>&1 || st=$?
  grep -E "^(stat::|Done|==[0-9]+==ERROR|SUMMARY)" "$WORK/$target.log" || true
  if [ "$st" -ne 0 ]; then
    tail -60 "$WORK/$target.log"
    echo "fuzz.sh: $target FAILED (exit $st); reproducer in build-fuzz/artifacts/" >&2
    exit "$st"
  fi
}

# the grammar target: first byte 0 = GBNF, 1 = JSON Schema
mkdir -p "$WORK/gcorpus"
for f in tests/data/grammars/*.gbnf; do { printf '\0'; cat "$f"; } >"$WORK/gcorpus/$(basename "$f")"; done
for f in tests/data/json-schemas/*.json; do { printf '\1'; cat "$f"; } >"$WORK/gcorpus/$(basename "$f")"; done
GSECONDS="${KILN_FUZZ_GRAMMAR_SECONDS:-30}"
# a fixed seed: the suite's run is the same sequence of inputs on every machine (up to the time
# limit), so a failure reproduces; explore further by hand with KILN_FUZZ_GRAMMAR_SEED=0 (random)
GSEED="${KILN_FUZZ_GRAMMAR_SEED:-1}"
# the LoRA adapter loader against stories260K (seeds: test_lora's adapters)
mkdir -p "$WORK/lcorpus"
build/tests/test_lora --write-seeds "$WORK/lcorpus" >/dev/null
LSECONDS="${KILN_FUZZ_LORA_SECONDS:-20}"

# Each fuzzer is one process on one core: fuzz_gguf in one lane, fuzz_grammar
# then fuzz_lora in the other (scripts/jobs.sh), the same seconds each as one
# after the other, in about half the wall time on two cores.
source scripts/jobs.sh
jobs_add fuzz_gguf 'echo "fuzz.sh: fuzz_gguf for ${SECONDS_TO_RUN}s, $(ls "$WORK/corpus" | wc -l) seeds, max_len ${MAX_LEN}"
  fuzz_run fuzz_gguf "$WORK/corpus" "$SECONDS_TO_RUN" -max_len="$MAX_LEN"'
jobs_add "fuzz_grammar, fuzz_lora" 'echo "fuzz.sh: fuzz_grammar for ${GSECONDS}s, seed ${GSEED}, $(ls "$WORK/gcorpus" | wc -l) seeds"
  fuzz_run fuzz_grammar "$WORK/gcorpus" "$GSECONDS" -seed="$GSEED" -max_len=8192
  echo "fuzz.sh: fuzz_lora for ${LSECONDS}s, seed 1, $(ls "$WORK/lcorpus" | wc -l) seeds"
  fuzz_run fuzz_lora "$WORK/lcorpus" "$LSECONDS" -seed=1 -max_len="$MAX_LEN"'
jobs_run 2 || { echo "fuzz.sh: FAILED" >&2; exit 1; }
echo "fuzz.sh: clean"
