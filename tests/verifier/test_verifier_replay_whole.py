"""`verifier/replay.py`'s noise and `_noisy_max` pinned where mutmut's whole-module run found them loose (issue 39):
the logarithm's range reduction at m = sqrt(2) exactly, the stage-1 and stage-2 bounds at scores so large that the
noise rounds away, a block of NaN rows before a normal one, and the sparse path with more rows than tokens.
docs/benchmarks-security.md ("mutmut") lists the mutants; tools/mutmut_equivalent.txt the equivalent ones."""

from __future__ import annotations

import math

import numpy as np
import torch

from intellect.verifier.replay import gumbel_noise, gumbel_sample, replay_margins


def test_the_noise_whose_uniform_has_mantissa_sqrt2_is_the_correctly_rounded_gumbel() -> None:
    """u = (m + 0.5) * 2^-23 with m = 5931641 is 11863283 / 2^24, whose float32 mantissa is exactly float32(sqrt 2):
    the range reduction keeps m = sqrt 2 (only m > sqrt 2 is halved), and the noise is -log(-log u) correctly rounded
    to float32 (0x3F87A2F1). (seed 0, position 39, token 77733) is the first place of seed 0 whose word has those top
    23 bits; halving at m = sqrt 2 too gives the float32 one below."""
    u = 11863283 / 2**24
    assert np.float32(u) / np.float32(2.0**-1) == np.float32(math.sqrt(2))  # the mantissa is float32(sqrt 2)
    g = gumbel_noise(0, 39, 77734)[77733]
    want = np.float32(-math.log(-math.log(u)))
    assert float(g) == float(want)
    assert np.array([float(g)], dtype=np.float32).view(np.uint32)[0] == 0x3F87A2F1


def _dominant(vocab: int, token: int, value: float) -> torch.Tensor:
    logits = torch.zeros(1, vocab)
    logits[0, token] = value
    return logits


def test_a_score_too_large_for_the_noise_to_move_is_drawn_and_replayed_with_margin_zero() -> None:
    """At 2^30 a float32 step is 128, so score + noise rounds to the score for every noise value and the stage-1 floor
    f0 - G_MAX rounds back to f0: the dominant token reaches the floor only with >= (stage 1) and its upper bound
    equals it (stage 2, >=). Ten tokens take the sparse path (1 of 10 kept), four the dense one (1 of 4)."""
    for vocab, token in ((10, 3), (4, 2)):
        logits = _dominant(vocab, token, 2.0**30)
        assert gumbel_sample(logits, [5], [0], 1.0).tolist() == [token]
        assert replay_margins(logits, [token], 5, 1.0).tolist() == [0.0]


def test_a_block_of_nan_rows_does_not_stop_the_rows_after_it() -> None:
    """At 131,073 tokens a block holds one row (2^18 // V = 1): row 0 all NaN keeps nothing (token 0, margin inf),
    row 1, in the next block, is still drawn (its dominant token 7) and replayed (margin 0)."""
    vocab = 131073
    logits = torch.zeros(2, vocab)
    logits[0] = float("nan")
    logits[1, 7] = 50.0
    assert gumbel_sample(logits, [3, 4], [0, 0], 1.0).tolist() == [0, 7]
    assert replay_margins(logits, [0, 7], 3, 1.0).tolist() == [math.inf, 0.0]


def test_the_sparse_path_takes_more_rows_than_tokens() -> None:
    """12 rows of 10 tokens, each with one dominant token (50 against 0: the others lie below f0 - G_MAX), keep 12 of
    120 scores, the sparse path: its per-row floor has one entry per row, not per token."""
    logits = torch.zeros(12, 10)
    tokens = [(3 * r + 1) % 10 for r in range(12)]
    for r, t in enumerate(tokens):
        logits[r, t] = 50.0
    assert gumbel_sample(logits, list(range(12)), [0] * 12, 1.0).tolist() == tokens
    assert replay_margins(logits, tokens, 9, 1.0).tolist() == [0.0] * 12
