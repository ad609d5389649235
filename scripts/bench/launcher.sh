#!/usr/bin/env bash
# The compiler launcher (issue 10) against ccache's direct mode on two real CMake builds,
# every ratio measured in one run (docs/performance.md "Issue 10: compiler launcher";
# /work/shared/BENCHMARKING.md explains the method).
#
#   bash scripts/bench/launcher.sh                  # zstd and googletest
#   bash scripts/bench/launcher.sh googletest       # one project (zstd | googletest)
#
# Projects: zstd 1.5.7's own CMake build (build/cmake, static library only; the sources of
# the zstd-sys crate cargo fetches for strata, added with add_subdirectory() from a
# two-line top-level CMakeLists.txt so that CMake names objects relative to the source tree
# rather than after their absolute path) and Debian's googletest (/usr/src/googletest: gtest,
# gtest_main, gmock, gmock_main). Both: Ninja, -j2, CMAKE_BUILD_TYPE=Release, and
# -ffile-prefix-map=<checkout>=. in CMAKE_C_FLAGS/CMAKE_CXX_FLAGS (the relocation advice of
# the docs: googletest's objects embed __FILE__). The peer is ccache with a fresh CCACHE_DIR,
# CCACHE_BASEDIR set and its defaults (direct mode); strata runs with a fresh
# STRATA_CACHE_ROOT and STRATA_BASE_DIRS set. Both base directories are the scratch
# directory, which holds checkout a and its copy b at another path.
#
# For each project:
#  cold    plain, ccache and strata builds of checkout a, each in a fresh build directory
#          and (launchers) with a fresh cache: wall and CPU time (user+sys of the ninja run;
#          configure is not timed), overhead over plain, and the sum of the compile steps'
#          durations from .ninja_log; then every object file of the strata (and ccache)
#          cold build is compared with the plain build's (cmp).
#  cold-tu the same compiles one at a time, each plain, as a ccache MISS, as a strata MISS
#          under ptrace-floor.c (a tracer with strata's seccomp stops that does nothing at
#          them: the floor of tracing; on one CPU and unpinned), and run by examples/trace.rs
#          untraced and traced by strata's tracer alone (what tracing costs without the
#          launcher's other work) in a rotating order (fresh caches): the overhead over
#          plain without the load drift that makes two whole builds minutes apart differ by
#          20 % or more here. Then (with
#          perf) what each launcher adds to a MISS without the compile's noise: its own
#          process's CPU time (perf stat --no-inherit), plus for ccache its preprocessor run.
#  warm    ccache and strata, alternately, in another build directory of checkout a and in
#          one of checkout b (a copy of the sources at another path), BENCH_WARM_ROUNDS
#          times, each time a new build directory and the cold build's cache (for b,
#          strata's machine-local verification memos removed first: a first lookup at that
#          path, as on a CI runner that restored the cache): wall and CPU medians, the
#          compile steps' durations (.ninja_log: without archiving and ninja), hits and
#          misses of both tools, ratios strata/ccache; strata's objects compared with the
#          plain build's. Then
#          BENCH_WARM_REPEATS times, alternately, `ninja -t clean` and a timed rebuild in
#          those directories (a developer's rebuild: strata's memo vouches for headers).
#  header  (zstd) one header changed (a declaration appended to
#          lib/compress/zstd_compress_internal.h): every compile
#          of a fresh build directory runs once through each tool; the TUs that MISS are
#          compared with those whose compile reads the header (the compiler's own -M output).
#  shadow  (googletest) a header created earlier on the include path
#          (googlemock/include/gtest/gtest.h, shadowing googletest/include/gtest/gtest.h
#          for the gmock TUs): strata MISSes those TUs, ccache HITs all (its known false hit).
#  tu      (googletest) HIT latency of one C++ TU (gtest-all.cc), ccache direct hit vs strata
#          HIT, hyperfine -N alternating, three rounds, ratio of medians.
#
# Environment: BENCH_PARTS (default "cold-tu self warm header shadow tu": the parts after
# the cold builds, which always run since the others use their build directories and
# caches), BENCH_COLD_ROUNDS (default 1; order reversed every other round),
# BENCH_STRATA_ARCHIVES (default 1: strata also caches the archive steps through
# CMAKE_<LANG>_ARCHIVE_CREATE/_FINISH, as strata_enable_launcher() does; 0: compiles only),
# BENCH_WARM_ROUNDS (default 3), BENCH_WARM_REPEATS (default 10), BENCH_WORK (scratch directory; default a new temp
# directory, removed at the end unless BENCH_KEEP=1). Takes about 15-20 minutes on 2 cores.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
projects=("$@")
[ ${#projects[@]} -gt 0 ] || projects=(zstd googletest)
cold_rounds=${BENCH_COLD_ROUNDS:-1}
warm_rounds=${BENCH_WARM_ROUNDS:-3}
warm_repeats=${BENCH_WARM_REPEATS:-10}
parts=" ${BENCH_PARTS:-cold-tu self warm header shadow tu} "
want() { [[ $parts == *" $1 "* ]]; }

. "$repo/scripts/prereqs.sh"
. "$repo/scripts/bench/lib.sh"
prereqs_debian ca-certificates cmake ninja-build g++ ccache hyperfine googletest time python3
prereqs_rust
bench_cpu
echo "$(gcc --version | head -n 1); $(ccache --version | head -n 1); $(cmake --version | head -n 1); ninja $(ninja --version)"
cargo build --release --locked --manifest-path "$repo/Cargo.toml" --bin strata --example trace 2>&1 | tail -n 1
S="$repo/target/release/strata"
TRACE_EXAMPLE="$repo/target/release/examples/trace"
CCACHE=$(command -v ccache)
# perf (Debian linux-perf) measures what each launcher process itself costs on a MISS; the
# part is skipped where it is missing or not permitted (perf_event_paranoid > 2).
command -v perf >/dev/null || prereqs_debian linux-perf || true
perf_ok=0
perf stat --no-inherit -x, -e task-clock -o /dev/null true >/dev/null 2>&1 && perf_ok=1
H="python3 $repo/scripts/bench/launcher_helper.py"
if [ -n "${BENCH_WORK:-}" ]; then
  work=$BENCH_WORK
  rm -rf "$work"
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-launcher.XXXXXX")
fi
work=$(cd "$work" && pwd -P)
[ "${BENCH_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
echo "scratch: $work (base directory of both tools)"
# The floor of tracing: the same seccomp stops, nothing done at them (ptrace-floor.c).
FLOOR=$work/ptrace-floor
cc -O2 -o "$FLOOR" "$repo/scripts/bench/ptrace-floor.c"

# with_tool TOOL CACHE COMMAND...: runs COMMAND with the tool's settings.
with_tool() {
  local tool=$1 cache=$2
  shift 2
  case $tool in
  plain) "$@" ;;
  ccache) CCACHE_DIR=$cache CCACHE_BASEDIR=$work "$@" ;;
  strata) STRATA_CACHE_ROOT=$cache STRATA_BASE_DIRS=$work "$@" ;;
  esac
}

