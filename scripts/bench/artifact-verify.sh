#!/usr/bin/env bash
# Artifact store HIT verification vs openssl and b3sum, and the per-handle verification memo
# (docs/performance.md "## Artifact store"). Targets: strata >= 3x openssl and
# >= 0.8x b3sum over the same files.
#
#   bash scripts/bench/artifact-verify.sh [ROUNDS] [TOTAL_MIB] [FILES]
#
# Defaults: 7 rounds, 1024 MiB in 500 files. Builds the release binary, publishes one
# artifact of FILES random files, then alternates, ROUNDS times, in one loop:
#   peer-1: openssl dgst -sha256 over every payload file (one process, one core)
#   peer-2: the same split over two openssl processes (xargs -P2, both cores)
#   peer-3: b3sum over every payload file (BLAKE3, its default: all cores; `cargo install
#           b3sum`; skipped with a note if it is not installed)
#   strata: strata artifact lookup (a full HIT verification: walk, manifest, BLAKE3 of
#           every byte, rayon over both cores; the artifact is published with the default
#           --digest, or with STRATA_DIGEST=sha256 if that is set)
# Each command is preceded by reading the files once (cat > /dev/null) so all three hash
# from the page cache (BENCHMARKING.md: ~1.2 GB stays cached; 1 GiB fits). Reports the
# median seconds of each and the ratios of medians (peer median / strata median: > 1
# means strata is faster). Then runs `strata artifact verify --repeat 5` to show that
# re-verifying with one handle does not re-hash unchanged bytes.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$repo/scripts/bench/lib.sh"
bench_cpu
rounds=${1:-7}
total_mib=${2:-1024}
files=${3:-500}

cargo build --release --quiet --manifest-path "$repo/Cargo.toml"
strata="$repo/target/release/strata"
command -v openssl >/dev/null || { echo "openssl is required" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT
src="$work/src"
mkdir -p "$src"
per_file=$(( total_mib * 1024 * 1024 / files ))
echo "generating $files files of $per_file bytes in $src"
head -c $(( per_file * files )) /dev/urandom | split -d -a 4 -b "$per_file" - "$src/obj_"

hex() { printf "%064d" 0 | tr 0 "$1"; }
flags=(--root "$work/cache" --env "cc=$(hex a)" --source "$(hex b)" --specialization "$(hex c)"
       --require obj_0000)
"$strata" artifact get-or-build "${flags[@]}" --private-root "$work/private" -- \
  sh -c 'cp "$0"/obj_* "$STRATA_ARTIFACT_OUT"/' "$src" >/dev/null
rm -rf "$src" "$work/private"
slot=$("$strata" artifact lookup --json "${flags[@]}" | sed -n 's/.*"dir":"\([^"]*\)".*/\1/p')
[ -d "$slot" ] || { echo "no slot" >&2; exit 1; }
echo "slot: $slot ($(du -sh "$slot" | cut -f1))"

warm() { cat "$slot"/obj_* > /dev/null; }
now() { date +%s.%N; }
time_cmd() { local t0 t1; warm; t0=$(now); "$@" > /dev/null; t1=$(now); echo "$t1 - $t0" | bc -l; }
peer1() { openssl dgst -sha256 "$slot"/obj_*; }
peer2() { printf '%s\0' "$slot"/obj_* | xargs -0 -P2 -n $(( (files + 1) / 2 )) openssl dgst -sha256; }
peer3() { b3sum "$slot"/obj_*; }
have_b3sum=0; command -v b3sum >/dev/null && have_b3sum=1
[ "$have_b3sum" = 1 ] || echo "b3sum not found (cargo install b3sum): peer-3 skipped"
ours() { "$strata" artifact lookup "${flags[@]}"; }

# Warm-up (first touches are slow, BENCHMARKING.md).
time_cmd peer1 >/dev/null; time_cmd ours >/dev/null

declare -a t_p1 t_p2 t_p3 t_s
for i in $(seq 1 "$rounds"); do
  t_p1+=("$(time_cmd peer1)")
  t_p2+=("$(time_cmd peer2)")
  if [ "$have_b3sum" = 1 ]; then t_p3+=("$(time_cmd peer3)"); else t_p3+=(0); fi
  t_s+=("$(time_cmd ours)")
  printf 'round %d: openssl %.3fs  openssl -P2 %.3fs  b3sum %.3fs  strata %.3fs\n' "$i" "${t_p1[-1]}" "${t_p2[-1]}" "${t_p3[-1]}" "${t_s[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
m1=$(median "${t_p1[@]}"); m2=$(median "${t_p2[@]}"); m3=$(median "${t_p3[@]}"); ms=$(median "${t_s[@]}")
printf '\nmedians over %d rounds: openssl %.3fs, openssl -P2 %.3fs, b3sum %.3fs, strata lookup %.3fs\n' "$rounds" "$m1" "$m2" "$m3" "$ms"
printf 'ratio openssl/strata = %.2f (target >= 3), openssl-P2/strata = %.2f, b3sum/strata = %.2f (target >= 0.8)\n' \
  "$(echo "$m1 / $ms" | bc -l)" "$(echo "$m2 / $ms" | bc -l)" "$(echo "$m3 / $ms" | bc -l)"
printf 'strata throughput: %.0f MiB/s\n\n' "$(echo "$total_mib / $ms" | bc -l)"

echo "one handle, five passes (the first hashes everything; later passes only stat):"
warm
"$strata" artifact verify --root "$work/cache" --env "cc=$(hex a)" --source "$(hex b)" \
  --specialization "$(hex c)" --require obj_0000 --repeat 5
