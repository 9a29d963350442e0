"""`verifier/toploc.py` as a whole (issue 39, mutmut on every function of the module): the modulus search, the
field arithmetic's input types, the proof encoding's bounds and error texts, the structural checks and their
verdicts, the per-chunk statistics (upper median, the no-match marker), the batched check's bookkeeping, the
per-chunk bounds at their limits, the replay allowance, and `rejudge` (a looser profile's results judged again).

Each test pins exact values: a verdict's reason and detail are what a worker and a challenger see."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from intellect.verifier import toploc
from intellect.verifier.toploc import (
    PRIME,
    PROFILES,
    ChunkStats,
    ProofFormatError,
    ReasonCode,
    ReplayStats,
    Thresholds,
    ToplocError,
    VerificationResult,
    _chunk_stats,
    _judge,
    build_proofs,
    check_proofs,
    check_proofs_many,
    check_replay_budget,
    decode_proof,
    encode_proof,
    evaluate_proof,
    find_injective_modulus,
    interpolate,
    n_chunks,
    profile,
    rejudge,
    replay_differing_allowed,
    verify_proofs,
    verify_proofs_many,
)

MIXED = profile("mixed")
FP32 = profile("fp32")


def _brute_modulus(xs: list[int]) -> int:
    """The first m from 65497 down with xs % m distinct (the reference's search, one candidate at a time)."""
    for m in range(PRIME, 0, -1):
        if len({v % m for v in xs}) == len(xs):
            return m
    raise AssertionError("unreachable")


def _proof(modulus: int, coeffs: list[int]) -> bytes:
    return modulus.to_bytes(2, "big") + b"".join(c.to_bytes(2, "big") for c in coeffs)


# --- the modulus search ----------------------------------------------------------------------------------------


def test_modulus_of_a_one_dimensional_row_is_one_int64_value():
    out = find_injective_modulus(np.array([3, 1, 2]))
    assert out.shape == (1,) and out.dtype == np.int64 and out[0] == PRIME
    out = find_injective_modulus(np.array([0, 65497]))  # 65497 ≡ 0 mod p: the search goes one below
    assert out.tolist() == [65496] and out.dtype == np.int64


def test_modulus_search_rows_distinct_within_but_equal_across_rows_are_fine():
    assert find_injective_modulus(np.array([[1, 2], [1, 2], [2, 1]])).tolist() == [PRIME, PRIME, PRIME]


def test_modulus_search_refuses_repeated_indices_in_a_row():
    with pytest.raises(ToplocError) as info:
        find_injective_modulus(np.array([[1, 2], [3, 3]]))
    assert str(info.value) == "top-k indices are not distinct"


def test_modulus_search_takes_indices_as_integers():
    # 0.2 and 0.7 are both index 0 once taken as int64: not distinct
    with pytest.raises(ToplocError, match="not distinct"):
        find_injective_modulus(np.array([[0.2, 0.7]]))


def test_modulus_of_rows_without_values_is_the_prime():
    assert find_injective_modulus(np.zeros((2, 0), dtype=np.int64)).tolist() == [PRIME, PRIME]


def test_modulus_with_an_index_equal_to_the_prime_is_searched_not_assumed():
    # max index == 65497: 65497 % 65497 == 0 collides with index 0, so m = PRIME is not injective
    row = [0, PRIME, *range(1, 127)]
    assert find_injective_modulus(np.array([row])).tolist() == [_brute_modulus(row)] == [65370]


def test_modulus_search_in_the_second_and_third_block_is_the_first_injective_one():
    second = [0, *range(65371, 65498)]  # every m in 65497..65371 is an index: first injective m 65370
    cands = list(range(PRIME, PRIME - 254, -1))
    third = [0, *(cands[2 * i] * cands[2 * i + 1] for i in range(127))]  # 254 candidates each divide an index
    small = list(range(128))
    out = find_injective_modulus(np.array([second, small, third]))
    assert out.tolist() == [65370, PRIME, 65243]
    assert out.tolist() == [_brute_modulus(second), PRIME, _brute_modulus(third)]


def test_modulus_search_reports_indices_that_no_modulus_up_to_the_prime_separates():
    # 0..511 collide mod every m < 512; each further index t is a product of the three largest moduli not yet
    # collided, so t ≡ 0 mod each of them and t mod m < 512 (a collision with 0..511) for many others: 946 indices
    # that collide mod every m in [1, 65497], so the search ends without a modulus
    small = 512
    left = np.arange(small, PRIME + 1, dtype=np.int64)
    xs = list(range(small))
    while left.size:
        t = int(np.prod(left[-3:]))
        xs.append(t)
        left = left[t % left >= small]
    assert len(xs) == 946 and len(set(xs)) == len(xs)
    with pytest.raises(ToplocError) as info:
        find_injective_modulus(np.array([xs]))
    assert str(info.value) == "no injective modulus found"


# --- field arithmetic: the input's integer type does not matter -------------------------------------------------


def test_inverse_table_is_built_on_first_use_and_then_cached(monkeypatch):
    monkeypatch.setattr(toploc, "_INV", None)  # as in a fresh process
    assert interpolate(np.array([[1, 2]]), np.array([[2, 3]])).tolist() == [[1, 1]]  # the line 1 + X
    table = toploc._INV
    assert table is not None and table[2] == 32749 and table[PRIME - 1] == PRIME - 1
    assert toploc._inv() is table


def test_interpolate_of_uint16_points_equals_int64_points():
    # bf16 bit patterns are uint16: differences must not wrap at 2**16
    rng = np.random.default_rng(5)
    x = np.stack([rng.choice(65000, 16, replace=False) for _ in range(2)])
    y = rng.integers(0, 65536, (2, 16))
    want = interpolate(x.astype(np.int64), y.astype(np.int64))
    got = interpolate(x.astype(np.uint16), y.astype(np.uint16))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(evaluate_proof(got, x), y % PRIME)


def test_evaluate_proof_against_horner_and_its_result_is_int64():
    rng = np.random.default_rng(6)
    for n in (1, 2, 3, 5, 17, 128, 130):
        coeffs = rng.integers(0, PRIME, (2, n))
        x = rng.integers(0, 200000, (2, 7))
        want = [[sum(int(c) * pow(int(v), k, PRIME) for k, c in enumerate(coeffs[r])) % PRIME for v in x[r]]
                for r in range(2)]
        got = evaluate_proof(coeffs, x)
        assert got.dtype == np.int64 and got.tolist() == want
    # integer-valued float indices are evaluated as the integers they are, the result still int64
    got = evaluate_proof(np.array([[1, 2, 3]]), np.array([[2.0, 5.0]]))
    assert got.dtype == np.int64 and got.tolist() == [[1 + 4 + 12, 1 + 10 + 75]]


# --- proof bytes ----------------------------------------------------------------------------------------------


def test_encode_proof_is_big_endian_modulus_then_coefficients():
    assert encode_proof(258, np.array([1, 65496])) == b"\x01\x02\x00\x01\xff\xd8"


def test_decode_proof_bounds_and_its_int64_coefficients():
    m, c = decode_proof(_proof(1, [0, 65496]), topk=2)  # modulus 1 and coefficient p - 1: the edges accepted
    assert m == 1 and c.dtype == np.int64 and c.tolist() == [0, 65496]
    m, c = decode_proof(bytearray(_proof(PRIME, [7, 8])), topk=2)
    assert m == PRIME and c.tolist() == [7, 8]
    assert decode_proof(memoryview(_proof(258, [1, 2])), topk=2)[0] == 258


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("ab", "proof must be bytes, got str"),
        (b"\x00\x01\x00", "proof is 3 bytes, expected 6 for top-2"),
        (_proof(0, [1, 2]), "proof modulus 0 is outside [1, 65497]"),
        (_proof(PRIME + 1, [1, 2]), "proof modulus 65498 is outside [1, 65497]"),
        (_proof(5, [1, PRIME]), "proof has a coefficient >= 65497"),
    ],
)
def test_decode_proof_errors_say_what_is_wrong(data, message):
    with pytest.raises(ProofFormatError) as info:
        decode_proof(data, topk=2)
    assert str(info.value) == message


