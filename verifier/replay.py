"""A verifiable sampler: Gumbel-max sampling with noise that anyone can recompute.

TOPLOC commits to the hidden states that *produced* each token, not to the token drawn from
them, so a token altered after generation is nearly invisible to it (the last one entirely).
This module closes that gap: a worker samples token t at decoding position p of completion c as

    t = argmax_j ( masked(logits_j / T) + g_j ),   g = gumbel_noise(seed_c, p, V)

which is exactly a draw from the temperature / top-k / top-p distribution (the Gumbel-max
trick), but the noise g is a pure function of (seed_c, p, j). A validator that recomputes the
logits with one prefill can therefore *replay* the sampler and check that every completion
token is the argmax; `replay_margins` gives, per position, by how much it is not (0 when it
is). Honest workers differ from the validator only by floating-point noise in the logits
(bf16 vs fp32, kernels, batch shapes), which a small tolerance on the margin absorbs; an
altered token, a completion of another prompt or another seed shows margins of whole logits.

Noise, bit-identical on every machine and never from a GPU RNG:
- per position p, a 64-bit key `k_p` = splitmix64 of (seed, p) (numpy uint64, wrap-around
  defined), folded to 32 bits;
- per vocabulary entry j, `h_j = lowbias32(j ^ 0x9E3779B9)` (computed once per vocabulary size);
- the element's 32-bit word is `lowbias32(k_p ^ h_j)` (numpy uint32: exact integer ops);
- its top 23 bits m give u = (m + 0.5) · 2⁻²³ ∈ (0, 1), exact in float32;
- g = −log(−log u) with a logarithm written out in IEEE float32 additions, multiplications
  and one division (range reduction by the exponent bits, then 2·atanh series): every step is
  correctly rounded, so the result does not depend on the CPU's libm or vector width.
u has 2²³ levels, the resolution of `torch.rand` in float32: g is Gumbel(0, 1) truncated to
[−2.8, 16.6], i.e. a tail mass of < 10⁻⁷ per value is moved to the nearest level.

`sample_seed(base_seed, index)` gives each completion of a generation call its own stream, so
a validator recomputes a row's noise from the call's seed (derived from the chain's claim
seed) and the row's index, whatever batch the worker generated it in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = [
    "SEED_DOMAIN",
    "gumbel_noise",
    "gumbel_noise_many",
    "gumbel_sample",
    "masked_scores",
    "problem_seed",
    "replay_margins",
    "sample_seed",
]

SEED_DOMAIN = b"intellect.replay.seed/v1"
"""Domain separator of `sample_seed`'s sha256."""

_U64 = np.uint64
_BLOCK_ELEMENTS = 1 << 18  # noise is built in blocks of ~256k values (1 MiB float32: stays in L2)
_LN2_HI = np.float32(0.693145751953125)  # ln 2 split so that e·ln2 is exact for |e| < 2^11
_LN2_LO = np.float32(1.428606765330187e-06)
_SQRT2 = np.float32(1.4142135)
_ONE = np.float32(1.0)
_HALF = np.float32(0.5)
_TWO = np.float32(2.0)
_INV = [np.float32(1.0 / n) for n in (3, 5, 7, 9)]


def sample_seed(base_seed: int, index: int) -> int:
    """63-bit seed of completion `index` of a generation call seeded `base_seed` (sha256-derived).

    sha256(SEED_DOMAIN || u64be(base_seed) || u64be(index)), first 8 bytes big-endian, top bit
    cleared. Both arguments must fit in an unsigned 64-bit integer.
    """
    if not 0 <= int(base_seed) < 1 << 64:
        raise ValueError(f"base_seed {base_seed} is outside [0, 2^64)")
    if not 0 <= int(index) < 1 << 64:
        raise ValueError(f"index {index} is outside [0, 2^64)")
    digest = hashlib.sha256(
        SEED_DOMAIN + int(base_seed).to_bytes(8, "big") + int(index).to_bytes(8, "big")
    ).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def problem_seed(claim_seed: bytes, index: int) -> int:
    """Base seed of the generation call for problem `index` of a claim drawn with `claim_seed`.

    u64be(claim_seed[:8]) mod 2^62 + index: the worker passes it as `SamplingParams.seed` for the
    problem's group, whose completion i then samples with `sample_seed(problem_seed, i)`; a
    validator recomputes both from the chain's claim seed and the row's place in the file.
    """
    if len(claim_seed) < 8:
        raise ValueError(f"claim seed of {len(claim_seed)} bytes, need at least 8")
    if index < 0:
        raise ValueError(f"problem index must be >= 0, got {index}")
    return int.from_bytes(claim_seed[:8], "big") % (1 << 62) + index


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on uint64 (numpy wraps uint64 arithmetic modulo 2^64)."""
    x = x + _U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def _lowbias32(x: np.ndarray) -> np.ndarray:
    """Chris Wellons' lowbias32 integer hash on uint32 (in place on a fresh array)."""
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


