"""Where a completion ends is part of the proof.

A worker samples until the seeded sampler draws an end-of-sequence token (kept as the completion's
last token) or the thinking budget (`max_tokens`) runs out, and nowhere else. TOPLOC and the
sampler replay check each token that is there; this module checks that the completion stops where
the sampler stopped:

- no token after an EOS (sampling on after EOS pads the completion, and pay is per token);
- no cut before the sampler's end: a completion shorter than its budget must end with EOS (a cut
  at the best-scoring prefix would choose the answer);
- never longer than the budget.

Together with the replay of every token (the final EOS included), the paid units of a submission,
its completion tokens, are all tokens the sampler produced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

__all__ = ["CompletionEnd", "EndError", "check_completion_end", "eos_token_ids"]


class EndError(StrEnum):
    """Why a completion does not end where the sampler ended (stable strings: reason codes)."""

    EMPTY = "empty_completion"
    TOKENS_AFTER_EOS = "tokens_after_eos"
    CUT_SHORT = "cut_short"
    OVER_BUDGET = "over_budget"


class CompletionEnd:
    """Outcome of `check_completion_end`: `error` is None when the completion ends correctly."""

    __slots__ = ("detail", "error")

    def __init__(self, error: EndError | None, detail: str = "") -> None:
        self.error = error
        self.detail = detail

    @property
    def ok(self) -> bool:
        return self.error is None


def check_completion_end(completion_ids: Sequence[int], eos_ids: Iterable[int], max_tokens: int) -> CompletionEnd:
    """Check that `completion_ids` ends where a sampler with budget `max_tokens` stops.

    Valid: 1 ≤ len ≤ max_tokens, no EOS before the last token, and either the last token is an EOS
    or the budget is used up exactly.
    """
    eos = frozenset(int(t) for t in eos_ids)
    n = len(completion_ids)
    if n == 0:
        return CompletionEnd(EndError.EMPTY, "empty completion (the sampler draws at least one token)")
    if n > max_tokens:
        return CompletionEnd(EndError.OVER_BUDGET, f"{n} tokens > budget {max_tokens}")
    for i, t in enumerate(completion_ids[:-1]):
        if int(t) in eos:
            return CompletionEnd(EndError.TOKENS_AFTER_EOS,
                                 f"end-of-sequence token {int(t)} at position {i}, followed by {n - 1 - i} more tokens")
    if int(completion_ids[-1]) not in eos and n < max_tokens:
        return CompletionEnd(EndError.CUT_SHORT,
                             f"{n} tokens without an end-of-sequence token, budget {max_tokens}: cut before the "
                             f"sampler's end")
    return CompletionEnd(None)


def eos_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The token ids that end a completion: the model's generation config EOS (an int or a list) and the
    tokenizer's, as the engines stop on them."""
    ids: set[int] = set()
    gen = getattr(model, "generation_config", None)
    for value in (getattr(gen, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return frozenset(ids)
