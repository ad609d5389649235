#!/usr/bin/env bash
# Remote entry tier: what fetching one entry from s3s-fs on loopback adds to a local HIT
# (docs/remote-tier.md; issue 12 target: <= 30 ms added).
#
#   bash scripts/bench/remote-tier.sh [ROUNDS] [ENTRY_KIB] [FILES]
#
# Defaults: 15 rounds, one entry of 1024 KiB in 16 random files. Starts a throwaway s3s-fs
# (scripts/s3-test-server.sh, its own state directory), lets a producer `strata action run
# --remote-write` build and upload the entry, then alternates, ROUNDS times:
#   local:  `strata action run` on the producer's cache (a local HIT), outputs removed first;
#   remote: the same on a new empty cache with --remote-store (a remote HIT: one GET of the
#           ref, one ranged GET of the entry object, verify, install, then the HIT).
# Alternated with both: curl fetching the same ref and entry object over one connection with
# the same headers (the peer: what the two GETs cost any client of this server). Prints the CPU, the median
# wall time of each (whole process: start, key, lookup, restore), the difference
# remote - local in ms, the ratio remote / local, and what strata adds beyond the peer.
# STRATA_BIN=path uses that binary instead of building the release one.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$repo/scripts/bench/lib.sh"
bench_cpu
rounds=${1:-15}
entry_kib=${2:-1024}
files=${3:-16}
strata=$(realpath "${STRATA_BIN:-$(bench_strata)}")

work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-remote-XXXXXX")
export STRATA_S3_TEST_DIR="$work/s3"
cleanup() { bash "$repo/scripts/s3-test-server.sh" stop >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
s3_env=$(bash "$repo/scripts/s3-test-server.sh" start) || exit 1
eval "$s3_env"
url="s3://$STRATA_TEST_S3_BUCKET/bench?endpoint=$STRATA_TEST_S3_ENDPOINT&region=us-east-1"

src="$work/src"
mkdir -p "$src"
per_file=$(( entry_kib * 1024 / files ))
head -c $(( per_file * files )) /dev/urandom | split -d -a 3 -b "$per_file" - "$src/part_"
cd "$work"
run() { # run CACHE [extra flags...]
  local cache=$1; shift
  rm -rf "$work/out"
  "$strata" action run --cache-root "$cache" --domain third_party --unit bench \
    --output-dir "$work/out" --environment-profile bare --prepared-input "$src" "$@" \
    -- sh -c 'mkdir -p out && cp src/part_* out/'
}
run "$work/producer" --remote-store "$url" --remote-write 2>&1 | grep -E "SAVED|WARNING"
echo "entry: $files files, $(( per_file * files )) bytes"

# The peer: curl (SigV4) fetching the same two objects the tier reads, the ref and the
# entry object, on one connection, the second with `Connection: close` as the tier sends it
# (get_range_last): what any HTTP/1.1 client pays this server for them. Without that header
# s3s-fs (Nagle on) holds the answer's tail until the client's delayed ACK, up to 40 ms.
ref_file=$(cd "$STRATA_S3_TEST_DIR/data" && find . -path '*~refs/*' -type f | sed -n 1p)
obj_file=$(cd "$STRATA_S3_TEST_DIR/data" && find . -path '*~entries/*' -type f | sed -n 1p)
sig=(--http1.1 --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
  -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
fetch_peer() {
  curl -sf -o /dev/null "${sig[@]}" "$STRATA_TEST_S3_ENDPOINT/${ref_file#./}" \
    --next -sf -o /dev/null "${sig[@]}" -H "Connection: close" "$STRATA_TEST_S3_ENDPOINT/${obj_file#./}"
}
peer=true
command -v curl >/dev/null && curl --help all 2>/dev/null | grep -q -- --aws-sigv4 && fetch_peer || peer=false

ms() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.1f\n", (e - s) * 1000 }'; }
local_ms=(); remote_ms=(); peer_ms=()
for i in $(seq 1 "$rounds"); do
  if $peer; then t0=$(date +%s.%N); fetch_peer; t1=$(date +%s.%N); peer_ms+=("$(ms "$t0" "$t1")"); fi
  t0=$(date +%s.%N); run "$work/producer" 2>"$work/local.err"; t1=$(date +%s.%N)
  grep -q "strata: HIT" "$work/local.err" || { cat "$work/local.err"; exit 1; }
  local_ms+=("$(ms "$t0" "$t1")")
  rm -rf "$work/consumer"
  t0=$(date +%s.%N); run "$work/consumer" --remote-store "$url" 2>"$work/remote.err"; t1=$(date +%s.%N)
  grep -q "strata: HIT" "$work/remote.err" || { cat "$work/remote.err"; exit 1; }
  remote_ms+=("$(ms "$t0" "$t1")")
done
l=$(bench_median "${local_ms[@]}"); r=$(bench_median "${remote_ms[@]}")
echo "local HIT:  median $l ms  (${local_ms[*]})"
echo "remote HIT: median $r ms  (${remote_ms[*]})"
awk -v l="$l" -v r="$r" 'BEGIN { printf "remote - local: %.1f ms added (target <= 30 ms); remote / local: %.2fx\n", r - l, r / l }'
if $peer; then
  p=$(bench_median "${peer_ms[@]}")
  echo "curl, the same ref + entry object on one connection, the same headers: median $p ms  (${peer_ms[*]})"
  awk -v l="$l" -v r="$r" -v p="$p" 'BEGIN { printf "added beyond what the two GETs take any client: %.1f ms\n", r - l - p }'
else
  echo "curl with --aws-sigv4 not found: no peer fetch measured"
fi
