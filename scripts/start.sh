#!/usr/bin/env bash
# The main job: generate a story with the embedded default model
# (models/stories260K.gguf). Arguments go to kiln-generate.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target kiln-generate >/dev/null
exec build/bin/kiln-generate "$@"
