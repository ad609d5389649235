#!/usr/bin/env bash
# Step script of actions/save: runs `strata snapshot save --github-output`. Each skip
# (no key, no .updated, no writer credentials, key exists) is printed with its reason.
# strata fails open itself; the step fails only with strict (a store error). Anything else —
# a missing binary (126/127), a crash (a signal, 128+N), a Rust panic (101), a malformed
# input (2) — is a warning with status=error, and the build result stands.
set -uo pipefail
# shellcheck source=../lib/common.sh
. "$GITHUB_ACTION_PATH/../lib/common.sh"
strata_credentials
strata_trust

args=(snapshot save --github-output --cache-dir "$INPUT_CACHE_DIR" --key "${INPUT_KEY:-}"
  --compression "${INPUT_COMPRESSION:-zstd}")
# `--level=N` keeps a negative level (zstd's fast modes) one argument.
[ -n "${INPUT_LEVEL:-}" ] && args+=("--level=$INPUT_LEVEL")
[ -n "${INPUT_FORMAT:-}" ] && args+=(--format "$INPUT_FORMAT")
[ -n "${INPUT_STORE:-}" ] && args+=(--store "$INPUT_STORE")
strict=false
[ "${INPUT_STRICT:-false}" = true ] && { args+=(--strict); strict=true; }

strata="$(strata_binary)"
"$strata" "${args[@]}"
status=$?
if [ "$status" -eq 0 ]; then
  exit 0
fi
if [ "$status" -eq 1 ] && [ "$strict" = true ]; then
  # strata's own documented failure (--strict); it wrote the outputs.
  exit 1
fi
echo "::warning title=strata snapshot save::'$strata snapshot save' $(strata_describe_exit "$status"); no snapshot was published, the build result stands"
strata_output saved false
strata_output status error
strata_output reason "strata snapshot save $(strata_describe_exit "$status")"
if [ "$strict" = true ]; then
  exit 1
fi
exit 0
