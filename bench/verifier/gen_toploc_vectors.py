"""Regenerate the TOPLOC test vectors from the reference package `toploc` 0.1.6.

Usage (the reference is NOT a dependency of this repo; build it outside, once, ~4 min):

    # toploc 0.1.6's prebuilt extensions do not load with torch 2.13 (undefined symbol):
    # rebuild its shipped C++ sources against our torch with cpp_extension.
    mkdir -p /tmp/toplocref && cd /tmp/toplocref
    .venv/bin/pip download toploc==0.1.6 --no-deps -d dl && unzip -q dl/*.whl -d src
    rm src/toploc/C/csrc/*.so
    # setup_ref.py: CppExtension("toploc.C.csrc.{ndd,utils,poly}", [".../{name}.cpp"],
    #               extra_compile_args=["-O3", "-fopenmp"]) with BuildExtension
    cd src && /work/main/.venv/bin/python setup_ref.py build_ext --inplace
    cd /work/main && PYTHONPATH=/tmp/toplocref/src .venv/bin/python bench/verifier/gen_toploc_vectors.py

Writes tests/verifier/data/toploc_vectors.npz: for each case `<name>__act` (bf16 bit patterns,
uint16, shape (T, H)), `<name>__proofs` (uint8, (C, 258)) from `toploc.build_proofs_bytes(
[rows], decode_batching_size=32, topk=128, skip_prefill=True)`, and `<name>__stats` (float64,
(C, 3): exp mismatches, mantissa error mean, median) from the reference's C++ `verify_proofs_bytes`
on a perturbed copy `<name>__pert` of the activations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[2] / "tests" / "verifier" / "data" / "toploc_vectors.npz"


def cases() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    out: dict[str, torch.Tensor] = {}
    out["randn_64x576"] = torch.randn(64, 576, generator=g)
    out["randn_75x64_partial"] = torch.randn(75, 64, generator=g)  # T % 32 = 11
    out["ties_40x32"] = torch.randint(-3, 4, (40, 32), generator=g).float()  # many equal |values|
    z = torch.zeros(33, 576)
    z.view(-1)[torch.randperm(z.numel(), generator=g)[:50]] = torch.randn(50, generator=g)
    out["sparse_zeros_33x576"] = z  # top-128 includes zeros (ties at 0)
    out["negative_40x96"] = -torch.rand(40, 96, generator=g) * 10
    out["wide_32x2100_modsearch"] = torch.randn(32, 2100, generator=g)  # indices > 65497
    out["wide_40x2100_modsearch"] = torch.randn(40, 2100, generator=g) * 3
    f = torch.randn(32, 2100, generator=g) * 0.01
    pairs = torch.arange(0, 1700, 27)  # 63 pairs (k, k + 65497) collide mod 65497
    f.view(-1)[pairs] = 50 + torch.rand(len(pairs), generator=g)
    f.view(-1)[pairs + 65497] = -50 - torch.rand(len(pairs), generator=g)
    out["forced_modsearch_32x2100"] = f  # the modulus search must go below 65497
    out["exact_topk_32x4"] = torch.randn(32, 4, generator=g)  # chunk holds exactly 128 values
    e = torch.randn(64, 128, generator=g)
    e[:, :8] *= 1e30
    e[:, 8:16] *= 1e-38  # subnormals
    out["extreme_64x128"] = e
    out["one_token_1x576"] = torch.randn(1, 576, generator=g)
    return out


def main() -> None:
    import toploc
    from toploc.C.csrc.poly import verify_proofs_bytes

    g = torch.Generator().manual_seed(99)
    arrays: dict[str, np.ndarray] = {}
    for name, act in cases().items():
        act = act.to(torch.bfloat16)
        proofs = toploc.build_proofs_bytes(list(act), decode_batching_size=32, topk=128, skip_prefill=True)
        assert all(len(p) == 258 for p in proofs), name
        assert any(any(p[2:]) for p in proofs), f"{name}: reference returned null proofs"
        pert = (act.float() * (1 + 0.01 * torch.randn(act.shape, generator=g))).to(torch.bfloat16)
        stats = verify_proofs_bytes(pert, proofs, 32, 128)
        arrays[f"{name}__act"] = act.view(torch.int16).numpy().view(np.uint16)
        arrays[f"{name}__pert"] = pert.view(torch.int16).numpy().view(np.uint16)
        arrays[f"{name}__proofs"] = np.frombuffer(b"".join(proofs), dtype=np.uint8).reshape(len(proofs), 258)
        arrays[f"{name}__stats"] = np.array(
            [[s.exp_mismatches, s.mant_err_mean, s.mant_err_median] for s in stats], dtype=np.float64
        )
        print(f"{name}: {tuple(act.shape)} -> {len(proofs)} proofs; stats[0]={arrays[f'{name}__stats'][0]}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
