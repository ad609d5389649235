#!/usr/bin/env bash
# Starts, stops or describes a local s3s-fs server for manual tests and benchmarks.
#
#   scripts/s3-test-server.sh start   # start on 127.0.0.1:<free port>, print export lines
#   scripts/s3-test-server.sh env     # print the export lines of the running server
#   scripts/s3-test-server.sh stop    # stop it and delete its data
#
# Use: eval "$(scripts/s3-test-server.sh start)"
# The access key and secret are random hex generated at start: throwaway values for a
# loopback-only server, never real credentials. State lives in $STRATA_S3_TEST_DIR
# (default: ${TMPDIR:-/tmp}/strata-s3-test-$UID). The integration tests do not need this
# script: they start their own server (tests/it/transport/server.rs).
# Install the server with: cargo install s3s-fs --version 0.14.1 --features binary --locked
set -euo pipefail

state="${STRATA_S3_TEST_DIR:-${TMPDIR:-/tmp}/strata-s3-test-$(id -u)}"
bucket="strata-test"

find_server() {
  if command -v s3s-fs >/dev/null 2>&1; then
    command -v s3s-fs
  elif [[ -x "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs" ]]; then
    echo "${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs"
  else
    echo "s3s-fs not found; install it with: cargo install s3s-fs --version 0.14.1 --features binary --locked" >&2
    return 1
  fi
}

random_hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

port_is_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() { [[ -f "$state/pid" ]] && kill -0 "$(cat "$state/pid")" 2>/dev/null; }

print_env() {
  [[ -f "$state/env" ]] || { echo "no server state in $state; run: $0 start" >&2; return 1; }
  cat "$state/env"
}

start() {
  if running; then print_env; return 0; fi
  local server; server="$(find_server)"
  rm -rf "$state"; mkdir -p "$state/data/$bucket"
  local access="test-$(random_hex 8)" secret; secret="$(random_hex 20)"
  local attempt port
  for attempt in 1 2 3 4 5; do
    port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 40000 ))
    port_is_open "$port" && continue
    "$server" --host 127.0.0.1 --port "$port" --access-key "$access" --secret-key "$secret" \
      "$state/data" >"$state/server.log" 2>&1 &
    echo $! >"$state/pid"
    for _ in $(seq 1 100); do
      if port_is_open "$port"; then
        cat >"$state/env" <<ENV
export STRATA_TEST_S3_ENDPOINT=http://127.0.0.1:$port
export STRATA_TEST_S3_BUCKET=$bucket
export STRATA_TEST_S3_ACCESS_KEY=$access
export STRATA_TEST_S3_SECRET_KEY=$secret
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
ENV
        print_env
        return 0
      fi
      kill -0 "$(cat "$state/pid")" 2>/dev/null || break
      sleep 0.1
    done
    kill "$(cat "$state/pid")" 2>/dev/null || true
  done
  echo "s3s-fs did not start; see $state/server.log" >&2
  return 1
}

stop() {
  if running; then
    kill "$(cat "$state/pid")"
  fi
  rm -rf "$state"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
