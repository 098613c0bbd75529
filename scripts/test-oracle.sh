#!/usr/bin/env bash
# Cross-check against llama.cpp (node-llama-cpp's prebuilt CPU build, a
# devDependency): builds the native tools, the fixtures (build/oracle/), and
# runs tests/oracle/oracle.mjs, tests/oracle/pretok.mjs (the BPE
# pre-tokenizers against llama.cpp's), tests/oracle/arch.mjs (every decoder
# architecture on random-weight models from kiln-synth-model),
# tests/oracle/embed.mjs (embeddings of bert / nomic-bert encoders and a
# decoder against llama.cpp's), tests/oracle/chat-template.mjs (built-in chat
# templates vs llama.cpp's Jinja), tests/oracle/quant-mix.mjs (q4_K_M / q5_K_M
# vs llama.cpp's quantizer), tests/oracle/grammar.mjs (grammar-constrained
# generation against llama.cpp's grammar engine and ajv),
# tests/oracle/lora.mjs (LoRA adapters and merged models against llama.cpp's),
# tests/oracle/finetune.mjs (a LoRA adapter trained by kiln-finetune, loaded by
# llama.cpp), tests/oracle/finetune-arch.mjs (adapters trained for phi3, qwen3
# and gemma3 random-weight models: Kiln = llama.cpp with them) and tests/audio/vad-oracle.mjs (Silero VAD against
# whisper.cpp). Needs `npm install` done (offline is fine: the
# prebuilt binary ships in @node-llama-cpp/<platform>; the postinstall step is
# not needed). About 40 s after the build on this machine, plus 1-3 min for
# grammar.mjs.
#
#   scripts/test-oracle.sh [BUILD_DIR]      KILN_ORACLE_STRICT=1: count every token comparison
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-build}"
if ! node -e 'import("node-llama-cpp")' 2>/dev/null; then
  echo "test-oracle: node-llama-cpp is not installed (npm install)" >&2
  exit 1
fi
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln-generate kiln-tokenize kiln-quantize kiln-llama-pad kiln-synth-model \
  kiln-logits kiln-synth-lora kiln-export-lora >/dev/null
bash scripts/make-oracle-fixtures.sh "$B" >/dev/null
rc=0
# Kiln's Q4_K x8 kernels against llama.cpp's exported repacked Q4_K kernels
# (the haswell build, bit for bit; x86-64 Linux, where that build exists)
if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln >/dev/null
  GGML_BINS=$(node -e 'const p=require("path");console.log(p.resolve(p.dirname(require.resolve("@node-llama-cpp/linux-x64")),"..","bins","linux-x64"))')
  ${CC:-cc} -O2 -Isrc/include -Isrc -Isrc/core -Isrc/quant tests/oracle/ggml_repack_check.c "$B/libkiln.a" -ldl -lm -lpthread \
    -o "$B/ggml_repack_check"
  "$B/ggml_repack_check" "$GGML_BINS/libggml-base.so" "$GGML_BINS/libggml-cpu-haswell.so" || rc=1
fi
node tests/oracle/oracle.mjs --build "$B" --json build/oracle/result.json || rc=1
# byte-level BPE pre-tokenizers: every tokenizer.ggml.pre name Kiln accepts against llama.cpp's tokenizer
node tests/oracle/pretok.mjs --build "$B" || rc=1
# every decoder architecture x weight type on random-weight models (build/oracle-arch/)
node tests/oracle/arch.mjs --build "$B" --json "$B/oracle-arch/result.json" || rc=1
# embeddings (bert / nomic-bert random-weight encoders, stories260K) against llama.cpp's
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln-embed kiln-synth-encoder >/dev/null
node tests/oracle/embed.mjs --build "$B" --json "$B/oracle-embed/result.json" || rc=1
# kiln-quantize's q4_K_M / q5_K_M mixes against llama.cpp's llama_model_quantize (types and bytes)
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln-gguf >/dev/null
node tests/oracle/quant-mix.mjs --build "$B" || rc=1
# the built-in chat templates against llama.cpp's Jinja engine on real models' templates
node tests/oracle/chat-template.mjs --build "$B" || rc=1
# LoRA adapters (kiln-synth-lora) and kiln-export-lora's merged models (build/oracle-lora/)
node tests/oracle/lora.mjs --build "$B" --json "$B/oracle-lora/result.json" || rc=1
# grammar-constrained generation against llama.cpp's grammar engine and ajv
node tests/oracle/grammar.mjs --build "$B" --json build/oracle/grammar-result.json || rc=1
# LoRA fine-tuning: kiln-finetune's adapter loaded by llama.cpp (stories260K + the Zorbu corpus)
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln-finetune >/dev/null
node tests/oracle/finetune.mjs --build "$B" || rc=1
# adapters trained for random-weight phi3 (fused qkv and gate/up), qwen3 and gemma3 models, against llama.cpp with them
node tests/oracle/finetune-arch.mjs --build "$B" || rc=1
# Silero VAD against whisper.cpp (@fugood/whisper.node) and onnxruntime-node
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln-vad >/dev/null
node tests/audio/vad-oracle.mjs --build "$B" 2> >(grep -v '^whisper_' >&2) || rc=1
# Whisper against whisper.cpp (@fugood/whisper.node) on random-weight model files
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln-transcribe kiln-whisper-random >/dev/null
node tests/audio/whisper-oracle.mjs --build "$B" 2> >(grep -v '^whisper_\|^read_audio' >&2) || rc=1
# Whisper's decoding modes (beam search, best-of, fallback, prompt, VAD, SRT/VTT) against whisper.cpp's whisper_full
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln >/dev/null
node tests/audio/whisper-decode-oracle.mjs --build "$B" || rc=1
exit $rc
