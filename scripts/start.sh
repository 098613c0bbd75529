#!/usr/bin/env bash
# The main job on the embedded default model (models/stories260K.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-native.sh >/dev/null
if [ -x build/bin/kiln-generate ]; then
  exec build/bin/kiln-generate "$@"
fi
exec build/bin/kiln-gguf info models/stories260K.gguf
