"""`verifier/capture.py` pinned (issue 39, mutmut on the module): generation with the replayable sampler while
capturing the LM head's inputs, on the tiny random Llama.

- `_left_padded`: prompts right-aligned with `pad_id`, a long 0/1 mask, positions counting real tokens from 0;
- `_append_step`: one token and one state per sample still going, a sample ending after (and with) an EOS id;
- `generate_with_states`: each prompt's noise stream `sample_seed(seed, i)` (default seed 0); every completion
  token the replayed sampler's draw at the given temperature / top-k / top-p (defaults 1.0, none, none); the
  captured states equal a prefill recomputation of prompt + completion (left padding, positions and the KV cache
  right); EOS ends a sample after the EOS token, the others go on, and generation stops when all have ended.
"""

from __future__ import annotations

import pytest
import torch

from intellect.verifier.capture import Generated, _append_step, _left_padded, generate_with_states
from intellect.verifier.prefill import decoder_of, lm_logits, prefill_hidden_states
from intellect.verifier.replay import replay_margins, sample_seed

H = 128
PROMPTS = [(5, 6, 7, 8, 9), [10, 11], torch.tensor([12, 13, 14])]  # three lengths: left padding matters


def test_left_padded_right_aligns_the_prompts_with_positions_from_zero():
    ids, attn, pos = _left_padded([[5, 6, 7], (8,), [9, 10]], 299)
    assert ids.tolist() == [[5, 6, 7], [299, 299, 8], [299, 9, 10]]
    assert attn.tolist() == [[1, 1, 1], [0, 0, 1], [0, 1, 1]]
    assert pos.tolist() == [[0, 1, 2], [0, 0, 0], [0, 0, 1]]
    assert ids.dtype == attn.dtype == pos.dtype == torch.long


def test_append_step_adds_to_the_samples_still_going_and_ends_one_after_its_eos():
    completions: list[list[int]] = [[], [1], []]
    states: list[list[torch.Tensor]] = [[], [torch.zeros(2)], []]
    done = [False, True, False]
    h = torch.arange(6.0).reshape(3, 2)
    _append_step(torch.tensor([7, 3, 4]), h, completions, states, done, {7, 8})
    assert completions == [[7], [1], [4]] and done == [True, True, False]
    assert [len(s) for s in states] == [1, 1, 1]
    assert torch.equal(states[0][0], h[0]) and torch.equal(states[2][0], h[2]) and states[2][0].device.type == "cpu"
    _append_step(torch.tensor([1, 2, 8]), h + 10, completions, states, done, {7, 8})
    assert completions == [[7], [1], [4, 8]] and done == [True, True, True]
    assert torch.equal(states[2][1], h[2] + 10) and len(states[0]) == 1


def _forwards(model):
    calls: list[int] = []
    handle = decoder_of(model).register_forward_pre_hook(lambda _m, _a, kw: calls.append(1), with_kwargs=True)
    return calls, handle


def _replayed_and_prefilled(model, gens, temperature, top_k, top_p):
    """Every token the replayed draw (margin 0) and the captured states those of a prefill of the same text."""
    prefilled = prefill_hidden_states(model, [g.prompt_ids for g in gens], [g.completion_ids for g in gens])
    for g, states in zip(gens, prefilled, strict=True):
        assert g.hidden.shape == (len(g.completion_ids), H) and g.hidden.dtype == torch.float32
        torch.testing.assert_close(g.hidden, states, atol=1e-5, rtol=1e-5)
        margins = replay_margins(lm_logits(model, g.hidden), g.completion_ids, g.seed, temperature, top_k, top_p)
        assert float(margins.max()) == pytest.approx(0.0, abs=1e-5), margins


def test_generate_with_states_draws_the_replayable_sample_and_captures_its_states(tiny_llama):
    gens = generate_with_states(tiny_llama, PROMPTS, 9, temperature=0.7, seed=5, top_k=40, top_p=0.9)
    assert all(isinstance(g, Generated) for g in gens)
    assert [g.prompt_ids for g in gens] == [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    assert all(type(t) is int for g in gens for t in g.prompt_ids + g.completion_ids)
    assert [g.seed for g in gens] == [sample_seed(5, i) for i in range(3)]
    assert [len(g.completion_ids) for g in gens] == [9, 9, 9]
    _replayed_and_prefilled(tiny_llama, gens, 0.7, 40, 0.9)
    assert not tiny_llama.get_output_embeddings()._forward_pre_hooks  # the capture hook is removed


def test_generate_with_states_defaults_seed_zero_temperature_one_no_top_k(tiny_llama):
    gens = generate_with_states(tiny_llama, PROMPTS, 8)
    assert [g.seed for g in gens] == [sample_seed(0, i) for i in range(3)]
    _replayed_and_prefilled(tiny_llama, gens, 1.0, 0, 1.0)
    again = generate_with_states(tiny_llama, PROMPTS, 8, temperature=1.0, seed=0, top_k=0, top_p=1.0, pad_id=0)
    assert [g.completion_ids for g in again] == [g.completion_ids for g in gens]


def test_generate_with_states_eos_ends_a_sample_after_it_and_the_others_go_on(tiny_llama):
    free = generate_with_states(tiny_llama, PROMPTS, 10, seed=6)
    eos = free[0].completion_ids[3]
    cut = [g.completion_ids.index(eos) + 1 if eos in g.completion_ids else 10 for g in free]
    assert cut[0] <= 4 and max(cut) == 10  # sample 0 ends early, one runs to the budget
    gens = generate_with_states(tiny_llama, PROMPTS, 10, seed=6, eos_ids=[eos])
    for g, f, n in zip(gens, free, cut, strict=True):
        assert g.completion_ids == f.completion_ids[:n]
        torch.testing.assert_close(g.hidden, f.hidden[:n], atol=1e-6, rtol=1e-6)


def test_generate_with_states_stops_when_every_sample_has_ended(tiny_llama):
    free = generate_with_states(tiny_llama, PROMPTS, 6, seed=7)
    eos = {g.completion_ids[1] for g in free} - {t for g in free for t in g.completion_ids[:1]}
    assert all(g.completion_ids[1] in eos for g in free)  # every sample's second token ends it, none the first
    calls, handle = _forwards(tiny_llama)
    try:
        gens = generate_with_states(tiny_llama, PROMPTS, 6, seed=7, eos_ids=sorted(eos))
    finally:
        handle.remove()
    assert [g.completion_ids for g in gens] == [g.completion_ids[:2] for g in free]
    assert len(calls) == 2  # the prompt pass and the second token's; no forward after all ended
