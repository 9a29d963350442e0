"""The verifiable sampler: seeds, noise definition, exact sampling, replay margins."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
import torch

from intellect.verifier.replay import (
    gumbel_noise,
    gumbel_noise_many,
    gumbel_sample,
    masked_scores,
    replay_margins,
    sample_seed,
)

V = 5000


def _spec_word(seed: int, position: int, j: int) -> int:
    """The noise's 32-bit word for (seed, position, j), written from the module docstring."""
    m64 = (1 << 64) - 1

    def splitmix(x: int) -> int:
        x = (x + 0x9E3779B97F4A7C15) & m64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m64
        return x ^ (x >> 31)

    def lowbias32(x: int) -> int:
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    k = splitmix(splitmix(seed) ^ position)
    key = ((k >> 32) ^ k) & 0xFFFFFFFF
    return lowbias32(key ^ lowbias32(j ^ 0x9E3779B9))


def test_sample_seed_matches_spec():
    digest = hashlib.sha256(b"intellect.replay.seed/v1" + (7).to_bytes(8, "big") + (3).to_bytes(8, "big")).digest()
    assert sample_seed(7, 3) == int.from_bytes(digest[:8], "big") >> 1
    assert 0 <= sample_seed(2**64 - 1, 0) < 2**63
    assert len({sample_seed(1, i) for i in range(100)}) == 100


@pytest.mark.parametrize(("base", "index"), [(-1, 0), (0, -1), (2**64, 0)])
def test_sample_seed_out_of_range_raises(base, index):
    with pytest.raises(ValueError, match="outside"):
        sample_seed(base, index)


def test_gumbel_noise_matches_spec_formula():
    seed = sample_seed(11, 2)
    g = gumbel_noise(seed, 17, V)
    assert g.dtype == torch.float32 and g.shape == (V,)
    for j in (0, 1, 77, 4999):
        u = ((_spec_word(seed, 17, j) >> 9) + 0.5) * 2.0**-23
        assert float(g[j]) == pytest.approx(-math.log(-math.log(u)), abs=2e-6)


def test_gumbel_noise_is_pinned_bit_for_bit():
    """Regression pin: the noise is part of the protocol; any change here breaks replay."""
    g = gumbel_noise_many(123456789, [0, 1, 2, 31, 1000], 1000).numpy()
    assert hashlib.sha256(g.tobytes()).hexdigest()[:16] == "fb6bb1d89497cae1"


def test_gumbel_noise_many_rows_equal_single_positions():
    many = gumbel_noise_many(5, [0, 3, 9], V)
    for row, p in enumerate((0, 3, 9)):
        assert torch.equal(many[row], gumbel_noise(5, p, V))
    assert not torch.equal(gumbel_noise(5, 0, V), gumbel_noise(6, 0, V))
    assert not torch.equal(gumbel_noise(5, 0, V), gumbel_noise(5, 1, V))


def test_gumbel_noise_has_gumbel_moments():
    g = gumbel_noise_many(3, range(200), V).double()  # 1e6 values
    assert float(g.mean()) == pytest.approx(0.5772, abs=0.01)
    assert float(g.var()) == pytest.approx(math.pi**2 / 6, abs=0.02)


def test_gumbel_sample_equals_argmax_of_full_noise():
    torch.manual_seed(0)
    logits = torch.randn(40, V) * 3
    seeds = [sample_seed(9, i) for i in range(40)]
    positions = list(range(40))
    got = gumbel_sample(logits, seeds, positions, 0.7, top_k=200)
    for b in range(40):
        full = masked_scores(logits[b : b + 1], 0.7, 200)[0] + gumbel_noise(seeds[b], positions[b], V)
        assert int(got[b]) == int(full.argmax())


def test_gumbel_sample_draws_from_the_tempered_distribution():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    n = 40000
    toks = gumbel_sample(logits.expand(n, -1), [sample_seed(1, i) for i in range(n)], [0] * n, 0.7)
    freq = torch.bincount(toks, minlength=5).double() / n
    expected = torch.softmax(logits.double() / 0.7, -1)
    # 5 sigma of a binomial proportion
    assert torch.all((freq - expected).abs() < 5 * torch.sqrt(expected * (1 - expected) / n))