launcher_of() { case $1 in plain) echo "" ;; ccache) echo "$CCACHE" ;; strata) echo "$S" ;; esac; }

# configure PROJECT TOOL CHECKOUT BUILD: a new Ninja build directory of the checkout.
configure() {
  local project=$1 tool=$2 ck=$3 build=$4 launcher
  launcher=$(launcher_of "$tool")
  local args=(-S "$ck/src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_C_FLAGS=-ffile-prefix-map=$ck=." "-DCMAKE_CXX_FLAGS=-ffile-prefix-map=$ck=.")
  [ "$project" != zstd ] || args+=(-DZSTD_BUILD_PROGRAMS=OFF -DZSTD_BUILD_SHARED=OFF -DZSTD_BUILD_TESTS=OFF)
  [ -z "$launcher" ] || args+=("-DCMAKE_C_COMPILER_LAUNCHER=$launcher" "-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher")
  # strata also caches the archive steps (ar, ranlib), as strata_enable_launcher() sets up;
  # BENCH_STRATA_ARCHIVES=0 measures the compile launcher alone.
  if [ "$tool" = strata ] && [ "${BENCH_STRATA_ARCHIVES:-1}" = 1 ]; then
    local lang
    for lang in C CXX; do
      args+=("-DCMAKE_${lang}_ARCHIVE_CREATE=$S <CMAKE_AR> qc <TARGET> <LINK_FLAGS> <OBJECTS>"
        "-DCMAKE_${lang}_ARCHIVE_FINISH=$S <CMAKE_RANLIB> <TARGET>")
    done
  fi
  cmake "${args[@]}" >"$build.configure.log" 2>&1 || { tail -n 20 "$build.configure.log" >&2; exit 1; }
}

