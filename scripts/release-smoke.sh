#!/usr/bin/env bash
# Smoke test of one strata binary, e.g. a release binary for another CPU under qemu-user:
#
#   bash scripts/release-smoke.sh BINARY TRIPLE [RUNNER...]
#   bash scripts/release-smoke.sh target/release-dist/strata-aarch64-unknown-linux-musl \
#        aarch64-unknown-linux-musl qemu-aarch64-static
#
# Checks, in a temporary directory, with the binary started through RUNNER (if given):
#   1. `--version` prints `strata <Cargo.toml version> (commit …, target TRIPLE)`;
#   2. `key generate` writes a producer key (Ed25519: ring's assembly for this CPU);
#   3. `action run` MISSes and saves, then HITs with the output restored (BLAKE3);
#   4. `snapshot save` packs and signs the cache into a file:// store (tar + zstd's C code);
#   5. `snapshot restore` into another cache directory accepts the signature, and the
#      action HITs from the restored cache;
#   6. natively only (no RUNNER) and where `cc` exists: a C compile through the compiler
#      launcher MISSes, then HITs, each object equal to a plain `cc` compile's, and the
#      preload library it wrote names no library it needs (`readelf -d`).
# Exits non-zero at the first check that fails, saying which.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: release-smoke.sh BINARY TRIPLE [RUNNER...]" >&2; exit 2; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
binary=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
triple=$2
shift 2
runner=("$@")
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT

strata() { "${runner[@]}" "$binary" "$@"; }
fail() {
  echo "smoke($triple): FAILED: $*" >&2
  exit 1
}

version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)
line=$(strata --version) || fail "--version did not run"
case "$line" in
  "strata $version (commit "*", target $triple)") ;;
  *) fail "--version printed '$line', not 'strata $version (commit …, target $triple)'" ;;
esac

public=$(strata key generate --out "$work/producer.key" 2>&1 | grep -o 'strata-ed25519:[^[:space:]]*' | head -n 1) ||
  fail "key generate printed no public key"

# One action: writes out/result.txt. Prints strata's status words (MISS SAVED, HIT).
action() {
  rm -rf "$work/out"
  strata action run --cache-root "$1" --domain third_party --unit smoke \
    --output-dir "$work/out" --environment-profile bare \
    -- sh -c "printf 'smoke %s\n' '$triple' > '$work/out/result.txt'" 2>&1 |
    sed -n 's/^strata: \([A-Z]*\) .*/\1/p' | tr '\n' ' '
}
[ "$(action "$work/cache")" = "MISS SAVED " ] || fail "the first action run did not MISS and save"
[ "$(action "$work/cache")" = "HIT " ] || fail "the second action run did not HIT"
[ "$(cat "$work/out/result.txt")" = "smoke $triple" ] || fail "the HIT restored other bytes"

store="file://$work/store"
strata snapshot save --cache-dir "$work/cache" --key "smoke-$triple" --store "$store" \
  --signing-key "$work/producer.key" --strict >"$work/save.log" 2>&1 ||
  fail "snapshot save: $(cat "$work/save.log")"
strata snapshot restore --cache-dir "$work/cache2" --key "smoke-$triple" --store "$store" \
  --trusted-key "$public" --fail-on-cache-miss --strict >"$work/restore.log" 2>&1 ||
  fail "snapshot restore: $(cat "$work/restore.log")"
[ "$(action "$work/cache2")" = "HIT " ] || fail "the action did not HIT from the restored snapshot"
[ "$(cat "$work/out/result.txt")" = "smoke $triple" ] || fail "the restored HIT gave other bytes"

# The compiler launcher, where the binary runs natively (no RUNNER): a C compile traced
# with the preload library exits 0 with the object of a plain compile, then HITs, and the
# library it wrote names no library it needs. (A library linked against musl's libc.so
# once made the loader refuse every compiler process on glibc systems: exit 127.)
launcher=""
if [ ${#runner[@]} -eq 0 ] && command -v cc >/dev/null; then
  printf '#include <stdio.h>\nint main(void) { puts("smoke"); return 0; }\n' >"$work/hello.c"
  (cd "$work" && cc -c hello.c -o plain.o) || fail "cc cannot compile a C file here"
  for round in MISS HIT; do
    rm -f "$work/hello.o"
    (cd "$work" && STRATA_CACHE_ROOT="$work/launcher-cache" STRATA_EXPLAIN=1 \
      strata cc -c hello.c -o hello.o) >"$work/launch.log" 2>&1 ||
      fail "strata cc -c hello.c failed ($round): $(cat "$work/launch.log")"
    cmp -s "$work/plain.o" "$work/hello.o" || fail "the launcher's object differs from cc's ($round)"
  done
  grep -q '^strata: hit ' "$work/launch.log" || fail "the second compile did not HIT: $(cat "$work/launch.log")"
  for library in "$work"/launcher-cache/.local/preload/*.so; do
    [ -e "$library" ] || fail "the traced compile wrote no preload library"
    if command -v readelf >/dev/null && readelf -d "$library" | grep -q '(NEEDED)'; then
      fail "the preload library names libraries it needs: $(readelf -d "$library" | grep NEEDED)"
    fi
  done
  launcher="; launcher MISS/HIT equal to cc"
fi

echo "smoke($triple): ok: $line; action MISS/HIT, signed snapshot save/restore/HIT$launcher"
