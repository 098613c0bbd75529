# Sourced by the wasm scripts: makes emcc usable, installing it if missing.
# Debian's emscripten (3.1.6) needs Debian's acorn for its JS optimizer.
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
if ! command -v emcc >/dev/null 2>&1; then
  bash "$(dirname "${BASH_SOURCE[0]}")/setup-wasm.sh"
fi
