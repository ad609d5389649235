#!/usr/bin/env bash
# Benchmarks of the L1 action engine against peers measured in the same run
# (docs/performance.md "L1 action engine"; BENCHMARKING.md explains the method).
#
#   bash scripts/bench/engine.sh            # all four
#   bash scripts/bench/engine.sh hit miss   # a subset: hit, miss, hash, rss
#
# hit   HIT of one C++ translation unit vs a ccache direct-mode hit of the same compile
#       (target: strata/ccache <= 0.5)
# miss  MISS overhead over the bare compile (target: <= 3 %)
# hash  hashing a ~300 MB, 2,000-file input tree (a HIT whose prepared input is the tree) vs
#       `openssl dgst -sha256` over the same files (target: openssl/strata >= 1.0)
# rss   peak RSS of a HIT restoring ~300 MB of artifacts (target: <= 64 MiB)
#
# Peers and strata alternate within each round (hyperfine with both commands, three rounds);
# the figure reported is the ratio of the medians over all rounds.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(hit miss hash rss)

. "$repo/scripts/prereqs.sh"
. "$repo/scripts/bench/lib.sh"
bench_cpu
prereqs_debian hyperfine ccache g++ openssl time
cargo build --release --locked --manifest-path "$repo/Cargo.toml" --bin strata 2>&1 | tail -n 1
S="$repo/target/release/strata"
work=$(mktemp -d "${TMPDIR:-/tmp}/strata-bench-engine.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

median_of() { # hyperfine json, command index -> median seconds
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][int(sys.argv[2])]["median"])' "$1" "$2"
}
ratio_rounds() { # name, peer cmd, strata cmd, hyperfine args... ; prints medians and ratio strata/peer
  local name=$1 peer=$2 mine=$3; shift 3
  local p=() m=()
  for round in 1 2 3; do
    hyperfine -N --style none "$@" --export-json "$work/$name-$round.json" "$peer" "$mine" >/dev/null
    p+=("$(median_of "$work/$name-$round.json" 0)")
    m+=("$(median_of "$work/$name-$round.json" 1)")
  done
  python3 - "${p[@]}" "${m[@]}" <<'EOF'
import statistics, sys
v = [float(x) for x in sys.argv[1:]]
peer, mine = v[:3], v[3:]
pm, mm = statistics.median(peer), statistics.median(mine)
print(f"peer median {pm*1000:.2f} ms (rounds {', '.join(f'{x*1000:.2f}' for x in peer)})")
print(f"strata median {mm*1000:.2f} ms (rounds {', '.join(f'{x*1000:.2f}' for x in mine)})")
print(f"ratio strata/peer = {mm/pm:.3f}")
EOF
}

cat >tu.cc <<'EOF'
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
std::string f(const std::string& s) {
  std::regex r("([a-z]+)@([a-z]+)\\.com");
  std::smatch m;
  std::map<std::string, std::vector<int>> mm;
  if (std::regex_search(s, m, r)) mm[m[1]].push_back(1);
  std::ostringstream o;
  for (auto& [k, v] : mm) o << k << v.size();
  std::vector<std::function<int(int)>> fs;
  fs.push_back([](int x) { return x + 1; });
  return o.str();
}
EOF
mkdir -p out
run_tu="$S action run --cache-root $work/cache --domain third_party --unit tu --output-dir $work/out --prepared-input $work/tu.cc --environment-profile host-cxx -- g++ -O2 -c $work/tu.cc -o $work/out/tu.o"

for w in "${what[@]}"; do
  case $w in
  hit)
    echo "== hit: one C++ TU, strata HIT vs ccache direct-mode hit"
    export CCACHE_DIR="$work/ccache"
    ccache g++ -O2 -c tu.cc -o tu.o && ccache g++ -O2 -c tu.cc -o tu.o
    ccache -s | grep -E 'Hits|direct' | head -n 3 || true
    $run_tu 2>/dev/null && $run_tu 2>&1 | grep -q '^strata: HIT'
    ratio_rounds hit "ccache g++ -O2 -c $work/tu.cc -o $work/tu.o" "$run_tu" --warmup 10 --runs 60
    ;;
  miss)
    echo "== miss: strata MISS (compile + hash + save) vs the bare compile"
    $run_tu >/dev/null 2>&1 # warm the tool-version memo, as in any existing cache
    # hyperfine's per-command batches drift with a 2-core machine's load; alternate single
    # runs instead (order swapped every pair) and compare medians.
    : >"$work/miss.txt"
    for i in $(seq 1 12); do
      for which in $([ $((i % 2)) -eq 0 ] && echo "bare strata" || echo "strata bare"); do
        rm -rf "$work/cache/actions-v1"
        start=$(date +%s%N)
        if [ "$which" = bare ]; then
          g++ -O2 -c "$work/tu.cc" -o "$work/tu.o"
        else
          STRATA_EVENT_LOG="$work/miss-events.jsonl" $run_tu 2>/dev/null || true
        fi
        echo "$which $(( $(date +%s%N) - start ))" >>"$work/miss.txt"
      done
    done
    python3 - "$work/miss.txt" "$work/miss-events.jsonl" <<'EOF2'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
