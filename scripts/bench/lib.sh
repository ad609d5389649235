# Shared helpers of the snapshot benchmarks (sourced). See BENCHMARKING notes in
# docs/performance.md: alternate peer and strata runs, report ratios of medians.

bench_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Prints the CPU model, core count and whether the CPU has SHA extensions (sha_ni): targets
# must hold on both kinds of machine (BENCHMARKING.md), so every benchmark says which it ran on.
bench_cpu() {
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores," \
    "sha_ni: $(grep -q -w sha_ni /proc/cpuinfo && echo yes || echo no)"
}

# Builds strata in release mode and prints the binary path.
# BENCH_STRATA_BINARY=<path> measures that binary instead (an older build, for a
# before/after comparison in the same period).
bench_strata() {
  if [ -n "${BENCH_STRATA_BINARY:-}" ]; then
    # Absolute: the scripts run it from other directories (a build's, ninja's).
    realpath "$BENCH_STRATA_BINARY"
    return
  fi
  cargo build --release --locked --quiet --manifest-path "$bench_repo/Cargo.toml" --bin strata >&2
  echo "$bench_repo/target/release/strata"
}

# Seconds (float) taken by "$@"; stdout/stderr of the command go to /dev/null unless
# BENCH_VERBOSE=1.
bench_time() {
  local start end
  start=$(date +%s.%N)
  if [ "${BENCH_VERBOSE:-0}" = 1 ]; then "$@"; else "$@" >/dev/null 2>&1; fi
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }'
}

# Median of the numbers given as arguments.
bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Prints "label: strata X s (median of N), peer Y s, ratio peer/strata = R" and the runs.
bench_report() {
  local label=$1 strata_list=$2 peer_list=$3 strata_median peer_median
  # shellcheck disable=SC2086
  strata_median=$(bench_median $strata_list)
  # shellcheck disable=SC2086
  peer_median=$(bench_median $peer_list)
  awk -v l="$label" -v s="$strata_median" -v p="$peer_median" -v sl="$strata_list" -v pl="$peer_list" \
    'BEGIN { printf "%-34s strata %6.3f s  peer %6.3f s  speed-up %.2fx   (strata:%s | peer:%s)\n", l, s, p, p / s, sl, pl }'
}


# Reads every file under the given paths once (warms the page cache before a run).
bench_warm() {
  find "$@" -type f -print0 | xargs -0 cat >/dev/null
}

# Writes FILE, a CMAKE_PROJECT_INCLUDE that adds the compile options strata_enable_launcher()
# adds (strata_prefix_map_options() of cmake/strata.cmake) and nothing else: the plain build
# with strata's flags (`plain-maps`). Usage: bench_maps_cmake FILE
bench_maps_cmake() {
  cat >"$1" <<CMAKE
include("$bench_repo/cmake/strata.cmake")
strata_prefix_map_options(_strata_bench_maps)
add_compile_options(\${_strata_bench_maps})
CMAKE
}

# The step before a timed cold build: `cmake ARGS...` with its output in LOG (its last lines
# shown and the script ended when it fails), the page cache warmed with the checkout CK, two
# seconds for the machine to settle. Usage: bench_configure LOG CK ARGS...
bench_configure() {
  local log=$1 ck=$2
  shift 2
  cmake "$@" >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    exit 1
  }
  bench_warm "$ck" >/dev/null 2>&1 || true
  sleep 2
}
