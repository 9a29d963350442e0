"""Validator cost vs worker cost at one shape, end to end on SmolLM2-135M (the issue's overhead figure).

Usage:
    BENCH_THREADS=2 .venv/bin/python bench/verifier/bench_verify_vs_generate.py [--samples 8 --tokens 128]

Worker: `generate_with_states` (one batch of `samples`, KV cache, the replayable sampler, fp32)
then `build_proofs_many` over the batch. Validator: `verify_samples` on the same samples with
their seeds (one batched prefill, no LM head in it; TOPLOC check; LM head on the completion rows
and sampler replay), timed in parts. Prints the ratios against the generation time of the same
run: proof build % of generation, verification speedup (with and without the replay).
"""

from __future__ import annotations

import os
import time

import click
import torch

from intellect.verifier.capture import generate_with_states
from intellect.verifier.models import smollm2_path
from intellect.verifier.prefill import lm_logits, prefill_hidden_states, verify_samples
from intellect.verifier.replay import replay_margins
from intellect.verifier.toploc import build_proofs_many, check_proofs_many

PROMPTS = [
    "What is 17 + 25? Think step by step.",
    "Write a short poem about the sea.",
    "Tom has 12 apples. He gives away 5 apples. How many apples are left?",
    "Write a Python function that returns the sum of the first 10 integers.",
]


@click.command()
@click.option("--samples", default=8, show_default=True)
@click.option("--tokens", default=128, show_default=True)
def main(samples: int, tokens: int) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    path = smollm2_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompts = [tok(PROMPTS[i % len(PROMPTS)]).input_ids for i in range(samples)]
    generate_with_states(model, prompts[:1], 2, seed=99)  # warm-up

    t0 = time.perf_counter()
    gens = generate_with_states(model, prompts, tokens, seed=1)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    proofs = build_proofs_many([g.hidden for g in gens])
    t_proof = time.perf_counter() - t0
    batch = [(g.prompt_ids, g.completion_ids, p, g.seed) for g, p in zip(gens, proofs, strict=True)]

    t0 = time.perf_counter()
    results = verify_samples(model, batch)
    t_verify = time.perf_counter() - t0
    assert all(r.ok for r in results), [r.detail for r in results]
    # the same work in parts
    t0 = time.perf_counter()
    states = prefill_hidden_states(model, [b[0] for b in batch], [b[1] for b in batch])
    t_prefill = time.perf_counter() - t0
    t0 = time.perf_counter()
    check_proofs_many([h.to(torch.bfloat16) for h in states], proofs)
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    for h, b in zip(states, batch, strict=True):
        replay_margins(lm_logits(model, h), b[1], b[3], 1.0)
    t_replay = time.perf_counter() - t0

    n_tok = sum(len(g.completion_ids) for g in gens)
    print(f"{samples} samples x {tokens} new tokens ({n_tok} generated), {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"  generation (baseline)      {t_gen:8.2f} s")
    print(f"  proof build (batched)      {t_proof:8.3f} s  = {100 * t_proof / t_gen:.3f} % of generation")
    print(f"  verify_samples (all)       {t_verify:8.2f} s  = {t_gen / t_verify:.1f}x faster than generation")
    print(f"    prefill                  {t_prefill:8.2f} s  = {t_gen / t_prefill:.1f}x faster than generation")
    print(f"    TOPLOC check             {t_check:8.3f} s")
    print(f"    LM head + replay         {t_replay:8.2f} s  = {100 * t_replay / t_prefill:.0f} % of the prefill")
    print(f"  verification without replay {t_gen / (t_prefill + t_check):.1f}x faster than generation")


if __name__ == "__main__":
    main()
