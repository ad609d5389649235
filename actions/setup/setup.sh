#!/usr/bin/env bash
# Step script of actions/setup.
#
#   setup.sh plan      decides how strata gets on PATH and outputs it as `plan`:
#                        input    the `binary` input names one;
#                        release  a release binary pinned in release-sums (this directory)
#                                 fits the runner (Linux X64 or ARM64), and `from-source`
#                                 is not 'true';
#                        source   otherwise: a cargo build of this action's sources, with
#                                 bin-dir and cache-key for actions/cache (a digest of
#                                 Cargo.toml, Cargo.lock, src/, `rustc --version`, the
#                                 runner OS and architecture);
#                      and cmake-module-path: this repository's cmake/ directory.
#   setup.sh install   carries the plan out, adds the binary's directory to GITHUB_PATH and
#                      outputs path, version and installed-from: input, release, cache (a
#                      source build restored by actions/cache) or source.
#
# A release binary is downloaded from the `download-url` input (default: the `url` line of
# release-sums) and installed only if its SHA-256 equals the one release-sums pins: a
# mismatch or a failed download fails the step (it never falls back to a build silently).
# An installed binary that still matches is used again without downloading.
set -euo pipefail
root=$(cd "$GITHUB_ACTION_PATH/../.." && pwd)
sums_file="$GITHUB_ACTION_PATH/release-sums"

fail() {
  echo "::error title=strata setup::$*"
  exit 1
}

source_digest() {
  {
    (cd "$root" && find Cargo.toml Cargo.lock src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    rustc --version 2>/dev/null || echo "no rustc"
    printf '%s %s\n' "${RUNNER_OS_NAME:-$(uname -s)}" "${RUNNER_ARCH_NAME:-$(uname -m)}"
  } | sha256sum | cut -c1-32
}

# The target triple of the release binary for this runner; empty if none is built for it.
release_target() {
  case "${RUNNER_OS_NAME:-}/${RUNNER_ARCH_NAME:-}" in
    Linux/X64) echo x86_64-unknown-linux-musl ;;
    Linux/ARM64) echo aarch64-unknown-linux-musl ;;
  esac
}

# The value of the `version` or `url` line of release-sums; empty if it has none.
pinned_field() {
  [ -f "$sums_file" ] || return 0
  sed -n "s/^$1 \\([^[:space:]]*\\)[[:space:]]*\$/\\1/p" "$sums_file" | head -n 1
}

# The SHA-256 (64 lowercase hex digits) release-sums pins for strata-<triple>; empty if none.
pinned_sum() {
  [ -f "$sums_file" ] || return 0
  awk -v name="strata-$1" '$2 == name && $1 ~ /^[0-9a-f]+$/ && length($1) == 64 { print $1; exit }' "$sums_file"
}

sha256_of() {
  sha256sum "$1" | cut -d ' ' -f 1
}

# Prints the plan (input, release or source) and says on stderr why it is not `release`.
decide() {
  if [ -n "${INPUT_BINARY:-}" ]; then
    echo input
    return
  fi
  if [ "${INPUT_FROM_SOURCE:-false}" = true ]; then
    echo "strata: building from source (from-source: 'true')" >&2
    echo source
    return
  fi
  local target
  target=$(release_target)
  if [ -z "$target" ]; then
    echo "strata: no release binary is built for ${RUNNER_OS_NAME:-?}/${RUNNER_ARCH_NAME:-?}; building from source" >&2
  elif [ -z "$(pinned_field version)" ] || [ -z "$(pinned_sum "$target")" ]; then
    echo "strata: actions/setup/release-sums pins no release binary strata-$target; building from source" >&2
  else
    echo release
    return
  fi
  echo source
}

