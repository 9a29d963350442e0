"""In-process tree benchmark with CPU accounting: origin → R relays → C clients as threads.

Usage:
    .venv/bin/python bench/shardcast/bench_inprocess.py [--size-mib 256] [--relays 2] [--clients 2]

Prints wall time and the process's CPU seconds (user + sys, kernel copies included) for the
tree, then for one client fetching alone from the origin: the CPU ratio shows whether the
tree's cost is linear in bytes processed, which holds regardless of machine load; wall / CPU
shows how much of a core the process actually got.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path

from intellect.sdk.shardcast import Client, Origin, Relay


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--relays", type=int, default=2)
    ap.add_argument("--clients", type=int, default=2)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="shardcast-inproc-"))
    try:
        (root / "ckpt").mkdir()
        with open(root / "ckpt" / "model.safetensors", "wb") as f:
            f.write(os.urandom(args.size_mib << 20))
        print(f"# load average: {os.getloadavg()[0]:.2f}")
        origin = Origin(root / "o", shard_size=50_000_000).start()
        m, _ = origin.publish(root / "ckpt", 1, "bench")
        c0, t0 = cpu(), time.monotonic()
        relays = [Relay([origin.url], root / f"r{i}").start() for i in range(args.relays)]
        done: dict[int, float] = {}

        def fetch(i: int) -> None:
            Client([r.url for r in relays], fsync=False).fetch(m, root / f"c{i}")
            done[i] = time.monotonic() - t0

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tree_wall, tree_cpu = max(done.values()), cpu() - c0
        c0, t0 = cpu(), time.monotonic()
        Client([origin.url], fsync=False).fetch(m, root / "single")
        single_wall, single_cpu = time.monotonic() - t0, cpu() - c0
        work = args.relays + args.clients  # copies hashed and moved, in units of the checkpoint
        print(f"tree ({args.relays} relays, {args.clients} clients): {tree_wall:.2f} s wall, {tree_cpu:.2f} CPU s")
        print(f"single client from origin: {single_wall:.2f} s wall, {single_cpu:.2f} CPU s")
        print(f"CPU ratio tree/single: {tree_cpu / single_cpu:.2f}x for {work}x the bytes processed; "
              f"share of a core: tree {tree_cpu / tree_wall:.2f}, single {single_cpu / single_wall:.2f}")
        for r in relays:
            r.stop()
        origin.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