@lru_cache(maxsize=8)
def _vocab_hash(vocab_size: int) -> np.ndarray:
    h = _lowbias32(np.arange(vocab_size, dtype=np.uint32) ^ np.uint32(0x9E3779B9))  # (V,)
    h.setflags(write=False)
    return h


def _position_keys(seeds: Sequence[int] | np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(P,) uint32 keys of (seeds[r], positions[r]) (a single seed broadcasts; `seeds` is 1-D).

    The seeds are read as Python ints one by one: `np.atleast_1d` on a list that mixes a seed ≥ 2^63 with smaller
    ones would infer float64 and round the large seed (2^63 + 1 became 2^63)."""
    sd = np.asarray([int(x) for x in seeds], dtype=object)
    if sd.size and (min(sd) < 0 or max(sd) >= 1 << 64):
        raise ValueError(f"seeds must be in [0, 2^64), got {min(sd)} .. {max(sd)}")
    if positions.size and int(positions.min()) < 0:
        raise ValueError(f"positions must be >= 0, got {int(positions.min())}")
    sd64 = np.broadcast_to(sd.astype(_U64), positions.shape)
    k = _splitmix64(_splitmix64(sd64) ^ positions.astype(_U64))
    return ((k >> _U64(32)) ^ k).astype(np.uint32)


def _log(x: np.ndarray) -> np.ndarray:
    """Natural log of positive normal float32 values using only correctly rounded IEEE ops.

    x = 2^e · m, m ∈ [√½, √2); log m = 2·atanh(s), s = (m−1)/(m+1), |s| < 0.172: the series
    to s⁹ leaves < 4·10⁻¹⁰ absolute error, below float32's resolution of the result.
    """
    bits = x.view(np.int32)
    e = (bits >> 23) - 127  # (..) unbiased exponent (inputs are normal)
    m = ((bits & 0x007FFFFF) | 0x3F800000).view(np.float32)  # mantissa in [1, 2)
    big = m > _SQRT2
    m = np.where(big, m * _HALF, m)
    e = (e + big).astype(np.float32)
    s = (m - _ONE) / (m + _ONE)
    z = s * s
    p = z * _INV[3] + _INV[2]
    p = p * z + _INV[1]
    p = p * z + _INV[0]
    p = p * z + _ONE
    return e * _LN2_HI + (e * _LN2_LO + _TWO * s * p)


def _words(keys: np.ndarray, vh: np.ndarray) -> np.ndarray:
    """(P, V) uint32 random words for position keys (P,) and vocabulary hashes (V,)."""
    return _lowbias32(keys[:, None] ^ vh[None, :])


def _gumbel_of_words(words: np.ndarray) -> np.ndarray:
    """Gumbel(0, 1) float32 of random words (any shape): THE definition of the noise."""
    u = ((words >> np.uint32(9)).astype(np.float32) + _HALF) * np.float32(2.0**-23)  # (0, 1), exact
    return -_log(-_log(u))


_DENSE_FRACTION = 0.2  # above this share of a block passing stage 1, stage 2 runs dense (measured crossover)
_BUCKET_SHIFT = np.uint32(20)  # 4096 buckets by the top 12 bits of a word; g is increasing in the word


@lru_cache(maxsize=1)
def _bucket_bounds() -> tuple[np.ndarray, np.ndarray]:
    """(4096,) lower / upper bounds of g over each bucket of words, with slack for rounding."""
    b = np.arange(4096, dtype=np.uint32)
    lo = _gumbel_of_words(b << _BUCKET_SHIFT) - np.float32(1e-4)
    hi = _gumbel_of_words(((b + np.uint32(1)) << _BUCKET_SHIFT) - np.uint32(1)) + np.float32(1e-4)
    lo.setflags(write=False)
    hi.setflags(write=False)
    return lo, hi


def _noisy_max(
    scores: np.ndarray, keys: np.ndarray, vh: np.ndarray, floor0: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise argmax and max of scores + noise, (P,) int64 and (P,) float32, for (P, V) scores.

    Equal to `argmax(scores + gumbel)` with the full noise (ties to the lowest index), but g is
    hashed only where it can matter, in three stages per row:
    1. `floor0`, a score + noise some token of the row surely reaches (default: the exact noisy
       score of the row's largest logit; the replay passes the claimed token's): a token j can
       only beat it if s_j >= floor0 - G_MAX (G_MAX = the noise's largest value), one compare
       over the row, which keeps ~10-20 % of a language model's vocabulary;
    2. for those, the word's bucket (top 12 bits) bounds g from below and above: the row's best
       lower bound raises the floor, and only tokens whose upper bound reaches it remain;
    3. g exactly (the same float32 ops as `gumbel_noise_many`) for the few that remain.
    """
    lo_t, hi_t = _bucket_bounds()
    g_max = hi_t[-1]  # the largest upper bound: no token's noise exceeds it
    p_all = scores.shape[0]
    best_idx = np.zeros(p_all, dtype=np.int64)
    best_val = np.full(p_all, np.nan, dtype=np.float32)  # stays NaN for a row of NaN scores
    if p_all == 0:
        return best_idx, best_val
    if floor0 is None:
        top = np.argmax(scores, axis=1)  # (P,)
        floor0 = scores[np.arange(p_all), top] + _gumbel_of_words(_lowbias32(keys ^ vh[top]))  # (P,)
    step = max(1, _BLOCK_ELEMENTS // max(1, scores.shape[1]))
    for start in range(0, p_all, step):
        s = scores[start : start + step]  # (p, V)
        f0 = floor0[start : start + step]  # (p,)
        mask = s >= (f0 - g_max)[:, None]  # stage 1
        kept = int(np.count_nonzero(mask))
        if kept == 0:
            continue
        if kept > _DENSE_FRACTION * mask.size:
            # flat logits keep most of the row: contiguous passes over all of it beat gathers
            bucket = _words(keys[start : start + step], vh) >> _BUCKET_SHIFT  # (p, V)
            floor = np.maximum((s + lo_t[bucket]).max(axis=1), f0)  # (p,)
            rows, cols = np.nonzero(s + hi_t[bucket] >= floor[:, None])  # stage 2
            exact = s[rows, cols] + _gumbel_of_words(_lowbias32(keys[start + rows] ^ vh[cols]))  # stage 3
        else:
            rows, cols = np.nonzero(mask)  # sorted by row, then column
            sc = s[rows, cols]  # (n,)
            words = _lowbias32(keys[start + rows] ^ vh[cols])  # (n,)
            bucket = words >> _BUCKET_SHIFT
            firsts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])  # each present row's first entry
            floor = np.full(s.shape[0], np.inf, dtype=np.float32)
            floor[rows[firsts]] = np.maximum(np.maximum.reduceat(sc + lo_t[bucket], firsts), f0[rows[firsts]])
            keep = np.flatnonzero(sc + hi_t[bucket] >= floor[rows])  # stage 2
            rows, cols = rows[keep], cols[keep]
            exact = sc[keep] + _gumbel_of_words(words[keep])  # stage 3, (n,)
        # per row: the largest exact score, ties to the lowest index (rows, cols come sorted)
        order = np.lexsort((cols, -exact, rows))
        first = np.ones(order.size, dtype=bool)
        first[1:] = rows[order][1:] != rows[order][:-1]
        pick = order[first]
        best_idx[start + rows[pick]] = cols[pick]
        best_val[start + rows[pick]] = exact[pick]
    return best_idx, best_val


