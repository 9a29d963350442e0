"""Recompute the last hidden states of rollouts with ONE batched prefill, and check proofs.

A validator does not generate: for each sample it feeds `prompt + completion[:-1]` through the
named checkpoint's decoder stack once (no KV cache, no sampling, no LM head) and reads the
final-norm output at positions `len(prompt)-1 ... len(prompt)+len(completion)-2`: row i is the
state from which completion token i was sampled, exactly what the worker committed to.
Samples are sorted by length and right-padded into batches bounded by `max_batch_tokens`;
right padding leaves every real position's causal context and position id unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from intellect.verifier.toploc import (
    CHUNK_SIZE,
    DEFAULT_THRESHOLDS,
    ReasonCode,
    ReplayStats,
    Thresholds,
    VerificationResult,
    verify_proofs_many,
)

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MIN_TOKEN_LOGPROB",
    "PrefillError",
    "decoder_of",
    "lm_logits",
    "prefill_hidden_states",
    "token_logprobs",
    "verify_samples",
]

DEFAULT_MIN_TOKEN_LOGPROB = -30.0
"""Sampling check floor (natural log); calibrated in docs/benchmarks-verifier.md."""

Sample = tuple[Sequence[int], Sequence[int], list[bytes]] | tuple[Sequence[int], Sequence[int], list[bytes], int | None]
"""(prompt_ids, completion_ids, proofs) or (..., seed): the completion's `replay.sample_seed`."""


class PrefillError(ValueError):
    """A sample cannot be prefilled (empty completion, token ids outside the vocabulary, too long)."""


def decoder_of(model: PreTrainedModel) -> torch.nn.Module:
    """The decoder stack whose output (after the final norm) is the LM head's input."""
    base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if base is None or base is model:
        raise PrefillError(f"{type(model).__name__} has no separate decoder stack")
    return base


def _check(model: PreTrainedModel, prompt: Sequence[int], completion: Sequence[int]) -> None:
    vocab = model.config.vocab_size
    if len(prompt) == 0:
        raise PrefillError("empty prompt")
    if len(completion) == 0:
        raise PrefillError("empty completion")
    bad = [t for t in (*prompt, *completion) if not 0 <= int(t) < vocab]
    if bad:
        raise PrefillError(f"token id {bad[0]} outside the vocabulary [0, {vocab})")
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and len(prompt) + len(completion) - 1 > limit:
        raise PrefillError(
            f"sequence of {len(prompt) + len(completion) - 1} tokens exceeds the model's {limit}"
        )


def prefill_hidden_states(
    model: PreTrainedModel,
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    max_batch_tokens: int = 16384,
) -> list[torch.Tensor]:
    """Last hidden states (T_i, H) for each sample, T_i = len(completion_ids[i]).

    Raises PrefillError naming the first invalid sample; `verify_samples` handles them one by one.
    """
    import torch

    if len(prompt_ids) != len(completion_ids):
        raise PrefillError(f"{len(prompt_ids)} prompts but {len(completion_ids)} completions")
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        try:
            _check(model, p, c)
        except PrefillError as exc:
            raise PrefillError(f"sample {i}: {exc}") from None
    seqs = [
        list(map(int, p)) + list(map(int, c))[:-1] for p, c in zip(prompt_ids, completion_ids, strict=True)
    ]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out: list[torch.Tensor | None] = [None] * len(seqs)
    decoder = decoder_of(model)
    device = next(model.parameters()).device
    pad = 0
    with torch.inference_mode():
        start = 0
        while start < len(order):
            # grow the batch while (batch × longest) stays within the token budget
            end = start + 1
            while end < len(order) and (end + 1 - start) * len(seqs[order[end]]) <= max_batch_tokens:
                end += 1
            idx = order[start:end]
            width = len(seqs[idx[-1]])
            ids = torch.full((len(idx), width), pad, dtype=torch.long)  # (B, S)
            mask = torch.zeros((len(idx), width), dtype=torch.long)  # (B, S)
            for row, i in enumerate(idx):
                ids[row, : len(seqs[i])] = torch.tensor(seqs[i])
                mask[row, : len(seqs[i])] = 1
            hidden = decoder(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
            states = hidden.last_hidden_state  # (B, S, H), after the final norm
            for row, i in enumerate(idx):
                p, c = len(prompt_ids[i]), len(completion_ids[i])
                out[i] = states[row, p - 1 : p - 1 + c].detach().to("cpu")  # (T_i, H)
            start = end
    return [t for t in out if t is not None]


def token_logprobs(
    model: PreTrainedModel, hidden: torch.Tensor, completion_ids: Sequence[int], temperature: float = 1.0
) -> torch.Tensor:
    """log p(token i | states row i) under the LM head at `temperature`: (T,) float32."""
    import torch

    head = model.get_output_embeddings()
    with torch.inference_mode():
        logits = head(hidden.to(head.weight.device, head.weight.dtype)).float() / temperature  # (T, V)
        ids = torch.tensor(list(completion_ids), dtype=torch.long, device=logits.device)  # (T,)
        return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, None]).squeeze(-1).cpu()


