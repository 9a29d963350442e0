"""`verifier/prefill.py` function by function (issue 39, the whole-module mutmut pass): each rule pinned by exact
values on the tiny random Llama or on hand-made inputs.

- `decoder_of`: the stack `base_model_prefix` names (default `model`), refused when missing or the model itself;
- `_check`: empty prompt / completion, token ids in [0, vocab), prompt + completion − 1 ≤ the position limit;
- `prefill_hidden_states`: the count check, the `sample i:` prefix, the shared path taken from a saving of
  `SHARE_MIN_SAVING` of the tokens on (exactly at it: shared), `share_prompts=False`, the default budget 16384;
- `_batches`: sorted by length, a batch grows while its cost fits the budget (at it: fits) and padding stays
  ≤ 1.25 × its real tokens (at it: fits);
- `_prefill_full` / `_prefill_shared`: the states of every sample equal an unpadded one-sample forward, and the
  forwards (rows × width) are exactly those the budget rules give;
- `_left_padded_caches`: each row's keys and values right-aligned in a zero block, per layer;
- `lm_logits` / `replay_margins_many`: the head's fp32 logits; per-sample replays at the given sampler
  settings, the head run on blocks of at most `head_rows` rows (default 512);
- `_sampling_check` / `verify_samples`: replay statistics, the per-token tolerance (at it: accepted), the
  tie margin (at it: not differing), the failing token and its chunk, the log-prob floor (at it: accepted),
  the sample shape and seed range, the replays batched for the samples that passed TOPLOC only.
"""

from __future__ import annotations

import copy
import math
import types
from contextlib import contextmanager

import pytest
import torch

import intellect.verifier.prefill as prefill
from intellect.verifier.capture import generate_with_states
from intellect.verifier.prefill import (
    PrefillError,
    _batches,
    _check,
    _left_padded_caches,
    _sampling_check,
    decoder_of,
    lm_logits,
    prefill_hidden_states,
    replay_margins_many,
    token_logprobs,
    verify_samples,
)
from intellect.verifier.replay import replay_margins
from intellect.verifier.toploc import (
    DEFAULT_THRESHOLDS,
    ReasonCode,
    ReplayStats,
    Thresholds,
    VerificationResult,
    build_proofs,
)

H = 128  # tiny_llama's hidden size
V = 300  # and vocabulary


# ----------------------------------------------------------------------------------------------- helpers


@contextmanager
def _decoder_calls(model):
    """(rows, width) of every decoder forward, with its use_cache and whether a cache was passed in."""
    calls: list[tuple[tuple[int, int], bool | None, bool]] = []

    def pre(_m, _a, kw):
        calls.append((tuple(kw["input_ids"].shape), kw.get("use_cache"), kw.get("past_key_values") is not None))

    handle = decoder_of(model).register_forward_pre_hook(pre, with_kwargs=True)
    try:
        yield calls
    finally:
        handle.remove()


@contextmanager
def _head_rows(model):
    """Rows of every LM-head call."""
    rows: list[int] = []
    handle = model.get_output_embeddings().register_forward_pre_hook(lambda _m, a: rows.append(int(a[0].shape[0])))
    try:
        yield rows
    finally:
        handle.remove()


def _reference(model, prompt: list[int], comp: list[int]) -> torch.Tensor:
    """One unpadded forward of prompt + completion[:-1], rows len(prompt)-1 ... (the states that sampled comp)."""
    with torch.inference_mode():
        out = decoder_of(model)(input_ids=torch.tensor([prompt + comp[:-1]]), use_cache=False)
    return out.last_hidden_state[0, len(prompt) - 1 :]


def _fake(vocab: int = 10, **config) -> types.SimpleNamespace:
    return types.SimpleNamespace(config=types.SimpleNamespace(vocab_size=vocab, **config))


# ----------------------------------------------------------------------------------------------- decoder_of


def test_decoder_of_is_the_attribute_base_model_prefix_names():
    stack = object()
    model = types.SimpleNamespace(base_model_prefix="transformer", transformer=stack, model=object())
    assert decoder_of(model) is stack


def test_decoder_of_defaults_the_prefix_to_model(tiny_llama):
    stack = object()
    assert decoder_of(types.SimpleNamespace(model=stack)) is stack
    assert decoder_of(tiny_llama) is tiny_llama.model


def test_decoder_of_refuses_a_missing_stack_or_the_model_itself():
    class Flat:
        base_model_prefix = "body"

    class Selfish:
        base_model_prefix = "me"

        @property
        def me(self):
            return self

    with pytest.raises(PrefillError, match=r"^Flat has no separate decoder stack$"):
        decoder_of(Flat())
    with pytest.raises(PrefillError, match=r"^Selfish has no separate decoder stack$"):
        decoder_of(Selfish())


