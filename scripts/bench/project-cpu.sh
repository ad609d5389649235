#!/usr/bin/env bash
# Every compile of a configured CMake + Ninja build, plain and through `strata compile`
# (an empty cache: every one a MISS), alternating per compile, so that a machine whose
# speed drifts by several percent between minutes (this VM: whole plain builds 66-73 s
# within one hour) slows both alike (issue 28; docs/performance.md "Real projects"). Prints
# the CPU time of each variant summed over all compiles (`perf stat -e task-clock` of the
# whole process tree), their ratio, and strata's CPU over plain per compile. What a whole
# cold build cannot resolve at 1-2 %, this does; it leaves out ninja's scheduling and the
# link steps (the same for both).
#
#   bash scripts/bench/project-cpu.sh BUILD_DIR                 # e.g. a configured xerces-c
#   BENCH_LIMIT=100 BENCH_STRATA_BINARY=/tmp/strata bash scripts/bench/project-cpu.sh BUILD_DIR
#   BENCH_STREAMS=2 bash scripts/bench/project-cpu.sh BUILD_DIR   # under a -j2-like load
#
# BENCH_STRATA_BINARIES="A B …": several strata binaries (each with a cache of its own),
# every compile run plainly and through each of them, in an order that rotates by compile,
# so that their costs are compared in the same minutes; one line per binary.
# BUILD_DIR: a CMake build directory configured for Ninja with the compile options that
# `strata_enable_launcher()` adds (prefix maps), without a launcher. Objects are written
# to a scratch directory inside it (`-o` replaced), so the build tree stays as it was.
# BENCH_LIMIT: only the first N compiles. BENCH_STREAMS (default 1): that many loops at
# once, the compiles dealt round-robin, one shared cache (as `ninja -jN` shares it), so
# that every compile runs while the other CPUs compile too. Needs perf (Debian: linux-perf)
# and ninja.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build=${1:?usage: project-cpu.sh BUILD_DIR}
build=$(cd "$build" && pwd -P)
command -v perf >/dev/null || {
  echo "project-cpu.sh: perf is needed (apt-get install linux-perf)" >&2
  exit 1
}
if [ -n "${BENCH_STRATA_BINARIES:-}" ]; then
  read -r -a binaries <<<"$BENCH_STRATA_BINARIES"
  S=${binaries[*]}
else
  S=$(bench_strata)
  binaries=("$S")
fi
streams=${BENCH_STREAMS:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-project-cpu.XXXXXX")
trap 'rm -rf "$work" "$build/.strata-project-cpu"' EXIT
mkdir -p "$build/.strata-project-cpu"
bench_cpu
# One compile per line: the commands ninja would run for object files.
ninja -C "$build" -t commands | grep -E ' -c ' | grep -E ' -o [^ ]+\.o( |$)' \
  | awk -v limit="${BENCH_LIMIT:-0}" 'limit == 0 || NR <= limit' >"$work/commands"
total=$(wc -l <"$work/commands")
echo "build: $build; compiles: $total; streams: $streams; strata: $S"
cpu() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '$3 == "task-clock" { print $1 }'; }

# One loop: the compiles numbered $1 modulo $streams, each run plainly and through every
# binary, in an order that rotates by compile; writes one line of sums (plain first, then
# each binary's) to $work/sum.$1.
stream() {
  local me=$1 n=0 line k i ms
  local -a command sums order
  for i in $(seq 0 "${#binaries[@]}"); do sums[i]=0; done
  while read -r line; do
    n=$((n + 1))
    [ $(((n - 1) % streams)) = "$me" ] || continue
    # The object goes to the scratch directory, under a name of its own per stream.
    read -r -a command <<<"$(sed -E "s# -o [^ ]+# -o .strata-project-cpu/o$me.o#" <<<"$line")"
    # Slot 0 is plain, slot i the i-th binary; the first slot moves by one per compile.
    order=()
    for i in $(seq 0 "${#binaries[@]}"); do
      order+=($(((i + (n - 1) / streams) % (${#binaries[@]} + 1))))
    done
    for k in "${order[@]}"; do
      if [ "$k" = 0 ]; then
        ms=$(cpu "${command[@]}")
      else
        ms=$(cpu "${binaries[k - 1]}" compile "--cache-root=$work/cache$k" -- "${command[@]}")
      fi
      sums[k]=$(awk -v x="${sums[k]}" -v y="${ms:-0}" 'BEGIN { print x + y }')
    done
  done <"$work/commands"
  echo "${sums[*]}" >"$work/sum.$me"
}

cd "$build"
pids=()
for me in $(seq 0 $((streams - 1))); do
  stream "$me" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
cat "$work"/sum.* | awk -v n="$total" -v names="${binaries[*]}" '
  { for (i = 1; i <= NF; i++) t[i] += $i }
  END {
    printf "  plain   cpu %10.1f ms\n", t[1]
    k = split(names, name, " ")
    for (i = 2; i <= k + 1; i++) {
      label = k == 1 ? "strata" : name[i - 1]
      printf "  %s  cpu %10.1f ms  %.3fx  (+%.1f ms per compile, n=%d)\n",
        label, t[i], t[i] / t[1], (t[i] - t[1]) / n, n
    }
  }'
