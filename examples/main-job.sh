#!/usr/bin/env bash
# strata's main job: build two real third-party code bases through the L1 action cache.
#
#   bash examples/main-job.sh
#
# 1. installs what it needs (Debian cmake, g++, make, googletest) when missing;
# 2. builds strata in release mode;
# 3. copies Debian's googletest sources and the zstd C library vendored in the zstd-sys crate
#    into a source tree next to examples/project (the CMake project that wires them to strata);
# 4. runs the build four times, then a fifth runner that needs no build, and prints a table:
#      cold     first build, empty cache: every action MISSes and is saved; the cache is
#               then saved as an L1 snapshot (strata snapshot key + save) to the default
#               local store;
#      restored another "runner": the snapshot is restored into a new cache directory
#               and the sources, copied to another path, build there: every action must
#               HIT;
#      warm     the same sources copied to another absolute path, fresh build directory,
#               the original cache: every action must HIT (relocation is not a semantic
#               change);
#      header   one zstd header changed in the copy, fresh build directory: only the
#               translation units that include it MISS;
#      l0       after the cold build, its final outputs were published as one L0 artifact
#               (strata artifact get-or-build + push); a fresh runner pulls it (an L0 HIT)
#               and skips the whole build.
#    Each phase also runs the programs linked against the cached or pulled outputs.
#    The project's ordinary targets (the programs and a second, plain CMake build of the zstd
#    library) compile through strata's compiler launcher into the same cache; the table
#    shows its hits and misses next to the actions', and the same checks apply to them.
#
# Environment: STRATA_WORK (default examples/work) is the scratch directory; it is wiped.
# XDG_CACHE_HOME is pointed into it, so the default snapshot store
# ($XDG_CACHE_HOME/strata/store) is a fresh local directory for every run.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${STRATA_WORK:-$repo/examples/work}
say() { printf '\n== %s\n' "$*"; }

# --- 1. prerequisites ----------------------------------------------------------------
. "$repo/scripts/prereqs.sh"
# make: Debian's cmake only recommends it, and apt installs without recommends here.
prereqs_debian ca-certificates cmake g++ make googletest
prereqs_rust

# --- 2. strata -----------------------------------------------------------------------
say "building strata (release; 10-20 minutes on 2 cores the first time, a line every 30 s)"
prereqs_progress "cargo build --release" \
  cargo build --release --locked --manifest-path "$repo/Cargo.toml" --bin strata
tail -n 1 "$PREREQS_PROGRESS_LOG"
strata="$repo/target/release/strata"

# --- 3. sources ----------------------------------------------------------------------
zstd_manifest=$(cargo metadata --format-version 1 --locked --manifest-path "$repo/Cargo.toml" 2>/dev/null |
  tr ',' '\n' | sed -n 's/.*"manifest_path":"\([^"]*zstd-sys-[^"]*Cargo.toml\)".*/\1/p' | head -n 1)
