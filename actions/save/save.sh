#!/usr/bin/env bash
# Step script of actions/save: runs `strata snapshot save --github-output`. Each skip
# (no key, no .updated, no writer credentials, key exists) is printed with its reason.
set -uo pipefail
# shellcheck source=../lib/common.sh
. "$GITHUB_ACTION_PATH/../lib/common.sh"
strata_credentials

args=(snapshot save --github-output --cache-dir "$INPUT_CACHE_DIR" --key "${INPUT_KEY:-}"
  --compression "${INPUT_COMPRESSION:-zstd}")
[ -n "${INPUT_LEVEL:-}" ] && args+=(--level "$INPUT_LEVEL")
[ -n "${INPUT_STORE:-}" ] && args+=(--store "$INPUT_STORE")
[ "${INPUT_STRICT:-false}" = true ] && args+=(--strict)

strata="$(strata_binary)"
"$strata" "${args[@]}"
status=$?
if [ "$status" -eq 127 ] || [ "$status" -eq 126 ]; then
  echo "::warning title=strata snapshot save::cannot run '$strata'; no snapshot was published"
  strata_output saved false
  strata_output status error
  status=0
fi
exit "$status"
