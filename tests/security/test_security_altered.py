"""Altered completions (issue 5 cheater matrix): a worker generates honestly, then changes one token of each
completion and keeps the proofs. Found by the swarm matrix: with the reference (mixed-precision) TOPLOC bounds
the validator ACCEPTED such work on the tiny model (16-22 of 128 exponent mismatches, under the bound of 38;
every token's log-prob far above the sampling floor of a near-uniform model). Since then every row's seeded
sampler is replayed: an altered token is not the sampler's draw, and both profiles reject it, the strict `fp32`
one and `mixed` (the default since issue 18: honest bf16 workers pass it against an fp32 validator), while
honest work under other batch sizes and thread counts still passes."""

from __future__ import annotations

import pytest
import torch

from intellect.verifier.replay import sample_seed
from intellect.verifier.toploc import DEFAULT_THRESHOLDS, Thresholds, check_replay_budget, profile


@pytest.fixture(scope="module")
def honest():
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.models import load_model, tiny_model_dir

    ckpt = tiny_model_dir()
    eng = TransformersEngine(device="cpu", max_batch_size=4)
    eng.load(ckpt)
    gens = eng.generate(["What is 12 + 30? Think for 24 tokens."] * 4, SamplingParams(max_tokens=24, seed=7))
    # each row with its sampler seed, as the validator passes it (the engine seeds completion i of a call
    # seeded s with sample_seed(s, i))
    samples = [(list(g.prompt_ids), list(g.completion_ids), list(g.proofs), sample_seed(7, i))
               for i, g in enumerate(gens)]
    eng1 = TransformersEngine(device="cpu", max_batch_size=1)
    eng1.load(ckpt)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gens1 = eng1.generate(["What is 7 * 6? Think for 48 tokens."] * 4, SamplingParams(max_tokens=48, seed=3))
    finally:
        torch.set_num_threads(threads)
    samples += [(list(g.prompt_ids), list(g.completion_ids), list(g.proofs), sample_seed(3, i))
                for i, g in enumerate(gens1)]
    return load_model(ckpt), samples


def _altered(samples, frac: float, *, seeded: bool = True):
    """Each completion with the token at `frac` of its length changed (1.0: the last token), proofs kept;
    `seeded=False` drops the sampler seed (TOPLOC and the log-prob floor only, no sampler replay)."""
    out = []
    for prompt, completion, proofs, seed in samples:
        c = list(completion)
        k = min(int(len(c) * frac), len(c) - 1)
        c[k] = c[k] - 1 if c[k] > 0 else c[k] + 1
        out.append((prompt, c, proofs, seed) if seeded else (prompt, c, proofs))
    return out


def test_verify_samples_fp32_profile_accepts_honest_batch_and_thread_variations(honest):
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    assert all(r.ok for r in verify_samples(model, samples, Thresholds.fp32()))
    assert all(r.ok for r in verify_samples(model, samples, Thresholds.fp32(), max_batch_tokens=64))


@pytest.mark.parametrize("frac", [0.0, 0.5, 0.75, 1.0])
def test_verify_samples_fp32_profile_rejects_altered_token(honest, frac):
    """As the validator verifies (fp32 bounds + replay of each row's seeded sampler): any altered token,
    the last one included, is rejected."""
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    results = verify_samples(model, _altered(samples, frac), Thresholds.fp32())
    assert not any(r.ok for r in results), [(r.ok, r.detail) for r in results]


@pytest.mark.parametrize("frac", [0.0, 0.5])
def test_verify_samples_fp32_toploc_alone_rejects_early_altered_token(honest, frac):
    """Without the sampler replay the fp32 TOPLOC bounds still catch a token altered early or mid-chunk (later
    tokens of a chunk move few top-k values: those are the replay's, see docs/security.md Known limits)."""
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    results = verify_samples(model, _altered(samples, frac, seeded=False), Thresholds.fp32())
    assert not any(r.ok for r in results), [(r.ok, r.detail) for r in results]


def test_verify_samples_mixed_toploc_alone_misses_altered_token(honest):
    """Kept visible: the mixed (reference) TOPLOC bounds alone, without the replay, accept an altered first token."""
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    results = verify_samples(model, _altered(samples, 0.0, seeded=False), DEFAULT_THRESHOLDS)
    assert sum(r.ok for r in results) >= len(results) // 2


@pytest.mark.parametrize("frac", [0.0, 0.5, 1.0])
def test_mixed_profile_with_replay_rejects_altered_tokens(honest, frac):
    """The default profile as the validator applies it (per-sample replay, then the submission's budget of
    differing tokens): every submission with altered tokens is rejected, the last token included."""
    from intellect.verifier.prefill import verify_samples

    model, samples = honest
    th = profile("mixed")
    assert all(r.ok for r in verify_samples(model, samples, th)) and check_replay_budget(
        verify_samples(model, samples, th), th).ok  # honest: accepted
    results = verify_samples(model, _altered(samples, frac), th)
    assert any(not r.ok for r in results) or not check_replay_budget(results, th).ok


def test_validator_settings_and_pool_rules_default_to_mixed_profile():
    from intellect.agents.config import ValidatorSettings
    from intellect.verifier.submission import SubmissionRules

    assert ValidatorSettings().toploc_profile == "mixed"
    assert profile("mixed") is DEFAULT_THRESHOLDS and profile("reference") is DEFAULT_THRESHOLDS
    assert SubmissionRules(problems_per_task=1, group_size=2, length_alpha=0, temperature=1,
                           budgets={"cpu": [8]}).toploc_profile == "mixed"
    with pytest.raises(ValueError, match="unknown verification profile 'bf17'"):
        profile("bf17")
