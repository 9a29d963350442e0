"""Generation-side cost of TOPLOC proof capture in `TransformersEngine` (the GRPO bench's shape).

Usage:
    .venv/bin/python bench/verifier/bench_engine_proofs.py [--prompts 128 --tokens 8 --repeats 3]

The tiny model of the agents' tests and GRPO runs (`intellect.agents.models.tiny_model_dir()`),
`prompts` prompts of the synthetic addition task, `tokens` new tokens: tokens/s without proofs
(baseline) and with proofs, best of `repeats`, same run. Then where the difference went, on the
states of one batch: `build_proofs` once per completion (the engine's former path) vs one
`build_proofs_many` for the batch (the engine's path now), and the replayable sampler's share
(`gumbel_sample` vs softmax + multinomial on the same logits, which is paid with or without proofs).
"""

from __future__ import annotations

import os
import timeit

import click
import torch

from intellect.agents.engines import SamplingParams, TransformersEngine
from intellect.agents.models import tiny_model_dir
from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.replay import gumbel_sample, sample_seed
from intellect.verifier.submission import prompt_text
from intellect.verifier.toploc import build_proofs, build_proofs_many


def best(fn, repeats: int) -> float:
    return min(timeit.repeat(fn, number=1, repeat=repeats))


@click.command()
@click.option("--prompts", "n_prompts", default=128, show_default=True)
@click.option("--tokens", default=8, show_default=True)
@click.option("--repeats", default=3, show_default=True)
def main(n_prompts: int, tokens: int, repeats: int) -> None:
    engine = TransformersEngine(tiny_model_dir())
    tasks = synthetic_task_set(8, seed=11, max_operand=20, ops=("+",))
    prompts = [prompt_text(t) for t in tasks] * (n_prompts // len(tasks))
    rates, gens = {}, {}
    for capture in (False, True):
        params = SamplingParams(max_tokens=tokens, temperature=1.0, seed=0, capture_proofs=capture)
        engine.generate(prompts[:2], params)  # warm-up
        t = best(lambda p=params: gens.__setitem__(p.capture_proofs, engine.generate(prompts, p)), repeats)
        rates[capture] = sum(len(g.completion_ids) for g in gens[capture]) / t
    assert [g.completion_ids for g in gens[True]] == [g.completion_ids for g in gens[False]]
    print(f"{len(prompts)} prompts x {tokens} new tokens, {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"  generation without proofs (baseline) {rates[False]:8.0f} tok/s")
    print(f"  generation with proofs               {rates[True]:8.0f} tok/s  = x{rates[True] / rates[False]:.2f}")

    # where it goes: proofs of one batch's states, per completion vs batched
    g = torch.Generator().manual_seed(0)
    h = engine.model.config.hidden_size
    hiddens = [torch.randn(len(x.completion_ids), h, generator=g).to(torch.bfloat16) for x in gens[True]]
    assert build_proofs_many(hiddens) == [build_proofs(x) for x in hiddens]
    t_each = best(lambda: [build_proofs(x) for x in hiddens], repeats)
    t_many = best(lambda: build_proofs_many(hiddens), repeats)
    logits = torch.randn(len(prompts), engine.model.config.vocab_size, generator=g) * 3
    seeds = [sample_seed(0, i) for i in range(len(prompts))]
    t_mult = best(lambda: torch.multinomial(torch.softmax(logits, dim=-1), 1), repeats)
    t_gumbel = best(lambda: gumbel_sample(logits, seeds, [3] * len(prompts), 1.0), repeats)
    print(f"  build_proofs per completion ({len(hiddens)} calls) {t_each * 1e3:8.1f} ms")
    print(f"  build_proofs_many, one call             {t_many * 1e3:8.1f} ms  = {t_each / t_many:.0f}x less")
    print(f"  one decoding step's sampling: multinomial {t_mult * 1e3:.2f} ms, gumbel_sample {t_gumbel * 1e3:.2f} ms "
          f"(x{tokens} steps, paid with and without proofs)")


if __name__ == "__main__":
    main()
