#!/usr/bin/env bash
# Installs the wasm toolchain on a fresh Debian 12 machine (CI): emscripten
# 3.1.6 (clang 14) from Debian, and clang/lld/llvm 16 for the relaxed-SIMD
# builds (see scripts/wasm-env.sh). Needs root.
set -euo pipefail
need=()
command -v emcc >/dev/null 2>&1 || need+=(emscripten)
for p in clang-16 lld-16 llvm-16; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
[ "${#need[@]}" -gt 0 ] || exit 0
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null
