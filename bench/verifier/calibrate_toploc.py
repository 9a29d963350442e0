"""TOPLOC calibration on the real SmolLM2-135M: honest variation vs attacks, and overheads.

Usage:
    .venv/bin/python bench/verifier/calibrate_toploc.py --n 200 --new-tokens 32 [--out runs/verifier-calib]
    # optional side-by-side with the reference package (built as in gen_toploc_vectors.py):
    TOPLOC_REF=/tmp/toplocref/src .venv/bin/python bench/verifier/calibrate_toploc.py ...

1. Generate `n` completions of exactly `new_tokens` tokens (sampling, T=1, batched, KV cache,
   fp32, 1 thread) while capturing the LM-head inputs; build proofs from them ("gen").
2. The validator's view: one batched fp32 prefill of prompt+completion ("ref"); every case is
   verified against these states or against a prefill of the tokens the case claims.
3. Honest cases (must pass): proofs from generation (batch n, KV cache), from prefill with batch
   1, with 2 threads, with bf16 compute. Attacks (must fail): weights + 1% noise, a smaller model
   with the same tokenizer (SmolLM2 with its last 6 layers dropped), int8 dynamic quantisation,
   1 completion token altered, 5% of tokens altered, proofs copied from another sample, the
   completion of a different prompt, a truncated proof, an empty proof list.
Prints per case the distribution (min/median/max over chunks) of the three statistics and the
acceptance rate at the default thresholds, plus overhead ratios; writes results.json.
Intermediate hidden states are cached under --out so an interrupted run resumes.
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
from intellect.verifier.prefill import DEFAULT_MIN_TOKEN_LOGPROB, prefill_hidden_states, token_logprobs
from intellect.verifier.toploc import Thresholds, build_proofs, check_proofs, verify_proofs

LOOSE = Thresholds(max_exp_mismatches=128, max_mant_err_mean=1e30, max_mant_err_median=1e30)
PROFILES = {
    "default": (Thresholds(), DEFAULT_MIN_TOKEN_LOGPROB),
    "toploc-only": (Thresholds(), None),
    "fp32": (Thresholds.fp32(), DEFAULT_MIN_TOKEN_LOGPROB),
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


MODEL: list = []  # the fp32 model, for the sampling check's LM head


def stats_of(hidden: list[torch.Tensor], proofs: list[list[bytes]], claims: list[list[int]]) -> list[dict]:
    """Per sample: structural verdict (None if well-formed), chunk stats, min token log-prob.

    `hidden` are the validator's states of the claimed tokens `claims`.
    """
    out = []
    for h, p, c in zip(hidden, proofs, claims, strict=True):
        r = verify_proofs(h, p, thresholds=LOOSE)
        structural = r.reason.value if r.reason is not None and not r.chunks else None
        out.append(
            {
                "structural": structural,
                "chunks": [[c.exp_mismatches, c.mant_err_mean, c.mant_err_median] for c in r.chunks],
                "min_logprob": float(token_logprobs(MODEL[0], h.float(), c).min()),
            }
        )
    return out


def accepted(sample: dict, th: Thresholds, floor: float | None = None) -> bool:
    if sample["structural"] is not None:
        return False
    if floor is not None and sample["min_logprob"] < floor:
        return False
    return all(
        e <= th.max_exp_mismatches and m <= th.max_mant_err_mean and md <= th.max_mant_err_median
        for e, m, md in sample["chunks"]
    )


def summarize(name: str, samples: list[dict], honest: bool) -> dict:
    def dist(vals: list[float]) -> list[float]:
        if not vals:
            return []
        q = np.percentile(vals, [0, 50, 99, 100])
        return [round(float(v), 2) for v in q]

    big = float(2**64)
    chunks = [c for s in samples for c in s["chunks"]]
    row = {
        "case": name,
        "honest": honest,
        "samples": len(samples),
        "exp_mismatches": dist([c[0] for c in chunks]),
        "mant_err_mean": dist([c[1] for c in chunks if c[1] < big]),
        "mant_err_median": dist([c[2] for c in chunks if c[2] < big]),
        "per_sample": samples,
    }
    row["min_logprob"] = dist([s["min_logprob"] for s in samples])
    for prof, (th, floor) in PROFILES.items():
        acc = sum(accepted(s, th, floor) for s in samples)
        row[f"rate_{prof}"] = (acc if honest else len(samples) - acc) / max(1, len(samples))
    label = "pass" if honest else "detect"
    rates = "  ".join(f"{prof} {label} {row[f'rate_{prof}'] * 100:5.1f}%" for prof in PROFILES)
    print(
        f"{name:<34} {rates}  exp_mism {row['exp_mismatches']}  mean {row['mant_err_mean']}  "
        f"median {row['mant_err_median']}  min-logprob {row['min_logprob']}  (min/p50/p99/max)",
        flush=True,
    )
    return row


def cached(out: Path, key: str, fn):
    path = out / f"{key}.pt"
    if path.exists():
        return torch.load(path)
    t0 = time.perf_counter()
    val = fn()
    torch.save(val, path)
    print(f"  [{key}: {time.perf_counter() - t0:.1f}s]", file=sys.stderr, flush=True)
    return val


@click.command()
@click.option("--n", default=200, show_default=True, help="honest completions (and samples per attack)")
@click.option("--new-tokens", default=32, show_default=True, help="tokens per completion")
@click.option("--gen-batch", default=50, show_default=True, help="generation batch size")
@click.option("--out", default="runs/verifier-calib", show_default=True, type=click.Path(path_type=Path))
def main(n: int, new_tokens: int, gen_batch: int, out: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    # 1 intra-op thread as the baseline: on a shared, oversubscribed machine an OpenMP team of 2
    # waits far more than it works (measured 4x slower generation); 2 threads is a variant
    torch.set_num_threads(1)
    path = smollm2_path()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    MODEL.append(model)
    prompts = [tok(p).input_ids for p in make_prompts(n)]
    timing: dict[str, float] = {}

    def gen():
        res, t_gen, t_proof = [], 0.0, 0.0
        for s in range(0, n, gen_batch):
            t0 = time.perf_counter()
            g = generate_with_states(model, prompts[s : s + gen_batch], new_tokens, seed=s)
            t_gen += time.perf_counter() - t0
            t0 = time.perf_counter()
            proofs = [build_proofs(x.hidden) for x in g]
            t_proof += time.perf_counter() - t0
            print(f"  generated {s + len(g)}/{n} ({t_gen:.0f}s)", file=sys.stderr, flush=True)
            res += [
                (x.completion_ids, x.hidden.to(torch.bfloat16), p) for x, p in zip(g, proofs, strict=True)
            ]
        return {"samples": res, "t_gen": t_gen, "t_proof": t_proof}

    g = cached(out, f"gen_{n}_{new_tokens}", gen)
    comps = [c for c, _, _ in g["samples"]]
    gen_proofs = [p for _, _, p in g["samples"]]
    timing["generation_s"] = g["t_gen"]
    timing["proof_build_s"] = g["t_proof"]

    def prefill(m, p_ids=None, c_ids=None, max_batch_tokens=16384):
        return [
            h.to(torch.bfloat16)
            for h in prefill_hidden_states(
                m, p_ids or prompts, c_ids or comps, max_batch_tokens=max_batch_tokens
            )
        ]

    def timed_ref():
        t0 = time.perf_counter()
        states = prefill(model)
        return {"states": states, "t": time.perf_counter() - t0}

    ref = cached(out, f"ref_{n}_{new_tokens}", timed_ref)
    ref_states = ref["states"]
    timing["verify_prefill_s"] = ref["t"]
    t0 = time.perf_counter()
    for h, p in zip(ref_states, gen_proofs, strict=True):
        check_proofs(h, p)
    timing["proof_check_s"] = time.perf_counter() - t0

    rows = []
    # --- honest variation: proofs from another valid computation, verified on ref states
    rows.append(
        summarize("honest: generation (KV, batch)", stats_of(ref_states, gen_proofs, comps), honest=True)
    )
    b1 = cached(out, f"b1_{n}_{new_tokens}", lambda: prefill(model, max_batch_tokens=1))
    rows.append(
        summarize("honest: prefill batch 1", stats_of(ref_states, [build_proofs(h) for h in b1], comps), True)
    )

    def two_threads():
        torch.set_num_threads(2)
        try:
            return prefill(model)
        finally:
            torch.set_num_threads(1)

    t2 = cached(out, f"t2_{n}_{new_tokens}", two_threads)
    rows.append(
        summarize("honest: 2 threads", stats_of(ref_states, [build_proofs(h) for h in t2], comps), True)
    )

    def bf16():
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16).eval()
        return prefill(m)

    bf = cached(out, f"bf16_{n}_{new_tokens}", bf16)
    rows.append(
        summarize("honest: bf16 compute", stats_of(ref_states, [build_proofs(h) for h in bf], comps), True)
    )
    # and the other way round: a bf16 validator checking fp32 generation proofs
    rows.append(summarize("honest: bf16 validator", stats_of(bf, gen_proofs, comps), True))

    # --- attacks: the worker's proofs come from something else; the validator prefills the claim
    def noisy():
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        gen_ = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn(p.shape, generator=gen_) * p.abs().mean() * 0.01)
        return prefill(m)

    rows.append(
        summarize(
            "attack: weights +1% noise",
            stats_of(
                ref_states, [build_proofs(h) for h in cached(out, f"noise_{n}_{new_tokens}", noisy)], comps
            ),
            False,
        )
    )

    def smaller():
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        m.model.layers = m.model.layers[:-6]
        m.config.num_hidden_layers = len(m.model.layers)
        return prefill(m)

    rows.append(
        summarize(
            "attack: smaller model (-6 layers)",
            stats_of(
                ref_states, [build_proofs(h) for h in cached(out, f"small_{n}_{new_tokens}", smaller)], comps
            ),
            False,
        )
    )

    def int8():
        m = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        from torch.ao.quantization import quantize_dynamic

        q = quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
        return prefill(q)

    rows.append(
        summarize(
            "attack: int8 quantised",
            stats_of(
                ref_states, [build_proofs(h) for h in cached(out, f"int8_{n}_{new_tokens}", int8)], comps
            ),
            False,
        )
    )

    rng = np.random.default_rng(11)
    vocab = model.config.vocab_size

    def altered(frac: float | None):
        claims = []
        for c in comps:
            c = list(c)
            k = max(1, round(frac * len(c))) if frac else 1
            # the last token changes no hidden state (it is the output of the last row): alter
            # positions 0 .. T-2, where a change reaches at least one committed row
            for j in rng.choice(len(c) - 1, size=k, replace=False):
                c[j] = int((c[j] + rng.integers(1, vocab)) % vocab)
            claims.append(c)
        return claims

    alt1 = altered(None)
    st = cached(out, f"alt1_{n}_{new_tokens}", lambda: prefill(model, c_ids=alt1))
    rows.append(summarize("attack: 1 token altered", stats_of(st, gen_proofs, alt1), False))
    alt5 = altered(0.05)
    st = cached(out, f"alt5_{n}_{new_tokens}", lambda: prefill(model, c_ids=alt5))
    rows.append(summarize("attack: 5% tokens altered", stats_of(st, gen_proofs, alt5), False))
    rows.append(
        summarize(
            "attack: proofs of other sample",
            stats_of(ref_states, gen_proofs[1:] + gen_proofs[:1], comps),
            False,
        )
    )
    other_prompts = prompts[1:] + prompts[:1]
    st = cached(out, f"otherprompt_{n}_{new_tokens}", lambda: prefill(model, p_ids=other_prompts))
    rows.append(summarize("attack: other prompt's completion", stats_of(st, gen_proofs, comps), False))
    rows.append(
        summarize(
            "attack: truncated proof",
            stats_of(ref_states, [[p[0][:200], *p[1:]] for p in gen_proofs], comps),
            False,
        )
    )
    rows.append(
        summarize("attack: empty proof list", stats_of(ref_states, [[] for _ in gen_proofs], comps), False)
    )

    # --- overheads
    tokens = n * new_tokens
    overhead = {
        "tokens": tokens,
        **{k: round(v, 3) for k, v in timing.items()},
        "proof_build_pct_of_generation": round(100 * timing["proof_build_s"] / timing["generation_s"], 3),
        "verify_speedup_vs_generation": round(
            timing["generation_s"] / (timing["verify_prefill_s"] + timing["proof_check_s"]), 2
        ),
    }
    ref_dir = os.environ.get("TOPLOC_REF")
    if ref_dir:
        sys.path.insert(0, ref_dir)
        from toploc.C.csrc.poly import verify_proofs_bytes as ref_verify

        t0 = time.perf_counter()
        for h, p in zip(ref_states, gen_proofs, strict=True):
            ref_verify(h, p, 32, 128)
        overhead["reference_proof_check_s"] = round(time.perf_counter() - t0, 4)
        overhead["our_check_vs_reference"] = round(
            overhead["reference_proof_check_s"] / timing["proof_check_s"], 3
        )
    print(json.dumps(overhead, indent=1))
    result = {
        "profiles": {k: {**th.model_dump(), "min_token_logprob": fl} for k, (th, fl) in PROFILES.items()},
        "cases": rows,
        "overhead": overhead,
        "n": n,
        "new_tokens": new_tokens,
        "torch_threads": 1,
    }
    (out / "results.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
