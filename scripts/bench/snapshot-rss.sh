#!/usr/bin/env bash
# Benchmark: peak RSS of `strata snapshot save` and `restore` of a 1 GiB snapshot against
# s3s-fs on 127.0.0.1, measured with /usr/bin/time -v (target: <= 64 MiB each).
#
#   bash scripts/bench/snapshot-rss.sh
#
# The cache holds 64 files of 16 MiB of random data (the object is ~1 GiB).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_cpu
work=${BENCH_DIR:-${TMPDIR:-/tmp}/strata-bench-rss}
strata=$(bench_strata)
[ -x /usr/bin/time ] || { echo "needs GNU time (apt-get install time)" >&2; exit 1; }
export STRATA_S3_TEST_DIR="$work/server"
rm -rf "$work"; mkdir -p "$work/cache/actions-v1/objects"
trap '"$bench_repo/scripts/s3-test-server.sh" stop >/dev/null 2>&1 || true' EXIT
eval "$("$bench_repo/scripts/s3-test-server.sh" start)"
store="s3://$STRATA_TEST_S3_BUCKET/rss?endpoint=$STRATA_TEST_S3_ENDPOINT"
for i in $(seq 1 64); do
  head -c $((16 * 1024 * 1024)) /dev/urandom >"$work/cache/actions-v1/objects/part-$i.o"
done
touch "$work/cache/.updated"

peak() { # label command...
  local label=$1; shift
  /usr/bin/time -v "$@" >"$work/out.txt" 2>"$work/time.txt"
  local kb seconds
  kb=$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$work/time.txt")
  seconds=$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time.txt")
  printf '%-8s peak RSS %6.1f MiB  (wall %s)  %s\n' "$label" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$seconds" \
    "$(grep -o 'bytes=[0-9]*' "$work/time.txt" | head -n 1)"
}
peak save "$strata" snapshot save --format full --cache-dir "$work/cache" --key rss-1 --store "$store"
peak restore "$strata" snapshot restore --cache-dir "$work/restored/cache" --key rss-1 --store "$store"
rm -rf "$work/cache" "$work/restored"