# timed_build TOOL CACHE BUILD: ninja -j2 in BUILD; prints "wall cpu" (seconds; cpu is
# user+sys of ninja and everything it ran).
timed_build() {
  local tool=$1 cache=$2 build=$3
  with_tool "$tool" "$cache" /usr/bin/time -f '%e %U %S' -o "$build.time" ninja -C "$build" -j2 >"$build.log" 2>&1 ||
    { tail -n 30 "$build.log" >&2; exit 1; }
  awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$build.time"
}

counters() { with_tool "$1" "$2" $H counters "$1" "$2"; }
hits() { $H hits "$1"; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f %%", 100 * (a / b - 1) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# setup PROJECT: checkout a (sources) and b (a copy at another path).
setup() {
  local project=$1 a="$work/$1/a"
  mkdir -p "$a/src"
  case $project in
  zstd)
    local manifest
    manifest=$(cargo metadata --format-version 1 --locked --manifest-path "$repo/Cargo.toml" 2>/dev/null |
      tr ',' '\n' | sed -n 's/.*"manifest_path":"\([^"]*zstd-sys-[^"]*Cargo.toml\)".*/\1/p' | sed -n 1p)
    local z
    z="$(dirname "$manifest")/zstd"
    [ -f "$z/build/cmake/CMakeLists.txt" ] || { echo "zstd sources not found via cargo metadata ($manifest)" >&2; exit 1; }
    mkdir -p "$a/src/zstd"
    cp -r "$z/build" "$z/lib" "$a/src/zstd/"
    printf 'cmake_minimum_required(VERSION 3.13)\nproject(zstd_bench C)\nadd_subdirectory(zstd/build/cmake zstd)\n' >"$a/src/CMakeLists.txt"
    ;;
  googletest) cp -r /usr/src/googletest/. "$a/src/" ;;
  esac
  chmod -R u+w "$a/src"
  mkdir -p "$work/$1/b"
  cp -a "$a/src" "$work/$1/b/src"
}

