#!/usr/bin/env bash
# Cross-check against llama.cpp (node-llama-cpp's prebuilt CPU build, a
# devDependency): builds the native tools, the fixtures (build/oracle/), and
# runs tests/oracle/oracle.mjs, tests/oracle/fa-paths.mjs (flash attention's
# tiled prompt and split-KV decode paths), tests/oracle/pretok.mjs (the BPE
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
# and gemma3 random-weight models: Kiln = llama.cpp with them),
# tests/audio/vad-oracle.mjs (Silero VAD against whisper.cpp and
# onnxruntime), tests/audio/whisper-oracle.mjs and whisper-decode-oracle.mjs
# (Whisper against whisper.cpp). The scripts run two at a time (see below).
# Needs `npm install` done (offline is fine: the
# prebuilt binary ships in @node-llama-cpp/<platform>; the postinstall step is
# not needed).
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
# every tool the scripts below run, in one build
cmake --build "$B" -j"${KILN_JOBS:-2}" --target kiln kiln-generate kiln-tokenize kiln-quantize kiln-llama-pad kiln-synth-model \
  kiln-logits kiln-synth-lora kiln-export-lora kiln-embed kiln-synth-encoder kiln-gguf kiln-finetune kiln-vad \
  kiln-transcribe kiln-whisper-random >/dev/null
bash scripts/make-oracle-fixtures.sh "$B" >/dev/null
rc=0
# Kiln's Q4_K x8 kernels against llama.cpp's exported repacked Q4_K kernels
# (the haswell build, bit for bit; x86-64 Linux, where that build exists)
if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  GGML_BINS=$(node -e 'const p=require("path");console.log(p.resolve(p.dirname(require.resolve("@node-llama-cpp/linux-x64")),"..","bins","linux-x64"))')
  ${CC:-cc} -O2 -Isrc/include -Isrc -Isrc/core -Isrc/quant tests/oracle/ggml_repack_check.c "$B/libkiln.a" -ldl -lm -lpthread \
    -o "$B/ggml_repack_check"
  "$B/ggml_repack_check" "$GGML_BINS/libggml-base.so" "$GGML_BINS/libggml-cpu-haswell.so" || rc=1
fi

# The oracle scripts are independent (each writes its own files; the shared
# random-weight models of arch-models.mjs are written under unique temporary
# names and renamed) and each runs one thread on both sides (fa-paths.mjs's
# decode case two, as it must), so they run two
# at a time (scripts/jobs.sh: each script's output printed whole when it
# ends, every exit status counted), longest first. whisper.cpp's log lines
# (whisper_*, read_audio_*) are left out of the audio oracles' output.
source scripts/jobs.sh
# the longest jobs first: Whisper's decoding modes (beam search, best-of, fallback, prompt, VAD,
# SRT/VTT) against whisper.cpp's whisper_full (~340 s CPU in all), its two parts as two jobs
jobs_add "whisper-decode-oracle.mjs model" "node tests/audio/whisper-decode-oracle.mjs --build '$B' --part model"
jobs_add "whisper-decode-oracle.mjs same-logits" "node tests/audio/whisper-decode-oracle.mjs --build '$B' --part same-logits"
# every decoder architecture x weight type on random-weight models
# (build/oracle-arch/), in four groups of architectures (arch.mjs --arch)
groups="$(arch_groups 4)"; [ -n "$groups" ]
for g in $groups; do
  jobs_add "arch.mjs $g" "node tests/oracle/arch.mjs --build '$B' --arch $g --json '$B/oracle-arch/result-${g//,/-}.json'"
done
# grammar-constrained generation against llama.cpp's grammar engine and ajv
jobs_add grammar.mjs "node tests/oracle/grammar.mjs --build '$B' --json build/oracle/grammar-result.json"
# Whisper against whisper.cpp (@fugood/whisper.node) on random-weight model files
jobs_add whisper-oracle.mjs "node tests/audio/whisper-oracle.mjs --build '$B' 2>&1 | { grep -v '^whisper_\|^read_audio' || true; }"
# adapters trained for random-weight phi3 (fused qkv and gate/up), qwen3 and gemma3 models, against llama.cpp with them
jobs_add finetune-arch.mjs "node tests/oracle/finetune-arch.mjs --build '$B'"
# Silero VAD against whisper.cpp (@fugood/whisper.node) and onnxruntime-node
jobs_add vad-oracle.mjs "node tests/audio/vad-oracle.mjs --build '$B' 2>&1 | { grep -v '^whisper_' || true; }"
# LoRA adapters (kiln-synth-lora) and kiln-export-lora's merged models (build/oracle-lora/)
jobs_add lora.mjs "node tests/oracle/lora.mjs --build '$B' --json '$B/oracle-lora/result.json'"
# embeddings (bert / nomic-bert random-weight encoders, stories260K) against llama.cpp's
jobs_add embed.mjs "node tests/oracle/embed.mjs --build '$B' --json '$B/oracle-embed/result.json'"
# LoRA fine-tuning: kiln-finetune's adapter loaded by llama.cpp (stories260K + the Zorbu corpus)
jobs_add finetune.mjs "node tests/oracle/finetune.mjs --build '$B'"
# stories260K and its quantized fixtures (build/oracle/) against llama.cpp
jobs_add oracle.mjs "node tests/oracle/oracle.mjs --build '$B' --json build/oracle/result.json"
# flash attention's tiled prompt path (>= 64 ids) and split-KV decode (n_kv >= 512, 2 threads) on stories260K
jobs_add fa-paths.mjs "node tests/oracle/fa-paths.mjs --build '$B'"
# byte-level BPE pre-tokenizers: every tokenizer.ggml.pre name Kiln accepts against llama.cpp's tokenizer
jobs_add pretok.mjs "node tests/oracle/pretok.mjs --build '$B'"
# kiln-quantize's q4_K_M / q5_K_M mixes against llama.cpp's llama_model_quantize (types and bytes)
jobs_add quant-mix.mjs "node tests/oracle/quant-mix.mjs --build '$B'"
# the built-in chat templates against llama.cpp's Jinja engine on real models' templates
jobs_add chat-template.mjs "node tests/oracle/chat-template.mjs --build '$B'"
jobs_run 2 || rc=1
exit $rc