# ----------------------------------------------------------------------------------------------- _check


def test_check_refuses_an_empty_prompt_or_completion_and_takes_one_token_each():
    with pytest.raises(PrefillError, match=r"^empty prompt$"):
        _check(_fake(), [], [1])
    with pytest.raises(PrefillError, match=r"^empty completion$"):
        _check(_fake(), [1], [])
    assert _check(_fake(), [1], [1]) is None


def test_check_token_ids_are_in_zero_to_vocab_and_the_first_bad_one_is_named():
    assert _check(_fake(vocab=10), [0, 9], [0, 9]) is None
    with pytest.raises(PrefillError, match=r"^token id 10 outside the vocabulary \[0, 10\)$"):
        _check(_fake(vocab=10), [1], [10])
    with pytest.raises(PrefillError, match=r"^token id -1 outside the vocabulary \[0, 10\)$"):
        _check(_fake(vocab=10), [-1], [1])
    with pytest.raises(PrefillError, match=r"^token id 12 outside the vocabulary \[0, 10\)$"):
        _check(_fake(vocab=10), [1, 12], [-3])


def test_check_sequence_of_prompt_plus_completion_minus_one_fits_the_position_limit():
    assert _check(_fake(max_position_embeddings=8), [1] * 4, [2] * 5) is None  # 4 + 5 - 1 = 8: at the limit
    with pytest.raises(PrefillError, match=r"^sequence of 9 tokens exceeds the model's 8$"):
        _check(_fake(max_position_embeddings=8), [1] * 4, [2] * 6)
    with pytest.raises(PrefillError, match=r"^sequence of 9 tokens exceeds the model's 8$"):
        _check(_fake(max_position_embeddings=8), [1] * 9, [2])


def test_check_without_a_position_limit_takes_any_length():
    assert _check(_fake(), [1] * 500, [2] * 500) is None  # no max_position_embeddings at all
    assert _check(_fake(max_position_embeddings=None), [1] * 500, [2] * 500) is None


# ----------------------------------------------------------------------------------------------- prefill_hidden_states


def test_prefill_hidden_states_names_the_counts_and_the_bad_sample(tiny_llama):
    with pytest.raises(PrefillError, match=r"^1 prompts but 2 completions$"):
        prefill_hidden_states(tiny_llama, [[1]], [[2], [3]])
    with pytest.raises(PrefillError, match=r"^sample 1: token id -1 outside the vocabulary \[0, 300\)$"):
        prefill_hidden_states(tiny_llama, [[1], [2]], [[3], [-1]])
    with pytest.raises(PrefillError, match=r"^sample 0: empty completion$"):
        prefill_hidden_states(tiny_llama, [[1], [2]], [[], [4]])


