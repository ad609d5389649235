"""Helpers of scripts/bench/real-project.sh: apt sources, counters of the three caches, object
copies and comparisons, ninja's rebuild set, result records and the final report.

Run as `python3 real_project_helper.py COMMAND ARGS...`; every command prints plain text or
one JSON value on stdout. Standard library only; the strata and ccache counters and the
object comparison come from launcher_helper.py beside this file.
"""

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launcher_helper  # noqa: E402


def cmd_apt_sources():
    """One `deb-src` line for every `deb` entry of the machine's apt sources (one-line
    `sources.list` files and deb822 `.sources` files), keeping its options (signed-by), so a
    private apt configuration can fetch source packages from the same archive and mirror
    without editing the system's sources."""
    lines = set()
    one_line = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
    for path in one_line:
        try:
            text = open(path).read()
        except OSError:
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("deb "):
                lines.add("deb-src " + line[4:])
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            text = open(path).read()
        except OSError:
            continue
        for stanza in text.split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[0].isspace():
                    continue
                k, v = line.split(":", 1)
                fields[k.strip().lower()] = v.strip()
            if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
                continue
            options = f"[signed-by={fields['signed-by']}] " if "signed-by" in fields else ""
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    lines.add(f"deb-src {options}{uri} {suite} {fields.get('components', '')}".strip())
    print("\n".join(sorted(lines)))


def sccache_counters(sccache):
    """`sccache --show-stats --stats-format=json` of the running server (SCCACHE_SERVER_PORT)
    as hit/miss counts summed over languages."""
    out = subprocess.run([sccache, "--show-stats", "--stats-format=json"], capture_output=True,
                         text=True, check=True)
    stats = json.loads(out.stdout)["stats"]

    def total(name):
        return sum(stats.get(name, {}).get("counts", {}).values())
    return {"hit": total("cache_hits"), "miss": total("cache_misses"),
            "not_cached": sum(stats.get("not_cached", {}).values()), "errors": total("cache_errors")}


def counters(tool, cache, sccache=""):
    if tool == "sccache":
        return sccache_counters(sccache)
    if tool == "ccache":
        os.environ["CCACHE_DIR"] = cache
    if tool in ("strata", "ccache"):
        return launcher_helper.counters(tool, cache)
    return {}


def cmd_counters(tool, cache, sccache=""):
    print(json.dumps(counters(tool, cache, sccache)))


def cmd_diff(after, before):
    print(json.dumps(launcher_helper.diff(json.loads(after), json.loads(before))))


def cmd_save_objects(build, dest):
    """Copies every object file (*.o) under BUILD to DEST, at the same relative paths."""
    n = 0
    for d, _, files in os.walk(build):
        for f in files:
            if f.endswith(".o") and "CMakeFiles/CMakeScratch" not in d and "CompilerId" not in d:
                rel = os.path.relpath(os.path.join(d, f), build)
                os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                shutil.copyfile(os.path.join(d, f), os.path.join(dest, rel))
                n += 1
    print(n)


def objects(root):
    found = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".o"):
                p = os.path.join(d, f)
                found[os.path.relpath(p, root)] = p
    return found


def cmd_zstd_cost(root):
    """What storing every file under ROOT compressed would cost: the bytes of each file
    compressed alone with `zstd -1` (as a cache that compresses its entries stores them),
    summed, and the CPU seconds of compressing and of decompressing them all (one `zstd`
    process per direction, one thread). Prints JSON."""
    import resource
    import tempfile
    files = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
             if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f))]
    with tempfile.TemporaryDirectory() as tmp:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["zstd", "-1", "-T1", "-q", "-f", "--output-dir-flat", tmp, "--"] + files, check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        packed = [os.path.join(tmp, f) for f in os.listdir(tmp)]
        compressed = sum(os.path.getsize(f) for f in packed)
        subprocess.run(["zstd", "-d", "-T1", "-q", "-c", "--"] + packed, check=True, stdout=subprocess.DEVNULL)
        r2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = lambda a, b: round((b.ru_utime - a.ru_utime) + (b.ru_stime - a.ru_stime), 3)
    print(json.dumps({"files": len(files), "bytes": sum(os.path.getsize(f) for f in files),
                      "zstd1_bytes": compressed, "compress_cpu": cpu(r0, r1), "decompress_cpu": cpu(r1, r2)}))


def cmd_rebuild_set(build):
    """What `ninja -n` would run in BUILD now, as a sorted JSON list of edge descriptions
    (`Building CXX object …`, `Linking CXX static library …`)."""
    env = dict(os.environ, NINJA_STATUS="")
    out = subprocess.run(["ninja", "-C", build, "-n"], capture_output=True, text=True, env=env, check=True)
    edges = sorted(line.strip() for line in out.stdout.splitlines()
                   if line.strip() and not line.startswith("ninja: "))
    print(json.dumps(edges))


