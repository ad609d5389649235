#!/usr/bin/env bash
# L1 HIT of one large artifact vs `cp` of the same file (docs/performance.md; target: at most 2x cp, under 0.6 s).
#
#   bash scripts/bench/l1-hit.sh [ROUNDS] [MIB] [BEFORE_BINARY]
#
# Defaults: 5 rounds, 300 MiB. Builds the release binary, saves one third-party entry
# holding one MIB-MiB random file, lets its stamps age (2.2 s: younger stamps are not
# remembered), and warms the verification memo with one HIT. Then alternates, ROUNDS
# times, each into an empty output directory, with the cached file in the page cache:
#   memo:   strata action run, a HIT whose memo vouches for the file (copy_file_range,
#           no hashing)
#   full:   the same HIT with the memo deleted first (one pass: copy while hashing)
#   before: (if BEFORE_BINARY is given) that binary's HIT, on its own cache
#   cp:     cp of the cached file
# Prints the CPU model, whether it has SHA extensions, the medians and ratios to cp.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
rounds=${1:-5}
mib=${2:-300}
before=${3:-}

strata=$(bench_strata)
bench_cpu

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-l1-hit-XXXXXX")
trap 'rm -rf "$work"' EXIT
head -c $(( mib * 1024 * 1024 )) /dev/urandom > "$work/big.bin"

# run BINARY CACHE [EVENT_LOG]: one `strata action run` of the action into "$work/out"
# (which the caller emptied: removing 300 MiB is not part of a HIT).
run() {
  "$1" action run --cache-root "$2" --domain third_party --unit big --output-dir "$work/out" \
    --environment-profile bare --event-log "${3:-/dev/null}" \
    -- sh -c 'cp "$0" "$1/big.bin"' "$work/big.bin" "$work/out"
}
run_full() { rm -rf "$work/cache/.local/verify-memo"; run "$strata" "$work/cache" "$work/full.jsonl"; }
status() { rm -rf "$work/out"; run "$@" 2>&1 | grep -o -E '^strata: (HIT|MISS|SAVED)' | tr '\n' ' '; echo; }

echo "save (new):    $(status "$strata" "$work/cache")"
[ -n "$before" ] && echo "save (before): $(status "$before" "$work/cache-before")"
sleep 2.2
echo "warm (new):    $(status "$strata" "$work/cache")"
cached=$(find "$work/cache/actions-v1" -name big.bin -type f)
bench_warm "$cached"
[ -n "$before" ] && bench_warm "$(find "$work/cache-before/actions-v1" -name big.bin -type f)"

memo=() full=() old=() copy=()
for _ in $(seq "$rounds"); do
  rm -rf "$work/out"
  memo+=("$(bench_time run "$strata" "$work/cache" "$work/memo.jsonl")")
  rm -rf "$work/out"
  full+=("$(bench_time run_full)")
  if [ -n "$before" ]; then
    rm -rf "$work/out"
    old+=("$(bench_time run "$before" "$work/cache-before")")
  fi
  rm -f "$work/copy.bin"
  copy+=("$(bench_time cp "$cached" "$work/copy.bin")")
done
# What the HITs hashed (from their events): the memo runs nothing, the full runs everything.
for log in memo full; do
  echo "$log HITs, hashed_bytes: $(grep -o '"hashed_bytes":[0-9]*' "$work/$log.jsonl" | cut -d: -f2 | sort -u | tr '\n' ' ')"
done
# The last HIT must have left the output intact.
cmp "$work/big.bin" "$work/out/big.bin"

report() {
  local label=$1 list=$2 m c
  # shellcheck disable=SC2086
  m=$(bench_median $list)
  # shellcheck disable=SC2086
  c=$(bench_median ${copy[*]})
  awk -v l="$label" -v m="$m" -v c="$c" -v r="$list" \
    'BEGIN { printf "%-28s %6.3f s  = %5.2fx cp   (runs:%s)\n", l, m, m / c, r }'
}
echo "median of $rounds, ${mib} MiB:"
report "HIT, memo vouches" " ${memo[*]}"
report "HIT, full verification" " ${full[*]}"
[ -n "$before" ] && report "HIT, before binary" " ${old[*]}"
report "cp" " ${copy[*]}"
