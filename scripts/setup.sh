#!/usr/bin/env bash
# Installs what the test suites need on a fresh Debian 12 machine, skipping
# whatever is already there: Debian packages (as root), then the npm
# devDependencies (package-lock.json). Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
need=()
for p in cmake gcc make clang libclang-rt-14-dev emscripten clang-16 lld-16 llvm-16 python3-numpy zlib1g-dev qemu-user-static gcc-aarch64-linux-gnu chromium espeak-ng sox; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing Debian packages (run as root to install): ${need[*]}" >&2
  else
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi
if [ ! -d node_modules/vitest ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  # onnxruntime-node (the VAD oracle) would fetch CUDA providers from nuget.org; CPU is bundled
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
else
  # node_modules is already installed here, but CI starts from a clean clone
  # with `npm ci`, which refuses a lock file out of step with package.json
  npm ci --dry-run --offline --no-audit --no-fund >/dev/null 2>&1 || {
    echo "setup: package-lock.json does not satisfy package.json (npm ci would refuse it): run npm ci --dry-run" >&2
    exit 1
  }
fi