def gumbel_noise_many(seed: int, positions: Sequence[int] | np.ndarray, vocab_size: int) -> torch.Tensor:
    """(P, V) float32 Gumbel(0, 1) noise, row r = `gumbel_noise(seed, positions[r], vocab_size)`.

    Vectorised over positions (in blocks that stay in cache). The definition of the noise;
    sampling and replay compute the same values only where they can matter (`_noisy_max`).
    """
    import torch

    if vocab_size < 1:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    keys = _position_keys([seed], pos)
    vh = _vocab_hash(int(vocab_size))
    out = np.empty((pos.size, vocab_size), dtype=np.float32)
    step = max(1, _BLOCK_ELEMENTS // vocab_size)
    for start in range(0, pos.size, step):
        out[start : start + step] = _gumbel_of_words(_words(keys[start : start + step], vh))
    return torch.from_numpy(out)


def gumbel_noise(seed: int, position: int, vocab_size: int) -> torch.Tensor:
    """(V,) float32 Gumbel(0,1) noise for decoding position `position` (0 = first completion token),
    bit-identical on every machine (counter-based integer hash and IEEE float32 ops; never a GPU RNG).
    """
    return gumbel_noise_many(seed, [position], vocab_size)[0]


def masked_scores(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """(B, V) float32 logits / T with tokens outside top-k / top-p set to −inf (T > 0).

    Top-p keeps a token while the probability mass of the tokens ranked before it is < top_p
    (so the most likely token is always kept), the same rule as the engines' multinomial path.
    """
    import torch

    if temperature <= 0:
        raise ValueError(f"masked_scores needs temperature > 0, got {temperature}")
    scores = logits.float()  # (B, V)
    if temperature != 1.0:  # x / 1.0 == x exactly: skip the copy
        scores = scores / temperature
    if 0 < top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]  # (B, 1)
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        sorted_scores, order = torch.sort(scores, dim=-1, descending=True)  # (B, V)
        probs = torch.softmax(sorted_scores, dim=-1)
        drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p  # mass before the token reaches top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores


def gumbel_sample(
    logits: torch.Tensor,
    seeds: Sequence[int],
    positions: Sequence[int],
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
) -> torch.Tensor:
    """(B,) token ids = argmax(masked(logits.float()/T) + g): exactly a sample from the
    temperature/top-k/top-p distribution, but replayable from (seed, position).

    `logits` (B, V) on any device (the noise is made on the CPU and moved there); row b uses
    `gumbel_noise(seeds[b], positions[b], V)`. temperature 0 is plain greedy (argmax of logits).
    """
    if logits.dim() != 2 or logits.shape[0] != len(seeds):
        raise ValueError(f"logits must be (B, V) with B = {len(seeds)} seeds, got {tuple(logits.shape)}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    import torch

    if len(positions) != len(seeds):
        raise ValueError(f"{len(seeds)} seeds but {len(positions)} positions")
    scores = masked_scores(logits, temperature, top_k, top_p).cpu().numpy()  # (B, V)
    keys = _position_keys(seeds, np.asarray(positions, dtype=np.int64))
    idx, _ = _noisy_max(scores, keys, _vocab_hash(scores.shape[1]))
    return torch.from_numpy(idx).to(logits.device)


def replay_margins(
    logits: torch.Tensor,
    tokens: Sequence[int],
    seed: int,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
) -> torch.Tensor:
    """(T,) max_j score_j − score_token ≥ 0 per position (0 where the token is the argmax).

    `logits` (T, V): row p = the logits that produced completion token p (position p of the
    seed's stream). Scores are `masked(logits/T) + g` (T > 0) or the raw logits (T = 0, greedy),
    so margins are in units of logit/T. A token the mask excludes gets +inf.
    """
    import torch

    if logits.dim() != 2 or logits.shape[0] != len(tokens):
        raise ValueError(f"logits must be (T, V) with T = {len(tokens)} tokens, got {tuple(logits.shape)}")
    ids = torch.tensor([int(t) for t in tokens], dtype=torch.long, device=logits.device)  # (T,)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= logits.shape[-1]):
        raise ValueError(f"token ids must be in [0, {logits.shape[-1]})")
    if temperature == 0:
        scores = logits.float()  # (T, V)
        margins = scores.max(dim=-1).values - scores.gather(-1, ids[:, None]).squeeze(-1)
    else:
        s = masked_scores(logits, temperature, top_k, top_p).cpu().numpy()  # (T, V)
        tok = ids.cpu().numpy()
        keys = _position_keys([seed], np.arange(len(tok), dtype=np.int64))
        vh = _vocab_hash(s.shape[1])
        own = s[np.arange(len(tok)), tok] + _gumbel_of_words(_lowbias32(keys ^ vh[tok]))  # (T,)
        # the claimed token's own score is reached by construction: it is the stage-1 floor
        _, best = _noisy_max(s, keys, vh, floor0=np.where(np.isfinite(own), own, np.float32(-np.inf)))  # (T,)
        margins = torch.from_numpy(best - own)
    return torch.where(torch.isnan(margins), torch.full_like(margins, float("inf")), margins).cpu()
