"""Helpers of scripts/bench/launcher.sh (counters, ninja commands, per-TU runs, reports).

Run as `python3 launcher_helper.py COMMAND ARGS...`; every command prints plain text or one
JSON value on stdout. Standard library only.
"""

import filecmp
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def strata_counters(cache):
    """Sum of strata's counters (`<cache>/.local/counters/*.json`, `{"<domain>": {"<name>":
    n}}`): the launcher's compile counters by name, the archive steps' as `archive_<name>`."""
    total = {}
    d = os.path.join(cache, ".local", "counters")
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            try:
                with open(os.path.join(d, name)) as f:
                    shard = json.load(f)
            except (OSError, ValueError):
                continue
            for domain, prefix in (("compile", ""), ("archive", "archive_")):
                for k, v in shard.get(domain, {}).items():
                    total[prefix + k] = total.get(prefix + k, 0) + v
    return total


def ccache_counters():
    """`ccache --print-stats` of $CCACHE_DIR as a dict (hit/miss named like strata's)."""
    out = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, check=True)
    raw = {}
    for line in out.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1].isdigit():
            raw[parts[0]] = int(parts[1])
    return {
        "hit": raw.get("direct_cache_hit", 0) + raw.get("preprocessed_cache_hit", 0),
        "direct_hit": raw.get("direct_cache_hit", 0),
        "miss": raw.get("cache_miss", 0),
    }


def counters(tool, cache):
    if tool == "strata":
        return strata_counters(cache)
    if tool == "ccache":
        return ccache_counters()
    return {}


def diff(after, before):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


def compile_commands(build, launcher):
    """The compile commands of a Ninja build dir (`ninja -t commands`) that start with
    `launcher` (empty: every command with ` -c `), as argument lists."""
    out = subprocess.run(["ninja", "-C", build, "-t", "commands"], capture_output=True, text=True, check=True)
    cmds = []
    for line in out.stdout.splitlines():
        args = shlex.split(line)
        if "-c" not in args or "-o" not in args:
            continue
        if launcher and args[0] != launcher:
            continue
        cmds.append(args)
    return cmds


def object_of(args):
    return args[args.index("-o") + 1]