def test_n_chunks_rounds_up_per_chunk_size():
    assert [n_chunks(t) for t in (0, 1, 32, 33, 64, 65)] == [0, 1, 1, 2, 2, 3]
    assert [n_chunks(t, 4) for t in (1, 4, 5, 9)] == [1, 1, 2, 3]


def test_profile_reference_is_the_alias_of_mixed():
    assert profile("reference") is PROFILES["mixed"]
    assert profile("fp32") is PROFILES["fp32"]


# --- building: bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hidden", "kwargs", "message"),
    [
        (torch.randn(4, 8), {"chunk_size": 0, "topk": 8}, "chunk_size and topk must be positive, got 0, 8"),
        (torch.randn(4, 8), {"chunk_size": 4, "topk": 0}, "chunk_size and topk must be positive, got 4, 0"),
        (torch.zeros(0, 8), {}, "no hidden states: a proof needs at least one decoded token"),
        (torch.randn(5, 2), {"chunk_size": 4, "topk": 3}, "a chunk of 1 rows × 2 values has fewer than top-3 values"),
        (torch.full((4, 8), float("inf")), {"chunk_size": 4, "topk": 8}, "hidden states contain NaN or inf"),
        ([[1.0]], {}, "hidden states must be a torch.Tensor, got list"),
        (torch.zeros(5), {}, "hidden states must be (T, H), got shape (5,)"),
        (torch.ones(3, 4, dtype=torch.long), {}, "hidden states must be floating point, got torch.int64"),
    ],
)
def test_build_proofs_errors_say_what_is_wrong(hidden, kwargs, message):
    with pytest.raises(ToplocError) as info:
        build_proofs(hidden, **kwargs)
    assert str(info.value) == message


