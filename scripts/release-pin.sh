#!/usr/bin/env bash
# Pins a release's binaries in actions/setup/release-sums, the file actions/setup checks
# every download against:
#
#   bash scripts/release-pin.sh TAG DIST_DIR URL
#   bash scripts/release-pin.sh v0.2.0 target/release-dist \
#        https://github.com/owner/strata/releases/download/v0.2.0
#
# DIST_DIR holds strata-x86_64-unknown-linux-musl, strata-aarch64-unknown-linux-musl and
# SHA256SUMS as scripts/release-build.sh wrote them (the release workflow passes the bytes
# it attested and attached). The SHA-256 of each binary is computed here and must agree
# with SHA256SUMS; then release-sums is rewritten: `version TAG`, `url URL` (the base URL
# of the release's assets) and one sha256sum line per binary.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: release-pin.sh TAG DIST_DIR URL" >&2; exit 2; }
tag=$1 dist=$2 url=${3%/}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
case "$tag" in
  v[0-9]*) ;;
  *) echo "release-pin: the tag must look like v1.2.3, not '$tag'" >&2; exit 2 ;;
esac
case "$url" in
  https://*) ;;
  *) echo "release-pin: the URL must be https://…, not '$url'" >&2; exit 2 ;;
esac
lines=()
for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
  name="strata-$target"
  [ -f "$dist/$name" ] || { echo "release-pin: $dist/$name is missing" >&2; exit 1; }
  sum=$(sha256sum "$dist/$name" | cut -d ' ' -f 1)
  grep -qx "$sum  $name" "$dist/SHA256SUMS" ||
    { echo "release-pin: $dist/SHA256SUMS does not list $sum for $name" >&2; exit 1; }
  lines+=("$sum  $name")
done
out="$repo/actions/setup/release-sums"
{
  sed -n '/^#/p' "$out" | grep -v '^# No release is pinned yet'
  echo "version $tag"
  echo "url $url"
  printf '%s\n' "${lines[@]}"
} >"$out.new"
mv "$out.new" "$out"
echo "release-pin: actions/setup/release-sums now pins $tag:"
sed -n '/^[^#]/p' "$out"
