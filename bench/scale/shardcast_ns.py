"""Shardcast across hosts (issue 19, scale (a)): one origin → R relays → C clients, each in its own network
namespace with its own address, every link capped with tbf; time until every client holds a verified
checkpoint, against the bandwidth floor of the tree.

    sudo .venv/bin/python bench/scale/shardcast_ns.py                       # 4 relays, 64 clients, 64 MiB
    sudo .venv/bin/python bench/scale/shardcast_ns.py --clients 16 --size-mib 16   # smaller
    sudo .venv/bin/python bench/scale/shardcast_ns.py --clients 16 --steps /tmp/chain-ckpts/lr2e-05   # deltas

With `--steps DIR` (checkpoints DIR/step-0 and DIR/step-1 of a real model, as bench/shardcast/delta.py or
delta_chain.py save them) the origin publishes step 0 first and step 1, with its delta against step 0, on the
clock; the clients fetch step 1 twice in the same run: once holding step 0 (the delta through the tree, each
rebuilding step 1 and checking it) and once holding nothing (the checkpoint itself), each against the floor of its
own bytes. The first round meets relays still pulling from the origin, the second warm ones: `--full-first` swaps
them.

The origin and the relays run before the version is published (relays long-poll the origin); clients are
running `Client`s (bench/shardcast/client_driver.py, a worker agent's case) handed the manifest when the
origin serves it; the clock runs from then until the last client has installed its verified copy. Client
i fetches from relay i mod R first (its sources: that relay, then the others), as a worker's configured
or discovered relays would be spread.

The floor is the slowest stage of the tree if every link ran at its cap the whole time, pipelined:
max(S / client link, (C/R) × S / relay uplink, R × S / origin uplink). The ratio measured / floor says how
close the tree comes to the network's limit; where it is far, the machine's CPU (every client hashes
every byte, all processes share this machine's cores) is the limit, not the network.
Network rules: traffic only inside the lab's namespaces (a 10.77.N.0/24 of its own); every namespace removed on exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "net"))
sys.path.insert(0, str(ROOT / "bench" / "shardcast"))
from bench_tree import make_checkpoint  # noqa: E402
from net_hosts import NetLab  # noqa: E402

CLIENT_DRIVER = ROOT / "bench" / "shardcast" / "client_driver.py"
ORIGIN = """
import sys, threading, time, signal
from pathlib import Path
from intellect.sdk.shardcast import Origin
data, ckpt, host, go, out = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5])
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
o = Origin(data, host=host, port=8002, keep=None).start()
if len(sys.argv) > 6:  # the step before, published first: step 1 then carries its delta against it
    o.publish(sys.argv[6], step=0, model_name="bench")
print(o.url, flush=True)
while not go.exists() and not stop.is_set():
    time.sleep(0.005)
