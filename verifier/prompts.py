"""The prompt the policy sees for a task: one function, shared by the worker's rollout builder, the
validator's check (`intellect.verifier.submission`), the evaluation and the task-set filter. Light: no
torch, so the CLI paths that only format prompts import it at module level."""

from __future__ import annotations

from typing import Any

from intellect.verifier.rewards import thinking_budget_suffix
from intellect.verifier.tasks import Task

__all__ = ["prompt_text"]


def prompt_text(task: Task, target_len: int | None = None, tokenizer: Any = None) -> str:
    """The prompt the model sees: the task text (+ the thinking-budget suffix if any), as the single
    user turn of the model's chat template when `tokenizer` is given and has one (an instruct model:
    SmolLM2-135M-Instruct), with the assistant turn opened; the bare text otherwise (the tiny model).

    Its special tokens are written as text: encode it with `add_special_tokens=False`, as the engines do.
    """
    text = task.prompt
    if target_len is not None:
        text += thinking_budget_suffix(target_len)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                 add_generation_prompt=True))
    return text