zstd_lib="$(dirname "$zstd_manifest")/zstd/lib"
[ -f "$zstd_lib/zstd.h" ] || { echo "zstd sources not found via cargo metadata ($zstd_manifest)" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/a/src/zstd"
cp -r "$repo/examples/project/." "$work/a/src/"
cp -r /usr/src/googletest "$work/a/src/googletest"
cp -r "$zstd_lib" "$work/a/src/zstd/lib"
chmod -R u+w "$work/a/src"
cache="$work/cache"
export XDG_CACHE_HOME="$work/xdg-cache"

# --- 4. phases -----------------------------------------------------------------------
declare -a rows=()
phase() { # name src build [cache]
  local name=$1 src=$2 build=$3 cache=${4:-$cache} events="$work/events-$1.jsonl"
  say "phase $name: $src -> $build"
  local start end
  start=$(date +%s%N)
  if ! STRATA_EVENT_LOG="$events" cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_MODULE_PATH="$repo/cmake" -DSTRATA_EXECUTABLE="$strata" -DSTRATA_CACHE_DIR="$cache" \
      >"$work/configure-$name.log" 2>&1; then
    tail -n 30 "$work/configure-$name.log" >&2; exit 1
  fi
  "$strata" stats --cache-root "$cache" --zero >/dev/null
  STRATA_EVENT_LOG="$events" cmake --build "$build" -j 2 2>&1 | grep -E '^strata: (MISS|BYPASS|WARNING|warning)' || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "build failed in phase $name" >&2; exit 1; }
  end=$(date +%s%N)
  "$build/zstd_roundtrip"
  "$build/zstd_roundtrip_plain"
  "$build/gtest_smoke" --gtest_brief=1 | tail -n 1
  local stats compiles chits cmisses
  stats=$("$strata" stats --cache-root "$cache" --json)
  # compile.counters is the one object at this depth with "hit"/"miss" (the archive steps'
  # counters, compile.archive.counters, are one level deeper).
  chits=$(printf '%s\n' "$stats" | sed -n 's/^      "hit": \([0-9]*\).*/\1/p'); chits=${chits:-0}
  cmisses=$(printf '%s\n' "$stats" | sed -n 's/^      "miss": \([0-9]*\).*/\1/p'); cmisses=${cmisses:-0}
  compiles=$((chits + cmisses))
  local hits misses actions
  hits=$(grep -c '"status":"HIT"' "$events" || true)
  misses=$(grep -c '"status":"MISS"' "$events" || true)
  actions=$((hits + misses))
  rows+=("$(printf '%-8s %8d %6d %7d %9d %6d %7d %10.1f' "$name" "$actions" "$hits" "$misses" "$compiles" "$chits" "$cmisses" "$(awk -v s="$start" -v e="$end" 'BEGIN { print (e - s) / 1e9 }')")")
  eval "${name}_hits=$hits ${name}_misses=$misses ${name}_actions=$actions"
  eval "${name}_chits=$chits ${name}_cmisses=$cmisses ${name}_compiles=$compiles"
}

phase cold "$work/a/src" "$work/a/build"

# L0: the whole build's final outputs as one verified artifact, keyed by everything the
# build depends on (toolchain versions, the source tree's relative paths and bytes, the build
# type). Runner A publishes it to the default local store after its build.
tree_digest() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-64; }
tool_digest() { "$1" --version | sha256sum | cut -c1-64; }
l0_key() { # artifact root, source tree
  printf '%s\n' --root "$1" --env "cc=$(tool_digest cc)" --env "cxx=$(tool_digest c++)" \
    --env "cmake=$(tool_digest cmake)" --source "$(tree_digest "$2")" \
    --specialization "$(printf 'Release' | sha256sum | cut -c1-64)" --stage ready \
    --require bin/zstd_roundtrip --require bin/gtest_smoke --require lib/libzstd_strata.a
}
mapfile -t key_a < <(l0_key "$work/a/artifacts" "$work/a/src")
say "L0 publish: the cold build's outputs as one artifact, pushed to the local store"
"$strata" artifact get-or-build "${key_a[@]}" -- sh -c '
  mkdir -p "$STRATA_ARTIFACT_OUT/bin" "$STRATA_ARTIFACT_OUT/lib" &&
  cp "$0/zstd_roundtrip" "$0/gtest_smoke" "$STRATA_ARTIFACT_OUT/bin/" &&
  cp "$0/libzstd_strata.a" "$STRATA_ARTIFACT_OUT/lib/"' "$work/a/build"
"$strata" artifact push "${key_a[@]}"

# The cold cache travels as an L1 snapshot through the default local store, signed by a
# producer key that the restoring "runner" trusts: a writer of the store who is not the
# producer could not get a snapshot of theirs restored (docs/snapshots.md, trust model).
snapshot_key() { "$strata" snapshot key --toolchain-tool cc --toolchain-tool c++ --source-hash main_job | head -n 1; }
producer_public=$("$strata" key generate --out "$work/producer.key")
say "snapshot save, signed (cold cache -> $XDG_CACHE_HOME/strata/store)"
"$strata" snapshot save --cache-dir "$cache" --key "$(snapshot_key)" --signing-key "$work/producer.key"
restored_cache="$work/c/l1"
say "snapshot restore, trusting only the producer's key (another runner's cache: $restored_cache)"
"$strata" snapshot restore --cache-dir "$restored_cache" --key "$(snapshot_key)" --trusted-key "$producer_public"
mkdir -p "$work/c"
cp -r "$work/a/src" "$work/c/src"
phase restored "$work/c/src" "$work/c/build" "$restored_cache"

