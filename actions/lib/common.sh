# Shared helpers of strata's composite actions (sourced, never executed).
#
# Inputs arrive as INPUT_* environment variables set by each step's `env:` block, never
# interpolated into script text (so an input can never become shell code).

# Prints `::add-mask::` for each non-empty argument: the runner hides those values in
# every later log line of the job.
strata_mask() {
  local value
  for value in "$@"; do
    if [ -n "$value" ]; then
      printf '::add-mask::%s\n' "$value"
    fi
  done
}

# Exports credentials given as action inputs for the strata process (and masks them), only
# as a complete pair: access-key-id and secret-access-key both non-empty (with
# session-token if given). Half a pair (e.g. one misnamed secret, which GitHub expands to
# an empty string) is a warning and exports nothing, so the job's environment (AWS_* or
# HW_OBS_*) or anonymous access applies. Inputs left empty keep the job's environment.
strata_credentials() {
  strata_mask "${INPUT_ACCESS_KEY_ID:-}" "${INPUT_SECRET_ACCESS_KEY:-}" "${INPUT_SESSION_TOKEN:-}"
  if [ -n "${INPUT_ACCESS_KEY_ID:-}" ] && [ -n "${INPUT_SECRET_ACCESS_KEY:-}" ]; then
    export AWS_ACCESS_KEY_ID="$INPUT_ACCESS_KEY_ID"
    export AWS_SECRET_ACCESS_KEY="$INPUT_SECRET_ACCESS_KEY"
    if [ -n "${INPUT_SESSION_TOKEN:-}" ]; then
      export AWS_SESSION_TOKEN="$INPUT_SESSION_TOKEN"
    fi
  elif [ -n "${INPUT_ACCESS_KEY_ID:-}" ] || [ -n "${INPUT_SECRET_ACCESS_KEY:-}" ]; then
    local given=access-key-id missing=secret-access-key
    if [ -z "${INPUT_ACCESS_KEY_ID:-}" ]; then
      given=secret-access-key missing=access-key-id
    fi
    echo "::warning title=strata credentials::only the $given input is set ($missing is empty: a misnamed or missing secret?); ignoring both inputs, so the job's AWS_*/HW_OBS_* environment or anonymous access applies"
  elif [ -n "${INPUT_SESSION_TOKEN:-}" ]; then
    echo "::warning title=strata credentials::session-token is set without access-key-id and secret-access-key; ignoring it"
  fi
}

# Exports the producer signing key given as an input (masked: the whole value and the key
# material on its own) as STRATA_SIGNING_KEY, and trusted producer keys as
# STRATA_TRUSTED_KEYS. Empty inputs keep the job's environment.
strata_trust() {
  if [ -n "${INPUT_SIGNING_KEY:-}" ]; then
    local material
    material=$(printf '%s' "$INPUT_SIGNING_KEY" | tr -d '[:space:]')
    strata_mask "$material" "${material#strata-ed25519-secret-v1:}"
    export STRATA_SIGNING_KEY="$INPUT_SIGNING_KEY"
  fi
  if [ -n "${INPUT_TRUSTED_KEYS:-}" ]; then
    export STRATA_TRUSTED_KEYS="$INPUT_TRUSTED_KEYS"
  fi
}

# Describes a strata exit status for a warning: "could not run (exit 127)", "crashed
# (signal 11)", "panicked (exit 101)", "exited 2 (a malformed input; see the error above)".
strata_describe_exit() {
  local status=$1
  case "$status" in
    126 | 127) printf 'could not run (exit %s)' "$status" ;;
    101) printf 'panicked (exit 101; please report it)' ;;
    2) printf 'exited 2 (a malformed input; see the error above)' ;;
    *)
      if [ "$status" -gt 128 ]; then
        printf 'crashed (signal %s)' "$((status - 128))"
      else
        printf 'exited %s' "$status"
      fi
      ;;
  esac
}

# The strata binary: the `strata` input, else `strata` on PATH.
strata_binary() {
  printf '%s' "${INPUT_STRATA:-strata}"
}

# Appends `name=value` to $GITHUB_OUTPUT (single-line values only); a missing or unwritable
# file is a warning on stderr, never a failed step.
strata_output() {
  if [ -z "${GITHUB_OUTPUT:-}" ] || ! printf '%s=%s\n' "$1" "$2" 2>/dev/null >>"$GITHUB_OUTPUT"; then
    echo "::warning title=strata GitHub output::cannot write the output '$1' to GITHUB_OUTPUT (${GITHUB_OUTPUT:-not set}); later steps will not see it" >&2
  fi
  return 0
}

# Appends `name=value` to $GITHUB_ENV (single-line values only), so later steps of the job
# see the variable; a missing or unwritable file is a warning on stderr, never a failed step.
strata_env() {
  if [ -z "${GITHUB_ENV:-}" ] || ! printf '%s=%s\n' "$1" "$2" 2>/dev/null >>"$GITHUB_ENV"; then
    echo "::warning title=strata GitHub environment::cannot export $1 through GITHUB_ENV (${GITHUB_ENV:-not set}); later steps will not see it" >&2
  fi
  return 0
}

# Reads a multi-line input into the array named $1 (blank lines and surrounding spaces
# dropped).
strata_lines() {
  local -n out=$1
  local line
  out=()
  while IFS= read -r line; do
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [ -n "$line" ] && out+=("$line")
  done <<<"${2:-}"
  return 0
}
