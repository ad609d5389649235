#!/usr/bin/env bash
# Builds strata's release binaries and checks them on this (x86_64) machine:
#
#   bash scripts/release-build.sh [--skip-engine-tests]
#
# 1. installs what it needs (scripts/prereqs.sh): the tools the engine tests run (cmake,
#    ninja, g++, make, git, GNU time), Rust (prereqs_rust), and prereqs_cross: rustup's
#    musl targets, cargo-zigbuild and ziglang (PyPI, in target/tools-venv) and Debian's
#    qemu-user-static;
# 2. builds static (musl), stripped `strata` binaries for x86_64-unknown-linux-musl and
#    aarch64-unknown-linux-musl with `cargo zigbuild --profile dist --locked`: zig compiles the
#    C and assembly of ring and zstd-sys for each CPU and links against its own musl;
#    Cargo.toml's dist profile (fat LTO, one codegen unit; release's strip settings) strips
# 3. copies them to target/release-dist/strata-<triple>, checks that each is an ELF for
#    its CPU with no interpreter and no shared library (readelf), prints its size and fails
#    if one is larger than STRATA_RELEASE_MAX_BYTES (default 12000000: the 12 MB budget);
# 4. writes target/release-dist/SHA256SUMS (sha256sum's format; `sha256sum -c` checks it);
# 5. smoke-tests both binaries (scripts/release-smoke.sh), the aarch64 one under
#    qemu-aarch64-static; the x86_64 one also compiles a C file through its launcher;
# 6. unless --skip-engine-tests: runs the engine integration tests and the --version test
#    (`cargo test --test it engine:: version::`) against the aarch64 binary under
#    qemu-aarch64-static. The test harness is built for this machine and starts the binary
#    under test through STRATA_TEST_BINARY and STRATA_TEST_RUNNER (tests/it/main.rs,
#    `strata_exe`), so cmake, make and build shells start it the same way, and no
#    binfmt_misc registration (root, a writable /proc/sys/fs/binfmt_misc) is needed;
# 7. unless --skip-engine-tests, on an x86_64 machine: runs the launcher's integration tests
#    (`launcher::`, real gcc, g++, clang, cmake builds) against the x86_64 binary natively:
#    the binary CI runners start for every compile, tested as the local build is.
#
# The release workflow (.github/workflows/release.yml) runs this script on a tag push v*.
# Measured on 2 cores shared with other builds: both release builds 16 minutes from scratch
# (fat LTO; seconds when nothing changed), the 69 engine and --version tests under qemu
# 3.3 minutes, the 148 launcher tests about a minute, the rest under a minute.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
engine_tests=yes
case "${1:-}" in
  --skip-engine-tests) engine_tests=no ;;
  "") ;;
  *) echo "usage: release-build.sh [--skip-engine-tests]" >&2; exit 2 ;;
esac
say() { printf '\n== %s\n' "$*"; }
max_bytes=${STRATA_RELEASE_MAX_BYTES:-12000000}
targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
dist="$repo/target/release-dist"

. "$repo/scripts/prereqs.sh"
prereqs_debian ca-certificates git cmake ninja-build g++ make time binutils
prereqs_rust
prereqs_cross

say "cargo zigbuild --profile dist --locked --bin strata (${targets[*]})"
started=$SECONDS
target_args=()
for target in "${targets[@]}"; do
  target_args+=(--target "$target")
done
cargo zigbuild --profile dist --locked --bin strata "${target_args[@]}"
echo "built in $((SECONDS - started)) s"

say "binaries (budget: $max_bytes bytes each)"
rm -rf "$dist"
mkdir -p "$dist"
over=0
for target in "${targets[@]}"; do
  name="strata-$target"
  cp "target/$target/dist/strata" "$dist/$name"
  case "$target" in
    x86_64-*) machine="X86-64" ;;
    aarch64-*) machine="AArch64" ;;
  esac
  readelf -h "$dist/$name" | grep -q "Machine:.*$machine" ||
    { echo "$name is not an ELF for $machine: $(readelf -h "$dist/$name" | grep Machine:)" >&2; exit 1; }
  if readelf -l "$dist/$name" | grep -q INTERP || readelf -d "$dist/$name" | grep -q NEEDED; then
    echo "$name is not static: it names an interpreter or shared libraries (readelf -ld)" >&2
    exit 1
  fi
  if readelf -S "$dist/$name" | grep -Eq '\.(debug_|symtab)'; then
    echo "$name is not stripped: it has .debug_* or .symtab sections (Cargo.toml [profile.dist] / [profile.release])" >&2
    exit 1
  fi
  bytes=$(stat -c %s "$dist/$name")
  printf '%-36s %10d bytes (%s MB), static, stripped\n' "$name" "$bytes" \
    "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1000000 }')"
  [ "$bytes" -le "$max_bytes" ] || { echo "  over the budget of $max_bytes bytes" >&2; over=1; }
done
[ "$over" = 0 ] || exit 1
(cd "$dist" && sha256sum strata-* >SHA256SUMS && cat SHA256SUMS)

say "smoke tests"
bash scripts/release-smoke.sh "$dist/strata-x86_64-unknown-linux-musl" x86_64-unknown-linux-musl
bash scripts/release-smoke.sh "$dist/strata-aarch64-unknown-linux-musl" aarch64-unknown-linux-musl qemu-aarch64-static

if [ "$engine_tests" = yes ]; then
  say "engine integration tests against the aarch64 binary under qemu-aarch64-static"
  started=$SECONDS
  STRATA_TEST_BINARY="$dist/strata-aarch64-unknown-linux-musl" \
    STRATA_TEST_RUNNER=qemu-aarch64-static \
    STRATA_TEST_TARGET=aarch64-unknown-linux-musl \
    cargo test --locked --test it -- engine:: version:: 2>&1 | grep -v '^test .* ok$'
  echo "ran in $((SECONDS - started)) s"
fi
if [ "$engine_tests" = yes ] && [ "$(uname -m)" = x86_64 ]; then
  # The published binary is what CI runners start for every compile: the launcher's tests
  # run against it natively (its preload library once failed every compile on glibc).
  say "launcher integration tests against the x86_64 binary"
  started=$SECONDS
  STRATA_TEST_BINARY="$dist/strata-x86_64-unknown-linux-musl" \
    STRATA_TEST_TARGET=x86_64-unknown-linux-musl \
    cargo test --locked --test it -- launcher:: 2>&1 | grep -v '^test .* ok$'
  echo "ran in $((SECONDS - started)) s"
fi
say "release binaries and SHA256SUMS are in ${dist#"$repo/"}/"
