"""The verifier's trust rules at their exact limits (issue 39), under the profiles pools run (`mixed`, the
default, and `fp32`): each rule accepts at its bound and refuses one step past it, with the bound taken
from the profile itself (never a test's own `Thresholds(...)`), so a changed default fails here.

- per chunk (TOPLOC): exponent mismatches, mantissa-error mean, mantissa-error median: a crafted chunk
  whose statistics land exactly on the bound (bf16 bit patterns chosen by hand, proofs built for real);
- per submission: the aggregate mantissa bound and its minimum chunk count; the replay budget of
  differing tokens;
- per token (sampler replay): the tie margin that decides which tokens count as differing, the
  per-token tolerance and the log-probability floor of unseeded samples, each at an observed value of
  the tiny model's real replay (the bound set to that value passes, the next float below refuses);
- the top-p cut when the mass before a token is exactly `top_p`.

The table of every rule and its tests is in docs/security.md ("Rules at their limits").
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from intellect.verifier.capture import generate_with_states
from intellect.verifier.prefill import lm_logits, prefill_hidden_states, token_logprobs, verify_samples
from intellect.verifier.replay import gumbel_noise, masked_scores, replay_margins, sample_seed
from intellect.verifier.toploc import (
    DEFAULT_THRESHOLDS,
    ChunkStats,
    ReasonCode,
    ReplayStats,
    Thresholds,
    VerificationResult,
    build_proofs,
    check_aggregate,
    check_replay_budget,
    profile,
    replay_differing_allowed,
    verify_proofs,
)

PROFILES = ["mixed", "fp32"]
PINNED = {  # the documented bounds by value (docs/verifier.md): a changed default fails here, not silently
    "mixed": {"max_exp_mismatches": 18, "max_mant_err_mean": 5.0, "max_mant_err_median": 4.0,
              "max_replay_margin": 1.0, "replay_tie_margin": 0.25, "max_replay_differing": 2,
              "max_replay_differing_rate": 0.002, "max_agg_mant_err_mean": 2.5, "min_agg_chunks": 8},
    "fp32": {"max_exp_mismatches": 4, "max_mant_err_mean": 1.5, "max_mant_err_median": 1.0,
             "max_replay_margin": 0.05, "replay_tie_margin": 0.0, "max_replay_differing": 0,
             "max_replay_differing_rate": 0.001, "max_agg_mant_err_mean": 2.5, "min_agg_chunks": 8},
}


def _profile(name: str) -> Thresholds:
    """The profile a pool names, checked against its documented bounds first."""
    th = profile(name)
    assert th.model_dump() == PINNED[name]
    return th


def test_default_profile_is_mixed():
    assert profile("mixed") is DEFAULT_THRESHOLDS and profile("reference") is DEFAULT_THRESHOLDS
    assert DEFAULT_THRESHOLDS.model_dump() == PINNED["mixed"]

# -- per chunk: a chunk whose statistics are chosen exactly ------------------------------------------

ROWS, WIDTH, TOPK = 32, 64, 128
BASE_MANTISSA = 32  # every top-k value is (1 + 32/128) = 1.25: mantissa room both ways, exponent 127


def _chunk() -> tuple[torch.Tensor, np.ndarray]:
    """(32, 64) bf16 states: 128 seeded positions hold 1.25, the rest 0.001 (far below: the top-k set is
    those 128 positions whatever their mantissas or a doubled exponent). Returns (states, positions)."""
    g = np.random.default_rng(39)
    pos = g.choice(ROWS * WIDTH, TOPK, replace=False)
    flat = torch.full((ROWS * WIDTH,), 0.001, dtype=torch.bfloat16)
    flat[torch.from_numpy(pos)] = 1.25
    return flat.view(ROWS, WIDTH), pos


def _with_errors(hidden: torch.Tensor, pos: np.ndarray, errors: list[int], exp_changed: int = 0) -> torch.Tensor:
    """A copy whose first len(errors) top-k values have their mantissa raised by errors[i] units, and whose
    next `exp_changed` values are doubled (exponent +1, same mantissa)."""
    bits = hidden.reshape(-1).view(torch.int16).clone()
    for i, e in enumerate(errors):
        bits[int(pos[i])] += e  # mantissa 32 + e <= 127: the exponent field is untouched
    for i in range(len(errors), len(errors) + exp_changed):
        bits[int(pos[i])] += 1 << 7  # exponent + 1: 2.5
    return bits.view(torch.bfloat16).view(ROWS, WIDTH)


def _judge(errors: list[int], exp_changed: int, th: Thresholds) -> VerificationResult:
    honest, pos = _chunk()
    claimed = _with_errors(honest, pos, errors, exp_changed)  # the worker proves these states
    return verify_proofs(honest, build_proofs(claimed), thresholds=th)  # the validator recomputes `honest`


def _stats(res: VerificationResult) -> tuple[int, float, float]:
    (c,) = res.chunks
    return c.exp_mismatches, c.mant_err_mean, c.mant_err_median


@pytest.mark.parametrize("name", PROFILES)
def test_chunk_exp_mismatches_at_limit_accepted_one_past_refused(name):
    th = _profile(name)
    n = th.max_exp_mismatches  # mixed 18, fp32 4
    at = _judge([], n, th)
    assert at.ok and _stats(at) == (n, 0.0, 0.0)
    past = _judge([], n + 1, th)
    assert (past.ok, past.reason, _stats(past)) == (False, ReasonCode.EXP_MISMATCH, (n + 1, 0.0, 0.0))


@pytest.mark.parametrize("name", PROFILES)
def test_chunk_mantissa_mean_at_limit_accepted_one_past_refused_while_median_passes(name):
    """The mean check alone refuses: the median is 0 (most values exact), a few values are far off."""
    th = _profile(name)
    k = round(th.max_mant_err_mean * TOPK / 64)  # k errors of 64 units: mean exactly the bound (mixed 10, fp32 3)
    assert k * 64 / TOPK == th.max_mant_err_mean
    at = _judge([64] * k, 0, th)
    assert at.ok and _stats(at) == (0, th.max_mant_err_mean, 0.0)
    past = _judge([64] * k + [1], 0, th)  # one more unit of error: mean (64k + 1) / 128
    assert (past.ok, past.reason) == (False, ReasonCode.MANTISSA_MEAN), past.detail
    assert _stats(past) == (0, (64 * k + 1) / TOPK, 0.0)
    assert past.chunks[0].mant_err_median <= th.max_mant_err_median  # the median alone would have passed


@pytest.mark.parametrize("name", PROFILES)
def test_chunk_mantissa_median_at_limit_accepted_one_past_refused(name):
    th = _profile(name)
    m = int(th.max_mant_err_median)  # mixed 4, fp32 1; the upper median of 128 values is the 65th smallest
    at = _judge([m] * 64, 0, th)
    assert at.ok and _stats(at) == (0, m / 2, float(m))
    past = _judge([m + 1] * 64, 0, th)
    assert (past.ok, past.reason, _stats(past)) == (False, ReasonCode.MANTISSA_MEDIAN, (0, (m + 1) / 2, float(m + 1)))
    assert _judge([m + 1] * 63, 0, th).ok  # 63 values off: the median is still an exact one


# -- per submission: the aggregate mantissa bound and the replay budget ---------------------------------


def _chunks(mean: float, n: int) -> list[VerificationResult]:
    return [VerificationResult(ok=True, chunks=[ChunkStats(exp_mismatches=0, mant_err_mean=mean, mant_err_median=0.0)])
            for _ in range(n)]


def test_aggregate_default_bound_at_limit_accepted_just_past_refused():
    """The default bound itself (2.5 over >= 8 chunks): the only defence of `mixed` against a slightly altered model."""
    bound, least = DEFAULT_THRESHOLDS.max_agg_mant_err_mean, DEFAULT_THRESHOLDS.min_agg_chunks
    assert (bound, least) == (2.5, 8)  # docs/benchmarks-verifier.md: honest <= 1.7, a 1 % perturbation >= 3.3
    assert check_aggregate(_chunks(2.5, 16)).ok  # the default thresholds, not a test's own
    past = check_aggregate(_chunks(2.5 + 1e-6, 16))
    assert (past.ok, past.reason) == (False, ReasonCode.AGGREGATE_MANTISSA), past.detail
    assert not check_aggregate(_chunks(3.3, 16)).ok  # the smallest perturbation measured


@pytest.mark.parametrize("name", PROFILES)
def test_aggregate_judges_from_min_chunks_on(name):
    th = _profile(name)
    assert th.max_agg_mant_err_mean == 2.5 and th.min_agg_chunks == 8  # both profiles keep the aggregate
    assert not check_aggregate(_chunks(3.0, th.min_agg_chunks), th).ok  # judged at exactly the minimum
    assert check_aggregate(_chunks(3.0, th.min_agg_chunks - 1), th).ok  # one chunk fewer: too noisy to judge


def _replayed(differing: int, positions: int) -> VerificationResult:
    return VerificationResult(ok=True, replay=ReplayStats(max_margin=0.5, mean_margin=0.0, flips=differing,
                                                          positions=positions, differing=differing))


@pytest.mark.parametrize(("name", "tokens", "allowed"), [
    ("mixed", 499, 2), ("mixed", 500, 3),  # 2 + int(0.002 x tokens)
    ("fp32", 999, 0), ("fp32", 1000, 1),  # 0 + int(0.001 x tokens)
])
def test_replay_budget_at_limit_accepted_one_past_refused(name, tokens, allowed):
    th = _profile(name)
    assert replay_differing_allowed(tokens, th) == allowed
    assert check_replay_budget([_replayed(allowed, tokens)], th).ok
    past = check_replay_budget([_replayed(allowed, tokens - 100), _replayed(1, 100)], th)  # summed over samples
    assert (past.ok, past.reason) == (False, ReasonCode.REPLAY_DIFFERING), past.detail


# -- per token: the sampler replay on the tiny model's real logits --------------------------------------


def _prompts(n: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(39)
    return [torch.randint(1, 300, (5 + i,), generator=g).tolist() for i in range(n)]


def _steer_into(model, prompt: list[int], n: int, seed: int, lo: float, hi: float) -> list[int]:
    """At every position the token with the smallest replay margin in (lo, hi] when there is one (the
    worker's choice instead of the seeded draw), else the draw itself."""
    out: list[int] = []
    with torch.inference_mode():
        for p in range(n):
            logits = model(input_ids=torch.tensor([prompt + out])).logits[0, -1:].float()  # (1, V)
            scores = masked_scores(logits, 1.0)[0] + gumbel_noise(seed, p, logits.shape[-1])  # (V,)
            margin = scores.max() - scores  # (V,)
            band = torch.where((margin > lo) & (margin <= hi), margin, torch.full_like(margin, torch.inf))
            out.append(int(band.argmin()) if torch.isfinite(band.min()) else int(scores.argmax()))
    return out


def _proven(model, prompt: list[int], completion: list[int], seed: int) -> tuple:
    (hidden,) = prefill_hidden_states(model, [prompt], [completion])
    return (prompt, completion, build_proofs(hidden), seed)


def _margins(model, sample: tuple) -> torch.Tensor:
    (hidden,) = prefill_hidden_states(model, [sample[0]], [sample[1]])
    return replay_margins(lm_logits(model, hidden), sample[1], sample[3], 1.0)  # (T,)


def test_replay_tie_margin_counts_tokens_between_tie_and_tolerance_as_differing(tiny_llama):
    """Under `mixed` a token within the per-token tolerance (1.0) but above the tie margin (0.25) is the
    worker's choice, not noise: it passes per token and counts against the submission's budget. Counting
    only tokens above the tolerance would let a worker steer every token within 1.0 of the draw."""
    th = _profile("mixed")
    lo, hi = th.replay_tie_margin, th.max_replay_margin
    seeds = [sample_seed(39, i) for i in range(6)]
    samples = [_proven(tiny_llama, p, _steer_into(tiny_llama, p, 16, s, lo + 0.05, hi - 0.05), s)
               for p, s in zip(_prompts(6), seeds, strict=True)]
    steered = sum(int(((m > lo) & (m <= hi)).sum()) for m in (_margins(tiny_llama, s) for s in samples))
    assert steered > replay_differing_allowed(6 * 16, th)  # enough choices to exceed the budget
    results = verify_samples(tiny_llama, samples, th)
    assert all(r.ok for r in results), [r.detail for r in results]  # every token within the per-token tolerance
    assert sum(r.replay.differing for r in results) == steered  # every one above the tie margin counted
    budget = check_replay_budget(results, th)
    assert (budget.ok, budget.reason) == (False, ReasonCode.REPLAY_DIFFERING), budget.detail


@pytest.fixture(scope="module")
def steered_sample(tiny_llama) -> tuple[tuple, float]:
    """One sample with some tokens off the seeded draw by margins in (0.1, 0.9], and its largest margin."""
    seed = sample_seed(40, 0)
    prompt = _prompts(1)[0]
    sample = _proven(tiny_llama, prompt, _steer_into(tiny_llama, prompt, 24, seed, 0.1, 0.9), seed)
    worst = float(_margins(tiny_llama, sample).max())
    assert 0.1 < worst <= 0.9
    return sample, worst


def _below(x: float) -> float:
    return float(np.nextafter(np.float32(x), np.float32(0)))  # margins are float32: the next one down


def test_replay_per_token_tolerance_at_limit_accepted_just_past_refused(tiny_llama, steered_sample):
    sample, worst = steered_sample
    at = Thresholds(max_replay_margin=worst)
    (res,) = verify_samples(tiny_llama, [sample], at)
    assert res.ok and res.replay.max_margin == worst
    (res,) = verify_samples(tiny_llama, [sample], Thresholds(max_replay_margin=_below(worst)))
    assert (res.ok, res.reason) == (False, ReasonCode.REPLAY_MISMATCH), res.detail


def test_replay_tie_margin_at_limit_not_counted_just_past_counted(tiny_llama, steered_sample):
    sample, worst = steered_sample
    over = int((_margins(tiny_llama, sample) >= worst).sum())  # tokens at the largest margin
    (at,) = verify_samples(tiny_llama, [sample], Thresholds(replay_tie_margin=worst))
    (past,) = verify_samples(tiny_llama, [sample], Thresholds(replay_tie_margin=_below(worst)))
    assert over >= 1 and (at.replay.differing, past.replay.differing) == (0, over)


def test_unseeded_logprob_floor_at_limit_accepted_just_past_refused(tiny_llama):
    (gen,) = generate_with_states(tiny_llama, _prompts(1), 12, seed=39)
    sample = (gen.prompt_ids, gen.completion_ids, build_proofs(gen.hidden))  # no seed: the floor applies
    (hidden,) = prefill_hidden_states(tiny_llama, [gen.prompt_ids], [gen.completion_ids])
    floor = float(token_logprobs(tiny_llama, hidden, gen.completion_ids).min())
    (res,) = verify_samples(tiny_llama, [sample], min_token_logprob=floor)
    assert res.ok, res.detail
    above = float(np.nextafter(np.float32(floor), np.float32(0)))
    (res,) = verify_samples(tiny_llama, [sample], min_token_logprob=above)
    assert (res.ok, res.reason) == (False, ReasonCode.IMPLAUSIBLE_TOKEN), res.detail


def test_top_p_drops_a_token_whose_preceding_mass_is_exactly_top_p():
    """Four equal tokens: masses before them 0, 0.25, 0.5, 0.75 (exact in float32). top_p 0.5 keeps two:
    the third's preceding mass reaches top_p exactly, so it is dropped; just above 0.5 keeps three."""
    logits = torch.zeros(1, 4)
    assert int(torch.isfinite(masked_scores(logits, 1.0, top_p=0.5)).sum()) == 2
    assert int(torch.isfinite(masked_scores(logits, 1.0, top_p=0.5 + 1e-6)).sum()) == 3
    assert int(torch.isfinite(masked_scores(logits, 1.0, top_p=0.25)).sum()) == 1
