"""Benchmark: one origin → 2 relays → 8 clients on loopback, all separate processes.

Usage:
    .venv/bin/python bench/shardcast/bench_tree.py                    # 1 GiB, 8 clients, 2 relays
    .venv/bin/python bench/shardcast/bench_tree.py --size-mib 256 --repeat 1
    .venv/bin/python bench/shardcast/bench_tree.py --reference /tmp/refvenv/bin/python   # + PyPI shardcast 0.3.2

Figures (each the median of --repeat runs, all in the same invocation):
- single: one client downloading the checkpoint alone, straight from the origin (baseline);
- tree: from the moment the origin serves the new version until all clients have a verified
  checkpoint installed. The origin and the relays are already running (relays long-polling the
  origin), as in a deployment and as bench_reference.py runs the reference's middles; clients are
  started at that moment (their process start-up is inside the clock);
- tree / single: the tree's cost relative to the baseline; aggregate throughput = clients × size / tree;
- sha256 of one core on this machine (the hashing ceiling), measured here too.
The reference implementation (PyPI shardcast 0.3.2) is driven by bench_reference.py when
--reference points at a Python with it installed (see that file for how to install it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from intellect.sdk.shardcast import http_get

CLI = [sys.executable, "-m", "intellect.sdk.shardcast.cli"]
DRIVER = Path(__file__).with_name("origin_driver.py")
CLIENT_DRIVER = Path(__file__).with_name("client_driver.py")


def make_checkpoint(d: Path, size: int) -> None:
    """A checkpoint-shaped directory of `size` random bytes (two safetensors files + config)."""
    d.mkdir(parents=True)
    half = size // 2
    chunk = os.urandom(16 * 1024 * 1024)  # random-looking, written fast (repeats every 16 MiB)
    for i, n in enumerate((half, size - half - 1024)):
        with open(d / f"model-0000{i + 1}-of-00002.safetensors", "wb") as f:
            left = n
            while left:
                k = min(left, len(chunk))
                f.write(chunk[:k])
                left -= k
    (d / "config.json").write_bytes(json.dumps({"model_type": "llama", "pad": "x" * 1000}).encode()[:1024])


def wait_file(p: Path, proc: subprocess.Popen[bytes], timeout: float = 120) -> str:
    t = time.monotonic()
    while not p.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        if time.monotonic() - t > timeout:
            raise TimeoutError(p)
        time.sleep(0.01)
    return p.read_text().strip()


def sha256_core_gbps() -> float:
    b = os.urandom(256 * 1024 * 1024)
    t = time.perf_counter()
    hashlib.sha256(b).digest()
    return len(b) / (time.perf_counter() - t) / 1e9


class Run:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, *args: str, name: str) -> subprocess.Popen[bytes]:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115
        p = subprocess.Popen([*CLI, *args], stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def spawn_script(self, script: Path, *args: str, name: str, stdin: int | None = None) -> subprocess.Popen[bytes]:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115
        p = subprocess.Popen([sys.executable, str(script), *args], stdout=log, stderr=subprocess.STDOUT, stdin=stdin)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.returncode is None and p.poll() is None:
                p.terminate()
        for p in self.procs:
            if p.returncode is not None:
                continue
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def reap(p: subprocess.Popen[bytes]) -> float | None:
    """If `p` has exited: reap it and return its user + system CPU seconds, else None."""
    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
    if not pid:
        return None
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def wait_all(procs: list[subprocess.Popen[bytes]], timeout: float) -> list[tuple[float, float]]:
    """Wait for every process in `procs` to exit, each in a thread blocked in `wait4`; returns each
    one's (monotonic exit time, user + system CPU seconds)."""
    out: list[tuple[float, float] | None] = [None] * len(procs)

    def wait_one(i: int, p: subprocess.Popen[bytes]) -> None:
        _, status, ru = os.wait4(p.pid, 0)
        out[i] = (time.monotonic(), ru.ru_utime + ru.ru_stime)
        p.returncode = os.waitstatus_to_exitcode(status)

    threads = [threading.Thread(target=wait_one, args=(i, p), daemon=True) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(o is None for o in out):
        raise RuntimeError(f"clients did not finish within {timeout:.0f} s")
    return [o for o in out if o is not None]


def wait_cpu(p: subprocess.Popen[bytes], timeout: float) -> float:
    """Wait for `p` to exit (up to `timeout` s); its user + system CPU seconds."""
    deadline = time.monotonic() + timeout
    while (cpu := reap(p)) is None:
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(p.args, timeout)
        time.sleep(0.005)
    return cpu


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds a live process has used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def disk_stats() -> dict[str, float]:
    """Bytes read/written and seconds busy of the disk holding the scratch directory (whole-disk
    counters from /proc/diskstats: every process's I/O, not only this benchmark's)."""
    out = {"read": 0.0, "written": 0.0, "busy": 0.0}
    try:
        for line in Path("/proc/diskstats").read_text().splitlines():
            f = line.split()
            if len(f) >= 13 and re.fullmatch(r"(?:[sv]d|xvd)[a-z]+|nvme\d+n\d+", f[2]):
                out["read"] += int(f[5]) * 512
                out["written"] += int(f[9]) * 512
                out["busy"] += int(f[12]) / 1000
    except OSError:
        pass
    return out


def relays_persisted(urls: list[str], timeout: float = 120) -> float:
    """Wait until every relay has written its RAM-held shards to disk; seconds waited."""
    t0 = time.monotonic()
    while urls:
        left = []
        for u in urls:
            if json.loads(http_get(u, "/health", timeout=10)).get("unpersisted_bytes", 0):
                left.append(u)
        urls = left
        if urls:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"relays {urls} did not write their shards behind within {timeout} s")
            time.sleep(0.05)
    return time.monotonic() - t0


