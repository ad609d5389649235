#!/usr/bin/env bash
# One translation unit's MISS against a plain compile, interleaved (issue 28;
# docs/performance.md "The MISS after the second round of cuts"): CPU time of the whole
# process tree (`perf stat -e task-clock`), so that a slow minute slows every variant alike.
#
#   bash scripts/bench/tu-cpu.sh DIR COMMAND_FILE [WRAPPER...]
#   BENCH_REPEATS=16 bash scripts/bench/tu-cpu.sh build build/cmd.txt ./ptrace-floor \
#       target/release/strata /tmp/strata-before
#
# DIR: where the compile runs (a CMake build directory). COMMAND_FILE: one compile command
# line, split at white space, no quoting (`ninja -t commands <object> | tail -n 1 >
# cmd.txt`). Each WRAPPER is a strata binary (any file named strata*: run as `strata compile --cache-root=<its own empty cache> --`)
# or a program that takes the command as its arguments (ptrace-floor: `cc -O2 -o
# ptrace-floor scripts/bench/ptrace-floor.c`). Every run adds `-DSTRATA_BENCH_RUN=<n>` so
# that each strata run is a MISS of a new key; each cache first gets two MISSes of other
# keys (its memos warm, as in a build). Prints the median CPU ms of each variant and its
# ratio to plain. Needs perf (Debian: linux-perf).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

dir=${1:?usage: tu-cpu.sh DIR COMMAND_FILE [WRAPPER...]}
command_file=${2:?usage: tu-cpu.sh DIR COMMAND_FILE [WRAPPER...]}
shift 2
wrappers=("$@")
repeats=${BENCH_REPEATS:-10}
command -v perf >/dev/null || {
  echo "tu-cpu.sh: perf is needed (apt-get install linux-perf)" >&2
  exit 1
}
read -r -a compile <"$command_file"
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-tu-cpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
bench_cpu
echo "dir: $dir; command: ${compile[*]:0:3} …; repeats: $repeats"

# The command that runs variant $1 (plain, or a wrapper's index).
variant() {
  local i=$1
  if [ "$i" = plain ]; then
    return
  fi
  local w=${wrappers[$i]}
  case $(basename "$w") in
  strata*) printf '%s\n' "$w" compile "--cache-root=$work/cache-$i" -- ;;
  *) printf '%s\n' "$w" ;;
  esac
}

cd "$dir"
for i in "${!wrappers[@]}"; do
  mapfile -t pre < <(variant "$i")
  for warm in 1 2; do
    "${pre[@]}" "${compile[@]}" "-DSTRATA_BENCH_WARM=$warm" >/dev/null 2>&1 || true
  done
done
results="$work/results"
: >"$results"
for run in $(seq 1 "$repeats"); do
  for i in plain "${!wrappers[@]}"; do
    mapfile -t pre < <(variant "$i")
    ms=$(perf stat -x, -e task-clock "${pre[@]}" "${compile[@]}" "-DSTRATA_BENCH_RUN=$run" 2>&1 >/dev/null |
      awk -F, '$3 == "task-clock" { print $1 }')
    name=plain
    [ "$i" = plain ] || name="$i:$(basename "${wrappers[$i]}")"
    echo "$name $ms" >>"$results"
  done
done
base=$(bench_median $(awk '$1 == "plain" { print $2 }' "$results"))
for name in $(awk '{ print $1 }' "$results" | awk '!seen[$0]++'); do
  # shellcheck disable=SC2046
  m=$(bench_median $(awk -v n="$name" '$1 == n { print $2 }' "$results"))
  awk -v n="$name" -v m="$m" -v b="$base" -v r="$repeats" \
    'BEGIN { printf "  %-24s cpu median %8.1f ms  %.3fx  (+%.1f ms, n=%d)\n", n, m, m / b, m - b, r }'
done
