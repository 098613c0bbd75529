#!/usr/bin/env bash
# The JS package's tests (Vitest, Node) against the real wasm builds, st and
# mt: builds wasm/dist and js/dist first, installs the npm devDependencies
# when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-wasm.sh >/dev/null
[ -x node_modules/.bin/vitest ] || npm ci --no-audit --no-fund
npm run -s build:ts
echo "== JS tests (vitest, wasm st + mt)"
npx vitest run --config tests/js/vitest.config.mjs "$@"