def lm_logits(model: PreTrainedModel, hidden: torch.Tensor) -> torch.Tensor:
    """(T, V) float32 logits of the LM head on recomputed states (T, H): the completion rows only."""
    import torch

    head = model.get_output_embeddings()
    with torch.inference_mode():
        return head(hidden.to(head.weight.device, head.weight.dtype)).float()


def _sampling_check(
    model: PreTrainedModel,
    hidden: torch.Tensor,
    sample: Sample,
    res: VerificationResult,
    thresholds: Thresholds,
    min_token_logprob: float | None,
    sampling: tuple[float, int, float],
) -> VerificationResult:
    """Replay the seeded sampler (seeded samples) or apply the log-prob floor (unseeded ones)."""
    import torch

    from intellect.verifier.replay import replay_margins

    completion = sample[1]
    seed = sample[3] if len(sample) > 3 else None  # type: ignore[misc]
    temperature, top_k, top_p = sampling
    if seed is not None and thresholds.max_replay_margin is not None:
        margins = replay_margins(lm_logits(model, hidden), completion, int(seed), temperature, top_k, top_p)  # (T,)
        stats = ReplayStats(
            max_margin=float(margins.max()),
            mean_margin=float(torch.nan_to_num(margins, posinf=1e9).mean()),
            flips=int((margins > 0).sum()),
            positions=len(completion),
        )
        res = res.model_copy(update={"replay": stats})
        worst = int(margins.argmax())
        if not stats.max_margin <= thresholds.max_replay_margin:
            return res.model_copy(update={
                "ok": False,
                "reason": ReasonCode.REPLAY_MISMATCH,
                "detail": f"completion token {worst} is not the seeded sampler's draw: margin "
                f"{stats.max_margin:.3g} > {thresholds.max_replay_margin} ({stats.flips} of "
                f"{stats.positions} tokens differ from the replay)",
                "failed_chunk": worst // CHUNK_SIZE,
            })
        return res
    if seed is None and min_token_logprob is not None:
        lp = token_logprobs(model, hidden, completion, temperature)  # (T,)
        worst = int(lp.argmin())
        if float(lp[worst]) < min_token_logprob:
            return res.model_copy(update={
                "ok": False,
                "reason": ReasonCode.IMPLAUSIBLE_TOKEN,
                "detail": f"completion token {worst} has log-probability {float(lp[worst]):.1f} "
                f"< {min_token_logprob} at temperature {temperature}",
                "failed_chunk": worst // CHUNK_SIZE,
            })
    return res


def verify_samples(
    model: PreTrainedModel,
    samples: Sequence[Sample],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    *,
    min_token_logprob: float | None = DEFAULT_MIN_TOKEN_LOGPROB,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    max_batch_tokens: int = 16384,
) -> list[VerificationResult]:
    """Check each (prompt_ids, completion_ids, proofs[, seed]) against one batched prefill.

    Two checks per sample: the TOPLOC proofs against the recomputed states (`thresholds`), then
    the sampling check on the LM head's logits of the completion rows only:
    - a sample with a `seed` (its `replay.sample_seed`): the seeded Gumbel-max sampler is
      replayed at the pool's `temperature` / `top_k` / `top_p`; every completion token must be
      the replayed argmax up to `thresholds.max_replay_margin` (floating-point slack between
      the worker's and the validator's logits). An altered token, another prompt's completion
      or another seed's draw fails with `replay_mismatch`, the last token included;
    - a sample without a seed (an engine that cannot replay): every token must have
      log-probability >= `min_token_logprob` (None disables). An honest sampler draws a token
      with log p < L with probability at most V·e^L per token: for L = -30, V = 49152, < 5e-9.
    TOPLOC commits to the states that *produced* each token, so it cannot see the token itself.

    Never raises for a bad sample: it gets ok=False with a reason, the others are still checked.
    """
    results: list[VerificationResult | None] = [None] * len(samples)
    valid: list[int] = []
    for i, sample in enumerate(samples):
        try:
            prompt, completion = sample[0], sample[1]
            if len(sample) not in (3, 4):
                raise PrefillError(f"a sample is (prompt, completion, proofs[, seed]), got {len(sample)} items")
            seed = sample[3] if len(sample) == 4 else None  # type: ignore[misc]
            if seed is not None and not 0 <= int(seed) < 1 << 64:
                raise PrefillError(f"sampler seed {seed} outside [0, 2^64)")
            _check(model, prompt, completion)
            valid.append(i)
        except (PrefillError, TypeError, ValueError) as exc:
            results[i] = VerificationResult(ok=False, reason=ReasonCode.INVALID_SAMPLE, detail=str(exc))
    if valid:
        states = prefill_hidden_states(
            model,
            [samples[i][0] for i in valid],
            [samples[i][1] for i in valid],
            max_batch_tokens=max_batch_tokens,
        )
        checked = verify_proofs_many(states, [samples[i][2] for i in valid], thresholds=thresholds)
        sampling = (temperature, top_k, top_p)
        for i, hidden, res in zip(valid, states, checked, strict=True):
            if res.ok:
                res = _sampling_check(model, hidden, samples[i], res, thresholds, min_token_logprob, sampling)
            results[i] = res
    return [r for r in results if r is not None]