def test_build_proofs_with_chunk_size_one_and_topk_one():
    h = torch.tensor([[1.0, -3.0], [0.5, 0.25]])
    proofs = build_proofs(h, chunk_size=1, topk=1)
    # one value per row: the largest magnitude, -3.0 (bf16 0xC040) at index 1, then 0.5 (0x3F00) at index 0
    assert proofs == [_proof(PRIME, [0xC040]), _proof(PRIME, [0x3F00])]


def test_build_proofs_of_a_tensor_that_requires_grad_or_is_not_contiguous():
    torch.manual_seed(11)
    h = torch.randn(40, 64)
    assert build_proofs(h.clone().requires_grad_(True)) == build_proofs(h)
    t = torch.randn(64, 40).t()  # (40, 64), not contiguous
    assert not t.is_contiguous()
    assert build_proofs(t) == build_proofs(t.contiguous())


def test_states_that_cannot_be_copied_to_the_cpu_fail_their_own_sample_only():
    # hidden states are copied to the CPU in the structural check: a tensor without data (meta device) fails
    # there, alone, instead of passing it and failing the whole batched check later
    torch.manual_seed(16)
    h = torch.randn(40, 64)
    proofs = build_proofs(h)
    res = verify_proofs_many([torch.empty(40, 64, device="meta"), h], [proofs, proofs])
    assert [r.ok for r in res] == [False, True]
    assert res[0].reason is ReasonCode.BAD_ACTIVATIONS and res[0].detail.startswith("NotImplementedError: ")
    assert res[1].chunks == verify_proofs(h, proofs).chunks


# --- checking: structure --------------------------------------------------------------------------------------


def test_check_proofs_errors_say_what_is_wrong():
    h = torch.randn(5, 2)
    p = _proof(PRIME, [0, 0, 0])
    with pytest.raises(ToplocError) as info:
        check_proofs(torch.zeros(0, 2), [], chunk_size=4, topk=3)
    assert str(info.value) == "no hidden states to check"
    with pytest.raises(ToplocError) as info:
        check_proofs(h, [p], chunk_size=4, topk=3)
    assert str(info.value) == "1 proofs for 5 tokens, expected 2"
    with pytest.raises(ToplocError) as info:
        check_proofs(h, [p, p], chunk_size=4, topk=3)
    assert str(info.value) == "a chunk of 1 rows × 2 values has fewer than top-3 values"
    bad = torch.randn(8, 2)
    bad[6, 1] = float("nan")
    with pytest.raises(ToplocError) as info:
        check_proofs(bad, [p, p], chunk_size=4, topk=3)
    assert str(info.value) == "hidden states contain NaN or inf"


