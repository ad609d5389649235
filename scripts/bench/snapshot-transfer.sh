#!/usr/bin/env bash
# Benchmark: upload and download of a 256 MiB snapshot to s3s-fs on 127.0.0.1, strata vs
# `aws s3 cp` (awscli from PyPI, installed here when missing) against the same server.
#
#   bash scripts/bench/snapshot-transfer.sh [RUNS]      (default 5 runs each, alternated)
#
# The cache holds 256 MiB of random data, so its snapshot object is ~256 MiB (zstd passes
# incompressible blocks through). Compared, each as one command's wall time:
#   upload:   strata snapshot save (pack + hash + upload + sidecar) vs aws s3 cp FILE s3://…
#   download: strata snapshot restore (download + SHA-256 check + unpack + swap) vs
#             aws s3 cp s3://… FILE
# strata's own transfer phases (from --json) are printed too. Both use path-style
# addressing, 8 MiB parts and their default concurrency (strata 8, aws 10).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_cpu
runs=${1:-5}
work=${BENCH_DIR:-${TMPDIR:-/tmp}/strata-bench-transfer}
strata=$(bench_strata)
if ! command -v aws >/dev/null; then
  # The peer, from PyPI, in a venv of its own (stock Debian refuses PyPI packages in the system Python).
  . "$bench_repo/scripts/prereqs.sh"
  prereqs_debian python3 python3-venv
  [ -x "$bench_repo/target/awscli-venv/bin/aws" ] || {
    python3 -m venv "$bench_repo/target/awscli-venv" &&
      "$bench_repo/target/awscli-venv/bin/python" -m pip install --quiet --disable-pip-version-check awscli
  }
  export PATH="$bench_repo/target/awscli-venv/bin:$PATH"
fi
export STRATA_S3_TEST_DIR="$work/server"
rm -rf "$work"; mkdir -p "$work/cache/actions-v1/objects" "$work/dl"
trap '"$bench_repo/scripts/s3-test-server.sh" stop >/dev/null 2>&1 || true' EXIT
s3_env=$("$bench_repo/scripts/s3-test-server.sh" start) || exit 1
eval "$s3_env"
export AWS_CONFIG_FILE="$work/aws-config" AWS_DEFAULT_REGION=us-east-1
printf '[default]\ns3 =\n  addressing_style = path\n  multipart_chunksize = 8MB\n' >"$AWS_CONFIG_FILE"
store="s3://$STRATA_TEST_S3_BUCKET/bench?endpoint=$STRATA_TEST_S3_ENDPOINT&addressing=path"
aws_s3() { aws --endpoint-url "$STRATA_TEST_S3_ENDPOINT" s3 "$@" --only-show-errors; }

for i in $(seq 1 16); do
  head -c $((16 * 1024 * 1024)) /dev/urandom >"$work/cache/actions-v1/objects/part-$i.o"
done
touch "$work/cache/.updated"
"$strata" snapshot pack --cache-dir "$work/cache" --output "$work/object" >/dev/null 2>&1
echo "snapshot object: $(stat -c %s "$work/object") bytes"

save_strata() { "$strata" snapshot save --format full --cache-dir "$work/cache" --key "strata-up-$1" --store "$store" --json >"$work/save-$1.json"; }
upload_peer() { aws_s3 cp "$work/object" "s3://$STRATA_TEST_S3_BUCKET/bench/aws-up-$1"; }
save_strata warm; upload_peer warm
s=""; p=""; phase=""
for ((r = 1; r <= runs; r++)); do
  bench_warm "$work/cache"; s+=" $(bench_time save_strata "$r")"
  phase+=" $(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["upload_seconds"])' "$work/save-$r.json")"
  cat "$work/object" >/dev/null; p+=" $(bench_time upload_peer "$r")"
done
bench_report "upload (strata save vs aws s3 cp)" "$s" "$p"
bench_report "upload (strata upload phase only)" "$phase" "$p"

restore_strata() { "$strata" snapshot restore --cache-dir "$work/dl/s$1/cache" --key strata-up-1 --store "$store" --json >"$work/restore-$1.json"; }
download_peer() { aws_s3 cp "s3://$STRATA_TEST_S3_BUCKET/bench/aws-up-1" "$work/dl/p$1"; }
restore_strata warm; download_peer warm
s=""; p=""; phase=""
for ((r = 1; r <= runs; r++)); do
  s+=" $(bench_time restore_strata "$r")"
  phase+=" $(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["download_seconds"])' "$work/restore-$r.json")"
  p+=" $(bench_time download_peer "$r")"
done
bench_report "download (strata restore vs aws cp)" "$s" "$p"
bench_report "download (strata download phase)" "$phase" "$p"
rm -rf "$work/dl" "$work/cache" "$work/object"