def cmd_record(path, *pairs):
    """Writes (or updates) the JSON object in PATH with KEY=VALUE arguments; a VALUE that
    parses as JSON is kept as such, and a VALUE of `@FILE` is the JSON in FILE."""
    rec = {}
    if os.path.exists(path):
        with open(path) as f:
            rec = json.load(f)
    for pair in pairs:
        k, v = pair.split("=", 1)
        if v.startswith("@"):
            with open(v[1:]) as f:
                rec[k] = json.load(f)
            continue
        try:
            rec[k] = json.loads(v)
        except ValueError:
            rec[k] = v
    with open(path, "w") as f:
        json.dump(rec, f, sort_keys=True)


def compiles(edges):
    return sum(1 for e in edges if e.startswith("Building "))


def cmd_finish_place(results, place_dir, producer):
    """Completes the job records of one place (PLACE_DIR/<tool>.json, written by the script)
    and appends them to RESULTS (JSON lines): objects compared with the plain build of the same
    flags at that place (`plain` for ccache and sccache, `plain-maps`, the options of
    strata_prefix_map_options(), for strata), the differing ones that name PRODUCER (the
    checkout the cache was filled in), and ninja's rebuild sets compared with plain's. Jobs
    are keyed by slot (`plain#2` is a second plain build in the round); the references are
    the first plain and plain-maps builds."""
    jobs = {}
    for path in sorted(glob.glob(os.path.join(place_dir, "*.json"))):
        with open(path) as f:
            rec = json.load(f)
        jobs[rec.get("slot", rec["tool"])] = rec
    plain = dict(jobs.get("plain", {}))
    for rec in jobs.values():
        ref = plain if rec["tool"] != "strata" else jobs.get("plain-maps")
        if rec["tool"] not in ("plain", "plain-maps") and ref and "objects" in rec and "objects" in ref:
            a, b = objects(ref["objects"]), objects(rec["objects"])
            same, differ = [], []
            for rel in sorted(set(a) & set(b)):
                with open(a[rel], "rb") as x, open(b[rel], "rb") as y:
                    (same if x.read() == y.read() else differ).append(rel)
            naming = 0
            for rel in differ:
                with open(b[rel], "rb") as y:
                    naming += producer.encode() in y.read()
            rec.update(objects_total=len(a), objects_same=len(same), objects_differ=differ[:20],
                       objects_naming_producer=naming, objects_missing=sorted(set(a) ^ set(b))[:20])
        for key in ("noop", "edit", "revert"):
            if key + "_set" in rec:
                rec[key + "_edges"] = len(rec[key + "_set"])
                rec[key + "_compiles"] = compiles(rec[key + "_set"])
                if rec["tool"] != "plain" and key + "_set" in plain:
                    rec[key + "_edges_equal"] = rec[key + "_set"] == plain[key + "_set"]
                    rec[key + "_compiles_equal"] = rec[key + "_edges_equal"]
                    if not rec[key + "_edges_equal"]:
                        rec[key + "_only_tool"] = sorted(set(rec[key + "_set"]) - set(plain[key + "_set"]))[:10]
                        rec[key + "_only_plain"] = sorted(set(plain[key + "_set"]) - set(rec[key + "_set"]))[:10]
                del rec[key + "_set"]
    with open(results, "a") as f:
        for tool, rec in sorted(jobs.items()):
            rec.pop("objects", None)
            f.write(json.dumps(rec, sort_keys=True) + "\n")