mkdir -p "$work/b"
cp -r "$work/a/src" "$work/b/src"
phase warm "$work/b/src" "$work/b/build"

header="$work/b/src/zstd/lib/decompress/zstd_decompress_block.h"
printf '\n/* edited by strata main-job */\n' >>"$header"
dependents=0
for c in "$work"/b/src/zstd/lib/{common,compress,decompress,dictBuilder}/*.c; do
  if gcc -MM -DZSTD_DISABLE_ASM -DZSTD_MULTITHREAD -I"$work/b/src/zstd/lib" -I"$work/b/src/zstd/lib/common" "$c" |
      grep -q 'zstd_decompress_block\.h'; then
    dependents=$((dependents + 1))
  fi
done
phase header "$work/b/src" "$work/b/build-header"

# Runner D: same sources at another path, empty L1 and L0 caches. The L0 pull HITs, so the
# build is skipped entirely; the pulled programs run.
mkdir -p "$work/d"
cp -r "$work/a/src" "$work/d/src"
mapfile -t key_d < <(l0_key "$work/d/artifacts" "$work/d/src")
say "phase l0: $work/d/src (fresh runner): try L0 before building"
start=$(date +%s%N)
if "$strata" artifact pull "${key_d[@]}" --dest "$work/d/dist"; then
  l0_hit=1
  end=$(date +%s%N)
  "$work/d/dist/bin/zstd_roundtrip"
  "$work/d/dist/bin/gtest_smoke" --gtest_brief=1 | tail -n 1
  rows+=("$(printf '%-8s %8s %6s %7s %9s %6s %7s %10.1f   (L0 HIT: build skipped)' l0 0 0 0 0 0 0 "$(awk -v s="$start" -v e="$end" 'BEGIN { print (e - s) / 1e9 }')")")
else
  l0_hit=0
fi

say "summary (cache: $cache)"
# Two header lines: which part of strata counted (over its three columns), then the columns.
printf '%-8s %-23s %-24s\n' '' '---- action run -----' '-- compiler launcher --'
printf '%-8s %8s %6s %7s %9s %6s %7s %10s\n' phase actions hits misses compiles hits misses seconds
printf '%s\n' "${rows[@]}"

fail=0
[ "$cold_misses" -eq "$cold_actions" ] || { echo "cold phase: expected every action to MISS" >&2; fail=1; }
[ "$restored_hits" -eq "$restored_actions" ] && [ "$restored_actions" -gt 0 ] || { echo "restored phase: expected 100% HIT from the snapshot" >&2; fail=1; }
[ "$warm_hits" -eq "$warm_actions" ] && [ "$warm_actions" -gt 0 ] || { echo "warm phase: expected 100% HIT" >&2; fail=1; }
[ "$header_misses" -eq "$dependents" ] || { echo "header phase: expected $dependents MISS (the sources including the header), got $header_misses" >&2; fail=1; }
[ "$cold_cmisses" -eq "$cold_compiles" ] && [ "$cold_compiles" -gt 0 ] || { echo "cold phase: expected every launcher compile to MISS" >&2; fail=1; }
for p in restored warm; do
  eval "ph=\$${p}_chits pc=\$${p}_compiles"
  [ "$ph" -eq "$pc" ] && [ "$pc" -eq "$cold_compiles" ] || { echo "$p phase: expected 100% launcher HIT ($cold_compiles compiles), got $ph of $pc" >&2; fail=1; }
done
[ "$header_cmisses" -eq "$dependents" ] || { echo "header phase: expected $dependents launcher MISS, got $header_cmisses" >&2; fail=1; }
[ "$l0_hit" -eq 1 ] || { echo "l0 phase: expected an L0 HIT on a fresh runner" >&2; fail=1; }
[ "$fail" -eq 0 ] && echo "main job OK: the restored snapshot and relocation gave 100% HIT (actions and launcher compiles); one header change missed exactly its $dependents dependent actions and compiles; an L0 HIT skipped the whole build"
exit "$fail"
