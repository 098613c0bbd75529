# Sourced by the test scripts: runs independent commands N at a time, so
# that single-threaded steps (an oracle's node process, a fuzzer) keep both
# cores of a 2-core CI machine busy.
#
#   jobs_add NAME 'COMMAND'   queue COMMAND (a bash string: it sees the
#                             caller's variables and functions)
#   jobs_run N                run the queue, N at a time, in queue order
#                             (put the longest first); empties the queue
#
# Each command runs in a subshell with its stdout and stderr in a log of its
# own; when it ends the log is printed whole, under a line with its name,
# status, wall and CPU seconds (user + sys of the command and its children),
# so that outputs never interleave. jobs_run returns 1 when any command
# failed, after all of them ended, and prints a table of the jobs' times.
# KILN_JOBS_SERIAL=1 runs the queue one at a time (N = 1).

JOBS_NAMES=()
JOBS_CMDS=()

jobs_add() {
  JOBS_NAMES+=("$1")
  JOBS_CMDS+=("$2")
}

# seconds (with a fraction) from a `times` figure such as 1m2.500s
_jobs_secs() {
  awk -v t="$1" 'BEGIN { split(t, a, "m"); sub("s", "", a[2]); printf "%.1f", a[1] * 60 + a[2] }'
}

jobs_run() {
  local n="${1:-2}" dir i pid st failed=0 running=0 next=0 total="${#JOBS_NAMES[@]}" summary=""
  [ "${KILN_JOBS_SERIAL:-0}" = 1 ] && n=1
  dir="$(mktemp -d)"
  local -A index_of=()
  local -a start_of=()
  while [ "$next" -lt "$total" ] || [ "$running" -gt 0 ]; do
    while [ "$running" -lt "$n" ] && [ "$next" -lt "$total" ]; do
      i="$next"
      (
        set +e
        ( eval "${JOBS_CMDS[$i]}" ) >"$dir/$i.log" 2>&1
        st=$?
        # the subshell's own CPU, then its children's (the command)
        times >"$dir/$i.times"
        exit "$st"
      ) &
      index_of[$!]="$i"
      start_of[$i]="$(date +%s)"
      next=$((next + 1)); running=$((running + 1))
    done
    st=0
    wait -n -p pid || st=$?
    running=$((running - 1))
    i="${index_of[$pid]}"
    local wall=$(( $(date +%s) - start_of[i] )) cpu=0 u s
    [ -f "$dir/$i.times" ] && while read -r u s; do
      cpu="$(awk -v a="$cpu" -v b="$(_jobs_secs "$u")" -v c="$(_jobs_secs "$s")" 'BEGIN { printf "%.1f", a + b + c }')"
    done <"$dir/$i.times"
    local r=ok
    if [ "$st" -ne 0 ]; then r="FAILED (exit $st)"; failed=$((failed + 1)); fi
    echo "---- ${JOBS_NAMES[$i]}: $r, ${wall} s wall, ${cpu} s CPU"
    cat "$dir/$i.log"
    echo "---- end of ${JOBS_NAMES[$i]}"
    summary="$summary ${JOBS_NAMES[$i]}=${cpu}s"
    [ "$st" -eq 0 ] || summary="$summary(FAILED)"
  done
  rm -rf "$dir"
  echo "jobs (CPU s):$summary"
  JOBS_NAMES=()
  JOBS_CMDS=()
  [ "$failed" -eq 0 ]
}

# arch_groups N: the architectures of tests/oracle/arch-models.mjs (every one
# of them, so that a new architecture is never left out) dealt into N
# comma-separated groups, one per line, for arch.mjs / arch-wasm.mjs --arch
arch_groups() {
  node --input-type=module -e '
    const { ARCH_VOCAB } = await import(process.cwd() + "/tests/oracle/arch-models.mjs");
    const n = Number(process.argv[1]), g = Array.from({ length: n }, () => []);
    ARCH_VOCAB.forEach(([a], i) => g[i % n].push(a));
    console.log(g.filter((x) => x.length).map((x) => x.join(",")).join("\n"));' "$1"
}
