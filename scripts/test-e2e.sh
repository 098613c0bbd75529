#!/usr/bin/env bash
# Browser tests of the web demo (tests/e2e): Debian's chromium driven by
# playwright-core against web-demo/server.mjs. Builds the package's js/dist
# and wasm/dist first when they are missing or older than their sources.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM="${KILN_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing chromium (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "test-e2e: $CHROMIUM is missing; install Debian's chromium (apt-get install -y chromium)" >&2
    exit 1
  fi
fi
[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund

newer() { # newer SRC_DIR TARGET: true when TARGET is missing or a file in SRC_DIR is newer
  [ ! -e "$2" ] || [ -n "$(find "$1" -path "$1/dist" -prune -o -newer "$2" -type f -print -quit)" ]
}
if newer js/src js/dist/index.js || newer js/src js/dist/worker.js || [ ! -e js/dist/vendor/jinja/index.js ]; then
  echo "== building js/dist"
  npm run -s build:ts
fi
if [ ! -e wasm/dist/st/kiln-st.wasm ] || [ ! -e wasm/dist/mt/kiln-mt.wasm ] || newer src wasm/dist/st/kiln-st.wasm || newer wasm wasm/dist/st/kiln-st.wasm; then
  echo "== building wasm/dist"
  bash scripts/build-wasm.sh
fi

# the native generators the tests write their random-weight models with:
# kiln-whisper-random (Transcribe page), kiln-synth-encoder (tests/e2e/embed.test.mjs),
# kiln-synth-model (tests/e2e/arch.test.mjs: every architecture)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target kiln-whisper-random kiln-synth-encoder kiln-synth-model >/dev/null

echo "== browser tests (chromium $("$CHROMIUM" --version 2>/dev/null | awk '{print $2}'))"
node --test --test-concurrency=1 tests/e2e/
