"""TOPLOC proofs over the last hidden states of decoded tokens.

A worker proves that it ran the named checkpoint by committing, for every chunk of
`chunk_size` (32) decoded tokens, to the `topk` (128) largest-magnitude bf16 values of the
chunk's last hidden states (the input of the LM head). The commitment is the polynomial over
GF(65497) through the points (flat index mod m, bf16 bit pattern), where `m` is the largest
modulus <= 65497 that keeps the chunk's indices distinct. A chunk's proof is encoded in
2 + 2·topk bytes, big-endian: `m` then the `topk` coefficients in ascending degree. These are
the same bytes as the reference package `toploc` 0.1.6 (`build_proofs_bytes(..., skip_prefill=True)`)
for the same activations; `tests/verifier/data/` holds vectors generated from it.

The validator recomputes the hidden states with one prefill pass, takes its own top-k of each
chunk, evaluates the proof polynomial at those indices and compares bf16 exponents (count of
mismatches) and mantissas (mean and median absolute error over matching exponents). Small
differences come from kernels, batch shapes and precision; a different model, altered tokens
or a copied proof move the top-k set and the values far beyond `Thresholds`.

Reference: Ong et al., "TOPLOC: A Locality Sensitive Hashing Scheme for Trustless Verifiable
Inference" (2025); https://github.com/PrimeIntellect-ai/toploc.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from intellect.sdk import IntellectError

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

PRIME = 65497
"""The field GF(65497): the largest prime below 2**16, so coefficients fit in 2 bytes."""
CHUNK_SIZE = 32
TOPK = 128
BF16_EXP_MASK = 0x7F80
BF16_MANT_MASK = 0x007F
PROOFS_HASH_DOMAIN = b"intellect.toploc.proofs/v1"

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_MAX_REPLAY_MARGIN",
    "PRIME",
    "PROFILES",
    "PROFILE_ALIASES",
    "TOPK",
    "ChunkStats",
    "ProofFormatError",
    "ReasonCode",
    "ReplayStats",
    "Thresholds",
    "ToplocError",
    "VerificationResult",
    "build_proofs",
    "build_proofs_many",
    "check_aggregate",
    "check_proofs",
    "check_proofs_many",
    "check_replay_budget",
    "decode_proof",
    "encode_proof",
    "evaluate_proof",
    "find_injective_modulus",
    "interpolate",
    "n_chunks",
    "profile",
    "proofs_hash",
    "rejudge",
    "replay_differing_allowed",
    "verify_proofs",
    "verify_proofs_many",
]


class ToplocError(IntellectError, ValueError):
    """Proofs cannot be built from the given activations (wrong shape, too few values)."""


class ProofFormatError(ToplocError):
    """Proof bytes are not a well-formed TOPLOC proof."""


# ---------------------------------------------------------------------------------------------
# GF(65497) arithmetic, vectorised with numpy int64 (products < 65497² < 2**33: no overflow).


def _inverse_table() -> np.ndarray:
    """inv[a] = a^(p-2) mod p for every a in [0, p) (inv[0] = 0), by square-and-multiply."""
    base = np.arange(PRIME, dtype=np.int64)
    result = np.ones(PRIME, dtype=np.int64)
    exp = PRIME - 2
    while exp:
        if exp & 1:
            result = result * base % PRIME
        base = base * base % PRIME
        exp >>= 1
    result[0] = 0
    return result


_INV: np.ndarray | None = None


def _inv() -> np.ndarray:
    global _INV
    if _INV is None:
        _INV = _inverse_table()
    return _INV


def find_injective_modulus(x: np.ndarray) -> np.ndarray:
    """Largest m in [1, 65497] with `x % m` distinct, per row of x (C, n) -> (C,).

    Same search as the reference (from 65497 downwards, first injective modulus). Indices below
    65497 are already distinct, so most chunks stop at the first candidate; others are searched
    in blocks of candidates at once.
    """
    x = np.asarray(x, dtype=np.int64)
    if x.ndim == 1:
        return find_injective_modulus(x[None, :])[0:1]
    out = np.zeros(x.shape[0], dtype=np.int64)
    if x.size and not np.all(np.diff(np.sort(x, axis=1), axis=1) != 0):  # all rows at once
        raise ToplocError("top-k indices are not distinct")
    small = x.max(axis=1, initial=0) < PRIME  # (C,) distinct indices below the prime: m = PRIME
    out[small] = PRIME
    for row in np.flatnonzero(~small):
        xs = x[row]
        start = PRIME
        block = 64
        while start >= 1:
            cands = np.arange(start, max(start - block, 0), -1, dtype=np.int64)  # (B,)
            mods = np.sort(xs[None, :] % cands[:, None], axis=1)  # (B, n)
            ok = np.all(np.diff(mods, axis=1) != 0, axis=1)  # (B,)
            hit = np.flatnonzero(ok)
            if hit.size:
                out[row] = cands[hit[0]]
                break
            start -= block
            block = min(block * 2, 4096)
        else:  # pragma: no cover - n distinct values always have an injective modulus <= max
            raise ToplocError("no injective modulus found")
    return out


def interpolate(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Coefficients (ascending) of the polynomials through (x, y) over GF(65497), batched.

    x, y: (C, n) integers, x distinct mod p within a row. Returns (C, n) int64. Newton's divided
    differences, then expansion to the standard basis; the polynomial of degree < n through n
    points is unique, so the result matches the reference's O(n²) C++ loop exactly.
    """
    x = np.asarray(x, dtype=np.int64) % PRIME  # (C, n)
    dd = np.asarray(y, dtype=np.int64) % PRIME  # (C, n)
    inv = _inv()
    n = x.shape[1]
    for k in range(1, n):
        num = (dd[:, k:] - dd[:, k - 1 : -1]) % PRIME  # (C, n-k)
        den = (x[:, k:] - x[:, :-k]) % PRIME  # (C, n-k)
        dd[:, k:] = num * inv[den] % PRIME
    coeffs = np.zeros_like(dd)  # (C, n)
    factor = np.zeros_like(dd)  # (C, n): prod_{j<i} (X - x_j), ascending
    factor[:, 0] = 1
    for i in range(n):
        coeffs[:, : i + 1] = (coeffs[:, : i + 1] + dd[:, i : i + 1] * factor[:, : i + 1]) % PRIME
        if i + 1 < n:
            minus_xi = (-x[:, i : i + 1]) % PRIME  # (C, 1)
            shifted = np.zeros_like(factor[:, : i + 2])
            shifted[:, 1:] = factor[:, : i + 1]  # X · factor
            factor[:, : i + 2] = (shifted + factor[:, : i + 2] * minus_xi) % PRIME
    return coeffs


