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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from intellect.sdk import IntellectError
from intellect.verifier.replay import replay_margins
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
    "replay_margins_many",
    "token_logprobs",
    "verify_samples",
]

DEFAULT_MIN_TOKEN_LOGPROB = -30.0
"""Sampling check floor (natural log); calibrated in docs/benchmarks-verifier.md."""

Sample = tuple[Sequence[int], Sequence[int], list[bytes]] | tuple[Sequence[int], Sequence[int], list[bytes], int | None]
"""(prompt_ids, completion_ids, proofs) or (..., seed): the completion's `replay.sample_seed`."""


SHARE_MIN_SAVING = 0.1
"""`share_prompts` takes the shared-prompt path only when it skips at least this share of the tokens:
it costs a second forward and an explicit attention mask, which short or distinct prompts do not
repay (docs/benchmarks-verifier.md: equal at 9 % saved, 1.6x faster at 84 %)."""


class PrefillError(IntellectError, ValueError):
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
    share_prompts: bool = True,
) -> list[torch.Tensor]:
    """Last hidden states (T_i, H) for each sample, T_i = len(completion_ids[i]).

    `share_prompts` (default): each distinct prompt is prefilled once and its KV cache reused by
    every completion of it (a GRPO group: n completions of the same prompt), so prompt tokens are
    computed once per group instead of once per sample; taken when that skips at least
    `SHARE_MIN_SAVING` of the tokens. False: one right-padded pass over
    `prompt + completion[:-1]` per sample (the reference path; the states agree to fp32 kernel
    noise, tests/verifier check it). Raises PrefillError naming the first invalid sample;
    `verify_samples` handles them one by one.
    """
    if len(prompt_ids) != len(completion_ids):
        raise PrefillError(f"{len(prompt_ids)} prompts but {len(completion_ids)} completions")
    for i, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        try:
            _check(model, p, c)
        except PrefillError as exc:
            raise PrefillError(f"sample {i}: {exc}") from None
    prompts = [list(map(int, p)) for p in prompt_ids]
    comps = [list(map(int, c)) for c in completion_ids]
    total = sum(len(p) + len(c) - 1 for p, c in zip(prompts, comps, strict=True))
    saved = sum(map(len, prompts)) - sum(map(len, {tuple(p) for p in prompts}))
    if share_prompts and saved >= SHARE_MIN_SAVING * total:
        return _prefill_shared(model, prompts, comps, max_batch_tokens)
    return _prefill_full(model, prompts, comps, max_batch_tokens)


def _batches(lengths: Sequence[int], cost: Callable[[list[int]], int], max_batch_tokens: int) -> list[list[int]]:
    """Indices sorted by length, cut into batches whose `cost` (padded tokens) fits the budget.

    A batch also stops growing when right padding would exceed a quarter of its real tokens
    (lengths that differ a lot go to separate, smaller forwards instead of computing padding).
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    for i in order:
        if out:
            cand = [*out[-1], i]
            real = sum(lengths[j] for j in cand)
            if cost(cand) <= max_batch_tokens and len(cand) * lengths[i] <= 1.25 * real:
                out[-1] = cand
                continue
        out.append([i])
    return out


def _prefill_full(
    model: PreTrainedModel, prompts: list[list[int]], comps: list[list[int]], max_batch_tokens: int
) -> list[torch.Tensor]:
    """One right-padded pass over prompt + completion[:-1] per sample (no prefix sharing)."""
    import torch

    seqs = [p + c[:-1] for p, c in zip(prompts, comps, strict=True)]
    lengths = [len(s) for s in seqs]
    out: list[torch.Tensor | None] = [None] * len(seqs)
    decoder = decoder_of(model)
    device = next(model.parameters()).device
    with torch.inference_mode():
        for idx in _batches(lengths, lambda b: len(b) * max(lengths[j] for j in b), max_batch_tokens):
            width = max(lengths[i] for i in idx)
            ids = torch.zeros((len(idx), width), dtype=torch.long)  # (B, S) right-padded with id 0
            mask = torch.zeros((len(idx), width), dtype=torch.long)  # (B, S)
            for row, i in enumerate(idx):
                ids[row, : lengths[i]] = torch.tensor(seqs[i])
                mask[row, : lengths[i]] = 1
            hidden = decoder(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
            states = hidden.last_hidden_state  # (B, S, H), after the final norm
            for row, i in enumerate(idx):
                p, c = len(prompts[i]), len(comps[i])
                out[i] = states[row, p - 1 : p - 1 + c].detach().to("cpu")  # (T_i, H)
    return [t for t in out if t is not None]


def _left_padded_caches(rows: list[list[tuple[torch.Tensor, torch.Tensor]]],
                        width: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the batch's prompt keys and values (each row's own prompt, per layer (kvh, P, d)), left-padded
    with zeros to `width` positions: (B, kvh, width, d) each."""
    import torch

    layers = []
    for layer in range(len(rows[0])):
        k0, _ = rows[0][layer]
        k = k0.new_zeros((len(rows), k0.shape[0], width, k0.shape[-1]))
        v = torch.zeros_like(k)
        for row, prompt_kv in enumerate(rows):
            pk, pv = prompt_kv[layer]
            k[row, :, width - pk.shape[1] :] = pk
            v[row, :, width - pv.shape[1] :] = pv
        layers.append((k, v))
    return layers


