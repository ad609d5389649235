#!/usr/bin/env bash
# What producer signatures cost (target: under 5 ms per save or restore): `strata snapshot
# save` and `restore` of a small cache to a file:// store, signed (--signing-key) and
# trusted (--trusted-key) against unsigned, measured alternately with hyperfine.
#
#   bash scripts/bench/signing.sh [RUNS]     (default 30 runs each)
#
# A small cache keeps the commands short, so the difference is the signature work itself
# (reading the key file, one Ed25519 signature or verification of the sidecar statement)
# rather than noise from packing. Prints the CPU model, the medians and their differences.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
runs=${1:-30}
strata=$(bench_strata)
bench_cpu
. "$bench_repo/scripts/prereqs.sh"
prereqs_debian hyperfine
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-signing-XXXXXX")
trap 'rm -rf "$work"' EXIT
entry="$work/cache/actions-v1/third_party/u/$(printf '%064d' 1)/artifacts"
mkdir -p "$entry"
head -c 200000 /dev/urandom > "$entry/lib.a"
printf '{}' > "$(dirname "$entry")/manifest.json"
pub=$("$strata" key generate --out "$work/producer.key")
export STRATA_STORE="file://$work/store"
n=0
save_cmd() { # a fresh key each run (a save never overwrites)
  printf '%s' "'$strata' snapshot save --format full --cache-dir '$work/cache' --key k-\$(date +%s%N) $1"
}
touch "$work/cache/.updated"
"$strata" snapshot save --format full --cache-dir "$work/cache" --key fixed --signing-key "$work/producer.key" 2>&1 | grep -q SAVED \
  || { echo "the signed save of key 'fixed' failed" >&2; exit 1; }
hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/save.json" \
  --prepare "touch '$work/cache/.updated'" \
  "bash -c \"$(save_cmd '')\"" "bash -c \"$(save_cmd "--signing-key '$work/producer.key'")\"" >/dev/null
"$strata" snapshot restore --cache-dir "$work/check" --key fixed --trusted-key "$pub" 2>&1 | grep -q RESTORED \
  || { echo "the trusted restore did not restore" >&2; exit 1; }
hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/restore.json" \
  "'$strata' snapshot restore --cache-dir '$work/r1' --key fixed" \
  "'$strata' snapshot restore --cache-dir '$work/r2' --key fixed --trusted-key '$pub'" >/dev/null
report() {
  python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
a, b = (x["median"] * 1000 for x in r)
print(f"{sys.argv[2]:<8} unsigned {a:7.2f} ms   signed/trusted {b:7.2f} ms   difference {b - a:+6.2f} ms (target < 5 ms)")
PY
}
report "$work/save.json" save
report "$work/restore.json" restore
