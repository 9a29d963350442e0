"""TOPLOC: byte-identity with the reference package, tampering, and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from intellect.verifier import toploc
from intellect.verifier.toploc import ReasonCode, Thresholds, build_proofs, proofs_hash, verify_proofs

DATA = Path(__file__).parent / "data" / "toploc_vectors.npz"


def _bf16(arr: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)


def _cases() -> list[str]:
    with np.load(DATA) as d:
        return sorted({k.split("__")[0] for k in d.files})


@pytest.fixture(scope="module")
def vectors() -> dict[str, np.ndarray]:
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


@pytest.mark.parametrize("name", _cases())
def test_build_proofs_matches_reference_bytes(vectors, name):
    act = _bf16(vectors[f"{name}__act"])
    expected = [bytes(row) for row in vectors[f"{name}__proofs"]]
    assert build_proofs(act) == expected


@pytest.mark.parametrize("name", _cases())
def test_check_proofs_matches_reference_statistics(vectors, name):
    pert = _bf16(vectors[f"{name}__pert"])
    proofs = [bytes(row) for row in vectors[f"{name}__proofs"]]
    stats = toploc.check_proofs(pert, proofs)
    ours = np.array([[s.exp_mismatches, s.mant_err_mean, s.mant_err_median] for s in stats])
    np.testing.assert_allclose(ours, vectors[f"{name}__stats"])


def test_build_proofs_modulus_search_goes_below_prime(vectors):
    proofs = [bytes(row) for row in vectors["forced_modsearch_32x2100__proofs"]]
    assert int.from_bytes(proofs[0][:2], "big") < toploc.PRIME


def test_interpolate_passes_through_points():
    rng = np.random.default_rng(0)
    x = np.stack([rng.choice(60000, 128, replace=False) for _ in range(3)])  # (3, 128)
    y = rng.integers(0, 65536, (3, 128))
    coeffs = toploc.interpolate(x, y)
    np.testing.assert_array_equal(toploc.evaluate_proof(coeffs, x), y % toploc.PRIME)


def test_build_proofs_dtype_independent_after_bf16():
    h = torch.randn(40, 64)
    assert build_proofs(h) == build_proofs(h.to(torch.bfloat16)) == build_proofs(h.double())


def test_verify_proofs_same_states_pass_with_zero_error():
    h = torch.randn(70, 96)
    res = verify_proofs(h, build_proofs(h))
    assert res.ok and res.reason is None
    assert len(res.chunks) == 3
    assert all(c.exp_mismatches == 0 and c.mant_err_mean == 0 for c in res.chunks)


def test_verify_proofs_small_noise_passes():
    h = torch.randn(64, 576)
    noisy = h * (1 + 1e-3 * torch.randn_like(h))
    assert verify_proofs(noisy, build_proofs(h)).ok


def test_verify_proofs_other_states_fail():
    h = torch.randn(64, 576)
    res = verify_proofs(torch.randn(64, 576), build_proofs(h))
    assert not res.ok and res.reason is ReasonCode.EXP_MISMATCH and res.failed_chunk == 0


def test_verify_proofs_tampered_coefficient_fails():
    h = torch.randn(64, 576)
    proofs = build_proofs(h)
    bad = bytearray(proofs[1])
    bad[100] ^= 0x01
    res = verify_proofs(h, [proofs[0], bytes(bad)])
    assert not res.ok and res.failed_chunk == 1


def test_verify_proofs_swapped_chunks_fail():
    h = torch.randn(64, 576)
    p = build_proofs(h)
    assert not verify_proofs(h, [p[1], p[0]]).ok


def test_verify_proofs_one_changed_row_fails_its_chunk():
    h = torch.randn(64, 576)
    proofs = build_proofs(h)
    h2 = h.clone()
    h2[40] = torch.randn(576) * 3  # one token's state replaced, in chunk 1
    res = verify_proofs(h2, proofs)
    assert not res.ok and res.failed_chunk == 1


@pytest.mark.parametrize(
    ("proofs", "reason"),
    [
        ([b""], ReasonCode.MALFORMED_PROOF),
        ([b"\x00" * 257], ReasonCode.MALFORMED_PROOF),
        ([b"\x00" * 258], ReasonCode.MALFORMED_PROOF),  # the reference's null proof (modulus 0)
        ([b"\x00" * 259], ReasonCode.MALFORMED_PROOF),
        ([b"\xff\xff" + b"\x00" * 256], ReasonCode.MALFORMED_PROOF),  # modulus > 65497
        ([b"\x00\x10" + b"\xff\xff" * 128], ReasonCode.MALFORMED_PROOF),  # coefficient >= p
        (["not bytes"], ReasonCode.MALFORMED_PROOF),
        ([], ReasonCode.WRONG_PROOF_COUNT),
        ("a string", ReasonCode.MALFORMED_PROOF),
    ],
)
def test_verify_proofs_malformed_input_returns_reason(proofs, reason):
    res = verify_proofs(torch.randn(32, 64), proofs)
    assert not res.ok and res.reason is reason and res.detail


def test_verify_proofs_wrong_token_count_fails():
    h = torch.randn(64, 64)
    proofs = build_proofs(h)
    assert verify_proofs(h[:32], proofs).reason is ReasonCode.WRONG_PROOF_COUNT
    assert verify_proofs(torch.randn(100, 64), proofs).reason is ReasonCode.WRONG_PROOF_COUNT
    assert verify_proofs(h, proofs[:1]).reason is ReasonCode.WRONG_PROOF_COUNT


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_verify_proofs_nonfinite_activations_fail(bad):
    h = torch.randn(32, 64)
    proofs = build_proofs(h)
    h[3, 5] = bad
    res = verify_proofs(h, proofs)
    assert not res.ok and res.reason is ReasonCode.BAD_ACTIVATIONS


@pytest.mark.parametrize(
    "hidden", [torch.zeros(0, 64), torch.zeros(5), torch.zeros(2, 3, 4), torch.ones(3, 4, dtype=torch.long)]
)
def test_verify_proofs_bad_shapes_fail(hidden):
    res = verify_proofs(hidden, [b"\xff\xd9" + b"\x00" * 256])
    assert not res.ok and res.reason in (ReasonCode.BAD_ACTIVATIONS, ReasonCode.WRONG_PROOF_COUNT)


def test_verify_proofs_not_a_tensor_fails():
    res = verify_proofs([[1.0, 2.0]], [b"\xff\xd9" + b"\x00" * 256])  # type: ignore[arg-type]
    assert not res.ok and res.reason is ReasonCode.BAD_ACTIVATIONS


def test_build_proofs_bad_input_raises_clear_error():
    with pytest.raises(toploc.ToplocError, match="NaN"):
        build_proofs(torch.full((32, 64), float("nan")))
    with pytest.raises(toploc.ToplocError, match="fewer than top-128"):
        build_proofs(torch.randn(33, 8))  # last chunk: 1 row × 8 values
    with pytest.raises(toploc.ToplocError, match="at least one"):
        build_proofs(torch.zeros(0, 64))


def test_verify_proofs_thresholds_are_configurable():
    h = torch.randn(64, 576)
    noisy = h * (1 + 0.02 * torch.randn_like(h))
    proofs = build_proofs(h)
    assert verify_proofs(noisy, proofs).ok
    strict = Thresholds(max_exp_mismatches=0, max_mant_err_mean=0.0, max_mant_err_median=0.0)
    assert not verify_proofs(noisy, proofs, thresholds=strict).ok


def test_proofs_hash_is_32_bytes_and_order_sensitive():
    p = build_proofs(torch.randn(64, 64))
    assert len(proofs_hash(p)) == 32
    assert proofs_hash(p) != proofs_hash(p[::-1])
    assert proofs_hash([p[0] + p[1]]) != proofs_hash(p)  # length prefixes: no ambiguity
    assert proofs_hash([]) != proofs_hash([b""])


def test_check_aggregate_bounds_the_submission_mean():
    from intellect.verifier.toploc import ChunkStats, VerificationResult, check_aggregate

    def results(mean: float, n: int) -> list[VerificationResult]:
        return [VerificationResult(ok=True, chunks=[ChunkStats(exp_mismatches=0, mant_err_mean=mean,
                                                               mant_err_median=1.0)]) for _ in range(n)]

    th = Thresholds(max_agg_mant_err_mean=2.5, min_agg_chunks=8)
    assert check_aggregate(results(1.4, 16), th).ok
    bad = check_aggregate(results(3.0, 16), th)
    assert not bad.ok and bad.reason is ReasonCode.AGGREGATE_MANTISSA and "16 chunks" in bad.detail
    assert check_aggregate(results(3.0, 7), th).ok  # too few chunks to judge
    assert check_aggregate(results(3.0, 16), Thresholds(max_agg_mant_err_mean=None)).ok
    # chunks without a matching exponent (mean 2^64) already failed per chunk; they do not swamp the mean
    assert check_aggregate(results(1.0, 8) + results(2.0**64, 1), th).ok
