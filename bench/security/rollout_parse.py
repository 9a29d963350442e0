"""Per-file cost of reading a rollout file safely (issue 32): v2 in the node's process, v1 (Parquet) in a child.

Usage:
    .venv/bin/python bench/security/rollout_parse.py [--repeats 5]

For each shape (rows x completion tokens, with TOPLOC proofs), the median of `repeats` reads of the same
file, all in this run: `read_v1` in this process (what a node did before, unsafe), `RolloutFile.from_bytes`
of the v1 bytes (the child: a fresh interpreter that imports pyarrow, reads, hands back v2 bytes that this
process parses), and `RolloutFile.from_bytes` of the v2 bytes (this process, pure Python + numpy). Ratios
are against the in-process v1 read measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from intellect.verifier._rollouts_v1 import read_v1
from intellect.verifier.rollouts import RolloutFile, RolloutLimits, RolloutMeta, RolloutRow

WORKER = "0x" + "ab" * 20
SHAPES = [(4, 36), (16, 1024), (128, 4096)]  # (rows, completion tokens per row): tiny, a submission, a large one


def make(rows: int, tokens: int) -> RolloutFile:
    """Random token ids (a 49k vocabulary, as SmolLM2's) and random proof bytes: compressible about as little as
    real ones (a patterned file would flatter Parquet's zstd)."""
    rnd = random.Random(rows * tokens)
    group = 4 if rows >= 4 else rows
    proofs = (tokens + 31) // 32
    out = [RolloutRow(problem_id=f"p{i // group}", prompt_ids=[rnd.randrange(49_152) for _ in range(200)],
                      completion_ids=[rnd.randrange(49_152) for _ in range(tokens)], reward=0.5, task_reward=0.5,
                      length_penalty=0.0, target_length=None, advantage=0.0, policy_step=3,
                      proofs=[rnd.randbytes(258) for _ in range(proofs)], worker=WORKER) for i in range(rows)]
    meta = RolloutMeta(task_id="1", seed="ab", model="m", worker=WORKER, policy_step=3, group_size=group)
    return RolloutFile(meta, out)


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print("| rows x tokens | v1 bytes | v2 bytes | v1 in-process | v1 isolated (child) | v2 in-process | "
          "isolated / v1 in-process | isolated / v2 |")
    print("|---|---|---|---|---|---|---|---|")
    for rows, tokens in SHAPES:
        rf = make(rows, tokens)
        v1, v2 = rf.to_bytes(version=1), rf.to_bytes()
        assert RolloutFile.from_bytes(v1).rows == RolloutFile.from_bytes(v2).rows == rf.rows
        t_v1 = median_seconds(lambda: read_v1(v1, "bench", RolloutLimits()), args.repeats)  # noqa: B023
        t_iso = median_seconds(lambda: RolloutFile.from_bytes(v1), args.repeats)  # noqa: B023
        t_v2 = median_seconds(lambda: RolloutFile.from_bytes(v2), args.repeats)  # noqa: B023
        print(f"| {rows} x {tokens} | {len(v1):,} | {len(v2):,} | {t_v1 * 1e3:.1f} ms | {t_iso * 1e3:.0f} ms | "
              f"{t_v2 * 1e3:.1f} ms | {t_iso / t_v1:.1f}x | {t_iso / t_v2:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
