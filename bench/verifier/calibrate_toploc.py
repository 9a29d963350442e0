"""TOPLOC + sampler-replay calibration on the real SmolLM2-135M: honest variation vs attacks, overheads.

Usage:
    .venv/bin/python bench/verifier/calibrate_toploc.py --n 200 --new-tokens 32 [--out runs/verifier-calib]
    # stage 1 only (generation, cached), e.g. to keep one bench call short:
    .venv/bin/python bench/verifier/calibrate_toploc.py --n 200 --new-tokens 32 --only-generate
    # optional side-by-side with the reference package (built as in gen_toploc_vectors.py):
    TOPLOC_REF=/tmp/toplocref/src .venv/bin/python bench/verifier/calibrate_toploc.py ...

1. Generate `n` completions of exactly `new_tokens` tokens with the replayable sampler
   (`intellect.verifier.replay`, T=1, batched, KV cache, fp32, 1 thread; completion i of batch b
   uses seed `sample_seed(b, i)`) while capturing the LM-head inputs; proofs with
   `build_proofs_many` over each generation batch ("gen").
2. The validator's view: one batched fp32 prefill of prompt+completion ("ref"), its LM head on
   the completion rows, the sampler replayed: per token, the margin max_j score_j − score_token.
3. Honest variants and model attacks are run teacher-forced on the generated prefixes: the
   variant's prefill gives its states (its proofs) and its logits, from which it draws its own
   tokens with the same seeded noise; the validator replays those tokens on its fp32 logits of the
   same prefixes. Per position this is exactly what the variant would have sampled and claimed.
   Honest (must pass): generation itself, prefill batch 1, 2 threads, bf16 compute (worker), a
   bf16 validator. Attacks (must fail): weights + 1 % noise, a smaller model (last 6 of 30 layers
   dropped), int8 dynamic quantisation, tokens sampled with another seed (cherry-picking), 1 token
   altered (any position, the last included), the last token altered, 5 % of tokens altered,
   proofs copied from another sample, the completion of a different prompt, a truncated proof,
   an empty proof list.
Writes results.json (per-sample TOPLOC chunk statistics and replay margins); prints rates at the
profiles below and overhead ratios. Intermediate results are cached under --out (keys carry
"r2": the replayable sampler; caches of the old multinomial sampler are not reused).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click
import numpy as np
import torch

from intellect.verifier.capture import generate_with_states
from intellect.verifier.models import smollm2_path
from intellect.verifier.prefill import prefill_hidden_states
from intellect.verifier.replay import gumbel_sample, replay_margins
from intellect.verifier.toploc import Thresholds, build_proofs_many, check_proofs_many, verify_proofs

TEMPERATURE = 1.0
LOOSE = Thresholds(max_exp_mismatches=128, max_mant_err_mean=1e30, max_mant_err_median=1e30)
PROFILES = {
    "default": Thresholds(),
    "toploc-only": Thresholds(max_replay_margin=None),
    "fp32": Thresholds.fp32(),
}

WORDS = ["apples", "books", "coins", "stamps", "marbles", "pencils", "cards", "shells"]
TOPICS = ["the sea", "a mountain", "autumn", "a robot", "the moon", "a city at night", "coffee", "rain"]


def make_prompts(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        a, b = int(rng.integers(2, 999)), int(rng.integers(2, 999))
        kind = i % 4
        if kind == 0:
            out.append(f"What is {a} + {b}? Think step by step.")
        elif kind == 1:
            w = WORDS[i % len(WORDS)]
            out.append(f"Tom has {a} {w}. He gives away {min(a, b)} {w}. How many {w} are left?")
        elif kind == 2:
            out.append(f"Write a short poem about {TOPICS[i % len(TOPICS)]}.")
        else:
            out.append(f"Write a Python function that returns the sum of the first {a} integers.")
    return out


def logits_of(model, hidden: torch.Tensor) -> torch.Tensor:
    """(T, V) float32 logits of `model`'s LM head (in its dtype) on states (T, H)."""
    head = model.get_output_embeddings()
    dtype = model.get_input_embeddings().weight.dtype  # the compute dtype (a quantised head has no .weight tensor)
    with torch.inference_mode():
        return head(hidden.to(dtype)).float()


