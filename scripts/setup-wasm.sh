#!/usr/bin/env bash
# Installs the wasm toolchain on a fresh Debian 12 machine (CI): emscripten
# 3.1.6 (clang 14) from Debian. Needs root.
set -euo pipefail
if command -v emcc >/dev/null 2>&1; then exit 0; fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq emscripten >/dev/null
