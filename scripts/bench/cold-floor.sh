#!/usr/bin/env bash
# The floor of a traced cold build (issue 28; docs/performance.md "Real projects"): a whole
# CMake + Ninja cold build four ways, alternating, each from a fresh copy of the sources
# with an empty cache:
#
#   plain-maps  no launcher, the compile options strata_enable_launcher() adds (prefix maps)
#   floor       the same, with scripts/bench/ptrace-floor.c as CMAKE_<LANG>_COMPILER_LAUNCHER:
#               every compile runs under a tracer with strata's seccomp stops that only
#               continues at each stop (tracer pinned with the compiler, as strata's is).
#               What any tracer built on these stops costs a cold build at least.
#   observe     the same with ptrace-floor started as ptrace-observe: at each stop it also
#               reads the call, its registers and its path argument and stats the path, the
#               least a tracer that records what each call found must do (no record kept).
#               What strata's tracing design costs at least, before the launcher's own work.
#   notif-observe  the same observation made by a seccomp user-notification supervisor
#               (scripts/bench/notif-floor.c started as notif-observe): no ptrace, the call and
#               its arguments come with the notification. Not in the default list.
#   notif-store the same, and then what the least cache must keep of each compile: the
#               object copied into a store directory and a manifest written (notif-floor.c
#               started as notif-store). What any cache that observes this way costs a cold
#               build at least. Not in the default list.
#   strata      cmake/strata.cmake with -DSTRATA_LAUNCHER=ON (launcher, archive steps,
#               prefix maps), an empty cache
#
#   bash scripts/bench/cold-floor.sh SOURCE_DIR            # e.g. a kept abseil checkout
#   BENCH_REPEATS=3 BENCH_JOBS=2 bash scripts/bench/cold-floor.sh SOURCE_DIR
#   BENCH_VARIANTS="plain-maps observe notif-observe strata" bash scripts/bench/cold-floor.sh DIR
#
# BENCH_VARIANTS (default "plain-maps floor observe strata"; plain-maps is always built, as
# the base) are built in rotating order, one build of each per round.
# Prints per build the wall and CPU seconds (user + system of ninja and everything it ran),
# then the medians and their ratios to plain-maps. Needs cmake, ninja, a C compiler.
# BENCH_STRATA_BINARY measures another strata binary. The work directory (a temp directory)
# is removed at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

src=${1:?usage: cold-floor.sh SOURCE_DIR}
src=$(cd "$src" && pwd -P)
repeats=${BENCH_REPEATS:-3}
jobs=${BENCH_JOBS:-$(nproc)}
S=$(bench_strata)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-cold-floor.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM
trap 'exit 129' HUP
cc -O2 -o "$work/ptrace-floor" "$bench_repo/scripts/bench/ptrace-floor.c"
cp "$work/ptrace-floor" "$work/ptrace-observe"
cc -O2 -o "$work/notif-observe" "$bench_repo/scripts/bench/notif-floor.c"
cp "$work/notif-observe" "$work/notif-store"
read -r -a variants <<<"${BENCH_VARIANTS:-plain-maps floor observe strata}"
[[ " ${variants[*]} " == *" plain-maps "* ]] || variants=(plain-maps "${variants[@]}")
bench_maps_cmake "$work/maps.cmake"
cat >"$work/floor.cmake" <<CMAKE
include("$work/maps.cmake")
set(CMAKE_C_COMPILER_LAUNCHER "$work/ptrace-floor")
set(CMAKE_CXX_COMPILER_LAUNCHER "$work/ptrace-floor")
CMAKE
cat >"$work/observe.cmake" <<CMAKE
include("$work/maps.cmake")
set(CMAKE_C_COMPILER_LAUNCHER "$work/ptrace-observe")
set(CMAKE_CXX_COMPILER_LAUNCHER "$work/ptrace-observe")
CMAKE
for name in notif-observe notif-store; do
  cat >"$work/$name.cmake" <<CMAKE
include("$work/maps.cmake")
set(CMAKE_C_COMPILER_LAUNCHER "$work/$name")
set(CMAKE_CXX_COMPILER_LAUNCHER "$work/$name")
CMAKE
done

bench_cpu
echo "source: $src; jobs: $jobs; repeats: $repeats; strata: $S"

# One cold build of $1; prints "tool wall cpu".
build() {
  local tool=$1 ck="$work/ck/$(basename "$src")"
  rm -rf "$work/ck" "$work/cache" "$work/store"
  mkdir -p "$work/ck"
  cp -r "$src" "$ck"
  rm -rf "$ck/build"
  local args=(-S "$ck" -B "$ck/build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
  case $tool in
  plain-maps) args+=("-DCMAKE_PROJECT_INCLUDE=$work/maps.cmake") ;;
  floor) args+=("-DCMAKE_PROJECT_INCLUDE=$work/floor.cmake") ;;
  observe) args+=("-DCMAKE_PROJECT_INCLUDE=$work/observe.cmake") ;;
  notif-observe | notif-store) args+=("-DCMAKE_PROJECT_INCLUDE=$work/$tool.cmake") ;;
  strata)
    args+=("-DCMAKE_PROJECT_INCLUDE=$bench_repo/cmake/strata.cmake" -DSTRATA_LAUNCHER=ON
      "-DSTRATA_EXECUTABLE=$S" "-DSTRATA_CACHE_DIR=$work/cache")
    ;;
  esac
  bench_configure "$work/configure.log" "$ck" "${args[@]}"
  # user + system of ninja and its (waited-for) descendants, from /proc/self/stat of a
  # wrapper shell: bash's `times` prints the children's totals.
  local start end times
  start=$(date +%s.%N)
  times=$(bash -c 'ninja -C "$1" -j "$2" >"$3" 2>&1 || { tail -n 20 "$3" >&2; exit 1; }; times' _ \
    "$ck/build" "$jobs" "$work/build.log" | tail -n 1)
  end=$(date +%s.%N)
  local cpu
  cpu=$(awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.2f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' <<<"$times")
  awk -v t="$tool" -v s="$start" -v e="$end" -v c="$cpu" 'BEGIN { printf "%-13s wall %7.2f s  cpu %7.2f s\n", t, e - s, c }'
}

declare -A walls cpus
for round in $(seq 1 "$repeats"); do
  # The list rotated by one more place each round, so that each variant takes each slot.
  shift_by=$(((round - 1) % ${#variants[@]}))
  order="${variants[*]:shift_by} ${variants[*]:0:shift_by}"
  echo "round $round: $order"
  for tool in $order; do
    line=$(build "$tool")
    echo "  $line"
    walls[$tool]+=" $(awk '{ print $3 }' <<<"$line")"
    cpus[$tool]+=" $(awk '{ print $6 }' <<<"$line")"
  done
done

echo "medians (ratio to plain-maps):"
# shellcheck disable=SC2086
base_wall=$(bench_median ${walls[plain-maps]})
# shellcheck disable=SC2086
base_cpu=$(bench_median ${cpus[plain-maps]})
for tool in "${variants[@]}"; do
  # shellcheck disable=SC2086
  w=$(bench_median ${walls[$tool]})
  # shellcheck disable=SC2086
  c=$(bench_median ${cpus[$tool]})
  awk -v t="$tool" -v w="$w" -v c="$c" -v bw="$base_wall" -v bc="$base_cpu" \
    'BEGIN { printf "  %-13s wall %7.2f s (%.3fx)  cpu %7.2f s (%.3fx)\n", t, w, w / bw, c, c / bc }'
done
