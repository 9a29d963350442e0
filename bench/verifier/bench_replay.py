"""Speed of the replayable sampler vs the work around it (same run, same inputs).

Usage:
    BENCH_THREADS=1 .venv/bin/python bench/verifier/bench_replay.py [--tokens 128 --vocab 49152 --hidden 576 --batch 50]

Prints best-of-`repeats` wall times and ratios against baselines measured in the same run:
- validator: `replay_margins` over `tokens` positions (T × V) vs the LM-head matmul that makes
  those logits (T × H × V), and vs materialising the full Gumbel noise (`gumbel_noise_many`);
- worker: `gumbel_sample` of one decoding step of `batch` rows vs `torch.multinomial` on the
  softmax of the same logits (what the engines used before).
"""

from __future__ import annotations

import os
import timeit

import click
import torch

from intellect.verifier.replay import gumbel_noise_many, gumbel_sample, replay_margins, sample_seed


def best(fn, repeats: int) -> float:
    """Best wall time of `repeats` calls of `fn`."""
    return min(timeit.repeat(fn, number=1, repeat=repeats))


@click.command()
@click.option("--tokens", default=128, show_default=True, help="positions replayed (validator)")
@click.option("--vocab", default=49152, show_default=True, help="SmolLM2's vocabulary by default")
@click.option("--hidden", default=576, show_default=True)
@click.option("--batch", default=50, show_default=True, help="rows per decoding step (worker)")
@click.option("--repeats", default=5, show_default=True)
def main(tokens: int, vocab: int, hidden: int, batch: int, repeats: int) -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    g = torch.Generator().manual_seed(0)
    head = torch.randn(vocab, hidden, generator=g) / hidden**0.5  # (V, H)
    states = torch.randn(tokens, hidden, generator=g) * 3  # (T, H)
    logits = states @ head.T  # (T, V)
    seed = sample_seed(1, 0)
    toks = [int(gumbel_sample(logits[p : p + 1], [seed], [p], 1.0)) for p in range(tokens)]
    assert float(replay_margins(logits, toks, seed, 1.0).max()) == 0.0

    t_head = best(lambda: states @ head.T, repeats)
    t_replay = best(lambda: replay_margins(logits, toks, seed, 1.0), repeats)
    t_noise = best(lambda: gumbel_noise_many(seed, range(tokens), vocab), repeats)
    print(f"validator, {tokens} positions x {vocab} vocab ({torch.get_num_threads()} thread(s)):")
    print(f"  LM-head matmul (baseline)    {t_head * 1e3:8.1f} ms")
    print(f"  replay_margins               {t_replay * 1e3:8.1f} ms  = {t_replay / t_head:.2f}x the LM head, "
          f"{t_replay / tokens / vocab * 1e9:.1f} ns per value")
    print(f"  full noise (gumbel_noise_many) {t_noise * 1e3:6.1f} ms  = {t_noise / t_replay:.2f}x replay_margins")

    step = logits[: min(batch, tokens)]
    rows = step.shape[0]
    seeds = [sample_seed(2, i) for i in range(rows)]
    t_mult = best(lambda: torch.multinomial(torch.softmax(step, dim=-1), 1, generator=g), repeats)
    t_gumbel = best(lambda: gumbel_sample(step, seeds, [5] * rows, 1.0), repeats)
    print(f"worker, one decoding step of {rows} rows:")
    print(f"  softmax + multinomial (baseline) {t_mult * 1e3:6.1f} ms")
    print(f"  gumbel_sample                {t_gumbel * 1e3:8.1f} ms  = {t_gumbel / t_mult:.2f}x the baseline")


if __name__ == "__main__":
    main()
