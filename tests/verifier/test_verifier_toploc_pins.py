"""TOPLOC values pinned exactly (issue 39, mutmut's survivors on `verifier/toploc.py`).

Each test pins one value or rule that a mutant changed and no other test noticed: the field inverse table (its
result is cached for the process, so other tests never recompute it), the on-chain `proofsHash` encoding byte
for byte, the `fp32` constructor itself (the `PROFILES` entry is built once at import), the aggregate check's
"no matching exponent" filter and its verdict text, the verdict (and log line) of an unexpected error, the batched proof
builder against the per-sample one, and `verify_proofs` passing its chunk size and top-k on. docs/benchmarks-security.md ("mutmut") lists the mutants.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from intellect.verifier.toploc import (
    PRIME,
    ChunkStats,
    ProofFormatError,
    ReasonCode,
    ReplayStats,
    Thresholds,
    ToplocError,
    VerificationResult,
    _error_result,
    _inverse_table,
    _judge,
    build_proofs,
    build_proofs_many,
    check_aggregate,
    check_replay_budget,
    profile,
    proofs_hash,
    verify_proofs,
)


def test_inverse_table_is_the_inverse_in_gf_65497():
    inv = _inverse_table()
    assert inv.shape == (PRIME,) and inv.dtype == np.int64
    assert inv[0] == 0 and inv[1] == 1 and inv[2] == 32749 and inv[PRIME - 1] == PRIME - 1
    a = np.arange(1, PRIME, dtype=np.int64)
    assert np.all(a * inv[1:] % PRIME == 1)


def test_proofs_hash_encoding_is_domain_count_then_length_prefixed_proofs():
    # sha256(b"intellect.toploc.proofs/v1" || u32be(2) || u32be(3) || b"abc" || u32be(0)), written out by hand
    expected = hashlib.sha256(
        b"intellect.toploc.proofs/v1" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x03abc" + b"\x00\x00\x00\x00"
    ).digest()
    assert proofs_hash([b"abc", b""]) == expected
    assert proofs_hash([]) == hashlib.sha256(b"intellect.toploc.proofs/v1\x00\x00\x00\x00").digest()


def test_fp32_constructor_builds_the_documented_bounds():
    assert Thresholds.fp32().model_dump() == {
        "max_exp_mismatches": 4, "max_mant_err_mean": 1.5, "max_mant_err_median": 1.0,
        "max_replay_margin": 0.05, "replay_tie_margin": 0.0, "max_replay_differing": 0,
        "max_replay_differing_rate": 0.001, "max_agg_mant_err_mean": 2.5, "min_agg_chunks": 8,
    }


def _result(*means: float) -> VerificationResult:
    return VerificationResult(ok=True, chunks=[ChunkStats(exp_mismatches=0, mant_err_mean=m, mant_err_median=0.0)
                                               for m in means])


def test_aggregate_counts_every_chunk_with_a_matching_exponent_however_large_its_mean():
    # 200 is far above any bound but finite (< 2**64, the "no matching exponent" marker): it counts
    res = check_aggregate([_result(*[200.0] * 8)])
    assert res.ok is False and res.reason == ReasonCode.AGGREGATE_MANTISSA
    assert res.detail == "mean mantissa error 200.00 over the submission's 8 chunks > 2.5"
    # chunks without a matching exponent (mean 2**64) are left out: 7 counted chunks are too few to judge
    skipped = check_aggregate([_result(*[2.0] * 7, float(2**64))])
    assert skipped == VerificationResult(ok=True)


def test_aggregate_pass_says_the_mean_and_the_chunk_count():
    res = check_aggregate([_result(*[2.5] * 4), _result(*[2.5] * 4)])
    assert res == VerificationResult(ok=True, detail="mean mantissa error 2.50 over 8 chunks")


@pytest.mark.parametrize(
    ("exc", "reason", "detail"),
    [
        (ProofFormatError("proof 3: bad length"), ReasonCode.MALFORMED_PROOF, "proof 3: bad length"),
        (ToplocError("no hidden states to check"), ReasonCode.BAD_ACTIVATIONS, "no hidden states to check"),
        (RuntimeError("boom"), ReasonCode.BAD_ACTIVATIONS, "RuntimeError: boom"),
    ],
)
def test_an_error_while_verifying_is_a_failed_verdict_with_its_reason(exc, reason, detail):
    assert _error_result(exc) == VerificationResult(ok=False, reason=reason, detail=detail)


def test_build_proofs_many_is_build_proofs_per_sample():
    torch.manual_seed(7)
    hiddens = [torch.randn(40, 64), torch.randn(70, 96), torch.randn(32, 128)]
    assert build_proofs_many(hiddens) == [build_proofs(h) for h in hiddens]
    small = torch.randn(5, 64)
    assert build_proofs_many([small], chunk_size=4, topk=8) == [build_proofs(small, chunk_size=4, topk=8)]
    assert len(build_proofs_many([small], chunk_size=4, topk=8)[0]) == 2
    assert build_proofs_many([]) == []


def test_an_unexpected_error_is_logged_with_its_type(caplog):
    with caplog.at_level("ERROR", logger="intellect.verifier.toploc"):
        _error_result(RuntimeError("boom"))
    assert [r.getMessage() for r in caplog.records] == ["unexpected error while verifying proofs: RuntimeError: boom"]


def test_verify_proofs_uses_the_chunk_size_and_topk_it_is_given():
    torch.manual_seed(3)
    h = torch.randn(40, 64)
    proofs = build_proofs(h, chunk_size=16, topk=64)
    assert len(proofs) == 3
    res = verify_proofs(h, proofs, chunk_size=16, topk=64)
    assert res.ok is True and len(res.chunks) == 3
    assert all(c == ChunkStats(exp_mismatches=0, mant_err_mean=0.0, mant_err_median=0.0) for c in res.chunks)


def test_an_unknown_profile_names_the_known_ones():
    with pytest.raises(ValueError) as info:
        profile("nope")
    assert str(info.value) == "unknown verification profile 'nope' (known: mixed, fp32)"


def test_a_failed_chunk_says_which_and_its_statistics():
    ok = ChunkStats(exp_mismatches=0, mant_err_mean=0.0, mant_err_median=0.0)
    bad = ChunkStats(exp_mismatches=19, mant_err_mean=1.234, mant_err_median=2.0)
    res = _judge([ok, bad], profile("mixed"))
    assert (res.ok, res.reason, res.failed_chunk) == (False, ReasonCode.EXP_MISMATCH, 1)
    assert res.detail == "chunk 1: 19 exponent mismatches, mantissa error mean 1.23 median 2.0"


def _replayed(differing: int | None, positions: int = 10) -> VerificationResult:
    if differing is None:  # an unseeded sample: no replay
        return VerificationResult(ok=True)
    stats = ReplayStats(max_margin=0.5, mean_margin=0.1, flips=differing, positions=positions, differing=differing)
    return VerificationResult(ok=True, replay=stats)


def test_replay_budget_names_the_sample_with_the_most_differing_tokens():
    fp32 = profile("fp32")  # no differing token allowed under 1,000 replayed tokens
    res = check_replay_budget([_replayed(None), _replayed(1)], fp32)
    assert (res.ok, res.reason) == (False, ReasonCode.REPLAY_DIFFERING)
    assert res.detail == ("1 of 10 completion tokens differ from the seeded sampler's draw by more than 0.0 "
                          "(allowed 0; most in sample 1): not the sampler's output")
    res = check_replay_budget([_replayed(3), _replayed(1), _replayed(None)], fp32)
    assert "4 of 20 completion tokens" in res.detail and "most in sample 0)" in res.detail


def test_replay_budget_pass_says_the_count_and_the_allowance():
    res = check_replay_budget([_replayed(1, positions=30), _replayed(None)], profile("mixed"))
    assert res == VerificationResult(ok=True, detail="1 of 30 tokens differ (allowed 2)")
