"""Batched prefill recomputation and end-to-end proof checks on real transformer models."""

from __future__ import annotations

import pytest
import torch

from intellect.verifier.capture import generate_with_states
from intellect.verifier.prefill import PrefillError, prefill_hidden_states, token_logprobs, verify_samples
from intellect.verifier.toploc import ReasonCode, Thresholds, build_proofs


def _prompts(n: int, vocab: int = 300) -> list[list[int]]:
    g = torch.Generator().manual_seed(5)
    return [
        torch.randint(1, vocab, (int(torch.randint(3, 12, (1,), generator=g)),), generator=g).tolist()
        for _ in range(n)
    ]


def test_prefill_hidden_states_batched_equals_single(tiny_llama):
    prompts = _prompts(5)
    comps = [list(range(10, 10 + k)) for k in (1, 7, 33, 40, 2)]
    batched = prefill_hidden_states(tiny_llama, prompts, comps)
    single = prefill_hidden_states(tiny_llama, prompts, comps, max_batch_tokens=1)
    for b, s, c in zip(batched, single, comps, strict=True):
        assert b.shape == (len(c), 128)
        torch.testing.assert_close(b, s, atol=1e-5, rtol=1e-5)


def test_prefill_hidden_states_match_lm_head_input(tiny_llama):
    prompt, comp = [5, 6, 7], [8, 9, 10, 11]
    captured = []
    handle = tiny_llama.get_output_embeddings().register_forward_pre_hook(lambda m, a: captured.append(a[0]))
    try:
        with torch.inference_mode():
            tiny_llama(input_ids=torch.tensor([prompt + comp[:-1]]))
    finally:
        handle.remove()
    (states,) = prefill_hidden_states(tiny_llama, [prompt], [comp])
    torch.testing.assert_close(states, captured[0][0, len(prompt) - 1 :], atol=1e-6, rtol=1e-6)


def test_generate_with_states_proofs_verify(tiny_llama):
    gens = generate_with_states(tiny_llama, _prompts(4), 40, seed=1)
    samples = [(g.prompt_ids, g.completion_ids, build_proofs(g.hidden)) for g in gens]
    results = verify_samples(tiny_llama, samples)
    assert all(r.ok for r in results), [r.detail for r in results]
    assert all(c.exp_mismatches == 0 for r in results for c in r.chunks)


def test_verify_samples_altered_tokens_fail(tiny_llama):
    gens = generate_with_states(tiny_llama, _prompts(3), 32, seed=2)
    samples = []
    for g in gens:
        comp = list(g.completion_ids)
        for j in range(0, 31, 4):  # ~25% of the tokens replaced
            comp[j] = (comp[j] + 17) % 300
        samples.append((g.prompt_ids, comp, build_proofs(g.hidden)))
    assert not any(r.ok for r in verify_samples(tiny_llama, samples))


def test_verify_samples_bad_sample_does_not_stop_the_others(tiny_llama):
    (g,) = generate_with_states(tiny_llama, _prompts(1), 32, seed=3)
    good = (g.prompt_ids, g.completion_ids, build_proofs(g.hidden))
    samples = [
        good,
        (g.prompt_ids, [*g.completion_ids[:-1], 10_000], good[2]),  # token outside the vocabulary
        (g.prompt_ids, [], []),  # empty completion
        ([], g.completion_ids, good[2]),  # empty prompt
        (g.prompt_ids, g.completion_ids, good[2][:0]),  # no proofs
        (g.prompt_ids, g.completion_ids, [b"junk"]),
        None,  # not even a tuple
        good,
    ]
    r = verify_samples(tiny_llama, samples)  # type: ignore[arg-type]
    assert len(r) == len(samples)
    assert r[0].ok and r[-1].ok
    assert [x.reason for x in r[1:4]] == [ReasonCode.INVALID_SAMPLE] * 3
    assert r[4].reason is ReasonCode.WRONG_PROOF_COUNT
    assert r[5].reason is ReasonCode.MALFORMED_PROOF
    assert r[6].reason is ReasonCode.INVALID_SAMPLE