def test_prefill_takes_the_shared_path_from_a_tenth_of_the_tokens_saved(tiny_llama):
    """Two samples of one 1-token prompt: 1 token saved of len(p) + len(c) − 1 summed. Completions of 5 + 5:
    1 of 10 saved (exactly SHARE_MIN_SAVING): shared, two forwards with a cache; 5 + 6: 1 of 11: one full pass."""
    assert prefill.SHARE_MIN_SAVING == 0.1
    with _decoder_calls(tiny_llama) as calls:
        shared = prefill_hidden_states(tiny_llama, [[7], [7]], [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
    assert calls == [((1, 1), True, False), ((2, 4), True, True)]
    with _decoder_calls(tiny_llama) as calls:
        full = prefill_hidden_states(tiny_llama, [[7], [7]], [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]])
    assert calls == [((2, 6), False, False)]
    with _decoder_calls(tiny_llama) as calls:
        off = prefill_hidden_states(tiny_llama, [[7], [7]], [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], share_prompts=False)
    assert calls == [((2, 5), False, False)]
    torch.testing.assert_close(shared[0], off[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared[1], off[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(full[0], off[0], atol=1e-5, rtol=1e-5)
    assert [tuple(s.shape) for s in full] == [(5, H), (6, H)]


def _distinct_145():
    """145 distinct 13-token prompts with 101-token completions: 145 × 113 = 16385 padded tokens, one past 16384."""
    prompts = [[(i * 7 + j * 3) % 299 + 1 for j in range(13)] for i in range(145)]
    return prompts, [[5] * 101 for _ in range(145)]


def test_prefill_default_budget_is_16384_tokens(tiny_llama):
    prompts, comps = _distinct_145()
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, prompts, comps)
    assert calls == [((144, 113), False, False), ((1, 113), False, False)]
    assert len(states) == 145 and all(tuple(s.shape) == (101, H) for s in states)


def test_verify_samples_default_budget_is_16384_tokens(tiny_llama):
    prompts, comps = _distinct_145()
    with _decoder_calls(tiny_llama) as calls:
        results = verify_samples(tiny_llama, [(p, c, []) for p, c in zip(prompts, comps, strict=True)])
    assert calls == [((144, 113), False, False), ((1, 113), False, False)]
    assert [r.reason for r in results] == [ReasonCode.WRONG_PROOF_COUNT] * 145


# ----------------------------------------------------------------------------------------------- _batches


def _cost(lengths):
    return lambda b: len(b) * max(lengths[j] for j in b)


def test_batches_sorted_by_length_grow_while_the_cost_fits_the_budget():
    lengths = [5, 3, 4, 3]  # order by length: 1, 3, 2, 0
    assert _batches(lengths, _cost(lengths), 8) == [[1, 3], [2], [0]]  # [1, 3, 2] costs 12
    assert _batches(lengths, _cost(lengths), 12) == [[1, 3, 2], [0]]  # at the budget: fits; 4 × 5 = 20 does not
    assert _batches(lengths, _cost(lengths), 11) == [[1, 3], [2, 0]]  # 12 > 11, then [2, 0] costs 10
    assert _batches(lengths, _cost(lengths), 100) == [[1, 3, 2], [0]]  # padding: 4 × 5 = 20 > 1.25 × 15
    assert _batches(lengths, _cost(lengths), 1) == [[1], [3], [2], [0]]  # over budget alone: a batch of its own
    assert _batches([], _cost([]), 8) == []


def test_batches_padding_at_most_a_quarter_of_the_real_tokens():
    assert _batches([3, 5], _cost([3, 5]), 100) == [[0, 1]]  # 2 × 5 = 10 = 1.25 × 8: at the bound, one batch
    assert _batches([3, 6], _cost([3, 6]), 100) == [[0], [1]]  # 2 × 6 = 12 > 1.25 × 9
    assert _batches([6, 3, 5], _cost([6, 3, 5]), 100) == [[1, 2], [0]]  # [3, 5, 6]: 3 × 6 = 18 > 1.25 × 14


# ----------------------------------------------------------------------------------------------- _prefill_full


def test_full_prefill_states_equal_one_unpadded_forward_per_sample(tiny_llama):
    prompts = [[1, 2, 3], [7, 8], [11, 12, 13, 14, 15], [20]]
    comps = [[4, 5, 6], [9, 10, 11, 12], [16, 17, 18, 19, 20], [21]]
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, prompts, comps, max_batch_tokens=10, share_prompts=False)
    # lengths 5, 5, 9, 1 -> sorted [3, 0, 1, 2]: [3, 0] pads 2 x 5 = 10 > 1.25 x 6; [0, 1] costs 10; 3 x 9 > 10
    assert calls == [((1, 1), False, False), ((2, 5), False, False), ((1, 9), False, False)]
    for p, c, s in zip(prompts, comps, states, strict=True):
        assert s.shape == (len(c), H) and s.dtype == torch.float32 and s.device.type == "cpu"
        torch.testing.assert_close(s, _reference(tiny_llama, p, c), atol=1e-5, rtol=1e-5)


def test_full_prefill_forwards_fit_the_budget(tiny_llama):
    prompts = [[1, 2], [3, 4], [5, 6]]
    comps = [[7, 8, 9, 10], [11, 12, 13, 14], [15, 16, 17, 18]]  # three sequences of 5
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, prompts, comps, max_batch_tokens=10)
    assert calls == [((2, 5), False, False), ((1, 5), False, False)]
    for p, c, s in zip(prompts, comps, states, strict=True):
        torch.testing.assert_close(s, _reference(tiny_llama, p, c), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------- _left_padded_caches


def test_left_padded_caches_right_align_each_rows_keys_and_values():
    def kv(p: int, layer: int, row: int):
        k = torch.arange(2 * p * 3, dtype=torch.float64).reshape(2, p, 3) + 100 * layer + 10 * row + 1
        return k, -k

    rows = [[kv(1, 0, 0), kv(1, 1, 0)], [kv(2, 0, 1), kv(2, 1, 1)]]  # 2 rows, 2 layers, (kvh 2, P, d 3)
    out = _left_padded_caches(rows, 3)
    assert len(out) == 2
    for layer, (k, v) in enumerate(out):
        assert k.shape == v.shape == (2, 2, 3, 3) and k.dtype == v.dtype == torch.float64
        for row, p in enumerate((1, 2)):
            pk, pv = rows[row][layer]
            assert torch.equal(k[row, :, 3 - p :], pk) and torch.equal(v[row, :, 3 - p :], pv)
            assert not k[row, :, : 3 - p].any() and not v[row, :, : 3 - p].any()
    (k1, v1), = _left_padded_caches([[kv(2, 0, 0)]], 2)  # one row, one layer, no padding
    assert torch.equal(k1[0], kv(2, 0, 0)[0]) and torch.equal(v1[0], kv(2, 0, 0)[1])


# ----------------------------------------------------------------------------------------------- _prefill_shared

SHARED_PROMPTS = [[1, 2, 3], [1, 2, 3], [4, 5, 6, 7, 8], [4, 5, 6, 7, 8]]
SHARED_COMPS = [[9, 10, 11, 12], [13], [14, 15, 16, 17], [18, 19, 20, 21, 22, 23]]
# saved 8 of 27 tokens: shared. Distinct prompts of 3 and 5; completion inputs 3, 0 (one token: row 0 only), 3, 5


@pytest.mark.parametrize(("budget", "expected"), [
    # prompts: 2 x 5 = 10 fits 16 and 15, not 9; completions [0, 2] cost 2 x (3 + 5) = 16; [0, 2, 3] pads 15 > 13.75
    (16, [((2, 5), True, False), ((2, 3), True, True), ((1, 5), True, True)]),
    (15, [((2, 5), True, False), ((1, 3), True, True), ((1, 3), True, True), ((1, 5), True, True)]),
    (9, [((1, 3), True, False), ((1, 5), True, False), ((1, 3), True, True), ((1, 3), True, True),
         ((1, 5), True, True)]),
])
def test_shared_prefill_states_equal_one_unpadded_forward_per_sample(tiny_llama, budget, expected):
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, SHARED_PROMPTS, SHARED_COMPS, max_batch_tokens=budget)
    assert calls == expected
    for p, c, s in zip(SHARED_PROMPTS, SHARED_COMPS, states, strict=True):
        assert s.shape == (len(c), H) and s.dtype == torch.float32 and s.device.type == "cpu"
        torch.testing.assert_close(s, _reference(tiny_llama, p, c), atol=1e-5, rtol=1e-5)


def test_shared_prefill_of_one_token_completions_is_the_prompt_pass_alone(tiny_llama):
    prompts, comps = [[1, 2, 3], [1, 2, 3], [4, 5]], [[6], [7], [8]]
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, prompts, comps)
    assert calls == [((2, 3), True, False)]
    for p, c, s in zip(prompts, comps, states, strict=True):
        assert s.shape == (1, H)
        torch.testing.assert_close(s, _reference(tiny_llama, p, c), atol=1e-5, rtol=1e-5)


