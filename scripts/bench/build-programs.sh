#!/usr/bin/env bash
# Where a whole cold build's CPU goes, program by program (issue 28; docs/performance.md
# "Real projects"). A whole CMake + Ninja cold build per variant, in the order given, each
# from a fresh copy of the sources with an empty cache, under `perf record -a -e cpu-clock`
# (every CPU sampled at 199 Hz: a sample stands for about 5 ms of one CPU). Prints per build
# ninja's wall time, the busy CPU of the whole machine (anything else running counts too), and
# the CPU of each program: the compiler proper split into its own code, the C library and the
# kernel (time the kernel spends on its behalf: system calls, page faults), strata's preload
# library's code in any process, strata's own processes, the assembler, the driver, the
# linker, and the idle time of every CPU.
#
#   bash scripts/bench/build-programs.sh SOURCE_DIR plain-maps strata strata plain-maps
#   BENCH_CMAKE_ARGS="-Dnetwork-accessor=socket -Dtranscoder=iconv" \
#     bash scripts/bench/build-programs.sh <xerces-c source> plain-maps strata strata-nopin
#
# Variants:
#   plain-maps    no launcher, the compile options strata_enable_launcher() adds (prefix maps)
#   strata        cmake/strata.cmake with -DSTRATA_LAUNCHER=ON, an empty cache
#   strata-nopin  the same with STRATA_TRACE_PIN=0 (tracer and compiler not kept on one CPU)
#   plain-preload plain-maps with strata's preload library in LD_PRELOAD for every process
#                 (without a log it only forwards each call): what loading it costs
# Give a variant several times, in an order that alternates (A B B A …): this machine's
# speed drifts by up to 10-20 % within minutes, so only neighbours compare.
#
# A `build` directory inside SOURCE_DIR is not copied (the build goes there).
# BENCH_CMAKE_ARGS: extra configure options of the project, split at blanks (a value cannot
# hold one). BENCH_JOBS (default nproc).
# BENCH_STRATA_BINARY measures another strata binary. Needs perf (Debian: linux-perf),
# cmake, ninja, a C/C++ compiler. The work directory (a temp directory) is removed at the end.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

src=${1:?usage: build-programs.sh SOURCE_DIR VARIANT...}
shift
[ $# -gt 0 ] || {
  echo "build-programs.sh: name at least one variant (plain-maps | strata | strata-nopin | plain-preload)" >&2
  exit 2
}
for v in "$@"; do
  case $v in plain-maps | strata | strata-nopin | plain-preload) ;; *)
    echo "build-programs.sh: unknown variant '$v' (plain-maps | strata | strata-nopin | plain-preload)" >&2
    exit 2
    ;;
  esac
done
command -v perf >/dev/null || {
  echo "build-programs.sh: perf is needed (apt-get install linux-perf)" >&2
  exit 1
}
[ -d "$src" ] || {
  echo "build-programs.sh: no source directory $src" >&2
  exit 2
}
src=$(cd "$src" && pwd -P)
jobs=${BENCH_JOBS:-$(nproc)}
read -r -a extra <<<"${BENCH_CMAKE_ARGS:-}"
S=$(bench_strata)
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-build-programs.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 143' TERM
trap 'exit 129' HUP
# LD_PRELOAD cannot name a path with a blank or a colon, and strata does not unpack its preload
# library into one: the strata variants would then measure tracing without it.
case $work in *[[:space:]:]*)
  echo "build-programs.sh: the work directory $work has a blank or a colon; set TMPDIR to a plain path" >&2
  exit 2
  ;;
esac
bench_maps_cmake "$work/maps.cmake"

