"""Batched sampling with HF transformers (CPU or GPU), capturing TOPLOC proofs in the same pass.

The decode loop is written out by hand (prefill, then one token per step with the KV cache)
rather than calling `model.generate`, for one reason: TOPLOC needs, for every generated token,
the hidden state the LM head turned into that token's logits. A forward pre-hook on the LM head
(`model.get_output_embeddings()`) sees exactly that tensor (after the final norm) in every
forward, so proofs cost no second pass. Row 0 of a completion's hidden states is the prompt's
last position (it produced completion token 0); row i is the input position of token i-1.

Prompts of different lengths are left-padded; positions come from the attention mask so a
padded row computes the same thing as an unpadded one.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from intellect.agents.engines._base import (
    CheckpointHolder,
    EngineError,
    Generation,
    SamplingParams,
)
from intellect.verifier.replay import gumbel_sample, sample_seed
from intellect.verifier.toploc import build_proofs_many

log = logging.getLogger(__name__)

__all__ = ["TransformersEngine", "sample_next"]


def sample_next(
    logits: torch.Tensor, params: SamplingParams, seeds: Sequence[int], positions: Sequence[int]
) -> torch.Tensor:
    """One token per row of logits (B, V) with temperature / top-k / top-p, replayably.

    Gumbel-max with the counter-based noise of `intellect.verifier.replay`: row b is
    argmax(masked(logits/T) + gumbel_noise(seeds[b], positions[b])), exactly a draw from the
    tempered, masked distribution that a validator can replay from the seed (temperature 0:
    greedy).
    """
    return gumbel_sample(logits, seeds, positions, params.temperature, params.top_k, params.top_p)


class TransformersEngine(CheckpointHolder):
    """`InferenceEngine` on HF transformers.

    engine = TransformersEngine(device="cpu"); engine.load(ckpt_dir)
    gens = engine.generate(["What is 2 + 3?"], SamplingParams(max_tokens=16, seed=0))
    """

    def __init__(
        self,
        checkpoint_dir: str | Path | None = None,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 64,
        proof_chunk_size: int = 32,
        proof_topk: int = 128,
    ) -> None:
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype)
        self.max_batch_size = max_batch_size
        self.proof_chunk_size = proof_chunk_size
        self.proof_topk = proof_topk
        self.model: Any = None
        self.tokenizer: Any = None
        self._captured: list[torch.Tensor] = []
        self.stats = {"generated_tokens": 0, "generate_seconds": 0.0, "loads": 0}
        if checkpoint_dir is not None:
            self.load(Path(checkpoint_dir))

    # -- loading ---------------------------------------------------------------------------

    def _has_model(self) -> bool:
        return self.model is not None

    def _load_fresh(self, checkpoint_dir: Path) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        try:
            AutoConfig.from_pretrained(str(checkpoint_dir))
            model = AutoModelForCausalLM.from_pretrained(str(checkpoint_dir), dtype=self.dtype)
            tokenizer = AutoTokenizer.from_pretrained(str(checkpoint_dir))
        except (OSError, ValueError) as exc:
            raise EngineError(f"cannot load checkpoint {checkpoint_dir}: {exc}") from exc
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.model.get_output_embeddings().register_forward_pre_hook(self._capture_hook)

    def _swap_weights(self, checkpoint_dir: Path) -> None:
        from safetensors.torch import load_file

        files = sorted(checkpoint_dir.glob("*.safetensors"))
        if not files:
            raise EngineError(f"checkpoint {checkpoint_dir} has no *.safetensors weights")
        state: dict[str, torch.Tensor] = {}
        for f in files:
            state.update(load_file(str(f)))
        self._apply_state(state, f"checkpoint {checkpoint_dir}")

    def _apply_state(self, state: Mapping[str, torch.Tensor], source: str) -> None:
        expected = set(self.model.state_dict())
        missing = expected - set(state)
        tied = {k for k in missing if k.endswith("lm_head.weight")} if self.model.config.tie_word_embeddings else set()
        if missing - tied or set(state) - expected:
            raise EngineError(
                f"{source} does not match the loaded architecture: "
                f"missing {sorted(missing - tied)[:5]}, unexpected {sorted(set(state) - expected)[:5]}"
            )
        with torch.no_grad():
            self.model.load_state_dict(state, strict=False)

    def load_weights(self, state: Mapping[str, torch.Tensor], *, policy_step: int | None = None) -> None:
        """Copy in-memory weights (a `state_dict()` of a model of the loaded architecture, e.g. a trainer's live
        module) into the loaded model, without a round trip through disk. The tokenizer and architecture stay
        those of the last `load`; `checkpoint_dir` becomes None (the weights are no longer a directory's) and
        `policy_step` the given one."""
        if self.model is None:
            raise EngineError("engine has no checkpoint loaded: call load(checkpoint_dir) first (it sets the "
                              "architecture and tokenizer that load_weights fills)")
        t0 = time.perf_counter()
        self._apply_state(state, "the given state dict")
        self._checkpoint_dir = None
        self.policy_step = policy_step
        self.stats["loads"] += 1
        log.info("engine loaded in-memory weights (step %s) in %.2fs", policy_step, time.perf_counter() - t0)

    # -- generation ------------------------------------------------------------------------

    def _capture_hook(self, _module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        if args[0].dim() == 3:  # (B, S, H) in a decoding forward; other callers of the head (a validator's replay) pass
            self._captured.append(args[0].detach()[:, -1, :])  # (B, H): the LM-head input of the last position

    def encode(self, prompt: str) -> list[int]:
        return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def generate(self, prompts: list[list[int]] | list[str], params: SamplingParams) -> list[Generation]:
        if self.model is None:
            raise EngineError("engine has no checkpoint loaded: call load(checkpoint_dir) first")
        if not prompts:
            return []
        ids = [p if isinstance(p, list) else self.encode(p) for p in prompts]
        for i, p in enumerate(ids):
            if not p:
                raise EngineError(f"prompt {i} is empty")

        # completion i samples with the noise stream sample_seed(params.seed, i), whatever batch it is in
        base = params.seed if params.seed is not None else secrets.randbits(63)
        seeds = [sample_seed(base, i) for i in range(len(ids))]
        out: list[Generation] = []
        t0 = time.perf_counter()
        for start in range(0, len(ids), self.max_batch_size):
            end = start + self.max_batch_size
            out += self._generate_batch(ids[start:end], params, seeds[start:end])
        self.stats["generate_seconds"] += time.perf_counter() - t0
        self.stats["generated_tokens"] += sum(len(g.completion_ids) for g in out)
        return out

    @torch.no_grad()
    def _generate_batch(
        self, prompts: list[list[int]], params: SamplingParams, seeds: list[int]
    ) -> list[Generation]:
        from transformers import DynamicCache

        tok = self.tokenizer
        eos_ids = self._eos_ids()
        pad = tok.pad_token_id
        batch = len(prompts)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), pad, dtype=torch.long)
        attn = torch.zeros((batch, width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding
            input_ids[i, width - len(p) :] = torch.tensor(p)
            attn[i, width - len(p) :] = 1
        input_ids, attn = input_ids.to(self.device), attn.to(self.device)
        positions = (attn.cumsum(-1) - 1).clamp(min=0)  # (B, W)

        completions: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        steps: list[torch.Tensor] = []  # (B, H) LM-head inputs per decoding step, stacked once at the end
        finish: list[str | None] = [None] * batch
        cache = DynamicCache(config=self.model.config)
        self._captured.clear()
        logits = self.model(
            input_ids=input_ids, attention_mask=attn, position_ids=positions,
            past_key_values=cache, use_cache=True, logits_to_keep=1,
        ).logits[:, -1, :]  # (B, V)
        last_pos = positions[:, -1:]  # (B, 1)
        for step in range(params.max_tokens):
            h = self._captured.pop() if self._captured else None  # (B, H) rows that made `logits`
            self._captured.clear()
            next_tok = sample_next(logits, params, seeds, [step] * batch)  # (B,)
            lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, next_tok[:, None]).squeeze(-1)
            for i in range(batch):
                if finish[i] is not None:
                    continue
                t = int(next_tok[i])
                completions[i].append(t)
                logprobs[i].append(float(lp[i]))
                if t in eos_ids or (params.stop and self._hit_stop(completions[i], params.stop)):
                    finish[i] = "stop"
            if params.capture_proofs and h is not None:
                steps.append(h)
            if all(f is not None for f in finish):
                break
            attn = torch.cat([attn, torch.ones((batch, 1), dtype=attn.dtype, device=self.device)], dim=1)
            last_pos = last_pos + 1
            feed = torch.where(
                torch.tensor([f is None for f in finish], device=self.device), next_tok, torch.full_like(next_tok, pad)
            )
            logits = self.model(
                input_ids=feed[:, None], attention_mask=attn, position_ids=last_pos,
                past_key_values=cache, use_cache=True, logits_to_keep=1,
            ).logits[:, -1, :]
        proofs = self._batch_proofs(steps, [len(c) for c in completions]) if params.capture_proofs else None
        gens = []
        for i in range(batch):
            text = tok.decode(completions[i], skip_special_tokens=True)
            reason = finish[i] or "length"
            if params.stop:
                cut = min((text.find(s) for s in params.stop if s in text), default=-1)
                if cut >= 0:
                    text = text[:cut]
            gens.append(Generation(prompt_ids=list(prompts[i]), completion_ids=completions[i], text=text,
                                   finish_reason=reason, logprobs=logprobs[i],
                                   proofs=proofs[i] if proofs else []))  # type: ignore[arg-type]
        return gens

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        eos = self.model.generation_config.eos_token_id if self.model.generation_config else None
        for value in (eos, self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list):
                ids.update(value)
        return ids

    def _hit_stop(self, completion: list[int], stops: tuple[str, ...]) -> bool:
        tail = self.tokenizer.decode(completion[-32:], skip_special_tokens=True)
        return any(s in tail for s in stops)

    def _batch_proofs(self, steps: list[torch.Tensor], lengths: list[int]) -> list[list[bytes]] | None:
        """Proofs of every completion of a batch in one `build_proofs_many` call.

        `steps[s]` (B, H) holds the LM-head inputs of decoding step s; completion i's states are
        rows 0 .. len_i - 1 of column i (a finished completion stops at its last token). One
        batched interpolation instead of one per completion: the per-call fixed cost (Newton's
        128 steps in numpy) no longer multiplies by the batch size.
        """
        if not steps or not any(lengths):
            return None
        states = torch.stack(steps).to("cpu", torch.bfloat16)  # (S, B, H)
        hiddens = [states[:n, i] for i, n in enumerate(lengths) if n]
        built = iter(build_proofs_many(hiddens, chunk_size=self.proof_chunk_size, topk=self.proof_topk))
        return [next(built) if n else [] for n in lengths]