def cmd_summary(path):
    """One line per job of the last place in RESULTS (printed as the run goes)."""
    recs = [json.loads(line) for line in open(path) if line.strip()]
    last = recs[-1]
    for r in recs:
        if (r["project"], r["repeat"], r["scenario"]) != (last["project"], last["repeat"], last["scenario"]):
            continue
        parts = [f"{r.get('slot', r['tool']):12}"]
        if "job" in r:
            parts.append(f"job {r['job']:.1f} s (restore {r.get('restore', 0):.1f} + build {r['wall']:.1f} + save {r.get('save', 0):.1f})")
        elif "wall" in r:
            parts.append(f"build {r['wall']:.1f} s, cpu {r.get('cpu', 0):.1f} s")
        if "hit" in r:
            parts.append(f"{r['hit']} hit / {r['miss']} miss")
        if "objects_total" in r:
            parts.append(f"objects equal to plain {r['objects_same']}/{r['objects_total']}"
                         + (f" ({r['objects_naming_producer']} name the producer's checkout)" if r["objects_naming_producer"] else ""))
        for key in ("noop", "edit", "revert"):
            if key + "_edges" in r:
                eq = r.get(key + "_edges_equal")
                parts.append(f"{key}: ninja re-runs {r[key + '_compiles']} compiles ({r[key + '_edges']} edges)"
                             + ("" if eq is None else " = plain's" if eq else " **differs from plain's**"))
            if key + "_wall" in r:
                parts.append(f"{key} rebuild {r[key + '_wall']:.1f} s"
                             + (f", {r.get(key + '_hit', 0)} hit / {r.get(key + '_miss', 0)} miss" if r["tool"] not in ("plain", "plain-maps") else ""))
        if "cache_bytes" in r:
            parts.append(f"local cache {r['cache_bytes'] / 1e6:.1f} MB")
        if "stored_bytes" in r:
            parts.append(f"stored {r['stored_bytes'] / 1e6:.1f} MB")
        if "zstd" in r:
            z = r["zstd"]
            parts.append(f"its {z['files']} files compressed one by one with zstd -1: {z['zstd1_bytes'] / 1e6:.1f} MB,"
                         f" {z['compress_cpu']:.2f} s cpu to compress, {z['decompress_cpu']:.2f} s to decompress")
        print("   " + "; ".join(parts))


def cmd_hits(text):
    d = json.loads(text) if text else {}
    print(f"{d.get('hit', 0)} hits, {d.get('miss', 0)} misses")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec=".2f"):
    return "—" if v is None else format(v, spec)


