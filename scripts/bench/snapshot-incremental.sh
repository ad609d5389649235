#!/usr/bin/env bash
# Benchmark of index snapshots and the remote entry tier against s3s-fs on 127.0.0.1
# (issue 12 "Done when"; docs/performance.md "Incremental snapshots and the remote tier").
#
#   bash scripts/bench/snapshot-incremental.sh [RUNS]     (default 3 rounds, orders alternated)
#
# Before every timed save and restore, `sync` writes back what earlier steps left dirty
# (not timed); no tree is deleted before the end (see
# the rounds). Needs about 4 GB of disk per round.
# Data: a generated L1 cache of 2,000 entries, ~0.98 GB (scripts/bench/incremental_helper.py:
# 1 % big entries of 5-20 MB, the rest 1-2 files of 50-430 KB; 80 % slices of real object
# files, 20 % random bytes; zstd -3 ratio ~2.9). No build runs: the snapshot layer needs only
# entry directories holding manifest.json. Every round, in a fresh store prefix per format:
#   a. first save of the whole cache: --format full vs --format index (order alternates)
#   d. a fresh runner restores it all: full-format restore vs index restore (order alternates),
#      each into a new directory
#   b. 40 entries (2 %) of the index-restored cache change (new keys, new manifest.json, one
#      artifact rewritten); index save with the restored index as parent: bytes of the new
#      objects in the bucket (read from s3s-fs's data directory) and time
#   c. the full-format-restored cache (it holds 1,960 of the new snapshot's 2,000 entries)
#      restores the new index snapshot through a counting TCP proxy: bytes sent to strata
#      (HTTP responses, headers included) and time
#   e. once, after the rounds: `strata action run` of a small compile, a local HIT vs a HIT
#      from the remote tier into an empty cache (alternated, 11 each)
# Figures: medians; ratios of medians. Environment: STRATA_BIN (a strata binary to use instead
# of building target/release/strata), BENCH_DIR (work directory), BENCH_ENTRIES (default 2000).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_cpu
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
runs=${1:-3}
entries=${BENCH_ENTRIES:-2000}
changes=$((entries / 50))
work=${BENCH_DIR:-${TMPDIR:-/tmp}/strata-bench-incremental}
helper="$bench_repo/scripts/bench/incremental_helper.py"
strata=${STRATA_BIN:-$(bench_strata)}
"$strata" --version

