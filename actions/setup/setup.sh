#!/usr/bin/env bash
# Step script of actions/setup.
#
#   setup.sh source-key   outputs bin-dir and cache-key: a digest of the strata sources
#                         (Cargo.toml, Cargo.lock, src/), `rustc --version`, the runner OS
#                         and architecture; and cmake-module-path: this repository's cmake/
#                         directory (strata.cmake)
#   setup.sh install      uses INPUT_BINARY, else BIN_DIR/strata if it runs (a cache hit),
#                         else builds with cargo; adds the directory to GITHUB_PATH
set -euo pipefail
root=$(cd "$GITHUB_ACTION_PATH/../.." && pwd)

source_digest() {
  {
    (cd "$root" && find Cargo.toml Cargo.lock src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    rustc --version 2>/dev/null || echo "no rustc"
    printf '%s %s\n' "${RUNNER_OS_NAME:-$(uname -s)}" "${RUNNER_ARCH_NAME:-$(uname -m)}"
  } | sha256sum | cut -c1-32
}

case "${1:-}" in
  source-key)
    digest=$(source_digest)
    echo "bin-dir=${HOME}/.cache/strata-action/bin-${digest}" >>"$GITHUB_OUTPUT"
    echo "cache-key=strata-bin-v1-${RUNNER_OS_NAME:-unknown}-${RUNNER_ARCH_NAME:-unknown}-${digest}" >>"$GITHUB_OUTPUT"
    echo "cmake-module-path=$root/cmake" >>"$GITHUB_OUTPUT"
    ;;
  install)
    mkdir -p "$BIN_DIR"
    if [ -n "${INPUT_BINARY:-}" ]; then
      cp "$INPUT_BINARY" "$BIN_DIR/strata"
      chmod 0755 "$BIN_DIR/strata"
    elif [ -x "$BIN_DIR/strata" ] && "$BIN_DIR/strata" --version >/dev/null 2>&1; then
      echo "strata: using the cached build in $BIN_DIR"
    else
      echo "::group::building strata (cargo build --release --locked)"
      target="${RUNNER_TEMP:-/tmp}/strata-target"
      CARGO_TARGET_DIR="$target" cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin strata
      cp "$target/release/strata" "$BIN_DIR/strata"
      echo "::endgroup::"
    fi
    echo "$BIN_DIR" >>"$GITHUB_PATH"
    echo "path=$BIN_DIR/strata" >>"$GITHUB_OUTPUT"
    echo "version=$("$BIN_DIR/strata" --version)" >>"$GITHUB_OUTPUT"
    ;;
  *)
    echo "usage: setup.sh source-key|install" >&2
    exit 2
    ;;
esac
