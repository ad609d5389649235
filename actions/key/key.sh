#!/usr/bin/env bash
# Step script of actions/key: runs `strata snapshot key --github-output`. Never fails the
# job for a cache-layer reason: if strata itself cannot run, it reports supported=false.
set -uo pipefail
# shellcheck source=../lib/common.sh
. "$GITHUB_ACTION_PATH/../lib/common.sh"

args=(snapshot key --github-output --cache-dir "$INPUT_CACHE_DIR" --source-root "${INPUT_SOURCE_ROOT:-.}")
[ -n "${INPUT_ARCHITECTURE:-}" ] && args+=(--architecture "$INPUT_ARCHITECTURE")
[ -n "${INPUT_SOC:-}" ] && args+=(--soc "$INPUT_SOC")
[ -n "${INPUT_SOC_ALIASES:-}" ] && args+=(--soc-aliases "$INPUT_SOC_ALIASES")
[ -n "${INPUT_TOOLCHAIN_IMAGE:-}" ] && args+=(--toolchain-image "$INPUT_TOOLCHAIN_IMAGE")
[ -n "${INPUT_CANN_METADATA:-}" ] && args+=(--cann-metadata "$INPUT_CANN_METADATA")
[ -n "${INPUT_SOURCE_HASH:-}" ] && args+=(--source-hash "$INPUT_SOURCE_HASH")
[ -n "${INPUT_PREFIX:-}" ] && args+=(--prefix "$INPUT_PREFIX")
tools=()
while read -r -a words; do
  for tool in "${words[@]}"; do
    args+=(--toolchain-tool "$tool")
    tools+=("$tool")
  done
done <<<"${INPUT_TOOLCHAIN_TOOLS:-}"
# The build compares its real compilers with these (cmake/strata.cmake warns when one is not
# among them: the snapshot key would then name another toolchain than the one that builds).
if [ ${#tools[@]} -gt 0 ]; then
  strata_env STRATA_TOOLCHAIN_TOOLS "${tools[*]}"
fi
[ "${INPUT_TOOLCHAIN_TOOL_CONTENT:-false}" = true ] && args+=(--toolchain-tool-content)
strata_lines paths "${INPUT_SOURCE_PATHS:-}"
for path in "${paths[@]}"; do
  args+=(--source-path "$path")
done
strata_lines required "${INPUT_REQUIRE:-}"
for path in "${required[@]}"; do
  args+=(--require "$path")
done

strata="$(strata_binary)"
if ! "$strata" "${args[@]}"; then
  echo "::warning title=strata snapshot key::'$strata snapshot key' failed; building without a persistent L1 snapshot"
  strata_output supported false
  strata_output reason "strata snapshot key failed"
fi
exit 0