def includes(args, cwd):
    """Absolute, normalised paths the compiler reads for this compile now (a `-M` run)."""
    compiler = args[1:] if args[0].endswith(("ccache", "strata")) else args
    keep, skip = [], False
    for a in compiler:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD", "-MP"):
            continue
        keep.append(a)
    with tempfile.NamedTemporaryFile(suffix=".d") as dep:
        subprocess.run(keep + ["-M", "-MF", dep.name], cwd=cwd, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = open(dep.name).read().replace("\\\n", " ")
    paths = text.split(":", 1)[1].split()
    return {os.path.normpath(os.path.join(cwd, p)) for p in paths}


def cmd_counters(tool, cache):
    print(json.dumps(counters(tool, cache)))


def cmd_diff(after, before):
    print(json.dumps(diff(json.loads(after), json.loads(before))))


def cmd_per_tu(tool, cache, build, launcher, header):
    """Runs every compile of `build` once, through `launcher`, one at a time, and prints a
    JSON report: the objects that HIT, that MISSed, and those whose compile reads
    `header` (an absolute path) now."""
    report = {"hit": [], "miss": [], "other": [], "reads": [], "preprocessed_hit": []}
    for args in compile_commands(build, launcher):
        obj = object_of(args)
        os.makedirs(os.path.dirname(os.path.join(build, obj)), exist_ok=True)
        if header and os.path.normpath(header) in includes(args, build):
            report["reads"].append(obj)
        before = counters(tool, cache)
        subprocess.run(args, cwd=build, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        d = diff(counters(tool, cache), before)
        report["hit" if d.get("hit") else "miss" if d.get("miss") else "other"].append(obj)
        if d.get("hit") and tool == "ccache" and not d.get("direct_hit"):
            report["preprocessed_hit"].append(obj)
    print(json.dumps(report))


def cmd_cmp(ref, other):
    """Compares every object file (*.o) under two build directories byte for byte."""
    def objects(root):
        found = set()
        for d, _, files in os.walk(root):
            for f in files:
                if f.endswith(".o"):
                    found.add(os.path.relpath(os.path.join(d, f), root))
        return found
    a, b = objects(ref), objects(other)
    same = [p for p in sorted(a & b) if filecmp.cmp(os.path.join(ref, p), os.path.join(other, p), shallow=False)]
    differ = sorted((a & b) - set(same))
    missing = sorted(a ^ b)
    print(f"{len(same)}/{len(a)} identical" + (f"; DIFFER: {differ}" if differ else "")
          + (f"; only in one: {missing}" if missing else ""))


def cmd_hits(text):
    """Counters diff (JSON) as "H hits, M misses[, other counters]"."""
    d = json.loads(text)
    d.pop("direct_hit", None)
    h, m = d.pop("hit", 0), d.pop("miss", 0)
    print(f"{h} hits, {m} misses" + "".join(f", {k} {v}" for k, v in sorted(d.items())))


def cmd_summary(text):
    """A per-tu report as one line: HIT/MISS counts and whether the MISS set is exactly
    the set of TUs that read the header."""
    r = json.loads(text)
    reads, miss = set(r["reads"]), set(r["miss"])
    total = len(r["hit"]) + len(miss) + len(r["other"])
    other = f", {len(r['other'])} other" if r["other"] else ""
    if r.get("preprocessed_hit"):
        other += f" ({len(r['preprocessed_hit'])} of the HITs in preprocessor mode)"
    if miss == reads:
        verdict = "MISS set == the TUs that read it"
    else:
        verdict = (f"MISS set != readers (MISS, not reading: {sorted(miss - reads)};"
                   f" reading, HIT: {sorted(reads - miss)})")
    print(f"{len(r['hit'])} HIT, {len(miss)} MISS{other}; {len(reads)} of {total} TUs read the header; {verdict}")


def ninja_log_steps(build):
    """Sum of the durations (ms) of the object-file edges of the last build recorded in
    BUILD's .ninja_log, and their count: the time the compile steps took, without linking,
    archiving or ninja itself. Ninja appends every run, each output once per run, so the
    last run is the tail of the log up to the first output named twice."""
    with open(os.path.join(build, ".ninja_log")) as f:
        lines = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
    seen, total, count = set(), 0, 0
    for parts in reversed(lines):
        if len(parts) < 4:
            continue
        if parts[3] in seen:
            break
        seen.add(parts[3])
        if parts[3].endswith(".o"):
            total += int(parts[1]) - int(parts[0])
            count += 1
    return total, count


def cmd_ninja_log(build):
    total, count = ninja_log_steps(build)
    print(f"{total} {count}")


def cmd_cold_tu(strata_build, work_dir, ccache, strata, ccache_dir, strata_cache, base_dir, floor=None,
                trace_example=None):
    """Every compile that went through the launcher in STRATA_BUILD (a Ninja build dir
    configured with strata as the launcher), one at a time, in a rotating order: plain,
    through ccache (a MISS into CCACHE_DIR), through strata (a MISS into STRATA_CACHE) and,
    with FLOOR (scripts/bench/ptrace-floor.c built), under that minimal tracer (the same
    seccomp stops, nothing done at them) pinned to one CPU and unpinned (-u), and with
    TRACE_EXAMPLE (examples/trace.rs built) run by it untraced (--plain) and traced by
    strata's tracer alone (no launcher work: what tracing itself costs a MISS), each in its
    own directory beside STRATA_BUILD.
    Prints JSON: per tool, total wall and CPU seconds (user+sys of the children), and the
    counters of both caches."""
    cmds = [args[1:] for args in compile_commands(strata_build, strata)]
    tools = (["plain", "ccache", "strata"] + (["floor", "floor-u"] if floor else [])
             + (["trace-plain", "traced"] if trace_example else []))
    dirs = {t: os.path.join(work_dir, f"tu-{t}") for t in tools}
    env = {
        "plain": dict(os.environ),
        "ccache": dict(os.environ, CCACHE_DIR=ccache_dir, CCACHE_BASEDIR=base_dir),
        "strata": dict(os.environ, STRATA_CACHE_ROOT=strata_cache, STRATA_BASE_DIRS=base_dir),
        "floor": dict(os.environ),
        "floor-u": dict(os.environ),
        "trace-plain": dict(os.environ),
        "traced": dict(os.environ),
    }
    prefix = {"plain": [], "ccache": [ccache], "strata": [strata], "floor": [floor], "floor-u": [floor, "-u"],
              "trace-plain": [trace_example, "--plain", "--"], "traced": [trace_example, "--"]}
    wall = {t: 0.0 for t in tools}
    cpu = {t: 0.0 for t in tools}
    for i, args in enumerate(cmds):
        order = tools[i % len(tools):] + tools[:i % len(tools)]
        for tool in order:
            obj = object_of(args)
            os.makedirs(os.path.dirname(os.path.join(dirs[tool], obj)), exist_ok=True)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(prefix[tool] + args, cwd=dirs[tool], env=env[tool], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall[tool] += time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[tool] += (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    os.environ["CCACHE_DIR"] = ccache_dir
    print(json.dumps({"tus": len(cmds), "wall": wall, "cpu": cpu,
                      "ccache": ccache_counters(), "strata": strata_counters(strata_cache)}))


def cmd_warm_repeat(runs, ccache_build, strata_build, ccache_dir, strata_cache, base_dir):
    """RUNS times, alternating which goes first: `ninja -t clean` (not timed), then a timed
    `ninja -j2`, in CCACHE_BUILD (ccache launcher) and STRATA_BUILD (strata launcher).
    Prints JSON: per tool the wall and CPU seconds (user+sys of ninja and its children) of
    every run, the compile steps' total (ms, .ninja_log) of every run, and the counters
    added over all runs."""
    env = {
        "ccache": dict(os.environ, CCACHE_DIR=ccache_dir, CCACHE_BASEDIR=base_dir),
        "strata": dict(os.environ, STRATA_CACHE_ROOT=strata_cache, STRATA_BASE_DIRS=base_dir),
    }
    build = {"ccache": ccache_build, "strata": strata_build}
    os.environ["CCACHE_DIR"] = ccache_dir
    before = {"ccache": ccache_counters(), "strata": strata_counters(strata_cache)}
    out = {t: {"wall": [], "cpu": [], "steps_ms": []} for t in build}
    for i in range(int(runs)):
        for tool in (["ccache", "strata"] if i % 2 == 0 else ["strata", "ccache"]):
            subprocess.run(["ninja", "-C", build[tool], "-t", "clean"], check=True, stdout=subprocess.DEVNULL)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(["ninja", "-C", build[tool], "-j2"], env=env[tool], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out[tool]["wall"].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[tool]["cpu"].append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
            out[tool]["steps_ms"].append(ninja_log_steps(build[tool])[0])
    after = {"ccache": ccache_counters(), "strata": strata_counters(strata_cache)}
    for t in build:
        out[t]["counted"] = diff(after[t], before[t])
    print(json.dumps(out))


def cmd_warm_repeat_report(text):
    r = json.loads(text)
    med = {t: {k: statistics.median(r[t][k]) for k in ("wall", "cpu", "steps_ms")} for t in r}
    for t in ("ccache", "strata"):
        c = dict(r[t]["counted"])
        c.pop("direct_hit", None)
        print(f"   {t:6} {med[t]['wall']:.3f} s wall, {med[t]['cpu']:.3f} s cpu, compile steps {med[t]['steps_ms']:.0f} ms"
              f"   [{c.pop('hit', 0)} hits, {c.pop('miss', 0)} misses{''.join(f', {k} {v}' for k, v in sorted(c.items()))}]"
              f"  walls: {' '.join(f'{x:.3f}' for x in r[t]['wall'])}")
    s, c = med["strata"], med["ccache"]
    print(f"   strata/ccache: wall {s['wall'] / c['wall']:.3f}, cpu {s['cpu'] / c['cpu']:.3f},"
          f" compile steps {s['steps_ms'] / c['steps_ms']:.3f}  (medians of {len(r['ccache']['wall'])})")


def cmd_self_cost(strata_build, work_dir, ccache, strata, ccache_dir, strata_cache, base_dir):
    """What each launcher adds to a MISS, measured without the compile's noise: for every
    compile that went through strata in STRATA_BUILD, a strata MISS and a ccache MISS (fresh
    caches) under `perf stat --no-inherit` (the launcher process's own CPU time, its
    children excluded), and the compiler with -E (ccache's MISS runs the preprocessor once
    besides the compile; CPU time of that child). Prints JSON totals in seconds."""
    cmds = [args[1:] for args in compile_commands(strata_build, strata)]
    env = {
        "ccache": dict(os.environ, CCACHE_DIR=ccache_dir, CCACHE_BASEDIR=base_dir),
        "strata": dict(os.environ, STRATA_CACHE_ROOT=strata_cache, STRATA_BASE_DIRS=base_dir),
    }
    prefix = {"ccache": ccache, "strata": strata}
    total = {"strata_self": 0.0, "ccache_self": 0.0, "ccache_cpp": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        stat = os.path.join(tmp, "stat.csv")
        for args in cmds:
            for tool in ("strata", "ccache"):
                d = os.path.join(work_dir, f"self-{tool}")
                os.makedirs(os.path.dirname(os.path.join(d, object_of(args))), exist_ok=True)
                subprocess.run(["perf", "stat", "--no-inherit", "-x,", "-e", "task-clock", "-o", stat,
                                prefix[tool]] + args, cwd=d, env=env[tool], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with open(stat) as f:
                    msec = [float(line.split(",")[0]) for line in f if "task-clock" in line]
                total[f"{tool}_self"] += msec[0] / 1000
            keep, skip = [], False
            for a in args:
                if skip:
                    skip = False
                elif a in ("-o", "-MF", "-MT", "-MQ"):
                    skip = True
                elif a not in ("-c", "-MD", "-MMD", "-MP"):
                    keep.append(a)
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(keep + ["-E", "-o", os.path.join(tmp, "out.i")], cwd=strata_build, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            total["ccache_cpp"] += (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    os.environ["CCACHE_DIR"] = ccache_dir
    total["tus"] = len(cmds)
    total["strata_counted"] = strata_counters(strata_cache)
    total["ccache_counted"] = ccache_counters()
    print(json.dumps(total))


def cmd_self_cost_report(text):
    r = json.loads(text)
    n = r["tus"]
    c = r["ccache_self"] + r["ccache_cpp"]
    print(f"   strata: its own process {r['strata_self']:.2f} s cpu ({1000 * r['strata_self'] / n:.1f} ms per MISS);"
          f" ccache: its own process {r['ccache_self']:.2f} s + the preprocessor run {r['ccache_cpp']:.2f} s"
          f" = {c:.2f} s cpu ({1000 * c / n:.1f} ms per MISS) over {n} TUs;"
          f" strata/ccache {r['strata_self'] / c:.3f}"
          f"   (misses counted: strata {r['strata_counted'].get('miss', 0)}, ccache {r['ccache_counted'].get('miss', 0)})")


def cmd_cold_tu_report(text):
    r = json.loads(text)
    w, c = r["wall"], r["cpu"]
    names = {"floor": "ptrace floor, one CPU (no work at a stop)", "floor-u": "ptrace floor, unpinned",
             "trace-plain": "examples/trace --plain", "traced": "examples/trace (strata's tracer alone)"}
    for tool in [t for t in ("plain", "ccache", "strata", "floor", "floor-u", "trace-plain", "traced") if t in w]:
        extra = ""
        if tool != "plain":
            counted = f"; {r[tool].get('hit', 0)} hits, {r[tool].get('miss', 0)} misses" if tool in ("ccache", "strata") else ""
            extra = (f" ({100 * (w[tool] / w['plain'] - 1):+.1f} % wall, {100 * (c[tool] / c['plain'] - 1):+.1f} % cpu"
                     f"{counted})")
        print(f"   {names.get(tool, tool):6} {w[tool]:7.2f} s wall, {c[tool]:7.2f} s cpu{extra}")
    if "traced" in w:
        print(f"   tracing's own MISS overhead (traced / --plain, same process): "
              f"{100 * (w['traced'] / w['trace-plain'] - 1):+.1f} % wall, {100 * (c['traced'] / c['trace-plain'] - 1):+.1f} % cpu"
              f"   (target: <= 3 %)")
    ow = {t: w[t] - w["plain"] for t in ("ccache", "strata")}
    oc = {t: c[t] - c["plain"] for t in ("ccache", "strata")}
    print(f"   {r['tus']} TUs; overhead over plain: strata {ow['strata']:+.2f} s wall / {oc['strata']:+.2f} s cpu,"
          f" ccache {ow['ccache']:+.2f} s wall / {oc['ccache']:+.2f} s cpu"
          f"   (target: strata's <= ccache's)")


def cmd_median(*values):
    print(statistics.median(float(v) for v in values))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"counters": cmd_counters, "diff": cmd_diff, "per-tu": cmd_per_tu, "cmp": cmd_cmp,
     "median": cmd_median, "hits": cmd_hits, "summary": cmd_summary,
     "ninja-log": cmd_ninja_log, "cold-tu": cmd_cold_tu, "cold-tu-report": cmd_cold_tu_report,
     "warm-repeat": cmd_warm_repeat, "warm-repeat-report": cmd_warm_repeat_report,
     "self-cost": cmd_self_cost, "self-cost-report": cmd_self_cost_report}[cmd](*args)


if __name__ == "__main__":
    main()
