"""`token_logprobs`, the log-probabilities the floor and the replay judge, pinned against a hand computation
(issue 39, mutmut's survivors on `verifier/prefill.py`): logits divided by the temperature, states cast to the
head's dtype (a bf16 prefill under an fp32 head), and an empty completion giving an empty vector."""

from __future__ import annotations

import torch

from intellect.verifier.prefill import token_logprobs


def _by_hand(model, hidden: torch.Tensor, ids: list[int], temperature: float) -> torch.Tensor:
    w = model.get_output_embeddings().weight.detach().float()  # (V, H), no bias
    logits = hidden.float() @ w.T / temperature
    return torch.log_softmax(logits, dim=-1)[torch.arange(len(ids)), torch.tensor(ids)]


def test_token_logprobs_divide_the_logits_by_the_temperature(tiny_llama):
    torch.manual_seed(11)
    hidden = torch.randn(6, 128)
    ids = [5, 17, 0, 299, 42, 42]
    for t in (1.0, 0.5, 2.0):
        got = token_logprobs(tiny_llama, hidden, ids, temperature=t)
        assert got.dtype == torch.float32 and got.shape == (6,)
        torch.testing.assert_close(got, _by_hand(tiny_llama, hidden, ids, t), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(token_logprobs(tiny_llama, hidden, ids, temperature=0.5),
                              token_logprobs(tiny_llama, hidden, ids, temperature=2.0))


def test_token_logprobs_cast_bf16_states_to_the_heads_dtype(tiny_llama):
    torch.manual_seed(12)
    hidden = torch.randn(4, 128).to(torch.bfloat16)
    ids = [1, 2, 3, 4]
    got = token_logprobs(tiny_llama, hidden, ids, temperature=0.7)
    torch.testing.assert_close(got, _by_hand(tiny_llama, hidden.float(), ids, 0.7), rtol=1e-5, atol=1e-5)


def test_token_logprobs_of_an_empty_completion_is_empty(tiny_llama):
    got = token_logprobs(tiny_llama, torch.zeros(0, 128), [])
    assert got.shape == (0,) and got.dtype == torch.float32


def test_shared_prefill_batches_fit_the_token_budget(tiny_llama):
    """`max_batch_tokens` bounds each forward of the shared-prompt prefill: prompts cost rows × longest prompt,
    completions rows × (longest completion input + longest prompt in the cache). Three prompts of 4 tokens with
    two 5-token completions each, budget 8: prompts go 2 + 1 (3 × 4 = 12 > 8), every completion alone (4 + 4)."""
    from intellect.verifier.prefill import decoder_of, prefill_hidden_states

    prompts = [[1, 2, 3, 4], [1, 2, 3, 4], [5, 6, 7, 8], [5, 6, 7, 8], [9, 10, 11, 12], [9, 10, 11, 12]]
    comps = [[20 + i, 21, 22, 23, 24] for i in range(6)]
    rows: list[int] = []
    hook = decoder_of(tiny_llama).register_forward_pre_hook(
        lambda _m, _a, kw: rows.append(int(kw["input_ids"].shape[0])), with_kwargs=True)
    try:
        states = prefill_hidden_states(tiny_llama, prompts, comps, max_batch_tokens=8)
    finally:
        hook.remove()
    assert rows == [2, 1, 1, 1, 1, 1, 1, 1]
    assert [tuple(s.shape) for s in states] == [(5, 128)] * 6