def test_shared_prefill_rows_keep_their_own_prompt_in_a_mixed_batch(tiny_llama):
    """Completions of three prompts of different lengths in one completion forward (left-padded caches)."""
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12], [1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12]]
    comps = [[20, 21, 22, 23], [24, 25, 26, 27], [28, 29, 30, 31], [32, 33, 34, 35], [36, 37, 38, 39],
             [40, 41, 42, 43]]  # prompts 3, 4, 5: 3 x 5 = 15 = 1.25 x 12, one prompt pass
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, prompts, comps)
    assert calls == [((3, 5), True, False), ((6, 3), True, True)]
    for p, c, s in zip(prompts, comps, states, strict=True):
        torch.testing.assert_close(s, _reference(tiny_llama, p, c), atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------- lm_logits


def test_lm_logits_are_the_heads_fp32_logits_of_the_states(tiny_llama):
    torch.manual_seed(21)
    hidden = torch.randn(3, H)
    w = tiny_llama.get_output_embeddings().weight.detach()
    got = lm_logits(tiny_llama, hidden)
    assert got.dtype == torch.float32 and got.shape == (3, V)
    torch.testing.assert_close(got, hidden @ w.T, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lm_logits(tiny_llama, hidden.to(torch.bfloat16)),
                               hidden.to(torch.bfloat16).float() @ w.T, atol=1e-5, rtol=1e-5)
    half = copy.deepcopy(tiny_llama).to(torch.bfloat16)
    got16 = lm_logits(half, hidden)  # fp32 states cast to a bf16 head, logits back in fp32
    assert got16.dtype == torch.float32
    assert torch.equal(got16, (hidden.to(torch.bfloat16) @ w.to(torch.bfloat16).T).float())


# ----------------------------------------------------------------------------------------------- replay_margins_many


def _random_samples(lengths, seed=31):
    g = torch.Generator().manual_seed(seed)
    hiddens = [torch.randn(n, H, generator=g) for n in lengths]
    comps = [torch.randint(0, V, (n,), generator=g).tolist() for n in lengths]
    seeds = [1000 + i for i in range(len(lengths))]
    return hiddens, comps, seeds


def _same_margins(a: torch.Tensor, b: torch.Tensor) -> None:
    """Equal up to the head's GEMM rounding (a block of rows is not bit-identical to one sample's rows on the
    CPU: logits differ by ~3e-7), +inf at the same places."""
    assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape
    assert torch.equal(torch.isinf(a), torch.isinf(b))
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_replay_margins_many_equal_per_sample_replays_at_the_given_sampler(tiny_llama):
    hiddens, comps, seeds = _random_samples([3, 4, 2, 6])
    with _head_rows(tiny_llama) as rows:
        many = replay_margins_many(tiny_llama, hiddens, comps, seeds, 0.7, 40, 0.9, head_rows=7)
    assert rows == [7, 2, 6]  # [3 + 4], then 2 + 6 > 7
    assert len(many) == 4
    for h, c, s, m in zip(hiddens, comps, seeds, many, strict=True):
        _same_margins(m, replay_margins(lm_logits(tiny_llama, h), c, s, 0.7, 40, 0.9))
    assert any(math.isinf(float(x)) for m in many for x in m)  # top-k 40 of 300 excludes some tokens
    with _head_rows(tiny_llama) as rows:
        alone = replay_margins_many(tiny_llama, hiddens, comps, seeds, 0.7, 40, 0.9, head_rows=1)
    assert rows == [3, 4, 2, 6]  # a sample longer than head_rows still goes, alone
    assert all(torch.equal(a, b) for a, b in zip(alone, many, strict=True))


def test_replay_margins_many_defaults_temperature_one_no_top_k_no_top_p_512_rows(tiny_llama):
    hiddens, comps, seeds = _random_samples([256, 257, 5])
    with _head_rows(tiny_llama) as rows:
        many = replay_margins_many(tiny_llama, hiddens, comps, seeds)
    assert rows == [256, 257 + 5]  # 256 + 257 > 512
    for h, c, s, m in zip(hiddens, comps, seeds, many, strict=True):
        _same_margins(m, replay_margins(lm_logits(tiny_llama, h), c, s, 1.0, 0, 1.0))
    assert not any(math.isinf(float(x)) for m in many for x in m)  # nothing masked


def test_replay_margins_many_refuses_unequal_counts_and_takes_none(tiny_llama):
    h, c, s = _random_samples([2, 2])
    for args, msg in [((h, c, [*s, 9]), "2 states, 2 completions, 3 seeds"),
                      ((h, [*c, [1]], s), "2 states, 3 completions, 2 seeds"),
                      (([*h, h[0]], c, s), "3 states, 2 completions, 2 seeds")]:
        with pytest.raises(ValueError, match=f"^{msg}$"):
            replay_margins_many(tiny_llama, *args)
    assert replay_margins_many(tiny_llama, [], [], []) == []


# ----------------------------------------------------------------------------------------------- _sampling_check

OK = VerificationResult(ok=True)


def _margins(n: int, at: dict[int, float]) -> torch.Tensor:
    m = torch.zeros(n, dtype=torch.float64)
    for i, x in at.items():
        m[i] = x
    return m


def _check_replay(margins, thresholds=DEFAULT_THRESHOLDS, n=40):
    sample = ([1, 2], list(range(n)), [], 7)
    return _sampling_check(None, torch.zeros(n, H), sample, OK, thresholds, 0.0, (1.0, 0, 1.0), margins)


def test_sampling_check_replay_statistics_and_the_tolerance_at_its_bound():
    """Default profile (tolerance 1.0, tie 0.25): margins 0.25 (a tie), 0.3 and 1.0 (differing); 1.0 accepted."""
    res = _check_replay(_margins(40, {3: 0.25, 10: 0.3, 35: 1.0}))
    assert res.ok and res.reason is None and res.failed_chunk is None and res.detail == ""
    assert res.replay.mean_margin == pytest.approx(1.55 / 40, rel=1e-12)
    assert res.replay == ReplayStats(max_margin=1.0, mean_margin=res.replay.mean_margin, flips=3, positions=40,
                                     differing=2, margins=(0.25, 0.3, 1.0))
    none = _check_replay(_margins(40, {}))
    assert none.ok and none.replay == ReplayStats(max_margin=0.0, mean_margin=0.0, flips=0, positions=40)


def test_sampling_check_replay_refuses_past_the_tolerance_naming_the_token_and_its_chunk():
    res = _check_replay(_margins(40, {5: 0.5, 33: 1.0000001}))
    assert not res.ok and res.reason is ReasonCode.REPLAY_MISMATCH
    assert res.detail == ("completion token 33 is not the seeded sampler's draw: margin 1 > 1.0 "
                          "(2 of 40 tokens differ from the replay)")
    assert res.failed_chunk == 1 and type(res.failed_chunk) is int
    assert res.replay.differing == 2 and res.replay.margins == (0.5, 1.0000001)
    first = _check_replay(_margins(40, {31: 3.0, 32: 2.0}))
    assert first.failed_chunk == 0 and first.detail.startswith("completion token 31 ")


def test_sampling_check_replay_counts_an_excluded_token_as_1e9_in_the_mean():
    res = _check_replay(_margins(40, {7: math.inf, 8: 0.5}))
    assert not res.ok and res.reason is ReasonCode.REPLAY_MISMATCH and res.failed_chunk == 0
    assert res.replay.max_margin == math.inf and res.replay.margins == (math.inf, 0.5)
    assert res.replay.mean_margin == pytest.approx((1e9 + 0.5) / 40, rel=1e-12)
    assert res.detail == ("completion token 7 is not the seeded sampler's draw: margin inf > 1.0 "
                          "(2 of 40 tokens differ from the replay)")


def test_sampling_check_replay_tie_margin_and_tolerance_come_from_the_thresholds():
    th = Thresholds(max_replay_margin=0.5, replay_tie_margin=0.1)
    res = _check_replay(_margins(40, {1: 0.1, 2: 0.2, 3: 0.5}), th)
    assert res.ok and res.replay.differing == 2 and res.replay.flips == 3
    bad = _check_replay(_margins(40, {1: 0.6}), th)
    assert not bad.ok and bad.detail.endswith("margin 0.6 > 0.5 (1 of 40 tokens differ from the replay)")


def test_sampling_check_replays_itself_without_given_margins(tiny_llama):
    torch.manual_seed(22)
    hidden = torch.randn(12, H)
    comp = torch.randint(0, V, (12,)).tolist()
    margins = replay_margins(lm_logits(tiny_llama, hidden), comp, 99, 0.7, 40, 0.9)
    sample = ([1], comp, [], 99)
    got = _sampling_check(tiny_llama, hidden, sample, OK, DEFAULT_THRESHOLDS, None, (0.7, 40, 0.9))
    given = _sampling_check(tiny_llama, hidden, sample, OK, DEFAULT_THRESHOLDS, None, (0.7, 40, 0.9), margins)
    assert got == given and got.replay.positions == 12 and got.replay.max_margin == math.inf


def test_sampling_check_seeded_sample_without_replay_is_not_floor_checked(tiny_llama):
    hidden = torch.randn(4, H)
    sample = ([1], [1, 2, 3, 4], [], 5)
    off = Thresholds(max_replay_margin=None)
    assert _sampling_check(tiny_llama, hidden, sample, OK, off, 0.0, (1.0, 0, 1.0)) is OK  # every lp < 0


def _unseeded(model, n=40, worst=37, temperature=0.5):
    """Random states; every completion token its row's likeliest but token `worst`, its row's least likely."""
    g = torch.Generator().manual_seed(23)
    hidden = torch.randn(n, H, generator=g)
    logits = lm_logits(model, hidden)
    comp = logits.argmax(-1).tolist()
    comp[worst] = int(logits[worst].argmin())
    lp = token_logprobs(model, hidden, comp, temperature)
    assert int(lp.argmin()) == worst
    return hidden, comp, lp


def test_sampling_check_floor_at_the_lowest_log_prob_accepted_just_above_refused(tiny_llama):
    hidden, comp, lp = _unseeded(tiny_llama)
    w = tiny_llama
    floor = float(lp[37])
    for sample in (([1], comp, []), ([1], comp, [], None)):
        at = _sampling_check(w, hidden, sample, OK, DEFAULT_THRESHOLDS, floor, (0.5, 0, 1.0))
        assert at is OK
        above = math.nextafter(floor, 0.0)
        bad = _sampling_check(w, hidden, sample, OK, DEFAULT_THRESHOLDS, above, (0.5, 0, 1.0))
        assert not bad.ok and bad.reason is ReasonCode.IMPLAUSIBLE_TOKEN and bad.failed_chunk == 1
        assert type(bad.failed_chunk) is int and bad.replay is None
        assert bad.detail == f"completion token 37 has log-probability {floor:.1f} < {above} at temperature 0.5"
        assert _sampling_check(w, hidden, sample, OK, DEFAULT_THRESHOLDS, None, (0.5, 0, 1.0)) is OK


def test_sampling_check_floor_is_at_the_samplers_temperature(tiny_llama):
    hidden, comp, lp = _unseeded(tiny_llama, n=10, worst=3, temperature=2.0)
    hot = float(lp[3])
    cold = float(token_logprobs(tiny_llama, hidden, comp, 1.0)[3])
    assert cold < hot
    res = _sampling_check(tiny_llama, hidden, ([1], comp, []), OK, DEFAULT_THRESHOLDS, hot, (2.0, 0, 1.0))
    assert res is OK
    res = _sampling_check(tiny_llama, hidden, ([1], comp, []), OK, DEFAULT_THRESHOLDS, hot, (1.0, 0, 1.0))
    assert not res.ok and res.failed_chunk == 0 and res.detail.endswith("at temperature 1.0")


# ----------------------------------------------------------------------------------------------- verify_samples


@pytest.fixture(scope="module")
def gens(tiny_llama):
    """Honest seeded generations at the pool's sampler (0.7, top-k 40, top-p 0.9) and at the defaults."""
    tuned = generate_with_states(tiny_llama, [[3, 4, 5], [6, 7], [8, 9, 10, 11]], 12, seed=41, temperature=0.7,
                                 top_k=40, top_p=0.9)
    plain = generate_with_states(tiny_llama, [[12, 13], [14, 15, 16]], 12, seed=42)
    return tuned, plain


def _sample(g, seed=True):
    base = (g.prompt_ids, g.completion_ids, build_proofs(g.hidden))
    return (*base, g.seed) if seed else base


def test_verify_samples_refuses_a_sample_of_the_wrong_shape_or_seed(tiny_llama, gens):
    g = gens[1][0]
    p, c, proofs = _sample(g, seed=False)
    samples = [(p, c), (p, c, proofs, g.seed, 0), (p, c, proofs, -1), (p, c, proofs, 1 << 64), (p, c, proofs, "x"),
               (p, c, proofs, 0), (p, c, proofs, (1 << 64) - 1), (p, c, proofs, None), (p, c, proofs, g.seed)]
    r = verify_samples(tiny_llama, samples, min_token_logprob=None)
    assert len(r) == 9
    assert [x.detail for x in r[:5]] == [
        "a sample is (prompt, completion, proofs[, seed]), got 2 items",
        "a sample is (prompt, completion, proofs[, seed]), got 5 items",
        "sampler seed -1 outside [0, 2^64)",
        f"sampler seed {1 << 64} outside [0, 2^64)",
        "invalid literal for int() with base 10: 'x'",
    ]
    assert all(not x.ok and x.reason is ReasonCode.INVALID_SAMPLE and x.replay is None for x in r[:5])
    # seeds 0 and 2^64 - 1 are in range: replayed (another seed's stream: refused), no seed: not replayed
    assert [x.reason for x in r[5:]] == [ReasonCode.REPLAY_MISMATCH, ReasonCode.REPLAY_MISMATCH, None, None]
    assert r[5].replay.positions == r[6].replay.positions == 12 and r[7].replay is None
    assert r[8].ok and r[8].replay.flips == 0


def test_verify_samples_replays_at_the_pools_sampler_and_flags_an_altered_token(tiny_llama, gens):
    tuned, _ = gens
    samples = [_sample(g) for g in tuned]
    ok = verify_samples(tiny_llama, samples, temperature=0.7, top_k=40, top_p=0.9)
    assert all(r.ok and r.replay.flips == 0 and r.replay.positions == 12 for r in ok)
    p, c, proofs, s = samples[1]
    c = list(c)
    c[-1] = next(t for t in range(V) if t != c[-1])
    (bad,) = verify_samples(tiny_llama, [(p, c, proofs, s)], temperature=0.7, top_k=40, top_p=0.9)
    assert bad.reason is ReasonCode.REPLAY_MISMATCH and bad.detail.startswith("completion token 11 ")
    for kw in ({"temperature": 0.7, "top_k": 40}, {"temperature": 0.7, "top_p": 0.9}, {"top_k": 40, "top_p": 0.9}):
        off = verify_samples(tiny_llama, samples, **kw)  # one setting other than the worker's
        assert sum(r.replay.flips for r in off) > 0


def test_verify_samples_default_sampler_is_temperature_one_without_top_k(tiny_llama, gens):
    _, plain = gens
    results = verify_samples(tiny_llama, [_sample(g) for g in plain])
    assert all(r.ok and r.replay.flips == 0 for r in results)
    (r,) = verify_samples(tiny_llama, [_sample(plain[0], seed=False)], min_token_logprob=0.0)
    assert not r.ok and r.reason is ReasonCode.IMPLAUSIBLE_TOKEN and r.detail.endswith("< 0.0 at temperature 1.0")


def test_verify_samples_checks_the_floor_it_is_given(tiny_llama, gens):
    _, plain = gens
    sample = _sample(plain[1], seed=False)
    # the floor of the states the verifier recomputes (a prefill), not of the generation's own states: the two
    # agree to float32 noise only, and this pins the comparison to the last ulp (it failed once in CI)
    (states,) = prefill_hidden_states(tiny_llama, [plain[1].prompt_ids], [plain[1].completion_ids])
    lp = token_logprobs(tiny_llama, states, plain[1].completion_ids)
    floor = float(lp.min())
    assert verify_samples(tiny_llama, [sample], min_token_logprob=floor)[0].ok
    (r,) = verify_samples(tiny_llama, [sample], min_token_logprob=math.nextafter(floor, 0.0), temperature=1.0)
    assert r.reason is ReasonCode.IMPLAUSIBLE_TOKEN and f"log-probability {floor:.1f} <" in r.detail
    assert verify_samples(tiny_llama, [sample], min_token_logprob=None)[0].ok
    assert verify_samples(tiny_llama, [sample])[0].ok  # the default floor, -30, is far below


def test_verify_samples_replays_the_seeded_samples_that_passed_toploc_in_one_head_pass(tiny_llama, gens):
    tuned, plain = gens
    a, b = _sample(tuned[0]), _sample(tuned[1])
    unseeded = _sample(tuned[2], seed=False)
    wrong_count = (*_sample(plain[0])[:2], [], plain[0].seed)  # fails TOPLOC: never replayed
    samples = [a, wrong_count, unseeded, b]
    with _head_rows(tiny_llama) as rows:
        r = verify_samples(tiny_llama, samples, temperature=0.7, top_k=40, top_p=0.9)
    assert rows == [24, 12]  # a + b in one GEMM, then the unseeded sample's log-probs
    assert [x.reason for x in r] == [None, ReasonCode.WRONG_PROOF_COUNT, None, None]
    assert r[0].replay.flips == r[3].replay.flips == 0 and r[1].replay is None and r[2].replay is None
    with _head_rows(tiny_llama) as rows:
        off = verify_samples(tiny_llama, samples, Thresholds(max_replay_margin=None), temperature=0.7)
    assert rows == [12]  # no replay: only the unseeded sample's floor (a seeded sample gets neither)
    assert [x.reason for x in off] == [None, ReasonCode.WRONG_PROOF_COUNT, None, None]
    assert all(x.replay is None for x in off)


def test_verify_samples_passes_its_thresholds_to_toploc(tiny_llama, gens):
    _, plain = gens
    g = plain[0]
    nudged = (g.prompt_ids, g.completion_ids, build_proofs(g.hidden * 1.01), g.seed)
    (loose,) = verify_samples(tiny_llama, [nudged])
    assert loose.ok, loose.detail
    strict = Thresholds(max_exp_mismatches=0, max_mant_err_mean=0.0, max_mant_err_median=0.0)
    (tight,) = verify_samples(tiny_llama, [nudged], strict)
    assert not tight.ok and tight.reason in (ReasonCode.EXP_MISMATCH, ReasonCode.MANTISSA_MEAN)
    assert tight.replay is None


def test_verify_samples_passes_its_budget_to_the_prefill(tiny_llama, gens):
    _, plain = gens
    samples = [_sample(g) for g in plain]  # sequences of 2 + 11 and 3 + 11 tokens
    with _decoder_calls(tiny_llama) as calls:
        r = verify_samples(tiny_llama, samples, max_batch_tokens=14)
    assert calls == [((1, 13), False, False), ((1, 14), False, False)]
    assert all(x.ok for x in r)
    with _decoder_calls(tiny_llama) as calls:
        verify_samples(tiny_llama, samples, max_batch_tokens=28)
    assert calls == [((2, 14), False, False)]


def test_shared_prefill_two_token_completions_get_row_zero_and_one_completion_row(tiny_llama):
    prompts, comps = [[1, 2, 3], [1, 2, 3], [4, 5, 6]], [[7, 8], [9], [10, 11]]  # completion inputs 1, 0, 1
    with _decoder_calls(tiny_llama) as calls:
        states = prefill_hidden_states(tiny_llama, prompts, comps)
    assert calls == [((2, 3), True, False), ((2, 1), True, True)]
    assert [tuple(s.shape) for s in states] == [(2, H), (1, H), (2, H)]
    for p, c, s in zip(prompts, comps, states, strict=True):
        torch.testing.assert_close(s, _reference(tiny_llama, p, c), atol=1e-5, rtol=1e-5)


def test_verify_samples_checks_the_prompt_of_each_sample(tiny_llama, gens):
    g = gens[1][0]
    _, c, proofs = _sample(g, seed=False)
    r = verify_samples(tiny_llama, [([], c, proofs), ([1, 300], c, proofs), _sample(g)])
    assert [x.detail for x in r[:2]] == ["empty prompt", "token id 300 outside the vocabulary [0, 300)"]
    assert [x.reason for x in r] == [ReasonCode.INVALID_SAMPLE, ReasonCode.INVALID_SAMPLE, None]