def test_precheck_verdicts_carry_reason_detail_and_chunk():
    h = torch.randn(40, 64)
    good = build_proofs(h)
    assert verify_proofs(h, "nope") == VerificationResult(  # type: ignore[arg-type]
        ok=False, reason=ReasonCode.MALFORMED_PROOF, detail="proofs must be a list of bytes, got str")
    assert verify_proofs(h, tuple(good)).ok is True  # a tuple of proofs is fine
    assert verify_proofs(h, [good[0], b"abc"]) == VerificationResult(
        ok=False, reason=ReasonCode.MALFORMED_PROOF, detail="proof 1: proof is 3 bytes, expected 258 for top-128",
        failed_chunk=1)
    assert verify_proofs([[1.0]], good) == VerificationResult(  # type: ignore[arg-type]
        ok=False, reason=ReasonCode.BAD_ACTIVATIONS, detail="hidden states must be a torch.Tensor, got list")
    assert verify_proofs(h, good[:1]) == VerificationResult(
        ok=False, reason=ReasonCode.WRONG_PROOF_COUNT, detail="1 proofs for 40 tokens, expected 2")
    assert verify_proofs(torch.zeros(0, 64), []) == VerificationResult(
        ok=False, reason=ReasonCode.WRONG_PROOF_COUNT, detail="0 proofs for 0 tokens, expected 0")


def test_one_token_is_checked_and_zero_width_states_are_bad_activations():
    h = torch.randn(1, 128)
    res = verify_proofs(h, build_proofs(h))
    assert res.ok is True and len(res.chunks) == 1
    res = verify_proofs(torch.zeros(3, 0), [_proof(PRIME, [0] * 128)])
    assert res == VerificationResult(ok=False, reason=ReasonCode.BAD_ACTIVATIONS,
                                     detail="a chunk of 3 rows × 0 values has fewer than top-128 values")


def test_nonfinite_states_found_after_the_precheck_keep_their_detail():
    h = torch.randn(32, 64)
    proofs = build_proofs(h)
    h[3, 5] = float("nan")
    assert verify_proofs(h, proofs) == VerificationResult(
        ok=False, reason=ReasonCode.BAD_ACTIVATIONS, detail="hidden states contain NaN or inf")


def test_an_unexpected_error_in_the_precheck_or_the_batched_check_is_a_failed_verdict_not_a_crash():
    h = torch.randn(2, 128)
    res = verify_proofs(h, [], chunk_size=0)  # n_chunks divides by the chunk size
    assert res == VerificationResult(ok=False, reason=ReasonCode.BAD_ACTIVATIONS,
                                     detail="ZeroDivisionError: integer division or modulo by zero")
    res = verify_proofs(h, [], chunk_size=-1)  # passes the count check (0 proofs), fails in the top-k's reshape
    assert (res.ok, res.reason) == (False, ReasonCode.BAD_ACTIVATIONS) and res.detail.startswith("RuntimeError: ")


def test_an_unexpected_error_of_one_sample_fails_that_sample_only():
    torch.manual_seed(15)
    h = torch.randn(40, 64)
    proofs = build_proofs(h)
    released = memoryview(proofs[0])
    released.release()  # passes the bytes-type check, then bytes() of it raises ValueError (not a proof error)
    res = verify_proofs_many([h, torch.randn(32, 64), h], [proofs, [released], proofs])
    assert [r.ok for r in res] == [True, False, True]
    assert res[1] == VerificationResult(ok=False, reason=ReasonCode.BAD_ACTIVATIONS,
                                        detail="ValueError: operation forbidden on released memoryview object")


def test_batched_verification_keeps_each_sample_in_its_place():
    torch.manual_seed(13)
    hs = [torch.randn(40, 64), torch.randn(32, 64), torch.randn(70, 64)]
    ps = [build_proofs(h) for h in hs]
    other = torch.randn(32, 64)
    res = verify_proofs_many([hs[0], other, hs[1], hs[2]], [ps[0], ps[1], ["x"], ps[2]])
    assert [r.ok for r in res] == [True, False, False, True]
    assert [len(r.chunks) for r in res] == [2, 1, 0, 3]
    assert res[1].reason is ReasonCode.EXP_MISMATCH and res[2].reason is ReasonCode.MALFORMED_PROOF
    assert res[1].failed_chunk == 0 and res[2].failed_chunk == 0
    with pytest.raises(ValueError):
        verify_proofs_many(hs, ps[:2])  # one list of proofs per sample