def test_gumbel_sample_top_p_and_greedy():
    logits = torch.tensor([[3.0, 2.9, -5.0, -6.0]]).expand(2000, -1)
    seeds = [sample_seed(2, i) for i in range(2000)]
    toks = gumbel_sample(logits, seeds, [0] * 2000, 1.0, top_p=0.5)
    assert set(toks.tolist()) == {0}  # token 0 alone holds >= 0.5 of the mass
    assert set(gumbel_sample(logits, seeds, [0] * 2000, 0.0).tolist()) == {0}


def _honest(logits: torch.Tensor, seed: int, temperature: float, **kw) -> list[int]:
    return [int(gumbel_sample(logits[p : p + 1], [seed], [p], temperature, **kw)) for p in range(len(logits))]


def test_replay_margins_zero_for_honest_tokens():
    torch.manual_seed(1)
    logits = torch.randn(50, V) * 4
    for temp, kw in ((1.0, {}), (0.6, {"top_k": 50}), (1.3, {"top_p": 0.9}), (0.0, {})):
        toks = _honest(logits, 42, temp, **kw)
        assert float(replay_margins(logits, toks, 42, temp, **kw).max()) == 0.0


def test_replay_margins_positive_for_altered_token_wrong_seed_and_masked():
    torch.manual_seed(2)
    logits = torch.randn(30, V) * 4
    toks = _honest(logits, 42, 1.0)
    bad = list(toks)
    bad[29] = (bad[29] + 1) % V  # the last token: invisible to TOPLOC
    m = replay_margins(logits, bad, 42, 1.0)
    assert float(m[29]) > 1.0 and float(m[:29].max()) == 0.0
    assert float(replay_margins(logits, toks, 43, 1.0).max()) > 1.0  # another seed's noise
    low = int(logits[0].argmin())
    assert math.isinf(float(replay_margins(logits[:1], [low], 42, 1.0, top_k=10)[0]))


def test_replay_margins_tolerates_small_logit_noise():
    torch.manual_seed(3)
    logits = torch.randn(200, V) * 4
    toks = _honest(logits, 7, 1.0)
    noisy = logits + torch.randn_like(logits) * 0.01
    m = replay_margins(noisy, toks, 7, 1.0)
    assert float(m.max()) < 0.2  # a flip needs two scores within the noise of each other


def test_replay_margins_bad_input_raises():
    with pytest.raises(ValueError, match="tokens"):
        replay_margins(torch.zeros(3, 10), [1, 2], 0, 1.0)
    with pytest.raises(ValueError, match="token ids"):
        replay_margins(torch.zeros(2, 10), [1, 10], 0, 1.0)
    with pytest.raises(ValueError, match="seeds"):
        gumbel_noise_many(-1, [0], 10)
    assert np.isinf(replay_margins(torch.full((1, 10), float("nan")), [1], 0, 1.0).numpy()).all()


@pytest.mark.parametrize("stage2", ["dense", "sparse"])
@pytest.mark.parametrize("shape", ["gaussian", "peaked", "ties"])
def test_replay_margins_and_sample_equal_full_noise(shape, stage2, monkeypatch):
    """The staged search (prefilter, bucket bounds, exact noise) equals the brute-force max."""
    import intellect.verifier.replay as replay

    monkeypatch.setattr(replay, "_DENSE_FRACTION", 0.0 if stage2 == "dense" else 2.0)
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(24, V, generator=g) * 3
    if shape == "peaked":  # an LM's shape: a few tokens far above the bulk
        logits[:, :20] += 25 * torch.rand(24, 20, generator=g)
    if shape == "ties":  # coarse values: many equal scores, ties go to the lowest index
        logits = (logits * 2).round() / 2
    seed = sample_seed(3, 1)
    positions = list(range(24))
    tokens = torch.randint(0, V, (24,), generator=g).tolist()
    for temp, kw in ((1.0, {}), (0.7, {"top_k": 300}), (1.0, {"top_p": 0.95})):
        scores = masked_scores(logits, temp, **kw) + gumbel_noise_many(seed, positions, V)  # (T, V)
        own = scores[torch.arange(24), torch.tensor(tokens)]
        want = torch.where(torch.isneginf(own), float("inf"), scores.max(dim=1).values - own)
        assert torch.equal(replay_margins(logits, tokens, seed, temp, **kw), want)
        drawn = gumbel_sample(logits, [seed] * 24, positions, temp, **kw)
        assert drawn.tolist() == scores.argmax(dim=1).tolist()
