#!/usr/bin/env python3
"""Helpers of scripts/bench/snapshot-incremental.sh (no dependencies beyond Python 3.9).

  pool OUT SIZE DIR...         concatenate real object files (*.o) found under DIR... into a
                               SIZE-byte pool file: the compressible content of the cache
  generate CACHE POOL N SEED   write an L1 cache of N entry directories (~1 GB for N = 2000)
  change CACHE POOL N SEED     replace N ordinary entries by N new ones (new keys, new
                               manifest.json, one artifact rewritten); prints bytes changed
  proxy PORT_FILE STATS_FILE UPSTREAM_PORT
                               a TCP proxy on 127.0.0.1 that counts the bytes each way and
                               writes "<to server> <to client>" to STATS_FILE on SIGTERM

The cache is shaped like real ones without running any build: entries
`actions-v1/third_party/unit<NNN>/<64 hex key>/` holding `manifest.json` (unique JSON per
entry), `identity.json` and `artifacts/...`. Sizes: 1 % of the entries ("big") hold one
5-20 MB archive; the others hold one or two files of 50-430 KB and a small dependency file.
About 20 % of the files are random bytes, the rest slices of real object files, so zstd -3
compresses the whole cache about 3x. Everything is derived from SEED (same bytes every time).
"""

import asyncio
import hashlib
import json
import os
import random
import signal
import sys

KB = 1000
MB = 1000 * 1000
UNITS = 500


def is_big(i):
    return i % 100 == 7


def changed_indices(n_entries, count):
    """Entries that `change` replaces: evenly spread ordinary (not big) entries."""
    step = n_entries // count
    return [k * step + step // 2 for k in range(count) if not is_big(k * step + step // 2)]


def entry_path(i, seed):
    key = hashlib.sha256(f"strata-bench-entry-{seed}-{i}".encode()).hexdigest()
    return f"third_party/unit{i % UNITS:03d}/{key}"


def content(rng, pool, size, random_share=0.2):
    if rng.random() < random_share:
        return rng.randbytes(size)
    start = rng.randrange(0, len(pool) - size)
    return pool[start:start + size]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def manifest(path, files, salt):
    """Manifest-like JSON naming the artifacts (the snapshot layer only reads its bytes)."""
    key = path.rsplit("/", 1)[1]
    return json.dumps({
        "schema": "strata.bench_entry", "version": 1, "domain": "third_party",
        "unit": path.split("/")[1], "key": key, "salt": salt,
        "artifacts": [{"path": p, "size": s,
                       "digest": "blake3:" + hashlib.sha256(f"{key}/{p}/{salt}".encode()).hexdigest()}
                      for p, s in files],
    }, indent=2).encode()


def make_entry(cache, path, rng, pool, big, salt):
    """Writes one entry; returns its artifact bytes."""
    root = os.path.join(cache, "actions-v1", path)
    files = []
    if big:
        size = rng.randrange(5 * MB, 20 * MB)
        files.append(("lib/libbundle.a", content(rng, pool, size, random_share=0.25)))
    else:
        for j in range(rng.choice((1, 2))):
            size = rng.randrange(50 * KB, 430 * KB)
            files.append((f"obj/part{j}.o", content(rng, pool, size)))
        dep = "\n".join(f"src/file{rng.randrange(10**6)}.h \\" for _ in range(rng.randrange(20, 80)))
        files.append(("obj/part0.d", dep.encode()))
    for rel, data in files:
        write(os.path.join(root, "artifacts", rel), data)
    write(os.path.join(root, "identity.json"),
          json.dumps({"bench": True, "entry": path, "salt": salt}).encode())
    write(os.path.join(root, "manifest.json"), manifest(path, [(p, len(d)) for p, d in files], salt))
    return sum(len(d) for _, d in files)


def generate(cache, pool_file, n, seed):
    with open(pool_file, "rb") as f:
        pool = f.read()
    total = 0
    for i in range(n):
        rng = random.Random(f"{seed}-{i}")
        total += make_entry(cache, entry_path(i, seed), rng, pool, is_big(i), salt=f"{seed}-{i}")
    os.makedirs(os.path.join(cache, "actions-v1"), exist_ok=True)
    open(os.path.join(cache, ".updated"), "wb").close()
    print(f"generated {n} entries, {total} artifact bytes")


def change(cache, pool_file, count, seed, n_entries):
    """Moves each chosen entry to a new key (entries are immutable: a changed entry is a new
    directory), rewrites its manifest.json and one artifact (same size, new bytes)."""
    with open(pool_file, "rb") as f:
        pool = f.read()
    changed = 0
    for i in changed_indices(n_entries, count):
        old = os.path.join(cache, "actions-v1", entry_path(i, seed))
        new_path = entry_path(i, f"{seed}-changed")
        new = os.path.join(cache, "actions-v1", new_path)
        os.rename(old, new)
        rng = random.Random(f"{seed}-changed-{i}")
        artifact = os.path.join(new, "artifacts", "obj", "part0.o")
        size = os.path.getsize(artifact)
        write(artifact, content(rng, pool, size))
        files = []
        for dirpath, _, names in os.walk(os.path.join(new, "artifacts")):
            for name in names:
                p = os.path.join(dirpath, name)
                files.append((os.path.relpath(p, os.path.join(new, "artifacts")), os.path.getsize(p)))
        write(os.path.join(new, "manifest.json"), manifest(new_path, sorted(files), f"{seed}-changed-{i}"))
        changed += sum(s for _, s in files)
    open(os.path.join(cache, ".updated"), "wb").close()
    print(changed)


def make_pool(out, size, dirs):
    paths = []
    for d in dirs:
        for dirpath, _, names in os.walk(d):
            paths += [os.path.join(dirpath, n) for n in names if n.endswith(".o")]
    paths.sort()
    random.Random(1).shuffle(paths)
    written = 0
    with open(out, "wb") as f:
        for p in paths:
            if written >= size:
                break
            with open(p, "rb") as g:
                data = g.read()[: size - written]
            f.write(data)
            written += len(data)
    if written < size:
        sys.exit(f"only {written} bytes of object files under {dirs}; need {size}")


async def proxy(port_file, stats_file, upstream_port):
    totals = [0, 0]

    async def pipe(reader, writer, slot):
        try:
            while True:
                data = await reader.read(1 << 18)
                if not data:
                    break
                totals[slot] += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer, 0), pipe(server_reader, client_writer, 1))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    with open(stats_file, "w") as f:
        f.write(f"{totals[0]} {totals[1]}\n")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "pool":
        make_pool(args[0], int(args[1]), args[2:])
    elif cmd == "generate":
        generate(args[0], args[1], int(args[2]), args[3])
    elif cmd == "change":
        change(args[0], args[1], int(args[2]), args[3], int(args[4]))
    elif cmd == "proxy":
        asyncio.run(proxy(args[0], args[1], int(args[2])))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
