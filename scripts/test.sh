#!/usr/bin/env bash
# Every test suite: native C tests (Release, then ASan+UBSan).
# Later suites (wasm C tests, JS, browser) are added here as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
J="$(nproc)"

echo "== native C tests (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$J"
ctest --test-dir build --output-on-failure -j"$J"

echo "== native C tests (KILN_SANITIZE=ON)"
cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON >/dev/null
cmake --build build-sanitize -j"$J"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-sanitize --output-on-failure -j"$J"

echo "== fuzz: GGUF reader (${KILN_FUZZ_SECONDS:-60} s)"
if command -v clang >/dev/null; then
  bash scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-60}"
else
  echo "(skipped: clang not installed; apt-get install -y clang libclang-rt-14-dev)"
fi
