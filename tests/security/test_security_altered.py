"""Altered completions (issue 5 cheater matrix): a worker generates honestly, then changes one token of each
completion and keeps the proofs. Found by the swarm matrix: with the reference (mixed-precision) TOPLOC bounds
the validator ACCEPTED such work on the tiny model (16-22 of 128 exponent mismatches, under the bound of 38;
every token's log-prob far above the sampling floor of a near-uniform model). The validator now uses the
strict fp32 profile (`validator.toploc_profile: fp32`, the default), which rejects it while honest work
under other batch sizes and thread counts still passes."""

from __future__ import annotations

import pytest
import torch

from intellect.verifier.toploc import DEFAULT_THRESHOLDS, Thresholds


@pytest.fixture(scope="module")
def honest():
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.models import load_model, tiny_model_dir

    ckpt = tiny_model_dir()
    eng = TransformersEngine(device="cpu", max_batch_size=4)
    eng.load(ckpt)
    gens = eng.generate(["What is 12 + 30? Think for 24 tokens."] * 4, SamplingParams(max_tokens=24, seed=7))
    samples = [(list(g.prompt_ids), list(g.completion_ids), list(g.proofs)) for g in gens]
    eng1 = TransformersEngine(device="cpu", max_batch_size=1)
    eng1.load(ckpt)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gens1 = eng1.generate(["What is 7 * 6? Think for 48 tokens."] * 4, SamplingParams(max_tokens=48, seed=3))
    finally:
        torch.set_num_threads(threads)
    samples += [(list(g.prompt_ids), list(g.completion_ids), list(g.proofs)) for g in gens1]
    return load_model(ckpt), samples


def _altered(samples, frac: float):
    out = []
    for prompt, completion, proofs in samples:
        c = list(completion)
        k = int(len(c) * frac)
        c[k] = c[k] - 1 if c[k] > 0 else c[k] + 1
        out.append((prompt, c, proofs))
    return out


def test_verify_samples_fp32_profile_accepts_honest_batch_and_thread_variations(honest):
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    assert all(r.ok for r in verify_samples(model, samples, Thresholds.fp32()))
    assert all(r.ok for r in verify_samples(model, samples, Thresholds.fp32(), max_batch_tokens=64))


@pytest.mark.parametrize("frac", [0.0, 0.5, 0.75])
def test_verify_samples_fp32_profile_rejects_altered_token(honest, frac):
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    results = verify_samples(model, _altered(samples, frac), Thresholds.fp32())
    assert not any(r.ok for r in results), [(r.ok, r.detail) for r in results]


def test_verify_samples_reference_profile_misses_altered_token(honest):
    """The gap the fp32 profile closes, kept visible: the reference bounds accept an altered first token."""
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    results = verify_samples(model, _altered(samples, 0.0), DEFAULT_THRESHOLDS)
    assert sum(r.ok for r in results) >= len(results) // 2


def test_validator_settings_default_to_fp32_profile():
    from intellect.agents.config import ValidatorSettings

    assert ValidatorSettings().toploc_profile == "fp32"