install_release() {
  local target version sum base name dir url actual
  target=$(release_target)
  version=$(pinned_field version)
  sum=$(pinned_sum "$target")
  base=${INPUT_DOWNLOAD_URL:-$(pinned_field url)}
  name="strata-$target"
  [ -n "$base" ] || fail "actions/setup/release-sums has no url line and the download-url input is empty: set download-url, or from-source: 'true'"
  dir="${RUNNER_TOOL_CACHE:-${HOME}/.cache}/strata/$version-$target"
  BIN_DIR=$dir
  mkdir -p "$dir"
  if [ -f "$dir/strata" ] && [ "$(sha256_of "$dir/strata")" = "$sum" ]; then
    echo "strata: $name $version is already installed in $dir (SHA-256 verified)"
    return
  fi
  url="${base%/}/$name"
  partial="$dir/.strata.partial.$$"
  trap 'rm -f "$partial"' EXIT
  echo "strata: downloading $name $version from $url"
  command -v curl >/dev/null ||
    fail "cannot download $url: curl is not installed on this runner (GitHub's runners have it; a minimal image does not): install it (apt-get install curl), or set from-source: 'true' to build strata from source"
  curl --fail --silent --show-error --location --retry 3 --connect-timeout 30 --max-time 600 \
    --output "$partial" "$url" ||
    fail "cannot download $url (curl's message is above): check the network and the download-url input, or set from-source: 'true' to build strata from source"
  actual=$(sha256_of "$partial")
  [ "$actual" = "$sum" ] ||
    fail "checksum mismatch: $url has SHA-256 $actual, but actions/setup/release-sums pins $sum for $name $version; the download is not the released binary (corrupt or replaced), so it is not installed. Retry, check the download-url input, or set from-source: 'true' to build strata from source"
  chmod 0755 "$partial"
  mv -f "$partial" "$dir/strata"
  trap - EXIT
  echo "strata: installed $name $version in $dir (SHA-256 $sum verified)"
}

install_source() {
  mkdir -p "$BIN_DIR"
  if [ -x "$BIN_DIR/strata" ] && "$BIN_DIR/strata" --version >/dev/null 2>&1; then
    echo "strata: using the cached build in $BIN_DIR"
    installed_from=cache
  else
    echo "::group::building strata (cargo build --release --locked)"
    target="${RUNNER_TEMP:-/tmp}/strata-target"
    CARGO_TARGET_DIR="$target" cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin strata
    cp "$target/release/strata" "$BIN_DIR/strata"
    echo "::endgroup::"
  fi
}

case "${1:-}" in
  plan)
    case "${INPUT_FROM_SOURCE:-false}" in
      true | false) ;;
      *) fail "the from-source input must be 'true' or 'false', not '${INPUT_FROM_SOURCE}'" ;;
    esac
    plan=$(decide)
    echo "plan=$plan" >>"$GITHUB_OUTPUT"
    if [ "$plan" = source ]; then
      digest=$(source_digest)
      echo "bin-dir=${HOME}/.cache/strata-action/bin-${digest}" >>"$GITHUB_OUTPUT"
      echo "cache-key=strata-bin-v1-${RUNNER_OS_NAME:-unknown}-${RUNNER_ARCH_NAME:-unknown}-${digest}" >>"$GITHUB_OUTPUT"
    fi
    echo "cmake-module-path=$root/cmake" >>"$GITHUB_OUTPUT"
    ;;
  install)
    installed_from=${PLAN:?the plan step sets PLAN}
    case "$PLAN" in
      input)
        BIN_DIR="${RUNNER_TEMP:-/tmp}/strata-bin"
        mkdir -p "$BIN_DIR"
        cp "$INPUT_BINARY" "$BIN_DIR/strata"
        chmod 0755 "$BIN_DIR/strata"
        ;;
      release) install_release ;;
      source) install_source ;;
      *) fail "unknown plan '$PLAN'" ;;
    esac
    version=$("$BIN_DIR/strata" --version) ||
      fail "$BIN_DIR/strata does not run (\`strata --version\` failed; its messages are above)"
    echo "strata: $version on PATH ($installed_from)"
    echo "$BIN_DIR" >>"$GITHUB_PATH"
    echo "path=$BIN_DIR/strata" >>"$GITHUB_OUTPUT"
    echo "version=$version" >>"$GITHUB_OUTPUT"
    echo "installed-from=$installed_from" >>"$GITHUB_OUTPUT"
    ;;
  *)
    echo "usage: setup.sh plan|install" >&2
    exit 2
    ;;
esac
