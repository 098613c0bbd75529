#!/usr/bin/env bash
# The JS package's tests (Vitest, Node) against the real wasm builds, st and
# mt: builds wasm/dist and js/dist first, installs the npm devDependencies
# when they are missing; then every decoder architecture's test models in
# the wasm engines against native Kiln (tests/oracle/arch-wasm.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-wasm.sh >/dev/null
[ -x node_modules/.bin/vitest ] || npm ci --no-audit --no-fund
npm run -s build:ts
# quantized fixtures for tests/js/repack.test.ts, native references for
# tests/js/structured.test.ts (native tools); tests/js/embed.test.ts writes
# its random-weight encoders with kiln-synth-encoder, tests/js/whisper.test.ts
# its Whisper models with kiln-whisper-random and compares with kiln-transcribe
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target kiln-llama-pad kiln-quantize kiln-generate kiln-logits kiln-synth-encoder \
  kiln-whisper-random kiln-transcribe kiln-synth-model kiln-tokenize >/dev/null
mkdir -p build/js-fixtures
build/bin/kiln-llama-pad models/stories260K.gguf build/js-fixtures/stories260K-pad.gguf --multiple 32 >/dev/null
for t in q8_0 q4_0; do
  build/bin/kiln-quantize build/js-fixtures/stories260K-pad.gguf "build/js-fixtures/stories260K-pad-$t.gguf" "$t" >/dev/null
done
echo "== JS tests (vitest, wasm st + mt, SIMD128)"
KILN_TEST_SIMD=simd128 npx vitest run --config tests/js/vitest.config.mjs "$@"
echo "== JS tests (vitest, wasm st + mt, relaxed SIMD)"
# The relaxed engines differ from the SIMD128 ones only in the kernel table
# (scripts/test-wasm.sh); the files that run no kernel run in the first pass
# only: types.test.ts (tsc on the .d.ts, no engine) and model.test.ts
# (loading, file bytes, handles). --passWithNoTests: the arguments may name
# only these.
RELAXED_SKIP=(--exclude tests/js/types.test.ts --exclude tests/js/model.test.ts)
KILN_TEST_SIMD=relaxed npx vitest run --config tests/js/vitest.config.mjs "${RELAXED_SKIP[@]}" \
  $([ $# -gt 0 ] && echo --passWithNoTests) "$@"
# (the whole suite only: arguments pick vitest files)
if [ $# -eq 0 ]; then
  echo "== every decoder architecture x weight type in the wasm engines (st, mt) against native Kiln"
  # four groups of architectures, two processes at a time (scripts/jobs.sh):
  # the st engine and the native side each run one thread
  source scripts/jobs.sh
  groups="$(arch_groups 4)"; [ -n "$groups" ]
  for g in $groups; do
    jobs_add "arch-wasm.mjs $g" "node --experimental-wasm-relaxed-simd tests/oracle/arch-wasm.mjs --build build --arch $g"
  done
  jobs_run 2
fi