def _prefill_shared(
    model: PreTrainedModel, prompts: list[list[int]], comps: list[list[int]], max_batch_tokens: int
) -> list[torch.Tensor]:
    """Prefill each distinct prompt once, then all completions against the prompts' KV caches.

    1. the distinct prompts, right-padded, one pass (use_cache): per prompt its keys/values of
       every layer (its real positions only) and its last state (row 0 of each completion);
    2. the completions' inputs `completion[:-1]`, right-padded, batched, each row attending to its
       own prompt's cache (left-padded to the batch's longest prompt and masked), positions
       continuing after its prompt.
    """
    import torch
    from transformers import DynamicCache

    decoder = decoder_of(model)
    device = next(model.parameters()).device
    keys: dict[tuple[int, ...], int] = {}
    group = [keys.setdefault(tuple(p), len(keys)) for p in prompts]  # sample -> distinct prompt
    distinct = [list(k) for k in keys]
    plen = [len(p) for p in distinct]
    kv: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in distinct]  # per prompt, per layer (kvh, P, d)
    last: list[torch.Tensor | None] = [None] * len(distinct)  # (H,) the prompt's last state
    out: list[torch.Tensor | None] = [None] * len(prompts)
    with torch.inference_mode():
        for idx in _batches(plen, lambda b: len(b) * max(plen[j] for j in b), max_batch_tokens):
            width = max(plen[i] for i in idx)
            ids = torch.zeros((len(idx), width), dtype=torch.long)  # (B, P) right-padded
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                ids[row, : plen[i]] = torch.tensor(distinct[i])
                mask[row, : plen[i]] = 1
            res = decoder(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=True)
            cache = res.past_key_values
            for row, i in enumerate(idx):
                last[i] = res.last_hidden_state[row, plen[i] - 1]  # (H,)
                kv[i] = [(layer.keys[row, :, : plen[i]], layer.values[row, :, : plen[i]]) for layer in cache.layers]
        clen = [len(c) - 1 for c in comps]  # completion inputs; a 1-token completion has only row 0
        todo = [i for i, n in enumerate(clen) if n > 0]
        for i in range(len(prompts)):
            if clen[i] == 0:
                out[i] = last[group[i]][None].detach().to("cpu")  # type: ignore[index]
        sub_len = [clen[i] for i in todo]

        def cost(b: list[int]) -> int:
            return len(b) * (max(sub_len[j] for j in b) + max(plen[group[todo[j]]] for j in b))

        for sub in _batches(sub_len, cost, max_batch_tokens):
            idx = [todo[j] for j in sub]
            width = max(clen[i] for i in idx)
            pw = max(plen[group[i]] for i in idx)
            ids = torch.zeros((len(idx), width), dtype=torch.long)  # (B, S) right-padded
            mask = torch.zeros((len(idx), pw + width), dtype=torch.long)  # (B, Pmax + S)
            pos = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):
                p = plen[group[i]]
                ids[row, : clen[i]] = torch.tensor(comps[i][:-1])
                mask[row, pw - p : pw + clen[i]] = 1  # prompt left-padded in the cache, completion right-padded
                pos[row] = torch.arange(p, p + width)
            layers = _left_padded_caches([kv[group[i]] for i in idx], pw)
            res = decoder(
                input_ids=ids.to(device),
                attention_mask=mask.to(device),
                position_ids=pos.to(device),
                past_key_values=DynamicCache(layers, config=model.config),
                use_cache=True,
            )
            states = res.last_hidden_state  # (B, S, H)
            for row, i in enumerate(idx):
                row0 = last[group[i]][None]  # type: ignore[index]
                out[i] = torch.cat([row0, states[row, : clen[i]]]).detach().to("cpu")  # (T_i, H)
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


