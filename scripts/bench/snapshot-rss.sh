#!/usr/bin/env bash
# Benchmark: peak RSS of `strata snapshot save` and `restore` of a 1 GiB cache against
# s3s-fs on 127.0.0.1, in both snapshot formats, measured with /usr/bin/time -v (target:
# <= 64 MiB each).
#
#   bash scripts/bench/snapshot-rss.sh
#
# The cache holds 1 GiB of random data in L1 entries (actions-v1/third_party/<unit>/<key>/
# with manifest.json and artifacts/): 32 entries of one 16 MiB file (each an entry object
# of its own in the index format) and 512 entries of one 1 MiB file (packed together).
# Every format saves the same cache under its own key and restores it into a new directory.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_cpu
work=${BENCH_DIR:-${TMPDIR:-/tmp}/strata-bench-rss}
strata=$(bench_strata)
[ -x /usr/bin/time ] || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }
export STRATA_S3_TEST_DIR="$work/server"
rm -rf "$work"; mkdir -p "$work/cache/actions-v1"
trap '"$bench_repo/scripts/s3-test-server.sh" stop >/dev/null 2>&1 || true' EXIT
s3_env=$("$bench_repo/scripts/s3-test-server.sh" start) || exit 1
eval "$s3_env"
store="s3://$STRATA_TEST_S3_BUCKET/rss?endpoint=$STRATA_TEST_S3_ENDPOINT"
entry() { # index MiB
  local dir
  dir="$work/cache/actions-v1/third_party/unit$(($1 % 16))/$(printf '%064x' "$1")"
  mkdir -p "$dir/artifacts"
  printf '{"entry":%d}' "$1" >"$dir/manifest.json"
  head -c $(($2 * 1024 * 1024)) /dev/urandom >"$dir/artifacts/part.o"
}
for i in $(seq 1 32); do entry "$i" 16; done
for i in $(seq 33 544); do entry "$i" 1; done
touch "$work/cache/.updated"
echo "cache: $(find "$work/cache/actions-v1" -type f -name part.o | wc -l) entries, $(du -sb "$work/cache/actions-v1" | cut -f1) bytes"

peak() { # label command...
  local label=$1; shift
  /usr/bin/time -v "$@" >"$work/out.txt" 2>"$work/time.txt"
  local kb seconds
  kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$work/time.txt")
  seconds=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.txt")
  printf '%-14s peak RSS %6.1f MiB  (wall %s)  %s\n' "$label" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$seconds" \
    "$(grep -o 'bytes=[0-9]*' "$work/time.txt" | head -n 1)"
}
for format in full index; do
  peak "save $format" "$strata" snapshot save --format "$format" --cache-dir "$work/cache" --key "rss-$format" --store "$store"
  peak "restore $format" "$strata" snapshot restore --cache-dir "$work/restored-$format/cache" --key "rss-$format" --store "$store"
  [ "$(find "$work/restored-$format/cache/actions-v1" -type f -name part.o | wc -l)" = 544 ] ||
    { echo "the $format restore is not the cache" >&2; exit 1; }
  rm -rf "$work/restored-$format"
done
rm -rf "$work/cache"
