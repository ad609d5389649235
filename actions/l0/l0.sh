#!/usr/bin/env bash
# Step script of actions/l0: computes the artifact key from the checkout and the toolchain,
# then `strata artifact pull` (mode pull) or `get-or-build` + `push` (mode push).
set -uo pipefail
# shellcheck source=../lib/common.sh
. "$GITHUB_ACTION_PATH/../lib/common.sh"
strata_credentials
strata_trust
strata="$(strata_binary)"

fail() { # status, message: fail open unless strict
  echo "::warning title=strata L0::$2"
  strata_output hit false
  strata_output status "$1"
  [ "${INPUT_STRICT:-false}" = true ] && exit 1
  exit 0
}

sha() { sha256sum | cut -c1-64; }

strata_lines paths "${INPUT_SOURCE_PATHS:-}"
if ! tracked=$(git -c safe.directory='*' ls-files -s -- "${paths[@]}" 2>/dev/null) || [ -z "$tracked" ]; then
  fail skipped "no tracked sources here (git ls-files); L0 needs a git checkout"
fi
key=(--root "${INPUT_ROOT:-${RUNNER_TEMP:-/tmp}/strata-l0}" --stage ready
  --source "$(printf '%s\n' "$tracked" | sha)"
  --specialization "$(printf '%s' "${INPUT_SPECIALIZATION:-}" | sha)")
# The toolchain is part of the key, and nothing guesses it: with neither toolchain-tools nor
# toolchain-image there is no L0 key (a default such as `cc c++` would key a build that
# compiles with g++-13 or clang by the system compiler, and could pull another toolchain's
# outputs).
toolchain=0
for tool in ${INPUT_TOOLCHAIN_TOOLS:-}; do
  name=$(printf '%s' "${tool##*/}" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9_.-' '_' | cut -c1-59)
  if ! version=$("$tool" --version 2>&1); then
    fail skipped "cannot run '$tool --version'; no L0 key"
  fi
  key+=(--env "tool-$name=$(printf '%s' "$version" | sha)")
  toolchain=$((toolchain + 1))
done
image="${INPUT_TOOLCHAIN_IMAGE:-}"
if [ -n "$image" ]; then
  case "$image" in
    *@sha256:*) ;;
    *) echo "::warning title=strata L0::toolchain-image '$image' names no @sha256: digest; a tag can be republished with other compilers under the same L0 key" ;;
  esac
  key+=(--env "image=$(printf '%s' "$image" | sha)")
  toolchain=$((toolchain + 1))
fi
[ "$toolchain" -gt 0 ] ||
  fail skipped "no toolchain identity: set the toolchain-tools input to the compilers the build runs (e.g. 'gcc-13 g++-13 cmake'), or toolchain-image for a container build; there is no default"
strata_lines required "${INPUT_REQUIRE:-}"
[ ${#required[@]} -gt 0 ] || fail skipped "the require input lists no paths"
for path in "${required[@]}"; do key+=(--require "$path"); done
store=()
[ -n "${INPUT_STORE:-}" ] && store=(--store "$INPUT_STORE")
strict=()
[ "${INPUT_STRICT:-false}" = true ] && strict=(--strict)

case "${INPUT_MODE:-}" in
  pull)
    "$strata" artifact pull "${key[@]}" "${store[@]}" "${strict[@]}" --dest "$INPUT_DIR"
    status=$?
    case $status in
      0) strata_output hit true; strata_output status pulled
         echo "L0 HIT: the verified artifact is in $INPUT_DIR; the build can be skipped" ;;
      3) strata_output hit false; strata_output status miss ;;
      *) fail error "strata artifact pull exited $status" ;;
    esac
    ;;
  push)
    # Check dir first, so that problems are reported against the user's directory rather
    # than strata's private copy of it.
    dir="${INPUT_DIR:-}"
    [ -n "$dir" ] && [ -d "$dir" ] && [ ! -L "$dir" ] ||
      fail error "dir '$dir' is not a directory; push needs the directory holding the final outputs"
    # Artifacts hold regular files and directories only (no symlinks such as versioned .so
    # links, no FIFOs, sockets or devices).
    links=$(find "$dir" -mindepth 1 -type l -printf '%P, ' | head -c 300)
    [ -z "$links" ] ||
      fail error "dir '$dir' holds symlinks (${links%, }); L0 artifacts hold only regular files and directories: copy the link targets instead (cp -L, or install without versioned .so links) or keep the links out of '$dir'"
    special=$(find "$dir" -mindepth 1 ! -type f ! -type d ! -type l -printf '%P, ' | head -c 300)
    [ -z "$special" ] ||
      fail error "dir '$dir' holds special files (${special%, }); L0 artifacts hold only regular files and directories"
    missing=()
    for path in "${required[@]}"; do
      [ -f "$dir/$path" ] || missing+=("$path")
    done
    [ ${#missing[@]} -eq 0 ] ||
      fail error "dir '$dir' lacks required file(s): ${missing[*]} (the require input lists paths relative to dir)"
    # Publish the outputs locally (verified, immutable), then upload put-if-absent.
    if ! "$strata" artifact get-or-build "${key[@]}" -- \
        sh -c 'cp -a "$0/." "$STRATA_ARTIFACT_OUT/"' "$dir"; then
      fail error "could not publish '$dir' as an L0 artifact (see strata's message above; it names strata's private copy of '$dir')"
    fi
    "$strata" artifact push "${key[@]}" "${store[@]}" "${strict[@]}"
    status=$?
    [ "$status" -eq 0 ] || fail error "strata artifact push exited $status"
    strata_output hit false
    strata_output status pushed
    ;;
  *) fail error "mode must be pull or push, got '${INPUT_MODE:-}'" ;;
esac
exit 0