def test_prefill_hidden_states_bad_input_raises(tiny_llama):
    with pytest.raises(PrefillError, match="sample 1"):
        prefill_hidden_states(tiny_llama, [[1], [2]], [[3], [-1]])
    with pytest.raises(PrefillError, match="prompts"):
        prefill_hidden_states(tiny_llama, [[1]], [[2], [3]])
    with pytest.raises(PrefillError, match="exceeds"):
        prefill_hidden_states(tiny_llama, [[1] * 200], [[2] * 100])


@pytest.mark.slow
def test_verify_samples_smollm2_honest_pass_and_attacks_fail(smollm2):
    model, tok = smollm2
    prompts = [tok(t).input_ids for t in ("What is 12 + 30?", "Write a haiku about rain.", "def add(a, b):")]
    gens = generate_with_states(model, prompts, 32, seed=0)
    honest = [(g.prompt_ids, g.completion_ids, build_proofs(g.hidden)) for g in gens]
    assert all(r.ok for r in verify_samples(model, honest))
    swapped = [(s[0], s[1], honest[(i + 1) % 3][2]) for i, s in enumerate(honest)]
    assert not any(r.ok for r in verify_samples(model, swapped))
    other_prompt = [(honest[(i + 1) % 3][0], s[1], s[2]) for i, s in enumerate(honest)]
    assert not any(r.ok for r in verify_samples(model, other_prompt))


def test_token_logprobs_match_model_logits(tiny_llama):
    prompt, comp = [3, 4, 5], [6, 7, 8, 9]
    (states,) = prefill_hidden_states(tiny_llama, [prompt], [comp])
    with torch.inference_mode():
        logits = tiny_llama(input_ids=torch.tensor([prompt + comp[:-1]])).logits[0, len(prompt) - 1 :]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(comp)[:, None]).squeeze(-1)
    torch.testing.assert_close(token_logprobs(tiny_llama, states, comp), expected, atol=1e-4, rtol=1e-4)


def test_verify_samples_sampling_check_flags_implausible_token(tiny_llama):
    (g,) = generate_with_states(tiny_llama, _prompts(1), 32, seed=4)
    sample = (g.prompt_ids, g.completion_ids, build_proofs(g.hidden))
    lp = float(token_logprobs(tiny_llama, g.hidden, g.completion_ids).min())
    (ok,) = verify_samples(tiny_llama, [sample], min_token_logprob=lp - 0.5)
    (bad,) = verify_samples(tiny_llama, [sample], min_token_logprob=lp + 0.5)
    (off,) = verify_samples(tiny_llama, [sample], min_token_logprob=None)
    assert ok.ok and off.ok
    assert not bad.ok and bad.reason is ReasonCode.IMPLAUSIBLE_TOKEN and "log-probability" in bad.detail


def _seeded(gens):
    return [(g.prompt_ids, g.completion_ids, build_proofs(g.hidden), g.seed) for g in gens]


def test_verify_samples_replay_accepts_honest_seeded_samples(tiny_llama):
    gens = generate_with_states(tiny_llama, _prompts(4), 40, seed=11, temperature=0.8)
    results = verify_samples(tiny_llama, _seeded(gens), temperature=0.8)
    assert all(r.ok for r in results), [r.detail for r in results]
    assert all(r.replay is not None and r.replay.flips == 0 and r.replay.positions == 40 for r in results)


def test_verify_samples_replay_catches_last_token_altered(tiny_llama):
    """TOPLOC cannot see the last token (no state depends on it); the replayed sampler can."""
    gens = generate_with_states(tiny_llama, _prompts(3), 32, seed=12)
    samples = []
    for p, c, proofs, s in _seeded(gens):
        c = list(c)
        c[-1] = (c[-1] + 1) % 300
        samples.append((p, c, proofs, s))
    assert all(r.ok for r in verify_samples(tiny_llama, [x[:3] for x in samples], min_token_logprob=None))
    results = verify_samples(tiny_llama, samples)
    assert [r.reason for r in results] == [ReasonCode.REPLAY_MISMATCH] * 3
    assert all("token 31" in r.detail and r.failed_chunk == 0 for r in results)