def draw(model, hidden: torch.Tensor, seed: int) -> list[int]:
    """The tokens `model` samples from its logits on these states with the seeded noise."""
    t = hidden.shape[0]
    return gumbel_sample(logits_of(model, hidden), [seed] * t, list(range(t)), TEMPERATURE).tolist()


def toploc_stats(hidden: list[torch.Tensor], proofs: list[list[bytes]]) -> list[dict]:
    """Per sample: structural verdict (None if well-formed) and per-chunk statistics."""
    out = []
    for h, p in zip(hidden, proofs, strict=True):
        r = verify_proofs(h, p, thresholds=LOOSE)
        structural = r.reason.value if r.reason is not None and not r.chunks else None
        out.append(
            {
                "structural": structural,
                "chunks": [[c.exp_mismatches, c.mant_err_mean, c.mant_err_median] for c in r.chunks],
            }
        )
    return out


def with_margins(stats: list[dict], margins: list[torch.Tensor]) -> list[dict]:
    for s, m in zip(stats, margins, strict=True):
        finite = torch.nan_to_num(m, posinf=1e9)
        s["margins"] = [round(float(x), 5) for x in finite]
        s["max_margin"] = float(finite.max())
        s["flips"] = int((m > 0).sum())
    return stats


def accepted(sample: dict, th: Thresholds) -> bool:
    if sample["structural"] is not None:
        return False
    if th.max_replay_margin is not None and sample["max_margin"] > th.max_replay_margin:
        return False
    return all(
        e <= th.max_exp_mismatches and m <= th.max_mant_err_mean and md <= th.max_mant_err_median
        for e, m, md in sample["chunks"]
    )


def dist(vals: list[float]) -> list[float]:
    if not vals:
        return []
    q = np.percentile(vals, [0, 50, 99, 100])
    return [round(float(v), 3) for v in q]


def summarize(name: str, samples: list[dict], honest: bool) -> dict:
    big = float(2**64)
    chunks = [c for s in samples for c in s["chunks"]]
    row = {
        "case": name,
        "honest": honest,
        "samples": len(samples),
        "exp_mismatches": dist([c[0] for c in chunks]),
        "mant_err_mean": dist([c[1] for c in chunks if c[1] < big]),
        "mant_err_median": dist([c[2] for c in chunks if c[2] < big]),
        "max_margin": dist([s["max_margin"] for s in samples]),
        "flips": dist([s["flips"] for s in samples]),
        "per_sample": samples,
    }
    for prof, th in PROFILES.items():
        acc = sum(accepted(s, th) for s in samples)
        row[f"rate_{prof}"] = (acc if honest else len(samples) - acc) / max(1, len(samples))
    label = "pass" if honest else "detect"
    rates = "  ".join(f"{prof} {label} {row[f'rate_{prof}'] * 100:5.1f}%" for prof in PROFILES)
    print(
        f"{name:<36} {rates}  exp {row['exp_mismatches']}  mean {row['mant_err_mean']}  "
        f"median {row['mant_err_median']}  max-margin {row['max_margin']}  flips {row['flips']}",
        flush=True,
    )
    return row


def cached(out: Path, key: str, fn):
    path = out / f"{key}.pt"
    if path.exists():
        return torch.load(path, weights_only=False)
    t0 = time.perf_counter()
    val = fn()
    torch.save(val, path)
    print(f"  [{key}: {time.perf_counter() - t0:.1f}s]", file=sys.stderr, flush=True)
    return val


