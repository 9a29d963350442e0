"""Issue 22: the end of a completion is part of the proof, and a worker gains no choice from the
replay tolerance. Each attack below passes TOPLOC + the per-token replay check of 5e47eb6 (margin 2.0)
and is refused by `check_completion_end` / `check_replay_budget` with the current thresholds."""

from __future__ import annotations

import copy

import pytest
import torch

from intellect.verifier.capture import generate_with_states
from intellect.verifier.completion import EndError, check_completion_end, eos_token_ids
from intellect.verifier.prefill import prefill_hidden_states, verify_samples
from intellect.verifier.replay import gumbel_noise, masked_scores, sample_seed
from intellect.verifier.toploc import (
    ReasonCode,
    ReplayStats,
    Thresholds,
    VerificationResult,
    build_proofs,
    check_aggregate,
    check_replay_budget,
    replay_differing_allowed,
)

OLD = Thresholds(max_replay_margin=2.0, max_exp_mismatches=4, max_mant_err_mean=1.5, max_mant_err_median=1.0)
"""5e47eb6's fp32 profile: the per-token tolerance 2.0 and nothing per submission."""


def _prompts(n: int, vocab: int = 300) -> list[list[int]]:
    g = torch.Generator().manual_seed(7)
    return [torch.randint(1, vocab, (6 + i,), generator=g).tolist() for i in range(n)]


def _passes_old(model, samples) -> bool:
    results = verify_samples(model, samples, OLD)
    return all(r.ok for r in results) and check_aggregate(results, OLD).ok


def _passes_new(model, samples, th: Thresholds) -> bool:
    results = verify_samples(model, samples, th)
    return all(r.ok for r in results) and check_aggregate(results, th).ok and check_replay_budget(results, th).ok


def _proven(model, prompt: list[int], completion: list[int], seed: int) -> tuple:
    """A sample whose proofs come from one prefill of the real model over the chosen tokens."""
    (hidden,) = prefill_hidden_states(model, [prompt], [completion])
    return (prompt, completion, build_proofs(hidden), seed)


@pytest.mark.parametrize(("ids", "budget", "error"), [
    ([5, 6, 2], 8, None),  # ends with EOS
    ([5, 6, 7, 8], 4, None),  # budget used up
    ([2], 4, None),
    ([], 4, EndError.EMPTY),
    ([5, 2, 6, 7], 8, EndError.TOKENS_AFTER_EOS),
    ([5, 2, 6, 2], 4, EndError.TOKENS_AFTER_EOS),
    ([5, 6, 7], 8, EndError.CUT_SHORT),
    ([5, 6, 7, 8, 9], 4, EndError.OVER_BUDGET),
])
def test_check_completion_end(ids, budget, error):
    assert check_completion_end(ids, {2}, budget).error is error


def test_eos_token_ids_from_generation_config_and_tokenizer(tiny_llama):
    model = copy.copy(tiny_llama)
    model.generation_config = copy.deepcopy(tiny_llama.generation_config)
    model.generation_config.eos_token_id = [2, 9]

    class Tok:
        eos_token_id = 4

    assert eos_token_ids(model, Tok()) == {2, 4, 9}


def test_sampling_on_after_eos_passes_proofs_but_not_the_end_check(tiny_llama):
    gens = generate_with_states(tiny_llama, _prompts(4), 24, seed=31)  # no EOS: the sampler never stops
    eos = gens[0].completion_ids[3]  # say this id were EOS: honest sampling would have stopped there
    samples = [(g.prompt_ids, g.completion_ids, build_proofs(g.hidden), g.seed) for g in gens]
    assert _passes_old(tiny_llama, samples)  # every padded token is a faithful draw
    assert check_completion_end(gens[0].completion_ids, {eos}, 24).error is EndError.TOKENS_AFTER_EOS


