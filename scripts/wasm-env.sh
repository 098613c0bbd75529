# Sourced by the wasm scripts: makes emcc usable, installing it if missing.
# Debian's emscripten (3.1.6) needs Debian's acorn for its JS optimizer.
export NODE_PATH="${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs"
# emcc runs binaryen's tools from PATH, and `npm test` / `npm run` put
# node_modules/.bin first, where the npm binaryen (for the relaxed builds
# only, see below) would shadow Debian's: the SIMD128 builds keep Debian's
PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/node_modules/\.bin$' | paste -sd: -)"
export PATH
# Debian's emcc runs "${EMSDK_PYTHON:-python3}" for every call: Debian's
# python3 directly, not a python3 shim earlier on PATH (pyenv's costs about
# 0.6 s of CPU per call, 1.2 s instead of 0.6 s for a small compile; a wasm
# build makes hundreds of calls)
if [ -z "${EMSDK_PYTHON:-}" ] && [ -x /usr/bin/python3 ]; then
  export EMSDK_PYTHON=/usr/bin/python3
fi
if ! command -v emcc >/dev/null 2>&1; then
  bash "$(dirname "${BASH_SOURCE[0]}")/setup-wasm.sh"
fi

# The relaxed-SIMD builds (-DKILN_WASM_RELAXED=ON) need clang >= 16 (Debian's
# clang-16, lld-16, llvm-16) under emscripten 3.1.6, and a wasm-opt that reads
# the final relaxed opcodes (npm binaryen, a devDependency; Debian's 108
# predates them). Emscripten calls wasm-opt from PATH; the build skips
# wasm-emscripten-finalize (see CMakeLists.txt), which npm binaryen lacks;
# scripts/binaryen-compat/wasm-opt adapts the one output format that changed.
# Run in a subshell: it changes the environment of the caller.
kiln_wasm_relaxed_env() {
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if [ ! -x /usr/lib/llvm-16/bin/clang ] || [ ! -x /usr/lib/llvm-16/bin/wasm-ld ]; then
    echo "relaxed SIMD build: needs clang-16 lld-16 llvm-16 (apt-get install; scripts/setup-wasm.sh)" >&2
    return 1
  fi
  if [ ! -x "$root/node_modules/binaryen/bin/wasm-opt" ]; then
    echo "relaxed SIMD build: needs npm binaryen (npm ci)" >&2
    return 1
  fi
  export EM_LLVM_ROOT=/usr/lib/llvm-16/bin EM_CLANG_ADD_VERSION= EM_LLVM_ADD_VERSION=
  export EMCC_READ_METADATA=python
  export PATH="$root/scripts/binaryen-compat:$PATH"
  # emcc warns that clang 16 is not the 14 it was released with
  export EMCC_CFLAGS="${EMCC_CFLAGS:+$EMCC_CFLAGS }-Wno-version-check"
}