def test_check_proofs_many_splits_the_batch_per_sample_and_returns_each_error_in_place():
    torch.manual_seed(14)
    hs = [torch.randn(40, 64), torch.randn(70, 64), torch.randn(32, 64)]
    ps = [build_proofs(h) for h in hs]
    noisy = [h * (1 + 0.05 * torch.randn_like(h)) for h in hs]
    want = [check_proofs(n, p) for n, p in zip(noisy, ps, strict=True)]
    assert check_proofs_many(noisy, ps) == want
    out = check_proofs_many([noisy[0], torch.zeros(0, 64), noisy[1], noisy[2]], [ps[0], [], ps[1], ps[2]])
    assert out[0] == want[0] and out[2] == want[1] and out[3] == want[2]
    assert isinstance(out[1], ToplocError) and str(out[1]) == "no hidden states to check"
    only_bad = check_proofs_many([torch.zeros(0, 64)], [[]])
    assert len(only_bad) == 1 and isinstance(only_bad[0], ToplocError)
    assert check_proofs_many([], []) == []
    with pytest.raises(ValueError):
        check_proofs_many(hs, ps[:2])


# --- the per-chunk statistics ---------------------------------------------------------------------------------


def test_chunk_stats_mismatches_mean_and_upper_median_exactly():
    # a constant polynomial claims 1.0 (bf16 0x3F80: exponent 127, mantissa 0) at every index
    one = 0x3F80
    idx = np.array([[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]])
    bits = np.array([
        [one, one + 3, one + 1, 0x4000],  # 3 matching exponents, errors 0, 3, 1; 2.0 has exponent 128
        [one + 1, one + 2, one + 5, one + 7],  # 4 matching, errors 1, 2, 5, 7: upper median 5
        [0x4000, 0x4010, 0x3F00, 0x3E80],  # no matching exponent
    ])
    moduli = np.array([PRIME, PRIME, PRIME])
    coeffs = np.array([[one, 0, 0, 0]] * 3)
    s = _chunk_stats(idx, bits, moduli, coeffs)
    assert [c.exp_mismatches for c in s] == [1, 0, 4]
    assert s[0].mant_err_mean == 4 / 3 and s[0].mant_err_median == 1.0
    assert s[1].mant_err_mean == 15 / 4 and s[1].mant_err_median == 5.0
    assert s[2].mant_err_mean == 2.0**64 and s[2].mant_err_median == 2.0**64  # the no-match marker


def test_chunk_stats_upper_median_of_two_values():
    one = 0x3F80
    s = _chunk_stats(np.array([[0, 1]]), np.array([[one, one + 3]]), np.array([PRIME]), np.array([[one, 0]]))
    assert s == [ChunkStats(exp_mismatches=0, mant_err_mean=1.5, mant_err_median=3.0)]


# --- per-chunk bounds at their limits -------------------------------------------------------------------------


def _stats(exp: int = 0, mean: float = 0.0, median: float = 0.0) -> ChunkStats:
    return ChunkStats(exp_mismatches=exp, mant_err_mean=mean, mant_err_median=median)


def test_judge_accepts_every_bound_at_its_limit():
    at = _stats(18, 5.0, 4.0)
    assert _judge([at], MIXED) == VerificationResult(ok=True, chunks=[at])


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (_stats(19, 0.0, 0.0), ReasonCode.EXP_MISMATCH),
        (_stats(0, 5.01, 0.0), ReasonCode.MANTISSA_MEAN),
        (_stats(0, 0.0, 4.5), ReasonCode.MANTISSA_MEDIAN),
    ],
)
def test_judge_refuses_one_past_each_bound_with_its_reason_and_the_chunks(bad, reason):
    ok = _stats()
    res = _judge([ok, bad, ok], MIXED)
    assert (res.ok, res.reason, res.failed_chunk) == (False, reason, 1)
    assert res.chunks == [ok, bad, ok]