bench_project() {
  local p=$1 a="$work/$1/a" tools r tool tb w c steps
  printf '\n######## %s\n' "$p"
  setup "$p"
  local -A wall cpu
  # --- cold builds ---
  for r in $(seq 1 "$cold_rounds"); do
    if [ $((r % 2)) -eq 1 ]; then tools="plain ccache strata"; else tools="strata ccache plain"; fi
    for tool in $tools; do
      local cache="$work/cache/$p-$tool-$r" build="$a/cold-$tool-$r" before="" counted=""
      mkdir -p "$cache"
      configure "$p" "$tool" "$a" "$build"
      [ "$tool" = plain ] || before=$(counters "$tool" "$cache")
      bench_warm "$a/src"
      tb=$(timed_build "$tool" "$cache" "$build")
      read -r w c <<<"$tb"
      wall[$tool]+="$w "
      cpu[$tool]+="$c "
      [ "$tool" = plain ] || counted=", $(hits "$($H diff "$(counters "$tool" "$cache")" "$before")")"
      steps=$($H ninja-log "$build")
      echo "cold build $r  $tool: wall $w s, cpu $c s; ${steps#* } compile steps took ${steps%% *} ms in all$counted"
    done
  done
  local wp wc ws cp cc cs
  # shellcheck disable=SC2086
  { wp=$($H median ${wall[plain]}); wc=$($H median ${wall[ccache]}); ws=$($H median ${wall[strata]})
    cp=$($H median ${cpu[plain]}); cc=$($H median ${cpu[ccache]}); cs=$($H median ${cpu[strata]}); }
  echo "== $p cold build (ninja -j2, median of $cold_rounds): plain $wp s wall / $cp s cpu"
  echo "   ccache $wc s ($(pct "$wc" "$wp") wall), $cc s cpu ($(pct "$cc" "$cp") cpu)"
  echo "   strata $ws s ($(pct "$ws" "$wp") wall), $cs s cpu ($(pct "$cs" "$cp") cpu)"
  echo "   strata/ccache cold build: wall $(ratio "$ws" "$wc"), cpu $(ratio "$cs" "$cc")"
  echo "   objects, strata cold vs plain: $($H cmp "$a/cold-plain-1" "$a/cold-strata-1")"
  echo "   objects, ccache cold vs plain: $($H cmp "$a/cold-plain-1" "$a/cold-ccache-1")"
  # --- cold, interleaved per TU: the overhead without the machine's load drift ---
  if want cold-tu; then
  echo "== $p cold, interleaved per TU: each compile plain, as a ccache MISS, as a strata MISS and under the ptrace floor, one at a time, rotating order"
  mkdir -p "$work/cache/$p-ccache-tu" "$work/cache/$p-strata-tu"
  $H cold-tu-report "$($H cold-tu "$a/cold-strata-1" "$a" "$CCACHE" "$S" "$work/cache/$p-ccache-tu" "$work/cache/$p-strata-tu" "$work" "$FLOOR" "$TRACE_EXAMPLE")"
  fi
  if [ "$perf_ok" = 1 ] && want self; then
    echo "== $p cold, what each launcher adds to a MISS (perf stat --no-inherit: the launcher process alone; the -E run ccache adds, timed apart)"
    mkdir -p "$work/cache/$p-ccache-self" "$work/cache/$p-strata-self"
    $H self-cost-report "$($H self-cost "$a/cold-strata-1" "$a" "$CCACHE" "$S" "$work/cache/$p-ccache-self" "$work/cache/$p-strata-self" "$work")"
  fi

  # --- warm: another build directory (a), and a copy of the sources at another path (b) ---
  local loc ck
  for loc in a b; do
    want warm || continue
    ck="$work/$p/$loc"
    local -A ww=() wcpu=() wsteps=() wcount=()
    for r in $(seq 1 "$warm_rounds"); do
      if [ $((r % 2)) -eq 1 ]; then tools="ccache strata"; else tools="strata ccache"; fi
      for tool in $tools; do
        local cache="$work/cache/$p-$tool-1" build="$ck/warm-$tool-$r" before
        configure "$p" "$tool" "$ck" "$build"
        # At the other path every round is a first lookup there, as on a CI runner that
        # restored the cache: strata's machine-local verification memos go (they would vouch
        # for the headers an earlier round hashed). In another build directory of checkout a
        # they stay as the cold build left them (it hashed those very headers).
        [ "$tool" = ccache ] || [ "$loc" = a ] || rm -rf "$cache/.local/verify-memo"
        before=$(counters "$tool" "$cache")
        bench_warm "$ck/src" "$cache"
        tb=$(timed_build "$tool" "$cache" "$build")
        read -r w c <<<"$tb"
        steps=$($H ninja-log "$build")
        ww[$tool]+="$w "
        wcpu[$tool]+="$c "
        wsteps[$tool]+="${steps%% *} "
        wcount[$tool]+="$(hits "$($H diff "$(counters "$tool" "$cache")" "$before")"); "
      done
    done
    local mc ms mcc mcs sc ss where
    # shellcheck disable=SC2086
    { mc=$($H median ${ww[ccache]}); ms=$($H median ${ww[strata]})
      mcc=$($H median ${wcpu[ccache]}); mcs=$($H median ${wcpu[strata]})
      sc=$($H median ${wsteps[ccache]}); ss=$($H median ${wsteps[strata]}); }
    where=$([ "$loc" = a ] && echo "another build directory" || echo "a copy of the sources at another path")
    echo "== $p warm build, $where: fresh build directory (ninja -j2, median of $warm_rounds; runs: ccache ${ww[ccache]}| strata ${ww[strata]}s)"
    echo "   ccache $mc s wall, $mcc s cpu, compile steps $sc ms   [${wcount[ccache]}]"
    echo "   strata $ms s wall, $mcs s cpu, compile steps $ss ms   [${wcount[strata]}]"
    echo "   strata/ccache: wall $(ratio "$ms" "$mc"), cpu $(ratio "$mcs" "$mcc"), compile steps $(ratio "$ss" "$sc")  (target: wall <= 0.8, 100 % hits)"
    echo "   objects, strata warm ($loc) vs plain cold (a): $($H cmp "$a/cold-plain-1" "$ck/warm-strata-1")"
    echo "== $p warm build again, $where: ninja -t clean, then ninja -j2, $warm_repeats times alternately (strata's memo now vouches for the headers)"
    $H warm-repeat-report "$($H warm-repeat "$warm_repeats" "$ck/warm-ccache-1" "$ck/warm-strata-1" "$work/cache/$p-ccache-1" "$work/cache/$p-strata-1" "$work")"
  done

  case $p in
  zstd) if want header; then header_test "$p"; fi ;;
  googletest)
    if want shadow; then shadow_test "$p"; fi
    if want tu; then tu_test "$p"; fi
    ;;
  esac
}