def evaluate_proof(coeffs: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Evaluate polynomials over GF(65497): coeffs (C, n) ascending, x (C, m) -> (C, m).

    Baby-step giant-step instead of Horner, to need ~2·sqrt(n) vector ops rather than n:
    P(x) = sum_a x^(s·a) · sum_b c[s·a + b] · x^b with s = ceil(sqrt(n)). Every partial sum of
    s products of values < p stays below 2**53, so the inner sums run as a float64 matmul.
    """
    coeffs = np.asarray(coeffs, dtype=np.int64)
    x = np.asarray(x, dtype=np.int64) % PRIME
    c, n = coeffs.shape
    s = max(1, int(np.ceil(np.sqrt(n))))
    g = -(-n // s)  # giant steps
    padded = np.zeros((c, g * s), dtype=np.int64)
    padded[:, :n] = coeffs
    blocks = padded.reshape(c, g, s)  # (C, G, S)
    baby = np.empty((*x.shape, s), dtype=np.int64)  # (C, m, S): x^b
    baby[..., 0] = 1
    for b in range(1, s):
        baby[..., b] = baby[..., b - 1] * x % PRIME
    # exact in float64: each sum is < s · 2**32 < 2**53; BLAS matmul instead of an int loop
    inner = np.matmul(baby.astype(np.float64), blocks.transpose(0, 2, 1).astype(np.float64))  # (C, m, G)
    inner = inner.astype(np.int64) % PRIME
    giant_step = baby[..., s - 1] * x % PRIME  # (C, m): x^s
    acc = inner[..., g - 1]
    for a in range(g - 2, -1, -1):  # Horner over the giant steps
        acc = (acc * giant_step + inner[..., a]) % PRIME
    return acc


# ---------------------------------------------------------------------------------------------
# Encoding


def encode_proof(modulus: int, coeffs: np.ndarray) -> bytes:
    """2 bytes modulus + 2 bytes per coefficient, big-endian (the reference's `to_bytes`)."""
    return int(modulus).to_bytes(2, "big") + np.asarray(coeffs, dtype=">u2").tobytes()


def decode_proof(data: bytes, topk: int = TOPK) -> tuple[int, np.ndarray]:
    """Parse one proof; raise ProofFormatError if it is not 2 + 2·topk bytes or ill-formed."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProofFormatError(f"proof must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) != 2 + 2 * topk:
        raise ProofFormatError(f"proof is {len(data)} bytes, expected {2 + 2 * topk} for top-{topk}")
    modulus = int.from_bytes(data[:2], "big")
    if not 1 <= modulus <= PRIME:
        raise ProofFormatError(f"proof modulus {modulus} is outside [1, {PRIME}]")
    coeffs = np.frombuffer(data[2:], dtype=">u2").astype(np.int64)
    if np.any(coeffs >= PRIME):
        raise ProofFormatError(f"proof has a coefficient >= {PRIME}")
    return modulus, coeffs


def proofs_hash(proofs: list[bytes]) -> bytes:
    """32-byte commitment to a sample's proofs, posted on-chain as `proofsHash`.

    sha256(b"intellect.toploc.proofs/v1" || u32be(len(proofs)) || for each proof:
    u32be(len(proof)) || proof). Length prefixes make the encoding unambiguous.
    """
    h = hashlib.sha256(PROOFS_HASH_DOMAIN)
    h.update(len(proofs).to_bytes(4, "big"))
    for proof in proofs:
        proof = bytes(proof)
        h.update(len(proof).to_bytes(4, "big"))
        h.update(proof)
    return h.digest()


# ---------------------------------------------------------------------------------------------
# Building


def n_chunks(n_tokens: int, chunk_size: int = CHUNK_SIZE) -> int:
    """Number of proofs for `n_tokens` decoded tokens."""
    return (n_tokens + chunk_size - 1) // chunk_size


def _as_bf16_2d(hidden: torch.Tensor) -> torch.Tensor:
    import torch

    if not isinstance(hidden, torch.Tensor):
        raise ToplocError(f"hidden states must be a torch.Tensor, got {type(hidden).__name__}")
    if hidden.dim() != 2:
        raise ToplocError(f"hidden states must be (T, H), got shape {tuple(hidden.shape)}")
    if not hidden.is_floating_point():
        raise ToplocError(f"hidden states must be floating point, got {hidden.dtype}")
    with _torch_threads(1):
        return hidden.detach().to("cpu", torch.bfloat16).contiguous()


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run torch ops on `n` intra-op threads, then restore the caller's setting.

    The tensors here are small (32·H values per chunk): on a loaded machine an OpenMP team
    spends far more time waiting than working (measured 30x slower with 2 threads than with 1),
    so proofs are built and checked single-threaded.
    """
    import torch

    before = torch.get_num_threads()
    if before == n:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _bits(hidden_bf16: torch.Tensor) -> np.ndarray:
    """bf16 bit patterns as uint16 (T, H) (no copy)."""
    import torch

    return hidden_bf16.view(torch.int16).numpy().view(np.uint16)


def _all_finite(bits: np.ndarray) -> bool:
    return not bool(np.any((bits & BF16_EXP_MASK) == BF16_EXP_MASK))  # exponent all ones: inf/NaN


def _chunk_topk(hidden_bf16: torch.Tensor, chunk_size: int, topk: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k (by |value|) flat indices and bf16 bit patterns of each chunk.

    Returns idx (C, k) int64 and bits (C, k) int64. The selection is the reference's own call,
    `chunk.abs().topk(k)` on bf16, so equal magnitudes straddling the cut (frequent: bf16 has 128
    mantissa steps per binade) are broken exactly as in the reference; the test vectors include
    such chunks. The last chunk may hold fewer rows; each chunk is flattened on its own.
    """
    import torch

    t, h = hidden_bf16.shape
    flat = hidden_bf16.reshape(-1)  # (T·H,)
    full = t // chunk_size
    parts: list[torch.Tensor] = []
    with _torch_threads(1):
        if full:
            parts.append(
                flat[: full * chunk_size * h].view(full, chunk_size * h).abs().topk(topk, dim=1).indices
            )
        if t % chunk_size:
            parts.append(flat[full * chunk_size * h :].view(1, -1).abs().topk(topk, dim=1).indices)
    idx = torch.cat(parts).numpy().astype(np.int64)  # (C, k) within-chunk flat indices
    offsets = (np.arange(idx.shape[0], dtype=np.int64) * chunk_size * h)[:, None]  # (C, 1)
    vals = _bits(hidden_bf16).reshape(-1)[idx + offsets].astype(np.int64)  # (C, k)
    return idx, vals


def _build_inputs(hidden: torch.Tensor, chunk_size: int, topk: int) -> tuple[np.ndarray, np.ndarray]:
    if chunk_size < 1 or topk < 1:
        raise ToplocError(f"chunk_size and topk must be positive, got {chunk_size}, {topk}")
    hb = _as_bf16_2d(hidden)  # (T, H)
    t, h = hb.shape
    if t == 0:
        raise ToplocError("no hidden states: a proof needs at least one decoded token")
    last_rows = t - (n_chunks(t, chunk_size) - 1) * chunk_size
    if last_rows * h < topk:
        raise ToplocError(f"a chunk of {last_rows} rows × {h} values has fewer than top-{topk} values")
    if not _all_finite(_bits(hb)):
        raise ToplocError("hidden states contain NaN or inf")
    return _chunk_topk(hb, chunk_size, topk)  # (C, k), (C, k)


def _polys(idx: np.ndarray, bits: np.ndarray) -> list[bytes]:
    moduli = find_injective_modulus(idx)  # (C,)
    coeffs = interpolate(idx % moduli[:, None], bits)  # (C, k)
    return [encode_proof(int(m), c) for m, c in zip(moduli, coeffs, strict=True)]


def build_proofs(hidden: torch.Tensor, chunk_size: int = CHUNK_SIZE, topk: int = TOPK) -> list[bytes]:
    """TOPLOC proofs of decoded tokens' last hidden states.

    hidden: (T, H); row i is the last hidden state (input of the LM head) that produced generated
    token i (row 0: the prompt's last position). Any float dtype; converted to bf16 first.
    Returns ceil(T / chunk_size) proofs of 2 + 2·topk bytes each.
    Raises ToplocError if T == 0, a chunk holds fewer than `topk` values, or values are not finite.
    """
    return _polys(*_build_inputs(hidden, chunk_size, topk))


def build_proofs_many(
    hiddens: list[torch.Tensor], chunk_size: int = CHUNK_SIZE, topk: int = TOPK
) -> list[list[bytes]]:
    """`build_proofs` for many samples, interpolating all their chunks as one batch."""
    with _torch_threads(1):  # once for all samples: switching the OpenMP team per sample costs more than a chunk
        parts = [_build_inputs(h, chunk_size, topk) for h in hiddens]
    if not parts:
        return []
    flat = _polys(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
    out, pos = [], 0
    for idx, _ in parts:
        out.append(flat[pos : pos + len(idx)])
        pos += len(idx)
    return out


# ---------------------------------------------------------------------------------------------
# Verification


class ReasonCode(StrEnum):
    """Why a verification failed (stable strings: they go into challenges and logs)."""

    MALFORMED_PROOF = "malformed_proof"  # wrong length, modulus or coefficient out of range
    WRONG_PROOF_COUNT = "wrong_proof_count"  # proofs do not cover the completion's tokens
    BAD_ACTIVATIONS = "bad_activations"  # recomputed states unusable: NaN/inf, wrong shape, empty
    EXP_MISMATCH = "exp_mismatch"  # too many exponent mismatches in a chunk
    MANTISSA_MEAN = "mantissa_mean"  # mean mantissa error above threshold
    MANTISSA_MEDIAN = "mantissa_median"  # median mantissa error above threshold
    IMPLAUSIBLE_TOKEN = "implausible_token"  # a completion token the model would (almost) never sample
    REPLAY_MISMATCH = "replay_mismatch"  # a completion token is not what the seeded sampler draws
    REPLAY_DIFFERING = "replay_differing"  # more tokens of a submission differ from the replay than noise explains
    AGGREGATE_MANTISSA = "aggregate_mantissa"  # mean mantissa error over a whole submission too high
    INVALID_SAMPLE = "invalid_sample"  # tokens outside the vocabulary, empty, or too long to prefill


DEFAULT_MAX_REPLAY_MARGIN = 1.0
"""Default per-token replay tolerance (logit/T units), only as wide as honest numerical noise needs:
honest bf16-vs-fp32 margins reach 0.84 (docs/benchmarks-verifier.md). It was 2.0 until issue 22: a
worker could then pick, at every position, any token within 2.0 of the seeded draw (steering)."""
DEFAULT_REPLAY_TIE_MARGIN = 0.25
"""A token that differs from the validator's draw by at most this margin is a floating-point tie and
is not counted against `max_replay_differing` (honest bf16 samples: p99 of the largest margin 0.23)."""
DEFAULT_MAX_REPLAY_DIFFERING = 2
DEFAULT_MAX_REPLAY_DIFFERING_RATE = 0.002


DEFAULT_MAX_AGG_MANT_ERR_MEAN: float | None = 2.5
"""Default submission-level bound on the mean of the chunks' mantissa-error means: honest bf16
submissions of >= 8 chunks reach 1.7, a 1 % weight perturbation starts at 3.3 (docs/benchmarks-verifier.md)."""
DEFAULT_MIN_AGG_CHUNKS = 8


class Thresholds(BaseModel):
    """Acceptance bounds: per chunk of 128 top-k values, per sample (replay), per submission (aggregate).

    Defaults from the calibration in docs/benchmarks-verifier.md (SmolLM2-135M, 200 samples per
    case, the replayable sampler): honest variation (generation vs prefill, batch 1 vs 50, 1 vs 2
    threads) gives 0 mismatches and 0 replay margin; bf16 vs fp32 compute gives at most 9 exponent
    mismatches, mantissa mean 2.27, median 2 per chunk, replay margins up to 0.84 and a submission
    mean (≥ 8 chunks) up to 1.7. The defaults sit about 2x above that (never accuse an honest bf16
    worker) and catch every attack measured at 100 %: other models and int8 per chunk, altered,
    foreign or cherry-picked tokens by the replay, a 1 % weight perturbation by the aggregate.
    `Thresholds.fp32()` is the strict per-chunk profile for pools that require fp32 compute.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_exp_mismatches: int = Field(default=18, ge=0)
    """Most top-k values whose bf16 exponent may differ (of 128)."""
    max_mant_err_mean: float = Field(default=5.0, ge=0)
    """Largest mean |mantissa difference| (7-bit bf16 mantissa units) over matching exponents."""
    max_mant_err_median: float = Field(default=4.0, ge=0)
    """Largest median of the same."""
    max_replay_margin: float | None = Field(default=DEFAULT_MAX_REPLAY_MARGIN, ge=0)
    """Largest replay margin (logit/T units) of any completion token of a seeded sample:
    max_j score_j − score_token under the replayed Gumbel-max sampler (`intellect.verifier.replay`);
    None disables the replay check."""
    replay_tie_margin: float = Field(default=DEFAULT_REPLAY_TIE_MARGIN, ge=0)
    """A completion token whose replay margin is at most this is a floating-point tie with the
    validator's draw; above it (and up to `max_replay_margin`) it counts as a differing token."""
    max_replay_differing: int = Field(default=DEFAULT_MAX_REPLAY_DIFFERING, ge=0)
    """Per submission: differing tokens allowed on top of `max_replay_differing_rate` × its tokens
    (`check_replay_budget`). Honest pairs differ at the rate of their numerical noise; a worker that
    steers its completions, or generates with a cheaper model and proves with the real one, differs
    at every position it changed."""
    max_replay_differing_rate: float = Field(default=DEFAULT_MAX_REPLAY_DIFFERING_RATE, ge=0)
    """Per submission: differing tokens allowed per replayed token (see `max_replay_differing`)."""
    max_agg_mant_err_mean: float | None = Field(default=DEFAULT_MAX_AGG_MANT_ERR_MEAN, ge=0)
    """Largest mean, over all chunks of all samples of a submission, of the chunks' mantissa-error
    means (`check_aggregate`). A model that differs a little everywhere (a 1 % weight perturbation)
    raises every chunk a little: hidden in bf16 noise per chunk, plain in the mean of many chunks.
    None disables."""
    min_agg_chunks: int = Field(default=DEFAULT_MIN_AGG_CHUNKS, ge=1)
    """`check_aggregate` judges only submissions with at least this many chunks (fewer: too noisy)."""

    @classmethod
    def fp32(cls) -> Thresholds:
        """Strict profile for pools that require fp32 compute from workers and validators.

        bf16 rounding of fp32 states hides kernel, batch and thread differences almost entirely,
        so the bounds can be tight: a 1 % weight perturbation fails per chunk, not only in the
        submission aggregate; ~27 % of honest bf16 workers fail it (docs/benchmarks-verifier.md).
        The sampler is exact too: honest fp32 pairs replay with margin 0.00 and no differing token
        (docs/benchmarks-verifier.md), so the per-token tolerance is 0.05 and every differing token
        counts, one allowed per 1,000 replayed tokens (none in a submission of fewer).
        """
        return cls(max_exp_mismatches=4, max_mant_err_mean=1.5, max_mant_err_median=1.0,
                   max_replay_margin=0.05, replay_tie_margin=0.0, max_replay_differing=0,
                   max_replay_differing_rate=0.001)


DEFAULT_THRESHOLDS = Thresholds()

PROFILES: dict[str, Thresholds] = {"mixed": DEFAULT_THRESHOLDS, "fp32": Thresholds.fp32()}
"""The verification profiles a pool's rules name (`toploc_profile`), each one `Thresholds`: the TOPLOC bounds,
the per-token replay tolerance and tie margin, and the per-submission budget of differing tokens together.
`mixed` (the default): workers and validators in bf16 or fp32, on any hardware (an honest bf16 worker against
an fp32 validator passes); `fp32`: every node computes in fp32 (exact replay, strict TOPLOC)."""
PROFILE_ALIASES = {"reference": "mixed"}
"""Older names: `reference` (the reference implementation's mixed-precision bounds) is `mixed`."""


def profile(name: str) -> Thresholds:
    """The `Thresholds` of profile `name` (`mixed`, `fp32`, or an alias); `ValueError` for an unknown name."""
    key = PROFILE_ALIASES.get(name, name)
    if key not in PROFILES:
        raise ValueError(f"unknown verification profile {name!r} (known: {', '.join(PROFILES)})")
    return PROFILES[key]


class ReplayStats(BaseModel):
    """Replay of a seeded sample's sampler: margins (logit/T units) of its completion tokens."""

    model_config = ConfigDict(frozen=True)

    max_margin: float
    mean_margin: float
    flips: int
    """positions whose token is not the replayed argmax (margin > 0)"""
    positions: int
    differing: int = 0
    """positions whose margin exceeds the thresholds' `replay_tie_margin` (counted per submission)"""
    margins: tuple[float, ...] = ()
    """the margins of the tokens that are not the replayed argmax (margin > 0; +inf for a token the mask
    excludes), in position order: the per-token evidence `intellect.verifier.evidence` accumulates"""


class ChunkStats(BaseModel):
    """The three TOPLOC statistics of one chunk."""

    model_config = ConfigDict(frozen=True)

    exp_mismatches: int
    mant_err_mean: float
    mant_err_median: float


class VerificationResult(BaseModel):
    """Outcome of checking one sample's proofs. `reason` is None iff `ok`."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    reason: ReasonCode | None = None
    detail: str = ""
    chunks: list[ChunkStats] = Field(default_factory=list)
    failed_chunk: int | None = None
    replay: ReplayStats | None = None
    """set by `verify_samples` for samples that carry a sampler seed"""


def _fp_parts(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (bits & BF16_EXP_MASK) >> 7, bits & BF16_MANT_MASK


def _prepare(
    hidden: torch.Tensor, proofs: list[bytes], chunk_size: int, topk: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate one sample; return its chunks' (top-k idx, bits, moduli, coeffs)."""
    hb = _as_bf16_2d(hidden)
    t, h = hb.shape
    if t == 0:
        raise ToplocError("no hidden states to check")
    if len(proofs) != n_chunks(t, chunk_size):
        raise ToplocError(f"{len(proofs)} proofs for {t} tokens, expected {n_chunks(t, chunk_size)}")
    decoded = [decode_proof(p, topk) for p in proofs]
    last_rows = t - (len(proofs) - 1) * chunk_size
    if last_rows * h < topk:
        raise ToplocError(f"a chunk of {last_rows} rows × {h} values has fewer than top-{topk} values")
    if not _all_finite(_bits(hb)):
        raise ToplocError("hidden states contain NaN or inf")
    idx, bits = _chunk_topk(hb, chunk_size, topk)  # (C, k)
    moduli = np.array([m for m, _ in decoded], dtype=np.int64)  # (C,)
    coeffs = np.stack([c for _, c in decoded])  # (C, k)
    return idx, bits, moduli, coeffs


def _chunk_stats(
    idx: np.ndarray, bits: np.ndarray, moduli: np.ndarray, coeffs: np.ndarray
) -> list[ChunkStats]:
    """The three statistics of every chunk, vectorised over chunks: (C, k) inputs."""
    claimed = evaluate_proof(coeffs, idx % moduli[:, None])  # (C, k) claimed bf16 bits
    exp_c, mant_c = _fp_parts(claimed)
    exp_r, mant_r = _fp_parts(bits)
    match = exp_c == exp_r  # (C, k)
    n_match = match.sum(axis=1)  # (C,)
    err = np.where(match, np.abs(mant_c - mant_r), np.iinfo(np.int64).max)  # (C, k), mismatches last
    err_sorted = np.sort(err, axis=1)
    sums = np.where(match, err, 0).sum(axis=1)
    # upper median of the matching values, as the reference's C++ (`errs[size / 2]`)
    med = err_sorted[np.arange(len(idx)), np.minimum(n_match // 2, idx.shape[1] - 1)]
    big = float(2**64)
    return [
        ChunkStats.model_construct(
            exp_mismatches=int(idx.shape[1] - n_match[c]),
            mant_err_mean=float(sums[c] / n_match[c]) if n_match[c] else big,
            mant_err_median=float(med[c]) if n_match[c] else big,
        )
        for c in range(len(idx))
    ]


def check_proofs(
    hidden: torch.Tensor, proofs: list[bytes], chunk_size: int = CHUNK_SIZE, topk: int = TOPK
) -> list[ChunkStats]:
    """Statistics of each chunk (no thresholds). Raises ToplocError/ProofFormatError on bad input."""
    return _chunk_stats(*_prepare(hidden, proofs, chunk_size, topk))


def check_proofs_many(
    hiddens: list[torch.Tensor], proofs: list[list[bytes]], chunk_size: int = CHUNK_SIZE, topk: int = TOPK
) -> list[list[ChunkStats] | ToplocError]:
    """`check_proofs` for many samples in one vectorised pass; a bad sample yields its error."""
    prepared: list[tuple[np.ndarray, ...] | ToplocError] = []
    with _torch_threads(1):
        for h, p in zip(hiddens, proofs, strict=True):
            try:
                prepared.append(_prepare(h, p, chunk_size, topk))
            except ToplocError as exc:
                prepared.append(exc)
    good = [x for x in prepared if not isinstance(x, ToplocError)]
    stats = _chunk_stats(*(np.concatenate(parts) for parts in zip(*good, strict=True))) if good else []
    out: list[list[ChunkStats] | ToplocError] = []
    pos = 0
    for x in prepared:
        if isinstance(x, ToplocError):
            out.append(x)
        else:
            out.append(stats[pos : pos + len(x[0])])
            pos += len(x[0])
    return out


def _precheck(
    hidden: torch.Tensor, proofs: list[bytes], chunk_size: int, topk: int
) -> VerificationResult | None:
    """Structural checks (proof bytes, shapes, count); a failing VerificationResult or None."""
    if not isinstance(proofs, list | tuple):
        return VerificationResult(
            ok=False,
            reason=ReasonCode.MALFORMED_PROOF,
            detail=f"proofs must be a list of bytes, got {type(proofs).__name__}",
        )
    for i, p in enumerate(proofs):
        try:
            decode_proof(p, topk)
        except ProofFormatError as exc:
            return VerificationResult(
                ok=False, reason=ReasonCode.MALFORMED_PROOF, detail=f"proof {i}: {exc}", failed_chunk=i
            )
    try:
        hb = _as_bf16_2d(hidden)
    except ToplocError as exc:
        return VerificationResult(ok=False, reason=ReasonCode.BAD_ACTIVATIONS, detail=str(exc))
    expected = n_chunks(hb.shape[0], chunk_size)
    if hb.shape[0] == 0 or len(proofs) != expected:
        return VerificationResult(
            ok=False,
            reason=ReasonCode.WRONG_PROOF_COUNT,
            detail=f"{len(proofs)} proofs for {hb.shape[0]} tokens, expected {expected}",
        )
    return None


def _judge(stats: list[ChunkStats], thresholds: Thresholds) -> VerificationResult:
    for i, s in enumerate(stats):
        reason = None
        if s.exp_mismatches > thresholds.max_exp_mismatches:
            reason = ReasonCode.EXP_MISMATCH
        elif s.mant_err_mean > thresholds.max_mant_err_mean:
            reason = ReasonCode.MANTISSA_MEAN
        elif s.mant_err_median > thresholds.max_mant_err_median:
            reason = ReasonCode.MANTISSA_MEDIAN
        if reason is not None:
            return VerificationResult(
                ok=False,
                reason=reason,
                detail=f"chunk {i}: {s.exp_mismatches} exponent mismatches, mantissa error mean "
                f"{s.mant_err_mean:.2f} median {s.mant_err_median:.1f}",
                chunks=stats,
                failed_chunk=i,
            )
    return VerificationResult(ok=True, chunks=stats)


def check_aggregate(results: Sequence[VerificationResult], thresholds: Thresholds = DEFAULT_THRESHOLDS) -> VerificationResult:
    """Submission-level check over the per-sample results of one submission (e.g. `verify_samples`'s).

    Fails with `aggregate_mantissa` if the mean over all their chunks of the chunks' mantissa-error
    means exceeds `thresholds.max_agg_mant_err_mean` (chunks with no matching exponent are left
    out; they already failed). Passes when disabled or with fewer than `min_agg_chunks` chunks.
    """
    bound = thresholds.max_agg_mant_err_mean
    means = [c.mant_err_mean for r in results for c in r.chunks if c.mant_err_mean < 2.0**64]
    if bound is None or len(means) < thresholds.min_agg_chunks:
        return VerificationResult(ok=True)
    mean = sum(means) / len(means)
    if mean > bound:
        return VerificationResult(
            ok=False,
            reason=ReasonCode.AGGREGATE_MANTISSA,
            detail=f"mean mantissa error {mean:.2f} over the submission's {len(means)} chunks > {bound}",
        )
    return VerificationResult(ok=True, detail=f"mean mantissa error {mean:.2f} over {len(means)} chunks")


def replay_differing_allowed(tokens: int, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> int:
    """Differing tokens a submission of `tokens` replayed tokens may hold (`check_replay_budget`)."""
    return thresholds.max_replay_differing + int(thresholds.max_replay_differing_rate * tokens)


def check_replay_budget(results: Sequence[VerificationResult], thresholds: Thresholds = DEFAULT_THRESHOLDS) -> VerificationResult:
    """Submission-level sampling check: how many completion tokens differ from the validator's own draw.

    The per-token tolerance (`max_replay_margin`) absorbs floating-point noise, so within it a worker
    could still pick its tokens: steer towards answers it likes, or generate with a cheaper model and
    prove with the real one. Each such token differs from the replayed draw; honest pairs differ
    only at the rate of their numerical noise. Fails with `replay_differing` when the samples'
    `replay.differing` add up to more than `replay_differing_allowed(replayed tokens)`.
    """
    replayed = [r.replay for r in results if r.replay is not None]
    tokens = sum(s.positions for s in replayed)
    differing = sum(s.differing for s in replayed)
    allowed = replay_differing_allowed(tokens, thresholds)
    if differing > allowed:
        worst = max(range(len(results)), key=lambda i: results[i].replay.differing if results[i].replay else -1)
        return VerificationResult(
            ok=False,
            reason=ReasonCode.REPLAY_DIFFERING,
            detail=f"{differing} of {tokens} completion tokens differ from the seeded sampler's draw by more than "
            f"{thresholds.replay_tie_margin} (allowed {allowed}; most in sample {worst}): not the sampler's output",
        )
    return VerificationResult(ok=True, detail=f"{differing} of {tokens} tokens differ (allowed {allowed})")


def _error_result(exc: Exception) -> VerificationResult:
    if isinstance(exc, ProofFormatError):
        return VerificationResult(ok=False, reason=ReasonCode.MALFORMED_PROOF, detail=str(exc))
    if isinstance(exc, ToplocError):
        return VerificationResult(ok=False, reason=ReasonCode.BAD_ACTIVATIONS, detail=str(exc))
    logger.error("unexpected error while verifying proofs: %s: %s", type(exc).__name__, exc)
    return VerificationResult(
        ok=False, reason=ReasonCode.BAD_ACTIVATIONS, detail=f"{type(exc).__name__}: {exc}"
    )


def verify_proofs(
    hidden: torch.Tensor,
    proofs: list[bytes],
    *,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    chunk_size: int = CHUNK_SIZE,
    topk: int = TOPK,
) -> VerificationResult:
    """Check a sample's proofs against recomputed hidden states (T, H).

    Never raises on bad proofs or activations: returns ok=False with a ReasonCode.
    """
    return verify_proofs_many([hidden], [proofs], thresholds=thresholds, chunk_size=chunk_size, topk=topk)[0]


def verify_proofs_many(
    hiddens: list[torch.Tensor],
    proofs: list[list[bytes]],
    *,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    chunk_size: int = CHUNK_SIZE,
    topk: int = TOPK,
) -> list[VerificationResult]:
    """`verify_proofs` for many samples; the polynomial checks of all chunks run as one batch."""
    results: list[VerificationResult | None] = []
    todo: list[int] = []
    for i, (h, p) in enumerate(zip(hiddens, proofs, strict=True)):
        try:
            pre = _precheck(h, p, chunk_size, topk)
        except Exception as exc:  # never let one bad sample take the validator down
            pre = _error_result(exc)
        results.append(pre)
        if pre is None:
            todo.append(i)
    try:
        checked = check_proofs_many(
            [hiddens[i] for i in todo], [list(proofs[i]) for i in todo], chunk_size, topk
        )
    except Exception as exc:  # pragma: no cover - _prepare already turns bad input into errors
        checked = [exc] * len(todo)
    for i, c in zip(todo, checked, strict=True):
        results[i] = _error_result(c) if isinstance(c, Exception) else _judge(c, thresholds)
    return [r for r in results if r is not None]


def rejudge(results: Sequence[VerificationResult], thresholds: Thresholds) -> list[VerificationResult]:
    """The per-sample results of a looser profile's `verify_samples` judged again under `thresholds` (stricter),
    with no model work: each passing sample's chunks against the per-chunk bounds, its replay margins against
    the per-token tolerance, its differing tokens recounted at the tie margin. A failed sample stays failed."""
    out: list[VerificationResult] = []
    for r in results:
        if not r.ok:
            out.append(r)
            continue
        j = _judge(list(r.chunks), thresholds)
        if j.ok and r.replay is not None:
            rp = r.replay
            rp = rp.model_copy(update={"differing": sum(1 for m in rp.margins if m > thresholds.replay_tie_margin)})
            j = j.model_copy(update={"replay": rp})
            if thresholds.max_replay_margin is not None and not rp.max_margin <= thresholds.max_replay_margin:
                j = j.model_copy(update={"ok": False, "reason": ReasonCode.REPLAY_MISMATCH,
                                         "detail": f"replay margin {rp.max_margin:.3g} > "
                                                   f"{thresholds.max_replay_margin}"})
        elif r.replay is not None:
            j = j.model_copy(update={"replay": r.replay})
        out.append(j)
    return out
