"""A node k steps behind: a chain of k deltas against the full checkpoint, bytes and time, in the same run.

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python bench/shardcast/delta_chain.py [--lr 2e-5] [--steps 4]

The model (SmolLM2-135M from the verifier's cache when it is there, else the tests' tiny Llama) takes `--steps`
policy steps of `--updates` AdamW updates each (bench/shardcast/delta.py's `make_steps`: the pool's optimizer,
bf16 as the trainer publishes), published one after another from an origin (each with its delta against the
step before). Then, for k = 1 … steps, a client holding step `steps − k` fetches step `steps` over loopback HTTP
through the k deltas (`Client.fetch_chain`: each step rebuilt and checked against its manifest) and, in the same
run, a client holding nothing fetches the checkpoint itself (`--link-mbit`: the origin capped as a network
link would be, as in delta.py). Printed per k: the chain's bytes as % of the
checkpoint and its time as a ratio of the full fetch's (the figure; absolute seconds depend on the load). The
worker stops following deltas back at MAX_DELTA_CHAIN (8) or where they stop being fewer bytes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from delta import make_steps, model_dir

from intellect.sdk.shardcast import Client, Origin


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--updates", type=int, default=2, help="AdamW updates per policy step (trainer default 2)")
    ap.add_argument("--ckpts", type=Path, default=None, help="where checkpoints are saved / reused")
    ap.add_argument("--link-mbit", type=float, default=None,
                    help="cap the origin at this many Mbit/s per client (default: loopback, uncapped)")
    a = ap.parse_args()
    src, name = model_dir()
    ckpts = a.ckpts or Path(tempfile.mkdtemp(prefix="chain-ckpts-"))
    load = os.getloadavg()
    print(f"model: {name}; lr {a.lr:g}, {a.updates} AdamW updates per step; load {load[0]:.1f} {load[1]:.1f}; "
          f"link {a.link_mbit or 'loopback'} Mbit/s")
    dirs = make_steps(src, ckpts / f"lr{a.lr:g}", a.lr, a.steps, a.updates)
    work = Path(tempfile.mkdtemp(prefix="chain-work-"))
    rate = int(a.link_mbit * 1e6 / 8 / 4) if a.link_mbit else None  # the client's 4 download threads share it
    origin = Origin(work / "origin", shard_size=50_000_000, max_rate=rate).start()
    try:
        manifests = [origin.publish(d, step=s, model_name="bench")[0] for s, d in enumerate(dirs)]
        last = manifests[-1]
        print(f"{'behind':>6} {'chain bytes':>12} {'% of full':>9} {'chain s':>8} {'full s':>7} {'time ratio':>10}")
        for k in range(1, a.steps + 1):
            held = a.steps - k
            client_dir = work / f"k{k}"
            shutil.copytree(dirs[held], client_dir / f"step-{held}")
            chain = manifests[held + 1:]
            t0 = time.perf_counter()
            res = Client([origin.url], fsync=False).fetch_chain(
                chain, [client_dir / f"step-{m.step}" for m in chain], base=client_dir / f"step-{held}")
            chain_s = time.perf_counter() - t0
            assert res.delta_steps == k, res.delta_error
            t0 = time.perf_counter()
            full = Client([origin.url], fsync=False).fetch_detailed(last, work / f"full{k}")
            full_s = time.perf_counter() - t0
            assert not full.delta and full.downloaded_bytes == last.total_size
            assert (client_dir / f"step-{a.steps}" / "model.safetensors").read_bytes() == \
                (work / f"full{k}" / "model.safetensors").read_bytes()
            print(f"{k:>6} {res.downloaded_bytes:>12,} {100 * res.downloaded_bytes / last.total_size:>8.1f}% "
                  f"{chain_s:>8.2f} {full_s:>7.2f} {chain_s / full_s:>9.2f}x")
            shutil.rmtree(client_dir)
            shutil.rmtree(work / f"full{k}")
    finally:
        origin.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