def cmd_report(path):
    """The per-scenario tables of a results file (see real-project.sh for the fields)."""
    recs = [json.loads(line) for line in open(path) if line.strip()]
    tools = ["plain", "strata", "ccache", "sccache"]
    for project in sorted({r["project"] for r in recs}):
        rp = [r for r in recs if r["project"] == project]
        print(f"\n#### {project}: {rp[0].get('compiles', '?')} compiles; "
              f"ratios are tool / plain in the same round, plain being the mean of the plain builds "
              f"(plain or plain-maps) just before and just after the tool's build "
              f"(median over {max(r['repeat'] for r in rp)} round(s))")
        print("| scenario | " + " | ".join(tools) + " |")
        print("|---|" + "---|" * len(tools))

        def cell(scenario, tool, field="wall"):
            rs = [r for r in rp if r["scenario"] == scenario and r["tool"] == tool and field in r]
            return rs

        def ratio_row(label, scenario, field):
            cells = []
            per_round = {}
            for tool in tools:
                rs = cell(scenario, tool, field)
                if not rs:
                    cells.append("—")
                    continue
                if tool == "plain":
                    # plain's cell: the mean of the round's plain builds, one value a round.
                    rounds = sorted({r["repeat"] for r in rs})
                    per_round[tool] = [1.0 for _ in rounds]
                    t = median([reference(scenario, field, n) for n in rounds])
                    cells.append(f"{t:.1f} s (1.000)")
                    continue
                ratios = []
                for r in rs:
                    base = reference(scenario, field, r["repeat"], r.get("position"))
                    ratios.append(r[field] / base if base else None)
                per_round[tool] = ratios
                t = median([r[field] for r in rs])
                cells.append(f"{t:.1f} s ({fmt(median(ratios), '.3f')})")
            print(f"| {label} | " + " | ".join(cells) + " |")
            if len(per_round.get("plain", [])) > 1:
                print("|   ratio in each round | " + " | ".join(
                    ", ".join(fmt(v, ".3f") for v in per_round[name]) if per_round.get(name) else "—" for name in tools) + " |")

        def reference(scenario, field, repeat, position=None):
            """Plain's time for the build at POSITION in a round: the mean of the plain builds
            (plain or plain-maps) nearest before and after it; with no position, the mean of
            all the round's plain builds. For a fresh runner's job, the job of a runner
            without a cache is the build."""
            base_field = "wall" if field == "job" else field
            plains = plain_builds(scenario, base_field, repeat)
            if position is not None and all("position" in b for b in plains):
                before = [b for b in plains if b["position"] < position]
                after = [b for b in plains if b["position"] > position]
                plains = ([max(before, key=lambda b: b["position"])] if before else []) + \
                         ([min(after, key=lambda b: b["position"])] if after else [])
            times = [b[base_field] for b in plains]
            return statistics.mean(times) if times else None

        def plain_builds(scenario, field, repeat):
            """The round's plain builds (plain or plain-maps) that have FIELD."""
            return [b for b in rp if b["scenario"] == scenario and b["repeat"] == repeat
                    and b["tool"] in ("plain", "plain-maps") and b.get(field)]

        def noise_row(scenario, field):
            """A plain build against the plain builds nearest before and after it (two slots
            away, where a tool's are one): what a tool with no cost at all would read in this
            run. Only rounds with positions and a plain build on both sides count."""
            ratios = []
            for n in sorted({r["repeat"] for r in rp if r["scenario"] == scenario}):
                plains = sorted((b for b in plain_builds(scenario, field, n) if "position" in b),
                                key=lambda b: b["position"])
                for before, mid, after in zip(plains, plains[1:], plains[2:]):
                    ratios.append(mid[field] / statistics.mean((before[field], after[field])))
            if not ratios:
                return
            print(f"|   plain against the plain builds on both sides (a tool of no cost would read this): "
                  f"median, lowest–highest | {median(ratios):.3f}, {min(ratios):.3f}–{max(ratios):.3f} | "
                  + " | ".join("—" for _ in tools[1:]) + " |")

        def count_row(label, scenario, fn):
            cells = []
            for tool in tools:
                rs = cell(scenario, tool, "scenario")
                cells.append("; ".join(sorted({fn(r) for r in rs})) if rs else "—")
            print(f"| {label} | " + " | ".join(cells) + " |")

        def hits(r):
            if r["tool"] == "plain":
                return "—"
            return f"{r.get('hit', 0)} hit / {r.get('miss', 0)} miss"

        def equal(r):
            if "objects_total" not in r:
                return "—"
            s = f"{r['objects_same']}/{r['objects_total']}"
            if r.get("objects_naming_producer"):
                s += f" ({r['objects_naming_producer']} name the producer's checkout)"
            return s

        def rebuild(key):
            def f(r):
                if key not in r:
                    return "—"
                s = str(r[key])
                if r["tool"] != "plain" and key + "_equal" in r:
                    s += " (= plain)" if r[key + "_equal"] else " (**≠ plain**)"
                return s
            return f

        for scenario, title in (("cold", "cold build"), ("warm", "warm, another checkout, same machine"),
                                ("fresh", "fresh runner at another path: restore + build + save")):
            if not any(r["scenario"] == scenario for r in rp):
                continue
            ratio_row(f"{title}: wall (ratio)", scenario, "wall" if scenario != "fresh" else "job")
            if scenario == "cold":
                noise_row(scenario, "wall")
            if scenario == "fresh":
                ratio_row("  of which the build", scenario, "wall")
                count_row("  restore / save s", scenario,
                          lambda r: "—" if r["tool"] == "plain" else f"{r.get('restore', 0):.1f} / {r.get('save', 0):.1f}")
            count_row("  hits / misses", scenario, hits)
            count_row("  objects equal to plain with the same flags", scenario, equal)
            if scenario == "cold":
                count_row("  local cache after the cold build", scenario,
                          lambda r: f"{r['cache_bytes'] / 1e6:.1f} MB" if "cache_bytes" in r else "—")
                count_row("  stored remotely by the producer", scenario,
                          lambda r: f"{r['stored_bytes'] / 1e6:.1f} MB" if "stored_bytes" in r else "—")
                count_row("  the local cache's files, each compressed with zstd -1", scenario,
                          lambda r: f"{r['zstd']['zstd1_bytes'] / 1e6:.1f} MB ({r['zstd']['compress_cpu']:.2f} s / {r['zstd']['decompress_cpu']:.2f} s cpu)" if "zstd" in r else "—")
        if any(r["scenario"] == "header" for r in rp):
            count_row("no-op `ninja -n` after the HIT-filled build: edges", "header", rebuild("noop_edges"))
            ratio_row("header edited: rebuild wall (ratio)", "header", "edit_wall")
            count_row("  compiles ninja re-runs", "header", rebuild("edit_compiles"))
            count_row("  hits / misses", "header",
                      lambda r: "—" if r["tool"] == "plain" else f"{r.get('edit_hit', 0)} hit / {r.get('edit_miss', 0)} miss")
            ratio_row("header reverted: rebuild wall (ratio)", "header", "revert_wall")
            count_row("  compiles ninja re-runs", "header", rebuild("revert_compiles"))
            count_row("  hits / misses", "header",
                      lambda r: "—" if r["tool"] == "plain" else f"{r.get('revert_hit', 0)} hit / {r.get('revert_miss', 0)} miss")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"apt-sources": cmd_apt_sources, "counters": cmd_counters, "diff": cmd_diff,
     "save-objects": cmd_save_objects, "zstd-cost": cmd_zstd_cost, "rebuild-set": cmd_rebuild_set,
     "record": cmd_record, "finish-place": cmd_finish_place, "summary": cmd_summary,
     "hits": cmd_hits, "report": cmd_report}[cmd](*args)


if __name__ == "__main__":
    main()
