"""Validator cost vs worker cost at one shape, end to end on SmolLM2-135M (the issue's overhead figure).

Usage:
    BENCH_THREADS=2 .venv/bin/python bench/verifier/bench_verify_vs_generate.py \
        [--samples 8 --tokens 128 --shape both --prompt-repeat 1 --repeats 3]

Shapes: `group` (the protocol's: a GRPO group, `samples` completions of ONE prompt) and
`distinct` (`samples` different prompts); `both` runs one after the other.
Worker: `generate_with_states` (one batch of `samples`, KV cache, the replayable sampler, fp32)
then `build_proofs_many` over the batch. Validator: `verify_samples` on the same samples with
their seeds (one prefill per distinct prompt whose KV cache the completions share, no LM head in
it; TOPLOC check; LM head on the completion rows and sampler replay), then the same work timed in
parts, and the prefill without prompt sharing (one pass per sample) for comparison. Prints the
ratios against the generation time of the same run (validator parts: best of `repeats` calls;
generation: one call), and the honest samples' worst statistics
(they must stay 0 at fp32: every sample is accepted).
"""

from __future__ import annotations

import os
import time

import click
import torch

from intellect.verifier.capture import generate_with_states
from intellect.verifier.models import smollm2_path
from intellect.verifier.prefill import prefill_hidden_states, replay_margins_many, verify_samples
from intellect.verifier.toploc import build_proofs_many, check_proofs_many

PROMPTS = [
    "What is 17 + 25? Think step by step.",
    "Write a short poem about the sea.",
    "Tom has 12 apples. He gives away 5 apples. How many apples are left?",
    "Write a Python function that returns the sum of the first 10 integers.",
    "Explain why the sky is blue in two sentences.",
    "List three prime numbers greater than 20.",
    "A train travels 60 km in 45 minutes. What is its speed in km/h?",
    "Translate 'good morning' into French and Spanish.",
]


def timed(fn, repeats: int = 1):
    """(result, best wall time of `repeats` calls)."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def run(model, tok, shape: str, samples: int, tokens: int, prompt_repeat: int, repeats: int) -> None:
    texts = [PROMPTS[0]] * samples if shape == "group" else [PROMPTS[i % len(PROMPTS)] for i in range(samples)]
    texts = [" ".join([t] * prompt_repeat) for t in texts]
    prompts = [tok(t).input_ids for t in texts]
    gens, t_gen = timed(lambda: generate_with_states(model, prompts, tokens, seed=1))
    proofs, t_proof = timed(lambda: build_proofs_many([g.hidden for g in gens]))
    batch = [(g.prompt_ids, g.completion_ids, p, g.seed) for g, p in zip(gens, proofs, strict=True)]

    results, t_verify = timed(lambda: verify_samples(model, batch), repeats)
    assert all(r.ok for r in results), [r.detail for r in results]
    pc, cc = [b[0] for b in batch], [b[1] for b in batch]
    states, t_prefill = timed(lambda: prefill_hidden_states(model, pc, cc), repeats)
    full, t_full = timed(lambda: prefill_hidden_states(model, pc, cc, share_prompts=False), repeats)
    _, t_check = timed(lambda: check_proofs_many([h.to(torch.bfloat16) for h in states], proofs), repeats)
    margins, t_replay = timed(lambda: replay_margins_many(model, states, cc, [b[3] for b in batch]), repeats)

    n_tok = sum(len(g.completion_ids) for g in gens)
    n_prompt = sum(len(p) for p in prompts)
    chunks = [c for r in results for c in r.chunks]
    print(f"[{shape}] {samples} samples x {tokens} new tokens ({n_tok} generated, {n_prompt} prompt tokens, "
          f"{len(set(map(tuple, prompts)))} distinct prompts), {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"  generation (baseline)       {t_gen:8.2f} s")
    print(f"  proof build (batched)       {t_proof:8.3f} s  = {100 * t_proof / t_gen:.3f} % of generation")
    print(f"  verify_samples (all)        {t_verify:8.2f} s  = {t_gen / t_verify:.1f}x faster than generation")
    print(f"    prefill (default path)    {t_prefill:8.2f} s  = {t_gen / t_prefill:.1f}x faster than generation")
    print(f"    prefill, one pass/sample  {t_full:8.2f} s  = {t_gen / t_full:.1f}x "
          f"(max |diff| vs shared {max(float((a - b).abs().max()) for a, b in zip(states, full, strict=True)):.2g})")
    print(f"    TOPLOC check              {t_check:8.3f} s")
    print(f"    LM head + replay          {t_replay:8.2f} s  = {100 * t_replay / t_prefill:.0f} % of the prefill")
    print(f"  verification without replay {t_gen / (t_prefill + t_check):.1f}x faster than generation")
    print(f"  honest worst case: exp mismatches {max(c.exp_mismatches for c in chunks)}, mantissa mean "
          f"{max(c.mant_err_mean for c in chunks):.3g}, median {max(c.mant_err_median for c in chunks):.3g}, "
          f"replay margin {max(float(m.max()) for m in margins):.3g}")


@click.command()
@click.option("--samples", default=8, show_default=True)
@click.option("--tokens", default=128, show_default=True)
@click.option("--shape", type=click.Choice(["group", "distinct", "both"]), default="both", show_default=True)
@click.option("--prompt-repeat", default=1, show_default=True, help="repeat each prompt's text k times (longer prompts)")
@click.option("--repeats", default=3, show_default=True, help="validator timings: best of this many calls")
def main(samples: int, tokens: int, shape: str, prompt_repeat: int, repeats: int) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    path = smollm2_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    generate_with_states(model, [tok(PROMPTS[0]).input_ids], 2, seed=99)  # warm-up
    for s in (["group", "distinct"] if shape == "both" else [shape]):
        run(model, tok, s, samples, tokens, prompt_repeat, repeats)


if __name__ == "__main__":
    main()