bare = [int(n) / 1e6 for w, n in rows if w == "bare"]
mine = [int(n) / 1e6 for w, n in rows if w == "strata"]
b, m = statistics.median(bare), statistics.median(mine)
print(f"bare compile median {b:.1f} ms, strata MISS median {m:.1f} ms over {len(bare)} alternating pairs")
print(f"ratio strata/bare = {m/b:.4f} (overhead {100*(m/b-1):+.2f} %)")
ev = [json.loads(l) for l in open(sys.argv[2])]
own = [e["total_ms"] - e["build_ms"] for e in ev if e.get("status") == "SAVED"]
print(f"strata's own time per MISS from its event log (total_ms - build_ms): median {statistics.median(own)} ms"
      f" = {100*statistics.median(own)/b:.2f} % of the compile")
EOF2
    ;;
  hash)
    echo "== hash: ~300 MB, 2,000 files; strata HIT over the tree vs openssl dgst -sha256"
    mkdir -p tree
    python3 - "$work/tree" <<'EOF'
import os, random, sys
root = sys.argv[1]
random.seed(7)
block = os.urandom(1 << 20)
for i in range(2000):
    d = os.path.join(root, f"d{i % 40:02d}")
    os.makedirs(d, exist_ok=True)
    size = random.randint(20_000, 280_000)
    with open(os.path.join(d, f"f{i:04d}.o"), "wb") as f:
        off = random.randint(0, len(block) - size)
        f.write(block[off:off + size])
EOF
    du -sb tree | awk '{printf "tree: %.0f MB, ", $1/1e6}'; find tree -type f | wc -l
    find tree -type f | sort >files.txt
    run_tree="$S action run --cache-root $work/cache-hash --domain third_party --unit tree --output-dir $work/out-hash --prepared-input $work/tree --environment-profile bare -- sh -c 'echo x > $work/out-hash/o'"
    sh -c "$run_tree" >/dev/null 2>&1 && sh -c "$run_tree" 2>&1 | grep -q '^strata: HIT'
    printf '#!/bin/sh\nxargs openssl dgst -sha256 <%s >/dev/null\n' "$work/files.txt" >peer.sh
    printf '#!/bin/sh\n%s 2>/dev/null\n' "$run_tree" >mine.sh
    chmod +x peer.sh mine.sh
    ratio_rounds hash "$work/peer.sh" "$work/mine.sh" --warmup 2 --runs 10
    echo "(for this one the target is the inverse: openssl/strata >= 1.0)"
    ;;
  rss)
    echo "== rss: HIT restoring ~300 MB of artifacts"
    [ -d tree ] || { echo "run 'hash' first (it creates the tree)"; exit 1; }
    mkdir -p out-rss
    run_rss="$S action run --cache-root $work/cache-rss --domain third_party --unit big --output-dir $work/out-rss --environment-profile bare --artifact-include '*' -- cp -r $work/tree/. $work/out-rss/"
    sh -c "$run_rss" >/dev/null 2>&1
    rm -rf out-rss && mkdir out-rss
    /usr/bin/time -v sh -c "$run_rss" 2>time.txt >/dev/null
    grep -q '^strata: HIT' time.txt
    du -sb out-rss | awk '{printf "restored: %.0f MB\n", $1/1e6}'
    grep 'Maximum resident set size' time.txt | awk '{printf "peak RSS: %.1f MiB (target <= 64 MiB)\n", $6/1024}'
    ;;
  *) echo "unknown benchmark $w" >&2; exit 2 ;;
  esac
done