def overheads(timing: dict[str, float], tokens: int, ref_bf16: list[torch.Tensor],
              gen_proofs: list[list[bytes]]) -> dict:
    """Overhead ratios from the stage timings (+ the reference package's check if TOPLOC_REF is set)."""
    verify_s = timing["verify_prefill_s"] + timing["proof_check_s"] + timing["replay_s"]
    overhead = {
        "tokens": tokens,
        **{k: round(v, 3) for k, v in timing.items()},
        "proof_build_pct_of_generation": round(100 * timing["proof_build_s"] / timing["generation_s"], 3),
        "replay_pct_of_prefill": round(100 * timing["replay_s"] / timing["verify_prefill_s"], 1),
        "verify_speedup_vs_generation": round(timing["generation_s"] / verify_s, 2),
        "verify_speedup_vs_generation_without_replay": round(
            timing["generation_s"] / (timing["verify_prefill_s"] + timing["proof_check_s"]), 2
        ),
    }
    ref_dir = os.environ.get("TOPLOC_REF")
    if ref_dir:
        sys.path.insert(0, ref_dir)
        from toploc.C.csrc.poly import verify_proofs_bytes as ref_verify

        t0 = time.perf_counter()
        for h, p in zip(ref_bf16, gen_proofs, strict=True):
            ref_verify(h, p, 32, 128)
        overhead["reference_proof_check_s"] = round(time.perf_counter() - t0, 4)
        overhead["our_check_vs_reference"] = round(overhead["reference_proof_check_s"] / timing["proof_check_s"], 3)
    print(json.dumps(overhead, indent=1))
    return overhead


@click.command()
@click.option("--n", default=200, show_default=True, help="honest completions (and samples per attack)")
@click.option("--new-tokens", default=32, show_default=True, help="tokens per completion")
@click.option("--gen-batch", default=50, show_default=True, help="generation batch size")
@click.option("--out", default="runs/verifier-calib", show_default=True, type=click.Path(path_type=Path))
@click.option("--only-generate", is_flag=True, help="stop after the (cached) generation stage")
@click.option("--timing-only", is_flag=True,
              help="re-measure the validator's timings (prefill, replay, proof check, reference) afresh and "
                   "update results_*.json's overhead: for a quiet-machine figure after a statistics run")