def test_verify_samples_replay_wrong_seed_or_temperature_fails(tiny_llama):
    gens = generate_with_states(tiny_llama, _prompts(3), 32, seed=13)
    samples = _seeded(gens)
    shifted = [(p, c, pr, samples[(i + 1) % 3][3]) for i, (p, c, pr, _) in enumerate(samples)]
    assert not any(r.ok for r in verify_samples(tiny_llama, shifted))
    # the random tiny model's logits are nearly flat: another temperature flips tokens by small margins
    assert sum(r.replay.flips for r in verify_samples(tiny_llama, samples, temperature=0.5)) > 0
    off = verify_samples(tiny_llama, shifted, Thresholds(max_replay_margin=None), min_token_logprob=None)
    assert all(r.ok and r.replay is None for r in off)


def test_verify_samples_replay_accepts_bf16_worker(tiny_llama):
    import copy

    worker = copy.deepcopy(tiny_llama).to(torch.bfloat16)
    gens = generate_with_states(worker, _prompts(6), 48, seed=14)
    results = verify_samples(tiny_llama, _seeded(gens))
    assert all(r.ok for r in results), [r.detail for r in results]


def test_verify_samples_bad_seed_is_invalid_sample(tiny_llama):
    (g,) = generate_with_states(tiny_llama, _prompts(1), 8, seed=15)
    (r,) = verify_samples(tiny_llama, [(g.prompt_ids, g.completion_ids, build_proofs(g.hidden), -5)])
    assert r.reason is ReasonCode.INVALID_SAMPLE and "seed" in r.detail


def test_prefill_hidden_states_shared_prompts_equal_one_pass_per_sample(tiny_llama, monkeypatch):
    """GRPO groups (completions of the same prompt) reuse the prompt's KV cache: same states."""
    import intellect.verifier.prefill as prefill

    monkeypatch.setattr(prefill, "SHARE_MIN_SAVING", 0.0)  # short prompts here: force the shared path
    p = _prompts(3)
    prompts = [p[0], p[0], p[1], p[0], p[2], p[2], p[1]]
    g = torch.Generator().manual_seed(6)
    comps = [torch.randint(1, 300, (k,), generator=g).tolist() for k in (1, 7, 33, 40, 2, 5, 60)]
    shared = prefill_hidden_states(tiny_llama, prompts, comps)
    full = prefill_hidden_states(tiny_llama, prompts, comps, share_prompts=False)
    tiny_batches = prefill_hidden_states(tiny_llama, prompts, comps, max_batch_tokens=1)
    for a, b, c, comp in zip(shared, full, tiny_batches, comps, strict=True):
        assert a.shape == b.shape == (len(comp), 128)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(c, b, atol=1e-5, rtol=1e-5)


def test_replay_margins_many_equal_per_sample_calls(tiny_llama):
    from intellect.verifier.prefill import lm_logits, replay_margins_many
    from intellect.verifier.replay import replay_margins

    gens = generate_with_states(tiny_llama, _prompts(5), 20, seed=4)
    hiddens = [g.hidden for g in gens]
    comps = [list(g.completion_ids) for g in gens]
    comps[2][-1] = (comps[2][-1] + 1) % 300  # one altered last token: a positive margin
    seeds = [g.seed for g in gens]
    many = replay_margins_many(tiny_llama, hiddens, comps, seeds, 0.8, head_rows=30)  # several GEMM blocks
    for h, c, s, m in zip(hiddens, comps, seeds, many, strict=True):
        assert torch.equal(m, replay_margins(lm_logits(tiny_llama, h), c, s, 0.8))
    assert float(many[2][-1]) > 0
