#!/usr/bin/env bash
# The fresh-machine check of README's commands (issue 26 item 7), in a debootstrap chroot of
# a stock Debian 12 (minbase: no curl, no sudo, no compiler), as root:
#
#   bash scripts/fresh-debian-check.sh [CHROOT_DIR]      # default /tmp/strata-debian12
#
# 1. debootstrap bookworm from the mirror apt uses here (the first URIs of
#    /etc/apt/sources.list.d/debian.sources or sources.list), unless CHROOT_DIR holds it;
# 2. copies this checkout (git archive HEAD) to the same path inside, with the host's
#    debug build of strata and of the integration tests (run `cargo test --no-run` first);
# 3. installs what scripts/test.sh installs (its `prereqs_debian` line, read from it), except
#    curl, and runs the actions/setup tests:
#    the two that download with curl must fail, naming curl;
# 4. runs test.sh's install line (scripts/prereqs.sh), which installs curl, and the tests
#    again: all pass. The main job's install line runs too.
# It does not build strata inside (that needs Rust from rustup, which README lists as a
# prerequisite and which cannot be fetched in every sandbox). The host's CA bundle is
# copied in, since registries may be reached through a proxy the host trusts.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
root=${1:-/tmp/strata-debian12}
[ "$(id -u)" -eq 0 ] || { echo "run as root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*\) .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -x "$root/bin/sh" ] || debootstrap --variant=minbase bookworm "$root" "${mirror:-http://deb.debian.org/debian}" >/dev/null
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
trap 'umount "$root/dev" "$root/proc" 2>/dev/null' EXIT
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's CA bundle, after Debian's ca-certificates (re)wrote the chroot's.
host_cas() {
  [ -s /etc/ssl/certs/ca-certificates.crt ] && mkdir -p "$root/etc/ssl/certs" &&
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
}
inside="$root$repo"
rm -rf "$inside" && mkdir -p "$inside/target/debug/deps"
(cd "$repo" && git archive HEAD) | tar -x -C "$inside"
cp "$repo/target/debug/strata" "$inside/target/debug/strata"
it=$(ls -t "$repo"/target/debug/deps/it-* | grep -v '\.d$' | head -n 1)
cp "$it" "$inside/target/debug/deps/it"
# A clean environment, but the host's TLS settings (which CA bundle pip and Python trust).
tls=()
for v in SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE PIP_CERT; do
  [ -n "${!v:-}" ] && tls+=("$v=${!v}")
done
in_root() { chroot "$root" env -i HOME=/root PATH=/usr/bin:/bin:/usr/sbin:/sbin "${tls[@]}" bash -c "cd '$repo' && $1"; }
tests() { in_root "STRATA_TEST_PYTHON=$repo/target/tools-venv/bin/python ./target/debug/deps/it actions_setup 2>&1" | grep -E '^test |test result|curl: command not found' ; }
# The install lines as the two scripts have them (so this check cannot drift from them).
test_line=$(sed -n 's/^prereqs_debian //p' "$repo/scripts/test.sh" | head -n 1)
main_line=$(sed -n 's/^prereqs_debian //p' "$repo/examples/main-job.sh" | head -n 1)
[ -n "$test_line" ] && [ -n "$main_line" ] || { echo "no prereqs_debian line in test.sh or main-job.sh" >&2; exit 2; }
without_curl=$(printf ' %s ' "$test_line" | sed 's/ curl / /')
fail=0
echo "== stock: $(in_root 'command -v curl || echo no curl')"
in_root ". scripts/prereqs.sh && prereqs_debian $without_curl" >/dev/null || fail=1
host_cas
in_root ". scripts/prereqs.sh && prereqs_tools_venv" >/dev/null || fail=1
in_root "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q curl" >/dev/null 2>&1
echo "== actions/setup tests without curl (two must fail)"
out=$(tests); printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q 'test result: FAILED. 3 passed; 2 failed' || fail=1
echo "== test.sh's install line, then the tests again (all must pass)"
in_root "set -e; . scripts/prereqs.sh; prereqs_debian $test_line" || fail=1
host_cas
in_root "set -e; . scripts/prereqs.sh; prereqs_tools_venv; command -v curl" || fail=1
out=$(tests); printf '%s\n' "$out"
printf '%s\n' "$out" | grep -q 'test result: ok. 5 passed' || fail=1
echo "== main-job.sh's install line"
in_root ". scripts/prereqs.sh && prereqs_debian $main_line && echo ok" || fail=1
[ "$fail" -eq 0 ] && echo "fresh Debian 12 check passed" || echo "fresh Debian 12 check FAILED" >&2
exit "$fail"
