#!/usr/bin/env bash
# Benchmark: snapshot pack+compress and extract of a ~300 MB, ~2,000-file build-cache-like
# tree, strata vs `tar | zstd -3 -T0` and `zstd -d | tar -x`.
#
#   bash scripts/bench/snapshot-pack.sh [RUNS]      (default 5 runs each, alternated)
#   BENCH_ONLY=extract bash scripts/bench/snapshot-pack.sh 9   (extraction only)
#   BENCH_CPUS="1 2 4" bash scripts/bench/snapshot-pack.sh     (CPU counts; default "1 2")
#
# Worker threads: strata starts one zstd worker and one file writer per CPU it may run on
# (std::thread::available_parallelism, which follows the CPU affinity), and the peer's
# `zstd -T0` and `tar` share the same CPUs. So each measurement is taken once per CPU count
# in BENCH_CPUS (counts above nproc are skipped), with this shell and everything it starts
# pinned to CPUs 0..n-1 (`taskset`): the ratios at 1 and 2 worker threads on a 2-core
# machine, and the trend on a larger runner. The last lines repeat the ratios per count.
#
# The tree: ~2,000 ELF binaries and libraries picked evenly (by sorted path) from /usr/lib,
# /usr/libexec and /usr/bin files of 24 KiB to 3 MiB, laid out like an L1 cache
# (actions-v1/third_party/<unit>/<key>/artifacts/<file>). Inputs are read once before
# every pack run; every extraction goes into a new directory (all deleted at the end), after
# a `sync`.
# Prints speed-ups (peer median / strata median); strata runs at its default zstd level 1
# and, for comparison at equal level, at level 3.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
runs=${1:-5}
work=${BENCH_DIR:-${TMPDIR:-/tmp}/strata-bench-pack}
strata=$(bench_strata)
bench_cpu
command -v zstd >/dev/null || { echo "needs zstd (apt-get install zstd)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "needs taskset (apt-get install util-linux)" >&2; exit 1; }
all_cpus=$(taskset -pc $$ | sed 's/.*: //')
cpu_counts=()
for n in ${BENCH_CPUS:-1 2}; do
  [ "$n" -ge 1 ] && [ "$n" -le "$(nproc --all)" ] && cpu_counts+=("$n") || echo "skipping $n CPUs (this machine has $(nproc --all))"
done

rm -rf "$work"; mkdir -p "$work/cache/actions-v1" "$work/out"
mapfile -t candidates < <(find /usr/lib /usr/libexec /usr/bin -type f -size +24k -size -3M 2>/dev/null | LC_ALL=C sort)
count=${#candidates[@]}
want=2000
[ "$count" -ge "$want" ] || { echo "only $count candidate files" >&2; exit 1; }
for ((i = 0; i < want; i++)); do
  src=${candidates[$((i * count / want))]}
  dir="$work/cache/actions-v1/third_party/unit$((i % 40))/$(printf '%064x' $((i / 40)))/artifacts"
  mkdir -p "$dir"
  cp "$src" "$dir/$i-$(basename "$src")"
done
bytes=$(du -sb "$work/cache/actions-v1" | cut -f1)
files=$(find "$work/cache/actions-v1" -type f | wc -l)
echo "data set: $files files, $((bytes / 1000000)) MB in $work/cache"

pack_strata() { "$strata" snapshot pack --cache-dir "$work/cache" --output "$work/out/strata.tzst" "$@"; }
pack_peer() { tar -C "$work/cache" -cf - actions-v1 | zstd -3 -T0 -q -f -o "$work/out/peer.tzst"; }
unpack_strata() { "$strata" snapshot unpack --input "$work/out/strata.tzst" --dest "$work/x/s$1"; }
unpack_peer() { mkdir -p "$work/x/p$1" && zstd -d -c -q "$work/out/peer.tzst" | tar -x -C "$work/x/p$1"; }
speedup() {
  # shellcheck disable=SC2086
  awk -v s="$(bench_median $1)" -v p="$(bench_median $2)" 'BEGIN { printf "%.2f", p / s }'
}
mkdir -p "$work/x"
summary=""

# measure N: every measurement with this shell (and so every command) pinned to N CPUs.
measure() {
  local n=$1 s p s3 r
  taskset -pc "0-$((n - 1))" $$ >/dev/null
  echo "--- $n CPU(s): strata runs $n zstd worker(s) and $(( n < 4 ? n : 4 )) file writer(s)"
  local line="$n CPU(s):"
  if [ "${BENCH_ONLY:-}" != extract ]; then
    # Warm-up (not timed).
    bench_warm "$work/cache"; pack_strata >/dev/null 2>&1; pack_peer
    s=""; p=""; s3=""
    for ((r = 1; r <= runs; r++)); do
      bench_warm "$work/cache"; s+=" $(bench_time pack_strata)"
      bench_warm "$work/cache"; p+=" $(bench_time pack_peer)"
      bench_warm "$work/cache"; s3+=" $(bench_time pack_strata --level 3)"
    done
    bench_report "pack (strata zstd-1 vs tar|zstd -3)" "$s" "$p"
    bench_report "pack (strata zstd-3 vs tar|zstd -3)" "$s3" "$p"
    line+=" pack $(speedup "$s" "$p")x"
  fi
  # Every extraction into a new directory; before each: the object in the page cache, and
  # no dirty pages of the run before (`sync`, untimed), so that neither side pays for the
  # other's writeback.
  [ -f "$work/out/strata.tzst" ] || pack_strata >/dev/null 2>&1
  [ -f "$work/out/peer.tzst" ] || pack_peer
  cat "$work/out/strata.tzst" "$work/out/peer.tzst" >/dev/null
  unpack_strata "w$n" >/dev/null 2>&1; unpack_peer "w$n"
  s=""; p=""
  for ((r = 1; r <= runs; r++)); do
    cat "$work/out/strata.tzst" >/dev/null; sync; s+=" $(bench_time unpack_strata "$n-$r")"
    cat "$work/out/peer.tzst" >/dev/null; sync; p+=" $(bench_time unpack_peer "$n-$r")"
  done
  bench_report "extract (strata vs zstd -d|tar -x)" "$s" "$p"
  line+=" extract $(speedup "$s" "$p")x"
  summary+="$line"$'\n'
}

for n in "${cpu_counts[@]}"; do measure "$n"; done
taskset -pc "$all_cpus" $$ >/dev/null
pack_strata >/dev/null 2>&1; pack_peer
strata_size=$(stat -c %s "$work/out/strata.tzst"); peer_size=$(stat -c %s "$work/out/peer.tzst")
echo "sizes: strata level 1 $strata_size B, zstd -3 $peer_size B, ratio strata/zstd-3 =" \
  "$(awk -v s="$strata_size" -v p="$peer_size" 'BEGIN { printf "%.3f", s / p }')"
echo "speed-up over tar|zstd (peer median / strata median; target on 2 cores: pack >= 1.0x, extract >= 1.0x):"
printf '%s' "$summary"
[ -n "${KEEP:-}" ] || rm -rf "$work"