def replay_margins_many(
    model: PreTrainedModel,
    hiddens: Sequence[torch.Tensor],
    completions: Sequence[Sequence[int]],
    seeds: Sequence[int],
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    *,
    head_rows: int = 512,
) -> list[torch.Tensor]:
    """`replay_margins(lm_logits(model, hiddens[i]), completions[i], seeds[i], ...)` for many samples.

    The LM head runs on the rows of several samples at once (about `head_rows` rows per GEMM:
    one (R, H) x (H, V) product instead of one per sample, at most R x V float32 logits alive),
    and the samples' replays (numpy, which releases the GIL) run on `torch.get_num_threads()`
    Python threads while the next block waits. Same margins, bit for bit, as the per-sample calls.
    """
    import torch

    if not len(hiddens) == len(completions) == len(seeds):
        raise ValueError(f"{len(hiddens)} states, {len(completions)} completions, {len(seeds)} seeds")
    out: list[torch.Tensor] = []
    start = 0
    with ThreadPoolExecutor(max_workers=max(1, torch.get_num_threads())) as pool:
        while start < len(hiddens):
            end, rows = start, 0
            while end < len(hiddens) and (end == start or rows + len(hiddens[end]) <= head_rows):
                rows += len(hiddens[end])
                end += 1
            logits = lm_logits(model, torch.cat(list(hiddens[start:end])))  # (R, V)
            parts = logits.split([len(h) for h in hiddens[start:end]])
            out += pool.map(
                lambda lg, toks, seed: replay_margins(lg, toks, seed, temperature, top_k, top_p),
                parts, completions[start:end], seeds[start:end],
            )
            start = end
    return out


def _sampling_check(
    model: PreTrainedModel,
    hidden: torch.Tensor,
    sample: Sample,
    res: VerificationResult,
    thresholds: Thresholds,
    min_token_logprob: float | None,
    sampling: tuple[float, int, float],
    margins: torch.Tensor | None = None,
) -> VerificationResult:
    """Replay the seeded sampler (seeded samples) or apply the log-prob floor (unseeded ones).

    `margins`: the sample's replay margins when `replay_margins_many` computed them already.
    """
    import torch

    completion = sample[1]
    seed = sample[3] if len(sample) > 3 else None  # type: ignore[misc]
    temperature, top_k, top_p = sampling
    if seed is not None and thresholds.max_replay_margin is not None:
        if margins is None:
            margins = replay_margins(lm_logits(model, hidden), completion, int(seed), temperature, top_k, top_p)  # (T,)
        stats = ReplayStats(
            max_margin=float(margins.max()),
            mean_margin=float(torch.nan_to_num(margins, posinf=1e9).mean()),
            flips=int((margins > 0).sum()),
            positions=len(completion),
            differing=int((margins > thresholds.replay_tie_margin).sum()),
            margins=tuple(float(m) for m in margins[margins > 0].tolist()),
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
        # replay every seeded sample that passed TOPLOC at once: LM head over many samples' rows per GEMM
        replay = [
            k for k, (i, res) in enumerate(zip(valid, checked, strict=True))
            if res.ok and len(samples[i]) > 3 and samples[i][3] is not None  # type: ignore[misc]
            and thresholds.max_replay_margin is not None
        ]
        margins: dict[int, torch.Tensor] = dict(zip(replay, replay_margins_many(
            model,
            [states[k] for k in replay],
            [samples[valid[k]][1] for k in replay],
            [int(samples[valid[k]][3]) for k in replay],  # type: ignore[misc]
            temperature, top_k, top_p,
        ), strict=True))
        for k, (i, hidden, res) in enumerate(zip(valid, states, checked, strict=True)):
            if res.ok:
                res = _sampling_check(
                    model, hidden, samples[i], res, thresholds, min_token_logprob, sampling, margins.get(k)
                )
            results[i] = res
    return [r for r in results if r is not None]
