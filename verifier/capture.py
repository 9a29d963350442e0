"""Generate with transformers and capture, without a second pass, the LM head's inputs.

A forward pre-hook on the output embedding (the LM head) records its input at every decoding
step: at the prefill step the prompt's last position (logits_to_keep=1), then one row per new
token. Row i of a sample's states is therefore the state whose logits produced completion
token i, the layout `build_proofs` expects. Used by the calibration bench and tests; the
agents' inference engines capture the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from intellect.verifier.replay import gumbel_sample, sample_seed

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

__all__ = ["Generated", "generate_with_states"]


@dataclass
class Generated:
    prompt_ids: list[int]
    completion_ids: list[int]
    hidden: torch.Tensor
    """(T, H) LM-head inputs, T = len(completion_ids), in the model's compute dtype."""
    seed: int = 0
    """the completion's replay seed: `sample_seed(seed argument, index of the prompt)`"""


def generate_with_states(
    model: PreTrainedModel,
    prompt_ids: Sequence[Sequence[int]],
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    top_k: int = 0,
    top_p: float = 1.0,
    eos_ids: Sequence[int] = (),
    pad_id: int = 0,
) -> list[Generated]:
    """Sample up to `max_new_tokens` per prompt (batched, left-padded, KV cache).

    Sampling is the replayable Gumbel-max of `intellect.verifier.replay`: prompt i's completion
    uses the noise stream `sample_seed(seed, i)` (`Generated.seed`), so a validator can replay
    it with `replay_margins`. A sample stops after emitting an id in `eos_ids` (kept).
    """
    import torch

    head = model.get_output_embeddings()
    captured: list[torch.Tensor] = []

    def hook(_module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        captured.append(args[0][:, -1, :].detach())  # (B, H): the row that makes the next logits

    handle = head.register_forward_pre_hook(hook)
    device = next(model.parameters()).device
    b = len(prompt_ids)
    seeds = [sample_seed(seed, i) for i in range(b)]
    ids, attn, pos = _left_padded(prompt_ids, pad_id)
    completions: list[list[int]] = [[] for _ in range(b)]
    states: list[list[torch.Tensor]] = [[] for _ in range(b)]
    done = [False] * b
    eos = set(eos_ids)
    try:
        with torch.inference_mode():
            out = model(
                input_ids=ids.to(device),
                attention_mask=attn.to(device),
                position_ids=pos.to(device),
                use_cache=True,
                logits_to_keep=1,
            )
            cache = out.past_key_values
            last = pos[:, -1:]
            for step in range(max_new_tokens):
                logits = out.logits[:, -1, :].float()  # (B, V)
                h = captured.pop()  # (B, H)
                captured.clear()
                nxt = gumbel_sample(logits, seeds, [step] * b, temperature, top_k, top_p).cpu()  # (B,)
                _append_step(nxt, h, completions, states, done, eos)
                if all(done):
                    break
                attn = torch.cat([attn, torch.ones((b, 1), dtype=attn.dtype)], dim=1)
                last = last + 1
                out = model(
                    input_ids=nxt[:, None].to(device),
                    attention_mask=attn.to(device),
                    position_ids=last.to(device),
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                cache = out.past_key_values
    finally:
        handle.remove()
    return [
        Generated(
            prompt_ids=list(map(int, prompt_ids[i])),
            completion_ids=completions[i],
            hidden=torch.stack(states[i]),
            seed=seeds[i],
        )
        for i in range(b)
    ]


def _left_padded(prompt_ids: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The prompts left-padded: input ids, attention mask and position ids that ignore the padding, each (B, S)."""
    import torch

    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        ids[i, width - len(p) :] = torch.tensor(list(p))
        attn[i, width - len(p) :] = 1
    return ids, attn, (attn.cumsum(-1) - 1).clamp(min=0)


def _append_step(nxt: torch.Tensor, h: torch.Tensor, completions: list[list[int]], states: list[list[torch.Tensor]],
                 done: list[bool], eos: set[int]) -> None:
    """Add one decoding step's token and state to every sample still going; a sample ends after an EOS id."""
    for i in range(len(done)):
        if done[i]:
            continue
        completions[i].append(int(nxt[i]))
        states[i].append(h[i].cpu())
        if int(nxt[i]) in eos:
            done[i] = True
