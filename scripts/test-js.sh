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
KILN_TEST_SIMD=relaxed npx vitest run --config tests/js/vitest.config.mjs "$@"
# (the whole suite only: arguments pick vitest files)
if [ $# -eq 0 ]; then
  echo "== every decoder architecture x weight type in the wasm engines (st, mt) against native Kiln"
  node tests/oracle/arch-wasm.mjs --build build
fi