m, _ = o.publish(ckpt, step=1, model_name="bench")
out.with_suffix(".tmp").write_bytes(m.to_bytes()); out.with_suffix(".tmp").rename(out)
stop.wait(); o.stop()
"""


def rate_bits(rate: str) -> float:
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
    for u, f in units.items():
        if rate.endswith(u):
            return float(rate[: -len(u)]) * f
    raise ValueError(f"rate {rate!r}: use e.g. 100mbit or 1gbit")


def wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: no {path} after {timeout:.0f}s")
        time.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--relays", type=int, default=4)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--client-rate", default="100mbit")
    ap.add_argument("--relay-rate", default="1gbit")
    ap.add_argument("--origin-rate", default="1gbit")
    ap.add_argument("--workers", type=int, default=2, help="parallel shard downloads per client")
    ap.add_argument("--timeout", type=float, default=540.0)
    ap.add_argument("--steps", type=Path, default=None,
                    help="DIR with step-0 and step-1 of a real model: step 1 fetched as a delta and whole")
    ap.add_argument("--full-first", action="store_true",
                    help="with --steps: the whole checkpoint's round first (it then meets the relays cold)")
    args = ap.parse_args()

    size = args.size_mib * 2**20
    work = Path(tempfile.mkdtemp(prefix="ipn-scale-"))
    lab = NetLab.create()
    procs: list[subprocess.Popen[bytes]] = []
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    try:
        if args.steps:
            size = sum(f.stat().st_size for f in (args.steps / "step-1").rglob("*") if f.is_file())
        else:
            make_checkpoint(work / "ckpt", size)
        origin = lab.host("origin")
        lab.cap("origin", args.origin_rate)
        relays = [lab.host(f"relay{i}") for i in range(args.relays)]
        for r in relays:
            lab.cap(r.name, args.relay_rate)
        clients = [lab.host(f"c{i}") for i in range(args.clients)]
        for c in clients:
            lab.cap(c.name, args.client_rate)
        go, mf = work / "go", work / "manifest.json"
        ckpt = args.steps / "step-1" if args.steps else work / "ckpt"
        before = [str(args.steps / "step-0")] if args.steps else []
        op = subprocess.Popen(origin.cmd([sys.executable, "-c", ORIGIN, str(work / "origin"), str(ckpt),
                                          origin.addr, str(go), str(mf), *before]), stdout=subprocess.PIPE, env=env)
        procs.append(op)
        assert op.stdout is not None
        o_url = op.stdout.readline().decode().strip()
        r_urls = []
        for i, r in enumerate(relays):
            log = open(work / f"relay{i}.log", "wb")  # noqa: SIM115 - owned by the child
            procs.append(subprocess.Popen(r.cmd([sys.executable, "-m", "intellect.sdk.shardcast.cli", "relay",
                                                 "--upstream", o_url, "--data-dir", str(work / f"relay{i}"),
                                                 "--host", r.addr, "--port", "8002",
                                                 "--url-file", str(work / f"relay{i}.url")]),
                                          stdout=log, stderr=subprocess.STDOUT, env=env))
            wait_for(work / f"relay{i}.url", procs[-1], 60, f"relay {i}")
            r_urls.append(f"http://{r.addr}:8002")

        client_seconds: dict[str, list[float]] = {}

        def fetch_round(label: str, base: Path | None, publish: bool) -> tuple[float, int, dict[str, int]]:
            """Every client fetches the manifest (published now when `publish`); seconds until the last one holds
            its verified copy, bytes downloaded by all, shards per source."""
            cps = []
            for i, c in enumerate(clients):
                order = r_urls[i % len(r_urls):] + r_urls[: i % len(r_urls)]
                cenv = dict(env)
                if base is not None:  # each client holds the step before (hard links: the rebuild only reads them)
                    subprocess.run(["cp", "-al", str(base), str(work / f"{label}-base{i}")], check=True)
                    cenv["INTELLECT_BENCH_BASE"] = str(work / f"{label}-base{i}")
                log = open(work / f"{label}-client{i}.log", "wb")  # noqa: SIM115 - owned by the child
                p = subprocess.Popen(c.cmd([sys.executable, str(CLIENT_DRIVER), str(work / f"{label}-client{i}"),
                                            str(work / f"{label}-client{i}.ready"), str(args.workers), *order]),
                                     stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=cenv)
                procs.append(p)
                cps.append(p)
            for i, p in enumerate(cps):
                wait_for(work / f"{label}-client{i}.ready", p, 300, f"client {i}")
            if publish:
                time.sleep(1.0)  # the relays' long-polls are at the origin
                go.touch()
                wait_for(mf, op, 300, "the origin's publish")
            t0 = time.monotonic()
            for p in cps:
                assert p.stdin is not None
                p.stdin.write(f"{mf}\n".encode())
                p.stdin.flush()
            ends = []
            deadline = t0 + args.timeout
            for i, p in enumerate(cps):
                try:
                    p.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise TimeoutError(f"{label} client {i} not done after {args.timeout:.0f}s") from None
                if p.returncode != 0:
                    raise RuntimeError(f"{label} client {i} failed: "
                                       f"{(work / f'{label}-client{i}.log').read_text()[-1500:]}")
                ends.append(time.monotonic())
            # clients are reaped in order: the last reap is the last client done (bounded by the wait above)
            per_source: dict[str, int] = {}
            downloaded = 0
            for i in range(args.clients):
                doc = json.loads((work / f"{label}-client{i}.log").read_text().strip().splitlines()[-1])
                assert doc.get("delta", False) == (base is not None), doc.get("delta_error")
                downloaded += int(doc.get("downloaded_bytes", 0))
                client_seconds.setdefault(label, []).append(float(doc["seconds"]))
                for src, n in doc["per_source"].items():
                    per_source[src] = per_source.get(src, 0) + n
            return max(ends) - t0, downloaded, per_source

        def floor(nbytes: float) -> float:
            bits = nbytes * 8
            return max(bits / rate_bits(args.client_rate),
                       (args.clients / args.relays) * bits / rate_bits(args.relay_rate),
                       args.relays * bits / rate_bits(args.origin_rate))

        report: dict[str, object] = {"relays": args.relays, "clients": args.clients, "size_mib": round(size / 2**20, 1),
                                     "client_rate": args.client_rate, "relay_rate": args.relay_rate,
                                     "origin_rate": args.origin_rate}
        rounds = [("delta", args.steps / "step-0"), ("full", None)] if args.steps else [("full", None)]
        if args.full_first:
            rounds.reverse()
        for k, (label, base) in enumerate(rounds):
            total, downloaded, per_source = fetch_round(label, base, publish=k == 0)
            per_client = downloaded / args.clients
            report[label] = {"seconds_all_verified": round(total, 2), "bytes_per_client": int(per_client),
                             "client_seconds_median": round(statistics.median(client_seconds[label]), 2),
                             "floor_seconds": round(floor(per_client), 2),
                             "ratio_to_floor": round(total / floor(per_client), 2), "shards_per_source": per_source}
        if args.steps:
            report["full_over_delta_seconds"] = round(report["full"]["seconds_all_verified"]  # type: ignore[index]
                                                      / report["delta"]["seconds_all_verified"], 2)  # type: ignore[index]
        report.update({"cpus": os.cpu_count(), "load_avg": os.getloadavg()})
        print(json.dumps(report, indent=1))
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        lab.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