# per_tu TOOL BUILD HEADER: every compile of BUILD once through TOOL's launcher (JSON report).
per_tu() {
  local p=$1 tool=$2 build=$3 header=$4
  with_tool "$tool" "$work/cache/$p-$tool-1" $H per-tu "$tool" "$work/cache/$p-$tool-1" "$build" "$(launcher_of "$tool")" "$header"
}
summary() { $H summary "$1"; }

header_test() {
  local p=$1 a="$work/$1/a" rel=zstd/lib/compress/zstd_compress_internal.h
  local hdr="$a/src/$rel"
  cp -p "$hdr" "$work/header.orig"
  # A declaration, not a comment: ccache's preprocessor mode would find a comment-only
  # change and HIT (strata, which never runs the preprocessor on a lookup, MISSes then).
  printf '\nextern int zstd_launcher_benchmark_changed;\n' >>"$hdr"
  local tool
  echo "== $p: one header changed ($rel); every compile of a fresh build directory once through each tool"
  for tool in ccache strata; do
    configure "$p" "$tool" "$a" "$a/header-$tool"
    echo "   $tool: $(summary "$(per_tu "$p" "$tool" "$a/header-$tool" "$hdr")")"
  done
  cp -p "$work/header.orig" "$hdr"
}

shadow_test() {
  local p=$1 a="$work/$1/a"
  local new="$a/src/googlemock/include/gtest/gtest.h"
  mkdir -p "$(dirname "$new")"
  printf '/* a new header earlier on the include path */\n#include "../../../googletest/include/gtest/gtest.h"\n' >"$new"
  echo "== $p: a new header created earlier on the include path (googlemock/include/gtest/gtest.h)"
  for tool in ccache strata; do
    configure "$p" "$tool" "$a" "$a/shadow-$tool"
    echo "   $tool: $(summary "$(per_tu "$p" "$tool" "$a/shadow-$tool" "$new")")"
  done
  rm -f "$new"
  rmdir "$(dirname "$new")"
}

tu_test() {
  local p=$1 a="$work/$1/a"
  local build="$a/cold-plain-1" cmd
  cmd=$(ninja -C "$build" -t commands | grep -- '-c .*gtest-all\.cc$' | sed -n 1p)
  echo "== $p: HIT latency of one TU: $(basename "${cmd##* }") ($(cd "$build" && bench_time sh -c "$cmd") s plain compile)"
  export CCACHE_DIR="$work/cache/$p-ccache-1" CCACHE_BASEDIR=$work
  export STRATA_CACHE_ROOT="$work/cache/$p-strata-1" STRATA_BASE_DIRS=$work
  local cb sb m_c=() m_s=() round
  cb=$(counters ccache "$CCACHE_DIR")
  sb=$(counters strata "$STRATA_CACHE_ROOT")
  for round in 1 2 3; do
    (cd "$build" && hyperfine -N --style none --warmup 5 --runs 30 --export-json "$work/tu-$round.json" \
      "$CCACHE $cmd" "$S $cmd" >/dev/null)
    m_c+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["median"])' "$work/tu-$round.json")")
    m_s+=("$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][1]["median"])' "$work/tu-$round.json")")
  done
  echo "   counted over the runs: ccache $(hits "$($H diff "$(counters ccache "$CCACHE_DIR")" "$cb")"), strata $(hits "$($H diff "$(counters strata "$STRATA_CACHE_ROOT")" "$sb")")"
  local mc ms
  mc=$($H median "${m_c[@]}")
  ms=$($H median "${m_s[@]}")
  awk -v c="$mc" -v s="$ms" -v rc="${m_c[*]}" -v rs="${m_s[*]}" 'BEGIN {
    printf "   ccache %.2f ms, strata %.2f ms (medians of 3 rounds of 30; rounds ccache %s | strata %s s): strata/ccache %.3f\n", c*1000, s*1000, rc, rs, s/c }'
  unset CCACHE_DIR CCACHE_BASEDIR STRATA_CACHE_ROOT STRATA_BASE_DIRS
}

for p in "${projects[@]}"; do
  case $p in
  zstd | googletest) bench_project "$p" ;;
  *) echo "unknown project $p (zstd | googletest)" >&2; exit 2 ;;
  esac
done
