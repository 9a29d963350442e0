"""Proof build and check speed: ours vs the reference package `toploc` 0.1.6, same inputs.

Usage:
    TOPLOC_REF=/tmp/toplocref/src .venv/bin/python bench/verifier/bench_toploc_speed.py [--samples 8 --tokens 128 --hidden 576]

Activations: `samples` × (tokens, hidden) bf16 normal noise (SmolLM2-135M's width by default).
Prints best-of-`repeats` wall times and ratios (reference time / our time: > 1 means we are
faster). Without TOPLOC_REF only our times are printed. 2 torch threads.
"""

from __future__ import annotations

import os
import sys
import timeit

import click
import torch

from intellect.verifier.toploc import build_proofs, build_proofs_many, check_proofs, check_proofs_many


def best(fn, repeats: int) -> float:
    """Best wall time of `repeats` calls of `fn`."""
    return min(timeit.repeat(fn, number=1, repeat=repeats))


@click.command()
@click.option("--samples", default=8, show_default=True)
@click.option("--tokens", default=128, show_default=True)
@click.option("--hidden", default=576, show_default=True)
@click.option("--repeats", default=5, show_default=True)
def main(samples: int, tokens: int, hidden: int, repeats: int) -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    g = torch.Generator().manual_seed(0)
    acts = [torch.randn(tokens, hidden, generator=g).to(torch.bfloat16) for _ in range(samples)]
    noisy = [(a.float() * (1 + 0.005 * torch.randn(a.shape, generator=g))).to(torch.bfloat16) for a in acts]
    proofs = [build_proofs(a) for a in acts]
    assert build_proofs_many(acts) == proofs
    ours_build = best(lambda: [build_proofs(a) for a in acts], repeats)
    ours_build_many = best(lambda: build_proofs_many(acts), repeats)
    ours_check = best(lambda: [check_proofs(n, p) for n, p in zip(noisy, proofs, strict=True)], repeats)
    ours_check_many = best(lambda: check_proofs_many(noisy, proofs), repeats)
    print(f"inputs: {samples} samples x {tokens} tokens x {hidden}, {samples * len(proofs[0])} proofs")
    print(f"ours       build {ours_build * 1e3:8.1f} ms   check {ours_check * 1e3:8.1f} ms   (per sample)")
    print(
        f"ours       build {ours_build_many * 1e3:8.1f} ms   check {ours_check_many * 1e3:8.1f} ms   (batched: *_many)"
    )
    ref = os.environ.get("TOPLOC_REF")
    if not ref:
        return
    sys.path.insert(0, ref)
    import toploc
    from toploc.C.csrc.poly import verify_proofs_bytes

    ref_proofs = [toploc.build_proofs_bytes(list(a), 32, 128, skip_prefill=True) for a in acts]
    assert ref_proofs == proofs, "reference and our proofs differ"
    ref_build = best(
        lambda: [toploc.build_proofs_bytes(list(a), 32, 128, skip_prefill=True) for a in acts], repeats
    )
    ref_check = best(
        lambda: [verify_proofs_bytes(n, p, 32, 128) for n, p in zip(noisy, proofs, strict=True)], repeats
    )
    ref_check_py = best(
        lambda: [
            toploc.verify_proofs_bytes(list(n), p, 32, 128, skip_prefill=True)
            for n, p in zip(noisy, proofs, strict=True)
        ],
        repeats,
    )
    print(
        f"reference  build {ref_build * 1e3:8.1f} ms   check {ref_check * 1e3:8.1f} ms (C++)   {ref_check_py * 1e3:8.1f} ms (its Python path)"
    )
    print(
        f"ratio (reference / ours, per sample): build {ref_build / ours_build:.2f}x   "
        f"check {ref_check / ours_check:.2f}x vs C++, {ref_check_py / ours_check:.2f}x vs its Python path"
    )
    print(
        f"ratio (reference / ours, batched):    build {ref_build / ours_build_many:.2f}x   "
        f"check {ref_check / ours_check_many:.2f}x vs C++, {ref_check_py / ours_check_many:.2f}x vs its Python path"
    )


if __name__ == "__main__":
    main()