def main(n: int, new_tokens: int, gen_batch: int, out: Path, only_generate: bool, timing_only: bool) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    # 1 intra-op thread as the baseline (a shared 2-core machine: an OpenMP team of 2 waits more
    # than it works under load); 2 threads is an honest variant
    torch.set_num_threads(1)
    path = smollm2_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompts = [tok(p).input_ids for p in make_prompts(n)]
    tag = f"r2_{n}_{new_tokens}"
    timing: dict[str, float] = {}

    def gen():
        res, t_gen, t_proof = [], 0.0, 0.0
        for s in range(0, n, gen_batch):
            t0 = time.perf_counter()
            g = generate_with_states(model, prompts[s : s + gen_batch], new_tokens, seed=s, temperature=TEMPERATURE)
            t_gen += time.perf_counter() - t0
            t0 = time.perf_counter()
            proofs = build_proofs_many([x.hidden for x in g])
            t_proof += time.perf_counter() - t0
            print(f"  generated {s + len(g)}/{n} ({t_gen:.0f}s)", file=sys.stderr, flush=True)
            res += [(x.completion_ids, x.seed, p) for x, p in zip(g, proofs, strict=True)]
        return {"samples": res, "t_gen": t_gen, "t_proof": t_proof}

    g = cached(out, f"gen_{tag}", gen)
    if only_generate:
        print(f"generation: {g['t_gen']:.1f}s, proofs {g['t_proof']:.3f}s")
        return
    comps = [c for c, _, _ in g["samples"]]
    seeds = [s for _, s, _ in g["samples"]]
    gen_proofs = [p for _, _, p in g["samples"]]
    timing["generation_s"] = g["t_gen"]
    timing["proof_build_s"] = g["t_proof"]
    if any(len(c) != new_tokens for c in comps):
        raise SystemExit("a completion stopped early; the bench expects fixed-length completions")

    def prefill(m, p_ids=None, c_ids=None, max_batch_tokens=16384) -> list[torch.Tensor]:
        return prefill_hidden_states(m, p_ids or prompts, c_ids or comps, max_batch_tokens=max_batch_tokens)

    def timed_ref():
        t0 = time.perf_counter()
        states = prefill(model)
        t_prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        margins = [
            replay_margins(logits_of(model, h), c, s, TEMPERATURE) for h, c, s in zip(states, comps, seeds, strict=True)
        ]
        return {"states": states, "t": t_prefill, "t_replay": time.perf_counter() - t0, "margins": margins}

    ref = timed_ref() if timing_only else cached(out, f"ref_{tag}", timed_ref)
    ref_states = ref["states"]  # fp32
    ref_bf16 = [h.to(torch.bfloat16) for h in ref_states]
    timing["verify_prefill_s"] = ref["t"]
    timing["replay_s"] = ref["t_replay"]
    t0 = time.perf_counter()
    check_proofs_many(ref_bf16, gen_proofs)
    timing["proof_check_s"] = time.perf_counter() - t0
    if timing_only:
        overhead = overheads(timing, n * new_tokens, ref_bf16, gen_proofs)
        res_path = out / f"results_{tag}.json"
        if res_path.exists():
            result = json.loads(res_path.read_text())
            result["overhead"] = overhead
            result["overhead_load_avg"] = os.getloadavg()
            res_path.write_text(json.dumps(result, indent=1))
        return

    def variant(m, max_batch_tokens=16384, threads=1):
        """Teacher-forced pass of a worker variant: its proofs, its own draws, and (as a validator) the
        margins of the generated tokens under its logits."""
        torch.set_num_threads(threads)
        try:
            states = prefill(m, max_batch_tokens=max_batch_tokens)
            toks = [draw(m, h, s) for h, s in zip(states, seeds, strict=True)]
            as_validator = [
                replay_margins(logits_of(m, h), c, s, TEMPERATURE) for h, c, s in zip(states, comps, seeds, strict=True)
            ]
        finally:
            torch.set_num_threads(1)
        return {"proofs": build_proofs_many(states), "tokens": toks, "as_validator": as_validator,
                "states_bf16": [h.to(torch.bfloat16) for h in states]}

    def replayed(tokens: list[list[int]], sample_seeds: list[int] | None = None) -> list[torch.Tensor]:
        """Margins of claimed tokens on the generated prefixes under the validator's fp32 logits."""
        sd = sample_seeds or seeds
        return [
            replay_margins(logits_of(model, h), t, s, TEMPERATURE) for h, t, s in zip(ref_states, tokens, sd, strict=True)
        ]

    def load(path_dtype=torch.float32):
        return AutoModelForCausalLM.from_pretrained(path, dtype=path_dtype).eval()

    rows = []
    # --- honest variation
    rows.append(summarize("honest: generation (KV cache, batch)",
                          with_margins(toploc_stats(ref_bf16, gen_proofs), ref["margins"]), True))
    b1 = cached(out, f"b1_{tag}", lambda: variant(model, max_batch_tokens=1))
    rows.append(summarize("honest: prefill batch 1",
                          with_margins(toploc_stats(ref_bf16, b1["proofs"]), replayed(b1["tokens"])), True))
    t2 = cached(out, f"t2_{tag}", lambda: variant(model, threads=2))
    rows.append(summarize("honest: 2 threads",
                          with_margins(toploc_stats(ref_bf16, t2["proofs"]), replayed(t2["tokens"])), True))
    bf = cached(out, f"bf16_{tag}", lambda: variant(load(torch.bfloat16)))
    rows.append(summarize("honest: bf16 compute (worker)",
                          with_margins(toploc_stats(ref_bf16, bf["proofs"]), replayed(bf["tokens"])), True))
    rows.append(summarize("honest: bf16 validator",
                          with_margins(toploc_stats(bf["states_bf16"], gen_proofs), bf["as_validator"]), True))

    # --- attacks with another model: its proofs and its own draws, replayed by the validator
    def noisy():
        m = load()
        gen_ = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn(p.shape, generator=gen_) * p.abs().mean() * 0.01)
        return variant(m)

    def smaller():
        m = load()
        m.model.layers = m.model.layers[:-6]
        m.config.num_hidden_layers = len(m.model.layers)
        return variant(m)

    def int8():
        from torch.ao.quantization import quantize_dynamic

        return variant(quantize_dynamic(load(), {torch.nn.Linear}, dtype=torch.qint8))

    for name, key, fn in (("attack: weights + 1 % noise", "noise", noisy),
                          ("attack: smaller model (-6 layers)", "small", smaller),
                          ("attack: int8 quantised", "int8", int8)):
        v = cached(out, f"{key}_{tag}", fn)
        rows.append(summarize(name, with_margins(toploc_stats(ref_bf16, v["proofs"]), replayed(v["tokens"])), False))

    # --- attacks on the tokens
    other_seed = [draw(model, h, s ^ 0x5A5A5A5A) for h, s in zip(ref_states, seeds, strict=True)]
    rows.append(summarize("attack: sampled with another seed",
                          with_margins(toploc_stats(ref_bf16, gen_proofs), replayed(other_seed)), False))

    rng = np.random.default_rng(11)
    vocab = model.config.vocab_size

    def altered(k: int | None, last: bool = False) -> list[list[int]]:
        claims = []
        for c in comps:
            c = list(c)
            where = [len(c) - 1] if last else rng.choice(len(c), size=k, replace=False)
            for j in where:
                c[j] = int((c[j] + rng.integers(1, vocab)) % vocab)
            claims.append(c)
        return claims

    def claim_case(name: str, key: str, claims: list[list[int]], p_ids=None) -> None:
        def run():
            st = prefill(model, p_ids=p_ids, c_ids=claims)
            margins = [replay_margins(logits_of(model, h), c, s, TEMPERATURE)
                       for h, c, s in zip(st, claims, seeds, strict=True)]
            return {"states_bf16": [h.to(torch.bfloat16) for h in st], "margins": margins}

        v = cached(out, f"{key}_{tag}", run)
        rows.append(summarize(name, with_margins(toploc_stats(v["states_bf16"], gen_proofs), v["margins"]), False))

    claim_case("attack: 1 token altered (any position)", "alt1", altered(1))
    claim_case("attack: last token altered", "altlast", altered(None, last=True))
    claim_case("attack: 5 % of tokens altered", "alt5", altered(max(1, round(0.05 * new_tokens))))
    rows.append(summarize("attack: proofs copied from another sample",
                          with_margins(toploc_stats(ref_bf16, gen_proofs[1:] + gen_proofs[:1]), ref["margins"]),
                          False))
    claim_case("attack: completion of a different prompt", "otherprompt", comps, p_ids=prompts[1:] + prompts[:1])
    for name, proofs in (("attack: truncated proof", [[p[0][:200], *p[1:]] for p in gen_proofs]),
                         ("attack: empty proof list", [[] for _ in gen_proofs])):
        rows.append(summarize(name, with_margins(toploc_stats(ref_bf16, proofs), ref["margins"]), False))

    # --- overheads
    overhead = overheads(timing, n * new_tokens, ref_bf16, gen_proofs)
    result = {
        "profiles": {k: th.model_dump() for k, th in PROFILES.items()},
        "cases": rows,
        "overhead": overhead,
        "n": n,
        "new_tokens": new_tokens,
        "temperature": TEMPERATURE,
        "torch_threads": 1,
        "load_avg": os.getloadavg(),
    }
    (out / f"results_{tag}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
