#!/usr/bin/env bash
# Builds the example project (examples/project: googletest + the zstd C library through the
# strata L1 cache) into BUILD_DIR; used by .github/workflows/strata-example.yml.
#
#   bash examples/ci-build.sh BUILD_DIR
#
# Needs strata on PATH (actions/setup) and STRATA_CACHE_ROOT (actions/key exports it).
# Installs cmake, g++ and googletest (Debian/Ubuntu packages) when missing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(realpath -m "${1:?usage: ci-build.sh BUILD_DIR}")
: "${STRATA_CACHE_ROOT:?set STRATA_CACHE_ROOT (actions/key exports it)}"

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/src/googletest/CMakeLists.txt ] || need+=(googletest)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

zstd_manifest=$(cargo metadata --format-version 1 --locked --manifest-path "$repo/Cargo.toml" 2>/dev/null |
  tr ',' '\n' | sed -n 's/.*"manifest_path":"\([^"]*zstd-sys-[^"]*Cargo.toml\)".*/\1/p' | head -n 1)
zstd_lib="$(dirname "$zstd_manifest")/zstd/lib"
[ -f "$zstd_lib/zstd.h" ] || { echo "zstd sources not found via cargo metadata" >&2; exit 1; }

src="$build.src"
rm -rf "$src"
mkdir -p "$src/zstd"
cp -r "$repo/examples/project/." "$src/"
cp -r /usr/src/googletest "$src/googletest"
cp -r "$zstd_lib" "$src/zstd/lib"
chmod -R u+w "$src"
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_MODULE_PATH="$repo/cmake" \
  -DSTRATA_EXECUTABLE="$(command -v strata)" -DSTRATA_CACHE_DIR="$STRATA_CACHE_ROOT" >/dev/null
# Show strata's one-line outcomes only; the build's own status decides.
set +e +o pipefail
cmake --build "$build" -j "$(nproc)" 2>&1 | grep -E '^strata: (HIT|MISS|BYPASS|WARNING)'
status=${PIPESTATUS[0]}
set -e -o pipefail
exit "$status"