def one_run(ckpt: Path, work: Path, *, relays: int, clients: int, shard_size: int, fetch_args: list[str],
            ram_mib: int = 0, warm: bool = False, workers: int = 4) -> dict:
    """Wall time from "origin serves the new version" to "all clients done", and the CPU seconds
    (user+sys) that the clients and, separately, the relays used in that time.

    As in a deployment (and in bench_reference.py's harness for the reference), the origin and the
    relays are already running when the version is published: relays long-poll the origin and
    start pulling the moment it serves the version. The clock starts when the origin's publish
    (sharding + hashing, the trainer's part) has returned. Cold clients (`intellect shardcast
    fetch`) are started at that moment, so their process start-up is inside the clock; warm ones
    (`client_driver.py`, like a worker agent) were started before and are handed the manifest then.
    The origin's CPU is not counted: its sharding happened before the clock, and its serving is the
    same for every topology. With `ram_mib`, relays hold shards in a RAM arena of that size and
    write them to disk once idle: the run also reports when they had ("relays on disk"), counting
    that write-behind's CPU in the relays' figure."""
    work.mkdir(parents=True)
    run = Run(work)
    try:
        mf, go = work / "manifest.json", work / "go"
        origin = run.spawn_script(DRIVER, str(work / "origin"), str(ckpt), str(work / "origin.url"), str(go), str(mf),
                                  str(shard_size), name="origin")
        o_url = wait_file(work / "origin.url", origin)
        ram = ["--ram-mib", str(ram_mib)] if ram_mib else []
        rps = [run.spawn("relay", "--upstream", o_url, "--data-dir", str(work / f"relay{i}"), "--url-file",
                         str(work / f"relay{i}.url"), "--port", "0", *ram, name=f"relay{i}") for i in range(relays)]
        sources = [wait_file(work / f"relay{i}.url", p) for i, p in enumerate(rps)] if relays else [o_url]
        cps: list[subprocess.Popen[bytes]] = []
        if warm:
            cps = [run.spawn_script(CLIENT_DRIVER, str(work / f"client{i}"), str(work / f"client{i}.ready"), str(workers), *sources,
                                    name=f"client{i}", stdin=subprocess.PIPE) for i in range(clients)]
            for i, p in enumerate(cps):
                wait_file(work / f"client{i}.ready", p)
        time.sleep(0.5 if relays else 0.0)  # let the relays' first long-poll reach the origin
        relay_cpu0 = sum(proc_cpu(p.pid) for p in rps)
        client_cpu0 = [proc_cpu(p.pid) for p in cps]
        go.touch()
        wait_file(mf, origin, timeout=300)
        t0 = time.monotonic()  # the origin now serves the version
        disk0 = disk_stats()
        if warm:
            for p in cps:
                assert p.stdin is not None
                p.stdin.write(f"{mf}\n".encode())
                p.stdin.flush()
        else:
            relay_flags = [flag for s in sources for flag in ("--relay", s)]
            cps = [run.spawn("fetch", str(mf), str(work / f"client{i}"), *relay_flags,
                             "--no-progress", "--json", "--workers", str(workers), *fetch_args, name=f"client{i}")
                   for i in range(clients)]
            client_cpu0 = [0.0] * clients
        done = wait_all(cps, timeout=600)  # blocking waits: the harness uses no CPU meanwhile
        ends, client_cpu = [], 0.0
        for i, p in enumerate(cps):
            if p.returncode != 0:
                raise RuntimeError(f"client {i} failed: {(work / f'client{i}.log').read_text()[-2000:]}")
            ends.append(done[i][0])
            client_cpu += done[i][1] - client_cpu0[i]
        total = max(ends) - t0
        if os.environ.get("SHARDCAST_BENCH_WINDOW"):  # for `perf record -k CLOCK_MONOTONIC` / `perf report --time`
            print(f"# window (CLOCK_MONOTONIC): {t0:.6f},{max(ends):.6f}", file=sys.stderr)
        disk1 = disk_stats()
        persisted = total + relays_persisted(sources) if ram_mib and relays else None
        relay_cpu = 0.0
        for p in rps:  # stop the relays so that their CPU time is counted
            p.terminate()
            relay_cpu += wait_cpu(p, 30)
        size = json.loads(mf.read_text())["total_size"]
        return {"seconds": total, "bytes": size * clients, "cpu": client_cpu, "relay_cpu": relay_cpu - relay_cpu0,
                "first": min(ends) - t0, "disk": {k: disk1[k] - disk0[k] for k in disk0}, "persisted": persisted}
    finally:
        run.close()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--relays", type=int, default=2)
    ap.add_argument("--shard-mb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--relay-ram-mib", type=int, default=None,
                    help="relays' RAM arena (default: the checkpoint's size + 16 MiB; 0: relays use the disk only)")
    ap.add_argument("--client-mode", choices=("cold", "warm", "both"), default="both",
                    help="cold: `fetch` processes started when the version is out; warm: already-running clients "
                         "handed the manifest (a worker agent's case)")
    ap.add_argument("--client-workers", type=int, default=4, help="parallel shard downloads per client")
    ap.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--fetch-arg", action="append", default=[], help="extra `fetch` flag, e.g. --no-fsync")
    ap.add_argument("--reference", default=None, help="python of a venv with PyPI shardcast 0.3.2")
    args = ap.parse_args()
    ram_mib = args.size_mib + 16 if args.relay_ram_mib is None else args.relay_ram_mib
    modes = ["cold", "warm"] if args.client_mode == "both" else [args.client_mode]

    root = Path(tempfile.mkdtemp(prefix="shardcast-bench-", dir=args.workdir))
    try:
        ckpt = root / "ckpt"
        make_checkpoint(ckpt, args.size_mib * 1024 * 1024)
        load = os.getloadavg()
        print(f"# load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores")
        sha = sha256_core_gbps()
        print(f"sha256, one core: {sha:.2f} GB/s")
        print(f"relays: {'RAM arena of ' + str(ram_mib) + ' MiB, written to disk when idle' if ram_mib else 'disk only'}")
        single: list[float] = []
        tree: dict[str, list[float]] = {m: [] for m in modes}
        cpu_tree: dict[str, list[float]] = {m: [] for m in modes}
        shard_size = args.shard_mb * 1_000_000
        for r in range(args.repeat):
            s = one_run(ckpt, root / f"single{r}", relays=0, clients=1, shard_size=shard_size,
                        fetch_args=args.fetch_arg, workers=args.client_workers)
            single.append(s["seconds"])
            print(f"run {r}: single {s['seconds']:.2f} s ({s['cpu']:.1f} CPU s)", flush=True)
            for mode in modes:
                t = one_run(ckpt, root / f"tree{r}{mode}", relays=args.relays, clients=args.clients,
                            shard_size=shard_size, fetch_args=args.fetch_arg, ram_mib=ram_mib, warm=mode == "warm",
                            workers=args.client_workers)
                tree[mode].append(t["seconds"])
                cpu_tree[mode].append(t["cpu"] + t["relay_cpu"])
                on_disk = f"; relays on disk at {t['persisted']:.2f} s" if t["persisted"] is not None else ""
                print(f"run {r}: tree, {mode} clients {t['seconds']:.2f} s "
                      f"({t['cpu']:.1f} CPU s in {args.clients} clients + {t['relay_cpu']:.1f} in {args.relays} "
                      f"relays, {t['bytes'] / t['seconds'] / 1e9:.2f} GB/s aggregate; first client done at "
                      f"{t['first']:.2f} s; disk {t['disk']['written'] / 1e9:.1f} GB written, "
                      f"{t['disk']['read'] / 1e9:.1f} GB read, busy {t['disk']['busy']:.1f} s{on_disk})", flush=True)
        ms = statistics.median(single)
        size = args.size_mib * 1024 * 1024
        print(f"single client from origin ({args.size_mib} MiB): {ms:.2f} s median ({size / ms / 1e9:.2f} GB/s, "
              f"{size / ms / 1e9 / sha:.2f}x one core's sha256)")
        for mode in modes:
            mt, ct = statistics.median(tree[mode]), statistics.median(cpu_tree[mode])
            print(f"origin -> {args.relays} relays -> {args.clients} {mode} clients: {mt:.2f} s median to all "
                  f"complete, aggregate {args.clients * size / mt / 1e9:.2f} GB/s; tree / single: {mt / ms:.2f}x; "
                  f"CPU (relays + clients) {ct:.1f} s = {ct / (args.clients * size / 2**30):.2f} CPU s per GiB "
                  f"delivered, floor on {os.cpu_count()} idle cores {ct / (os.cpu_count() or 1):.1f} s")
        mt, ct = statistics.median(tree[modes[0]]), statistics.median(cpu_tree[modes[0]])
        if args.reference:
            here = Path(__file__).with_name("bench_reference.py")
            out = subprocess.run([args.reference, str(here), "--ckpt", str(ckpt), "--clients", str(args.clients),
                                  "--relays", str(args.relays), "--repeat", str(args.repeat)],
                                 capture_output=True, text=True)
            print(out.stdout, end="")
            if out.returncode != 0:
                print(out.stderr[-5000:], file=sys.stderr)
                raise SystemExit(f"reference benchmark failed ({out.returncode})")
            ref = json.loads(out.stdout.strip().splitlines()[-1])
            for k, v in ref["median_s"].items():
                c = ref["median_cpu_s"][k]
                print(f"reference shardcast 0.3.2 tree ({k}): {v:.2f} s median, {c:.1f} CPU s; ours "
                      f"({modes[0]} clients, as the reference's) is {v / mt:.2f}x faster end to end, uses "
                      f"{c / ct:.2f}x less CPU")
        load = os.getloadavg()
        print(f"# load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
