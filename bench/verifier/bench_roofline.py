"""How fast can a CPU prefill of SmolLM2-135M be at all? fp32 matmul GFLOPS vs the prefill's.

Usage:
    BENCH_THREADS=2 .venv/bin/python bench/verifier/bench_roofline.py [--tokens 1100 --repeats 5]

Measures (best of `repeats`, same run):
- the fp32 GEMM rate of this machine on the model's own linear shapes at M = `tokens` rows
  (q/o 576→576, k/v 576→192, gate/up 576→1536, down 1536→576, the LM head 576→49152), through
  `torch.nn.functional.linear` (what the model calls: MKL sgemm on this build), and a large square
  GEMM (the machine's practical peak);
- the decoder stack's prefill on `tokens` real tokens (8 sequences, no LM head), its FLOPs counted
  from the config (linears 2·M·K·N, attention 4·S²·d per head, causal half counted in full as
  SDPA computes it), and the achieved GFLOPS.
The bound on the prefill time is FLOPs / (GEMM rate): what no kernel setting can beat.
"""

from __future__ import annotations

import os
import timeit

import click
import torch
import torch.nn.functional as F

from intellect.verifier.models import smollm2_path
from intellect.verifier.prefill import decoder_of


def best(fn, repeats: int) -> float:
    return min(timeit.repeat(fn, number=1, repeat=repeats))


def gemm_gflops(m: int, k: int, n: int, repeats: int) -> float:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(m, k, generator=g)
    w = torch.randn(n, k, generator=g)
    F.linear(x, w)
    return 2 * m * k * n / best(lambda: F.linear(x, w), repeats) / 1e9


def prefill_flops(cfg, seq_lens: list[int]) -> float:
    """FLOPs of the decoder stack (no LM head) on sequences of these lengths."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    d = h // cfg.num_attention_heads
    kv = cfg.num_key_value_heads * d
    per_token = 2 * (h * h * 2 + h * kv * 2 + h * i * 3)  # q, o; k, v; gate, up, down
    attn = sum(4 * s * s * d * cfg.num_attention_heads for s in seq_lens)  # QK^T and PV, full square
    return cfg.num_hidden_layers * (per_token * sum(seq_lens) + attn)


@click.command()
@click.option("--tokens", default=1100, show_default=True, help="rows of the GEMMs / prefill tokens")
@click.option("--repeats", default=5, show_default=True)
def main(tokens: int, repeats: int) -> None:
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    print(f"{torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
    shapes = {
        "q/o   576->576": (576, 576),
        "k/v   576->192": (576, 192),
        "gate/up 576->1536": (576, 1536),
        "down 1536->576": (1536, 576),
        "LM head 576->49152": (576, 49152),
    }
    rates = {}
    with torch.inference_mode():
        for name, (k, n) in shapes.items():
            rates[name] = gemm_gflops(tokens, k, n, repeats)
            print(f"  GEMM {name:20s} M={tokens}: {rates[name]:6.1f} GFLOPS")
        peak = gemm_gflops(2048, 2048, 2048, repeats)
        print(f"  GEMM 2048^3 (practical peak):      {peak:6.1f} GFLOPS")

        model = AutoModelForCausalLM.from_pretrained(smollm2_path(), dtype=torch.float32).eval()
        cfg = model.config
        dec = decoder_of(model)
        b = 8
        s = tokens // b
        ids = torch.randint(0, cfg.vocab_size, (b, s), generator=torch.Generator().manual_seed(1))
        dec(input_ids=ids, use_cache=False)
        t = best(lambda: dec(input_ids=ids, use_cache=False), repeats)
        flops = prefill_flops(cfg, [s] * b)
        # the linears' share at the measured per-shape rates: the bound a perfect framework would reach
        h, i = cfg.hidden_size, cfg.intermediate_size
        kvd = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
        m = b * s
        lin_time = cfg.num_hidden_layers * sum(
            2 * m * k * n / (rates[name] * 1e9)
            for name, k, n in (("q/o   576->576", h, h), ("q/o   576->576", h, h), ("k/v   576->192", h, kvd),
                               ("k/v   576->192", h, kvd), ("gate/up 576->1536", h, i),
                               ("gate/up 576->1536", h, i), ("down 1536->576", i, h))
        )
    print(f"prefill, decoder stack only, {b} x {s} = {b * s} tokens: {flops / 1e9:.1f} GFLOP")
    print(f"  measured                 {t:6.3f} s = {flops / t / 1e9:6.1f} GFLOPS "
          f"({100 * flops / t / 1e9 / peak:.0f} % of the 2048^3 GEMM rate)")
    print(f"  its linears alone at the GEMM rates above: {lin_time:6.3f} s "
          f"({100 * lin_time / t:.0f} % of the prefill)")
    print(f"  bound at the 2048^3 rate:  {flops / peak / 1e9:6.3f} s")


if __name__ == "__main__":
    main()