def test_replay_allowance_is_the_floor_plus_the_rate_times_the_tokens():
    assert replay_differing_allowed(1000) == 2 + 2
    assert replay_differing_allowed(499) == 2
    assert replay_differing_allowed(1000, FP32) == 1
    assert replay_differing_allowed(999, FP32) == 0


def test_replay_budget_at_the_allowance_passes():
    stats = ReplayStats(max_margin=0.5, mean_margin=0.1, flips=4, positions=1000, differing=4)
    res = check_replay_budget([VerificationResult(ok=True, replay=stats)])
    assert res == VerificationResult(ok=True, detail="4 of 1000 tokens differ (allowed 4)")


# --- rejudge ----------------------------------------------------------------------------------------------------


def _replay(margins: tuple[float, ...], differing: int = 0) -> ReplayStats:
    return ReplayStats(max_margin=max(margins, default=0.0), mean_margin=0.0, flips=len(margins),
                       positions=100, differing=differing, margins=margins)


def test_rejudge_keeps_a_failed_sample_as_it_was():
    failed = VerificationResult(ok=False, reason=ReasonCode.MALFORMED_PROOF, detail="proof 0: x", failed_chunk=0)
    assert rejudge([failed], FP32) == [failed]


def test_rejudge_without_replay_judges_the_chunks_again():
    loose_ok = [_stats(3, 1.0, 1.0), _stats(5, 1.0, 1.0)]  # 5 mismatches: fine for mixed, not for fp32
    r = VerificationResult(ok=True, detail="kept?", chunks=loose_ok)
    assert rejudge([r], MIXED) == [VerificationResult(ok=True, chunks=loose_ok)]
    out = rejudge([r], FP32)
    assert (out[0].ok, out[0].reason, out[0].failed_chunk, out[0].replay) == (False, ReasonCode.EXP_MISMATCH, 1, None)


def test_rejudge_recounts_differing_tokens_above_the_tie_margin():
    rp = _replay((0.1, 0.25, 0.3, 0.04), differing=0)
    r = VerificationResult(ok=True, chunks=[_stats()], replay=rp)
    mixed = rejudge([r], MIXED)[0]  # tie margin 0.25: only 0.3 is above it (0.25 itself is a tie)
    assert mixed.ok is True and mixed.reason is None
    assert mixed.replay == rp.model_copy(update={"differing": 1})
    fp32 = rejudge([VerificationResult(ok=True, chunks=[_stats()], replay=_replay((0.01, 0.05, 0.02)))], FP32)[0]
    assert fp32.ok is True and fp32.replay.differing == 3  # tie margin 0.0: every token counts


def test_rejudge_refuses_a_replay_margin_past_the_profiles_tolerance():
    r = VerificationResult(ok=True, chunks=[_stats()], replay=_replay((0.06,)))
    out = rejudge([r, r], FP32)
    assert out[0] == out[1]
    assert (out[0].ok, out[0].reason) == (False, ReasonCode.REPLAY_MISMATCH)
    assert out[0].detail == "replay margin 0.06 > 0.05"
    assert out[0].replay.differing == 1 and out[0].chunks == [_stats()]
    at_limit = VerificationResult(ok=True, chunks=[_stats()], replay=_replay((0.05,)))
    assert rejudge([at_limit], FP32)[0].ok is True
    no_bound = Thresholds(max_replay_margin=None)
    far = VerificationResult(ok=True, chunks=[_stats()], replay=_replay((9.0,)))
    assert rejudge([far], no_bound)[0].ok is True


def test_rejudge_of_a_sample_failing_its_chunks_keeps_its_replay_as_it_was():
    rp = _replay((0.3, 0.01), differing=1)
    r = VerificationResult(ok=True, chunks=[_stats(5)], replay=rp)
    out = rejudge([r], FP32)[0]
    assert (out.ok, out.reason) == (False, ReasonCode.EXP_MISMATCH)
    assert out.replay == rp  # not recounted (it failed before the replay is looked at)


def test_rejudge_keeps_the_order_of_mixed_results():
    failed = VerificationResult(ok=False, reason=ReasonCode.INVALID_SAMPLE)
    good = VerificationResult(ok=True, chunks=[_stats()])
    out = rejudge([good, failed, good], FP32)
    assert [o.ok for o in out] == [True, False, True] and out[1] is failed