# The preload library as strata unpacks it: one launch with an empty cache puts it there.
preload=""
if [[ " $* " == *" plain-preload "* ]]; then
  mkdir -p "$work/probe"
  printf 'int main(void) { return 0; }\n' >"$work/probe/p.c"
  (cd "$work/probe" && "$S" compile --cache-root "$work/probe/cache" -- cc -c p.c -o p.o)
  preload=$(find "$work/probe/cache" -name 'libstrata_preload*.so' | head -n 1)
  [ -n "$preload" ] || {
    echo "build-programs.sh: strata unpacked no preload library under $work/probe/cache" >&2
    exit 1
  }
fi

bench_cpu
echo "source: $src; jobs: $jobs; strata: $S"
printf '%-3s %-13s %8s %8s %8s %7s %7s %7s %7s %6s %6s %6s %6s\n' '#' variant ninja busy \
  'cc-own' 'cc-libc' 'cc-kern' preload strata as driver ld idle
n=0
for v in "$@"; do
  n=$((n + 1))
  ck="$work/ck/$(basename "$src")"
  rm -rf "$work/ck" "$work/cache"
  mkdir -p "$work/ck"
  cp -r "$src" "$ck"
  rm -rf "$ck/build"
  args=(-S "$ck" -B "$ck/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}")
  envs=(BENCH_VARIANT="$v")
  case $v in
  plain-maps) args+=("-DCMAKE_PROJECT_INCLUDE=$work/maps.cmake") ;;
  plain-preload)
    args+=("-DCMAKE_PROJECT_INCLUDE=$work/maps.cmake")
    envs+=("LD_PRELOAD=$preload")
    ;;
  strata | strata-nopin)
    args+=("-DCMAKE_PROJECT_INCLUDE=$bench_repo/cmake/strata.cmake" -DSTRATA_LAUNCHER=ON
      "-DSTRATA_EXECUTABLE=$S" "-DSTRATA_CACHE_DIR=$work/cache")
    [ "$v" != strata-nopin ] || envs+=(STRATA_TRACE_PIN=0)
    ;;
  esac
  bench_configure "$work/configure.log" "$ck" "${args[@]}"
  # ninja's own wall time, taken inside the recorded command (perf's start and end excluded).
  env "${envs[@]}" perf record -q -a -F 199 -e cpu-clock -o "$work/perf.data" -- \
    bash -c 's=$(date +%s.%N); ninja -C "$1" -j "$2" >"$3" 2>&1 || { tail -n 20 "$3" >&2; exit 1; }
      e=$(date +%s.%N); awk -v s="$s" -v e="$e" "BEGIN { printf \"%.2f\", e - s }" >"$4"' \
    _ "$ck/build" "$jobs" "$work/build.log" "$work/wall"
  perf script -i "$work/perf.data" -F comm,ip,dso 2>/dev/null | awk -v n="$n" -v v="$v" -v wall="$(cat "$work/wall")" '
    { t++; d = $3 }
    $1 == "swapper" { idle++; next }
    d ~ /libstrata_preload/ { p++; next }
    $1 == "cc1plus" || $1 == "cc1" { if (d ~ /kernel/) ck++; else if (d ~ /\/libc\.so/) cl++; else co++; next }
    $1 == "strata" { s++; next }
    $1 == "as" { a++; next }
    $1 == "ld" || $1 == "collect2" { l++; next }
    $1 ~ /^(c\+\+|g\+\+|gcc|cc|x86_64-linux-gn|aarch64-linux-g)/ { drv++; next }
    END {
      hz = 199
      printf "%-3s %-13s %8.2f %8.2f %8.2f %7.2f %7.2f %7.2f %7.2f %6.2f %6.2f %6.2f %6.2f\n", n, v, wall,
        (t - idle) / hz, co / hz, cl / hz, ck / hz, p / hz, s / hz, a / hz, drv / hz, l / hz, idle / hz
    }'
done
echo "seconds; busy = every CPU's samples but the idle task's; cc-own / cc-libc / cc-kern: the"
echo "compiler proper (cc1plus, cc1) in its own code, in the C library, in the kernel; preload:"
echo "the code of strata's preload library, in whichever process"
