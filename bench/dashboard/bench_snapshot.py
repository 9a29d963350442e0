"""How much the dashboard's incremental chain index saves: a snapshot built with a warm
`ChainIndex` (only new blocks scanned, final task states cached) against one built from scratch
(every event of the deployment rescanned, every task state read), on the same devnet history.

    .venv/bin/python bench/dashboard/bench_snapshot.py --workers 3 --tasks 20 --repeat 5

Prints the median time of each and the ratio (from scratch / warm); both measured in this run.
"""

from __future__ import annotations

import statistics
import time

import click

from intellect.sdk import devnet
from intellect.sdk.dashboard import ChainIndex, collect
from intellect.sdk.ipfs import compute_cid

TOKEN = 10**18


@click.command()
@click.option("--workers", default=3, show_default=True)
@click.option("--tasks", default=20, show_default=True, help="Submissions per worker.")
@click.option("--repeat", default=5, show_default=True)
def main(workers: int, tasks: int, repeat: int) -> None:
    with devnet.start() as net:
        pool_id = net.deployment.default_pool_id or 1
        t = net.protocol(0)
        t.publish_checkpoint(pool_id, 0, compute_cid(b"manifest 0"))
        ws = [net.protocol(1 + i) for i in range(workers)]
        v = net.protocol(1 + workers)
        for p in [*ws, v]:
            p.drip()
            p.register_node("validator" if p is v else "worker", endpoint="")
            p.stake(p.address, 100 * TOKEN)
        n = 0
        for k in range(tasks):
            for w in ws:
                c = w.claim_task(pool_id)
                s = w.submit_work(c.task_id, compute_cid(f"r{n}".encode()), n.to_bytes(32, "big"), 4, 0)
                n += 1
                if k == 0 and w is ws[-1]:
                    v.challenge(s.submission_id, compute_cid(b"evidence"))
        net.increase_time(t.pool(pool_id).params.window_length + 1)
        for w in ws[:-1]:
            w.claim_all_rewards()
        reader = net.protocol(None)
        events = len(reader.get_events())
        scratch, warm = [], []
        idx = ChainIndex(reader)
        collect(reader, idx)  # warm it
        for _ in range(repeat):
            t0 = time.perf_counter()
            collect(reader, ChainIndex(reader))
            scratch.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            snap = collect(reader, idx)
            warm.append(time.perf_counter() - t0)
        a, b = statistics.median(scratch), statistics.median(warm)
        click.echo(f"history: {snap.totals.submissions} submissions, {events} events, block {snap.block}")
        click.echo(f"snapshot from scratch (baseline): {a * 1000:.0f} ms   warm index: {b * 1000:.0f} ms   "
                   f"ratio {a / b:.2f}x")


if __name__ == "__main__":
    main()
