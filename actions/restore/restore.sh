#!/usr/bin/env bash
# Step script of actions/restore: runs `strata snapshot restore --github-output`.
# strata itself fails open (exit 0 with a warning); only fail-on-cache-miss, strict and
# malformed inputs end the step with an error.
set -uo pipefail
# shellcheck source=../lib/common.sh
. "$GITHUB_ACTION_PATH/../lib/common.sh"
strata_credentials

args=(snapshot restore --github-output --cache-dir "$INPUT_CACHE_DIR" --key "${INPUT_KEY:-}")
strata_lines prefixes "${INPUT_RESTORE_KEYS:-}"
for prefix in "${prefixes[@]}"; do
  args+=(--restore-key "$prefix")
done
[ -n "${INPUT_STORE:-}" ] && args+=(--store "$INPUT_STORE")
[ "${INPUT_LOOKUP_ONLY:-false}" = true ] && args+=(--lookup-only)
[ "${INPUT_FAIL_ON_CACHE_MISS:-false}" = true ] && args+=(--fail-on-cache-miss)
[ "${INPUT_STRICT:-false}" = true ] && args+=(--strict)

strata="$(strata_binary)"
"$strata" "${args[@]}"
status=$?
if [ "$status" -eq 127 ] || [ "$status" -eq 126 ]; then
  echo "::warning title=strata snapshot restore::cannot run '$strata'; building without a restored snapshot"
  strata_output cache-hit false
  strata_output status error
  status=0
fi
exit "$status"