def test_cut_at_a_chosen_prefix_passes_proofs_but_not_the_end_check(tiny_llama):
    gens = generate_with_states(tiny_llama, _prompts(4), 24, seed=32)
    cut = [_proven(tiny_llama, g.prompt_ids, g.completion_ids[:10], g.seed) for g in gens]
    assert _passes_old(tiny_llama, cut)
    eos = next(t for t in range(300) if all(t not in g.completion_ids for g in gens))  # never drawn here
    assert all(check_completion_end(g.completion_ids, {eos}, 24).ok for g in gens)  # the honest ones
    assert all(check_completion_end(c[1], {eos}, 24).error is EndError.CUT_SHORT for c in cut)


def _steered(model, prompt: list[int], n: int, seed: int, tolerance: float) -> list[int]:
    """At every position the highest-logit token whose replay margin is within `tolerance` (the worker's
    choice instead of the seeded draw), then proofs from one prefill: issue 22's steering attack."""
    out: list[int] = []
    with torch.inference_mode():
        for p in range(n):
            logits = model(input_ids=torch.tensor([prompt + out])).logits[0, -1:].float()  # (1, V)
            scores = masked_scores(logits, 1.0)[0] + gumbel_noise(seed, p, logits.shape[-1])  # (V,)
            ok = scores >= scores.max() - tolerance
            out.append(int(torch.where(ok, logits[0], torch.full_like(logits[0], -torch.inf)).argmax()))
    return out


def test_steering_within_the_old_tolerance_is_caught_per_submission(tiny_llama):
    prompts = _prompts(8)
    seeds = [sample_seed(41, i) for i in range(len(prompts))]
    steered = [_proven(tiny_llama, p, _steered(tiny_llama, p, 16, s, 2.0), s) for p, s in zip(prompts, seeds, strict=True)]
    honest = generate_with_states(tiny_llama, prompts, 16, seed=41)
    assert sum(a != b for s, g in zip(steered, honest, strict=True) for a, b in zip(s[1], g.completion_ids, strict=True)) > 0
    assert _passes_old(tiny_llama, steered)  # 5e47eb6 accepted it
    th = Thresholds.fp32()
    assert not _passes_new(tiny_llama, steered, th)
    honest_samples = [(g.prompt_ids, g.completion_ids, build_proofs(g.hidden), g.seed) for g in honest]
    assert _passes_new(tiny_llama, honest_samples, th)  # the same prompts, sampled honestly


def test_cheaper_model_proven_with_the_real_one_is_caught(tiny_llama):
    cheap = copy.deepcopy(tiny_llama)
    with torch.no_grad():  # 4-bit per-tensor absmax: the cheater's model
        for p in cheap.parameters():
            scale = float(p.abs().max()) / 7 or 1.0
            p.copy_(torch.round(p / scale).clamp(-7, 7) * scale)
    prompts = _prompts(8)
    gens = generate_with_states(cheap, prompts, 16, seed=42)
    proven = [_proven(tiny_llama, g.prompt_ids, g.completion_ids, g.seed) for g in gens]
    assert _passes_old(tiny_llama, proven)  # 5e47eb6 accepted it: TOPLOC sees the real model's states
    assert not _passes_new(tiny_llama, proven, Thresholds.fp32())


def test_check_replay_budget_counts_differing_tokens_per_submission():
    th = Thresholds(max_replay_differing=2, max_replay_differing_rate=0.01)

    def res(differing: int, positions: int = 100) -> VerificationResult:
        return VerificationResult(ok=True, replay=ReplayStats(max_margin=0.5, mean_margin=0.0, flips=differing,
                                                               positions=positions, differing=differing))

    assert replay_differing_allowed(400, th) == 6
    assert check_replay_budget([res(2), res(2), res(1), res(1)], th).ok
    bad = check_replay_budget([res(2), res(2), res(2), res(1)], th)
    assert not bad.ok and bad.reason is ReasonCode.REPLAY_DIFFERING and "7 of 400" in bad.detail
    assert check_replay_budget([VerificationResult(ok=True)], th).ok  # nothing replayed, nothing counted
    strict = Thresholds.fp32()
    assert replay_differing_allowed(999, strict) == 0 and replay_differing_allowed(1000, strict) == 1
