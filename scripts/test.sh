#!/usr/bin/env bash
# Every test suite, in order of speed. Each suite is a script of its own
# (they can be run alone); this one runs them all, keeps going after a
# failure, and ends with one summary line.
#
#   scripts/test.sh            all suites
#   KILN_TEST_ONLY="native sanitize" scripts/test.sh   a subset
set -uo pipefail
cd "$(dirname "$0")/.."
J="$(nproc)"
T0=$(date +%s)   # the summary counts setup too

# a fresh machine: install the Debian packages and npm devDependencies first
[ "${KILN_SKIP_SETUP:-0}" = 1 ] || bash scripts/setup.sh || { echo "setup failed"; exit 1; }

suite_native() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build build -j"$J" &&
  ctest --test-dir build --output-on-failure -j"$J"
}

suite_sanitize() {
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON >/dev/null &&
  cmake --build build-sanitize -j"$J" &&
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-sanitize --output-on-failure -j"$J"
}

suite_wasm()   { bash scripts/test-wasm.sh; }
suite_js()     { bash scripts/test-js.sh; }
suite_neon()   { bash scripts/test-neon.sh; }
suite_fuzz()   { bash scripts/fuzz.sh "${KILN_FUZZ_SECONDS:-60}"; }
suite_oracle() { bash scripts/test-oracle.sh; }
suite_e2e()    { bash scripts/test-e2e.sh; }
suite_bundlers() { bash scripts/test-bundlers.sh; }

# CPU seconds (user + sys) of the shell's finished children so far, in
# CPU_NOW: the second line of the shell's own `times` (run here, not in a
# command substitution, whose fork would count none of them)
CPUF="$(mktemp)"
trap 'rm -f "$CPUF"' EXIT
children_cpu() {
  times >"$CPUF"
  CPU_NOW="$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] } printf "%.0f", n }' "$CPUF")"
}

ALL="native sanitize wasm js neon fuzz oracle e2e bundlers"
ONLY="${KILN_TEST_ONLY:-$ALL}"
passed=0; failed=0; failed_names=""; times=""; cpus=""
for s in $ONLY; do
  case " $ALL " in *" $s "*) ;; *) echo "unknown suite '$s' (have: $ALL)"; exit 2 ;; esac
  echo
  echo "==================== suite: $s"
  t0=$(date +%s)
  children_cpu; c0="$CPU_NOW"
  if "suite_$s"; then
    passed=$((passed + 1)); r=ok
  else
    failed=$((failed + 1)); failed_names="$failed_names $s"; r=FAILED
  fi
  dt=$(( $(date +%s) - t0 ))
  times="$times $s=${dt}s"
  children_cpu; dc=$((CPU_NOW - c0))
  cpus="$cpus $s=${dc}s"
  echo "==================== suite $s: $r in $dt s ($dc s CPU)"
done
echo
[ -n "$failed_names" ] && echo "failed suites:$failed_names"
echo "suite times:$times (all: $(( $(date +%s) - T0 )) s)"
children_cpu
echo "suite CPU (user + sys):$cpus (all: $CPU_NOW s; load average now $(cut -d' ' -f1-3 /proc/loadavg))"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
