"""The inference-engine interface shared by the transformers and vLLM engines."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from intellect.sdk import IntellectError

__all__ = [
    "CHECKPOINT_META",
    "EngineError",
    "Generation",
    "InferenceEngine",
    "SamplingParams",
    "checkpoint_step",
]

CHECKPOINT_META = "intellect_checkpoint.json"
"""File the trainer writes into every checkpoint directory (schema, step, model id)."""


class EngineError(IntellectError, RuntimeError):
    """An engine could not load a checkpoint or generate (message names what was wrong)."""


class SamplingParams(BaseModel):
    """How to sample completions (crosses process boundaries: a worker's configuration)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int = Field(128, ge=1, le=32768)
    temperature: float = Field(1.0, ge=0.0)
    """0 means greedy"""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    """0 disables top-k"""
    stop: tuple[str, ...] = ()
    """stop strings: generation ends once the decoded completion contains one (it is cut off)"""
    seed: int | None = None
    """base seed of the replayable sampler: completion i of a call draws its Gumbel noise from
    `intellect.verifier.replay.sample_seed(seed, i)` (same seed, prompts and weights → same
    tokens; a validator replays the sampler from it); None draws a random base seed"""
    capture_proofs: bool = True
    """build TOPLOC proofs from the hidden states of this very pass"""


@dataclass
class Generation:
    """One completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    finish_reason: Literal["stop", "length"]
    logprobs: list[float] | None = None
    """log π(token) under the model's untempered distribution at sampling time"""
    proofs: list[bytes] = field(default_factory=list)
    """TOPLOC proofs of the completion's last hidden states (one per chunk of decoded tokens)"""


@runtime_checkable
class InferenceEngine(Protocol):
    """What workers, validators' samplers and the learning loop need from an engine."""

    @property
    def checkpoint_dir(self) -> Path | None: ...

    def load(self, checkpoint_dir: Path) -> None:
        """Load (or hot-swap to) the checkpoint in `checkpoint_dir` without a process restart."""
        ...

    def generate(self, prompts: list[list[int]] | list[str], params: SamplingParams) -> list[Generation]:
        """One completion per prompt, in order."""
        ...


def checkpoint_step(checkpoint_dir: Path) -> int | None:
    """The policy step recorded by the trainer in a checkpoint dir, or None for a base model."""
    meta = Path(checkpoint_dir) / CHECKPOINT_META
    if not meta.is_file():
        return None
    try:
        return int(json.loads(meta.read_text())["step"])
    except (ValueError, KeyError, TypeError) as exc:
        raise EngineError(f"checkpoint {checkpoint_dir}: unreadable {CHECKPOINT_META}: {exc}") from None
