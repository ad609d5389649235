#!/usr/bin/env bash
# Step script of actions/restore: runs `strata snapshot restore --github-output`.
# strata itself fails open (exit 0 with a warning). The step fails only when asked to:
# fail-on-cache-miss (nothing restored) or strict (a store or verification error). Anything
# else — a missing binary (126/127), a crash (a signal, 128+N), a Rust panic (101), a
# malformed input (2) — is a warning with status=error, and the build goes on.
set -uo pipefail
# shellcheck source=../lib/common.sh
. "$GITHUB_ACTION_PATH/../lib/common.sh"
strata_credentials
strata_trust

args=(snapshot restore --github-output --cache-dir "$INPUT_CACHE_DIR" --key "${INPUT_KEY:-}")
strata_lines prefixes "${INPUT_RESTORE_KEYS:-}"
for prefix in "${prefixes[@]}"; do
  args+=(--restore-key "$prefix")
done
[ -n "${INPUT_STORE:-}" ] && args+=(--store "$INPUT_STORE")
[ "${INPUT_LOOKUP_ONLY:-false}" = true ] && args+=(--lookup-only)
strict=false
[ "${INPUT_FAIL_ON_CACHE_MISS:-false}" = true ] && { args+=(--fail-on-cache-miss); strict=true; }
[ "${INPUT_STRICT:-false}" = true ] && { args+=(--strict); strict=true; }

strata="$(strata_binary)"
"$strata" "${args[@]}"
status=$?
if [ "$status" -eq 0 ]; then
  exit 0
fi
if [ "$status" -eq 1 ] && [ "$strict" = true ]; then
  # strata's own documented failure (fail-on-cache-miss or strict); it wrote the outputs.
  exit 1
fi
echo "::warning title=strata snapshot restore::'$strata snapshot restore' $(strata_describe_exit "$status"); building without a restored snapshot"
strata_output cache-hit false
strata_output status error
strata_output reason "strata snapshot restore $(strata_describe_exit "$status")"
if [ "$strict" = true ]; then
  exit 1
fi
exit 0