export STRATA_S3_TEST_DIR="$work/server"
rm -rf "$work"; mkdir -p "$work/json"
proxy_pid=""
cleanup() {
  [ -z "$proxy_pid" ] || kill "$proxy_pid" 2>/dev/null || true
  "$bench_repo/scripts/s3-test-server.sh" stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
s3_env=$("$bench_repo/scripts/s3-test-server.sh" start) || exit 1
eval "$s3_env"
bucket_dir="$STRATA_S3_TEST_DIR/data/$STRATA_TEST_S3_BUCKET"
port=${STRATA_TEST_S3_ENDPOINT##*:}
store() { echo "s3://$STRATA_TEST_S3_BUCKET/$1?endpoint=${2:-$STRATA_TEST_S3_ENDPOINT}&addressing=path"; }

# --- data ---------------------------------------------------------------------------------
# Compressible content: real object files of this repository's debug build (built if absent).
if [ "$(find "$bench_repo/target/debug" -name '*.o' -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')" -lt 200000000 ]; then
  cargo build --locked --quiet --manifest-path "$bench_repo/Cargo.toml" >&2
fi
python3 "$helper" pool "$work/pool.bin" 200000000 "$bench_repo/target/debug"
cache="$work/cache"
python3 "$helper" generate "$cache" "$work/pool.bin" "$entries" 1
cache_bytes=$(find "$cache/actions-v1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
cache_files=$(find "$cache/actions-v1" -type f | wc -l)
echo "cache: $entries entries, $cache_files files, $cache_bytes bytes"

# --- helpers ------------------------------------------------------------------------------
# "<path> <size>" of every object file under a store prefix in s3s-fs's data directory.
store_files() { (cd "$bucket_dir" && find "$1" -type f -printf '%p %s\n' 2>/dev/null | sort) || true; }
# Bytes of the objects listed in file $2 and not in $1 (new or changed objects).
new_bytes() { comm -13 "$1" "$2" | awk '{ s += $NF } END { print s + 0 }'; }
# The first of the given top-level fields present in a JSON file ("-" if none).
jfield() {
  python3 - "$@" <<'EOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception:
    print("-"); sys.exit()
def find(v, k):
    if isinstance(v, dict):
        if k in v: return v[k]
        for x in v.values():
            r = find(x, k)
            if r is not None: return r
    return None
for k in sys.argv[2:]:
    r = find(v, k)
    if r is not None:
        print(r); break
else:
    print("-")
EOF
}
entry_count() { find "$1/actions-v1" -mindepth 3 -maxdepth 3 -type d | wc -l; }
tree_bytes() { find "$1/actions-v1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
# Fails the benchmark when a command's JSON does not report the expected status.
expect_status() {
  local got; got=$(jfield "$1" status)
  [ "$got" = "$2" ] || { echo "unexpected status '$got' (expected $2) in $1:" >&2; cat "$1" >&2; exit 1; }
}

save() { # prefix key format dir tag
  "$strata" snapshot save --cache-dir "$4" --key "$2" --store "$(store "$1")" --format "$3" --json \
    >"$work/json/save-$5.json" 2>"$work/json/save-$5.err"
}
restore() { # prefix key dir tag [endpoint]
  "$strata" snapshot restore --cache-dir "$3" --key "$2" --store "$(store "$1" "${5:-}")" --json \
    >"$work/json/restore-$4.json" 2>"$work/json/restore-$4.err"
}

proxy_start() { # sets proxy_pid and proxy_endpoint
  rm -f "$work/proxy.port" "$work/proxy.stats"
  python3 "$helper" proxy "$work/proxy.port" "$work/proxy.stats" "$port" >"$work/proxy.log" 2>&1 &
  proxy_pid=$!
  for _ in $(seq 1 100); do [ -s "$work/proxy.port" ] && break; sleep 0.05; done
  proxy_endpoint="http://127.0.0.1:$(cat "$work/proxy.port")"
}
proxy_stop() { # prints "<bytes to server> <bytes to client>"
  kill -TERM "$proxy_pid"; wait "$proxy_pid" || true; proxy_pid=""
  cat "$work/proxy.stats"
}

# --- rounds -------------------------------------------------------------------------------
K0=bench-incr-base K1=bench-incr-next
t_full=""; t_idx=""; b_full=""; b_idx=""; t_rfull=""; t_ridx=""; t_inc=""; b_inc=""; t_part=""
b_part=""; b_changed=""; inc_counts=""; part_counts=""
for ((r = 1; r <= runs; r++)); do
  echo "round $r"
  f="full-$r" i="index-$r"
  if ((r % 2)); then order="full index" reverse="index full"; else order="index full" reverse="full index"; fi
  # a. first save of the whole cache, full vs index, into fresh prefixes.
  for fmt in $order; do
    bench_warm "$cache"
    t=$(sync; bench_time save "$fmt-$r" "$K0" "$fmt" "$cache" "$fmt-$r")
    expect_status "$work/json/save-$fmt-$r.json" saved
    if [ "$fmt" = full ]; then t_full+=" $t"; else t_idx+=" $t"; fi
  done
  b_full+=" $(store_files "$f" | awk '{ s += $NF } END { print s }')"
  b_idx+=" $(store_files "$i" | awk '{ s += $NF } END { print s }')"
  # d. fresh runners restore everything: full-format object vs index.
  for fmt in $reverse; do
    t=$(sync; bench_time restore "$fmt-$r" "$K0" "$work/runner-$fmt-$r" "$fmt-$r")
    expect_status "$work/json/restore-$fmt-$r.json" restored
    if [ "$fmt" = full ]; then t_rfull+=" $t"; else t_ridx+=" $t"; fi
    [ "$(entry_count "$work/runner-$fmt-$r")" = "$entries" ] && [ "$(tree_bytes "$work/runner-$fmt-$r")" = "$cache_bytes" ] ||
      { echo "restore of $fmt-$r is not the cache: $(entry_count "$work/runner-$fmt-$r") entries" >&2; exit 1; }
  done
  # b. 2 % of the index-restored cache changes; the next save knows its parent index.
  changed=$(python3 "$helper" change "$work/runner-index-$r" "$work/pool.bin" "$changes" 1 "$entries")
  b_changed+=" $changed"
  store_files "$i" >"$work/before"
  bench_warm "$work/runner-index-$r"
  t_inc+=" $(sync; bench_time save "$i" "$K1" index "$work/runner-index-$r" "inc-$r")"
  expect_status "$work/json/save-inc-$r.json" saved
  store_files "$i" >"$work/after"
  b_inc+=" $(new_bytes "$work/before" "$work/after")"
  j="$work/json/save-inc-$r.json"
  inc_counts+=" new=$(jfield "$j" new)/reused=$(jfield "$j" reused)/bytes_uploaded=$(jfield "$j" bytes_uploaded)"
  # c. the full-format runner (1,960 of the new snapshot's 2,000 entries) restores the new
  #    index snapshot through the counting proxy.
  proxy_start
  t_part+=" $(sync; bench_time restore "$i" "$K1" "$work/runner-full-$r" "part-$r" "$proxy_endpoint")"
  proxy_stop >"$work/proxy.out"
  read -r _ down <"$work/proxy.out"
  expect_status "$work/json/restore-part-$r.json" restored
  b_part+=" $down"
  j="$work/json/restore-part-$r.json"
  part_counts+=" fetched=$(jfield "$j" fetched)/present=$(jfield "$j" present)/failed=$(jfield "$j" failed)/bytes_downloaded=$(jfield "$j" bytes_downloaded)"
  missing=$(comm -23 <(cd "$work/runner-index-$r/actions-v1" && find . -mindepth 3 -maxdepth 3 -type d | sort) \
    <(cd "$work/runner-full-$r/actions-v1" && find . -mindepth 3 -maxdepth 3 -type d | sort) | wc -l)
  [ "$missing" = 0 ] || { echo "the partial restore lacks $missing entries of $K1" >&2; exit 1; }
  # Nothing is deleted until the end: on ext4, creating files in the half minute after a
  # large tree was deleted costs several times more (the inode allocator skips recently
  # freed inodes one by one), which would fall on whichever run came next.
done

# --- e. remote tier: a local HIT vs a HIT fetched from the store into an empty cache -------
e="$work/remote"; mkdir -p "$e/out"
cat >"$e/tiny.c" <<'EOF'
#include <stdio.h>
#include <string.h>
static int table[4096];
int tiny(const char *s) { int h = 0; for (size_t i = 0; i < strlen(s); i++) h = h * 31 + s[i] + table[i % 4096]; return h; }
int main(int argc, char **argv) { printf("%d\n", tiny(argc > 1 ? argv[1] : "strata")); return 0; }
EOF
run_action() { # cache-root [extra env]; outputs are removed first (each HIT restores them)
  rm -rf "$e/out"; mkdir -p "$e/out"
  env "${@:2}" "$strata" action run --cache-root "$1" --domain third_party --unit tiny \
    --output-dir "$e/out" --prepared-input "$e/tiny.c" --environment-profile bare \
    -- gcc -O2 -c "$e/tiny.c" -o "$e/out/tiny.o"
}
remote_url=$(store remote)
hit_local() { run_action "$e/producer" 2>"$e/local.err"; }
hit_remote() { run_action "$e/consumer-$1" STRATA_REMOTE_STORE="$remote_url" 2>"$e/remote.err"; }
remote_tier() { # sets l and m (seconds of each HIT); fails with a message if there is no remote HIT
  run_action "$e/producer" STRATA_REMOTE_STORE="$remote_url" STRATA_REMOTE_WRITE=1 2>"$e/producer.err" ||
    { echo "remote tier: the producer's run failed:"; cat "$e/producer.err"; return 1; } >&2
  hit_local; grep -q 'strata: HIT' "$e/local.err" || { echo "remote tier: no local HIT:"; cat "$e/local.err"; return 1; } >&2
  hit_remote warm >/dev/null || true
  grep -q 'strata: HIT' "$e/remote.err" || { echo "remote tier: no HIT from the store:"; cat "$e/remote.err"; return 1; } >&2
  for ((k = 1; k <= 11; k++)); do
    l+=" $(bench_time hit_local)"; grep -q 'strata: HIT' "$e/local.err" || return 1
    m+=" $(bench_time hit_remote "$k")"
    grep -q 'strata: HIT' "$e/remote.err" || { echo "remote tier: run $k was no HIT:"; cat "$e/remote.err"; return 1; } >&2
  done
}
l=""; m=""
remote_tier || { l=""; m=""; }

# --- report -------------------------------------------------------------------------------
echo
echo "runs: $runs rounds; times in s, bytes of objects in the bucket unless noted"
for v in t_full t_idx b_full b_idx t_rfull t_ridx b_changed t_inc b_inc inc_counts t_part b_part part_counts; do
  printf '  %-12s %s\n' "$v" "${!v}"
done
printf '  %-12s %s\n' hit_local "$l" hit_remote "$m"
# shellcheck disable=SC2086
python3 - "$(bench_median $t_full)" "$(bench_median $t_idx)" "$(bench_median $b_full)" \
  "$(bench_median $b_idx)" "$(bench_median $t_rfull)" "$(bench_median $t_ridx)" \
  "$(bench_median $t_inc)" "$(bench_median $b_inc)" "$(bench_median $t_part)" \
  "$(bench_median $b_part)" "$(bench_median $b_changed)" "$cache_bytes" \
  "$(bench_median ${l:-0})" "$(bench_median ${m:-0})" <<'EOF'
import sys
(t_full, t_idx, b_full, b_idx, t_rfull, t_ridx, t_inc, b_inc, t_part, b_part, b_changed,
 cache_bytes, hit_local, hit_remote) = map(float, sys.argv[1:])
rows = [
    ("first save, time: index vs full format", f"{t_idx:.3f} s", f"{t_full:.3f} s", t_idx / t_full, None, ""),
    ("first save, bytes: index vs full format", f"{b_idx/1e6:.1f} MB", f"{b_full/1e6:.1f} MB", b_idx / b_full, None, ""),
    ("2 % changed: bytes uploaded vs full save", f"{b_inc/1e6:.2f} MB", f"{b_full/1e6:.1f} MB", b_inc / b_full, 0.03, "<="),
    ("2 % changed: save time vs first index save", f"{t_inc:.3f} s", f"{t_idx:.3f} s", t_inc / t_idx, 0.15, "<="),
    ("2 % changed: save time vs full-format save", f"{t_inc:.3f} s", f"{t_full:.3f} s", t_inc / t_full, None, ""),
    ("restore onto 98 %: bytes downloaded (wire)", f"{b_part/1e6:.2f} MB", f"{b_full/1e6:.1f} MB", b_part / b_full, 0.03, "<="),
    ("restore onto 98 %: time vs full restore", f"{t_part:.3f} s", f"{t_rfull:.3f} s", t_part / t_rfull, None, ""),
    ("fresh runner: index vs full-format restore", f"{t_ridx:.3f} s", f"{t_rfull:.3f} s", t_ridx / t_rfull, 1.0, "<="),
]
print(f"\ncache {cache_bytes/1e6:.1f} MB; the changed entries hold {b_changed/1e6:.2f} MB ({100*b_changed/cache_bytes:.2f} % of it)\n")
print("| measure | strata | baseline | ratio | target | met? |")
print("|---|---|---|---|---|---|")
for name, mine, base, ratio, target, op in rows:
    met = "—" if target is None else ("yes" if ratio <= target else "**no**")
    print(f"| {name} | {mine} | {base} | {ratio:.3f} | {'—' if target is None else op + ' ' + str(target)} | {met} |")
added = (hit_remote - hit_local) * 1000
if hit_remote == 0:
    print("| remote-tier HIT vs local HIT (added) | not measured | | | <= 30 ms | — |")
else:
    print(f"| remote-tier HIT vs local HIT (added) | {hit_remote*1000:.1f} ms | {hit_local*1000:.1f} ms | +{added:.1f} ms | <= 30 ms | {'yes' if added <= 30 else '**no**'} |")
EOF
