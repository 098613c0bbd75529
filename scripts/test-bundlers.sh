#!/usr/bin/env bash
# The packed package in fixture apps built by Vite (build + dev server),
# webpack 5 and esbuild, run in Debian's chromium (tests/bundlers), plus
# Node ESM and CommonJS. Builds js/dist and wasm/dist first when they are
# missing or older than their sources (the tarball needs every variant).
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM="${KILN_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "test-bundlers: $CHROMIUM is missing; install Debian's chromium (apt-get install -y chromium)" >&2
  exit 1
fi
[ -d node_modules/webpack ] && [ -d node_modules/esbuild ] || npm ci --no-audit --no-fund

newer() { # newer SRC_DIR TARGET: true when TARGET is missing or a file in SRC_DIR is newer
  [ ! -e "$2" ] || [ -n "$(find "$1" -path "$1/dist" -prune -o -newer "$2" -type f -print -quit)" ]
}
if newer js/src js/dist/index.js || newer js/src js/dist/worker.js || [ ! -e js/dist/vendor/jinja/index.js ]; then
  echo "== building js/dist"
  npm run -s build:ts
fi
for v in st mt st-relaxed mt-relaxed; do
  if [ ! -e "wasm/dist/$v/kiln-$v.wasm" ] || newer src "wasm/dist/$v/kiln-$v.wasm" || newer wasm "wasm/dist/$v/kiln-$v.wasm"; then
    echo "== building wasm/dist"
    bash scripts/build-wasm.sh
    break
  fi
done

echo "== bundler fixtures (vite, webpack, esbuild; chromium $("$CHROMIUM" --version 2>/dev/null | awk '{print $2}'))"
node --test --test-concurrency=1 tests/bundlers/
