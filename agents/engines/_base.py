"""The inference-engine interface shared by the transformers and vLLM engines."""

from __future__ import annotations

import json
import logging
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from intellect.sdk import IntellectError

__all__ = [
    "ARCHITECTURE_KEYS",
    "CHECKPOINT_META",
    "CheckpointHolder",
    "EngineError",
    "Generation",
    "InferenceEngine",
    "SamplingParams",
    "checkpoint_step",
    "read_checkpoint_config",
]

log = logging.getLogger(__name__)

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


ARCHITECTURE_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size",
                     "num_attention_heads", "num_key_value_heads", "tie_word_embeddings")
"""The config.json fields that must match for a new checkpoint's weights to be swapped into a loaded model."""


def read_checkpoint_config(checkpoint_dir: Path) -> dict[str, Any]:
    """A checkpoint dir's config.json, or EngineError naming what is missing or unreadable."""
    cfg_path = Path(checkpoint_dir) / "config.json"
    if not cfg_path.is_file():
        raise EngineError(f"checkpoint {checkpoint_dir} has no config.json (not an HF model directory)")
    try:
        config = json.loads(cfg_path.read_text())
    except ValueError as exc:
        raise EngineError(f"checkpoint {checkpoint_dir}: unreadable config.json: {exc}") from None
    if not isinstance(config, dict):
        raise EngineError(f"checkpoint {checkpoint_dir}: config.json is not a JSON object")
    return config


class CheckpointHolder(ABC):
    """Loading, as both engines do it: read the checkpoint's config.json and policy step, swap the new weights
    into the loaded model when the architecture is the same (no process restart, no new KV cache), else start
    afresh; then record the dir, config and step. An engine supplies `_has_model`, `_swap_weights` and
    `_load_fresh`."""

    _checkpoint_dir: Path | None = None
    _config: dict[str, Any] | None = None
    policy_step: int | None = None
    stats: dict[str, Any]

    @property
    def checkpoint_dir(self) -> Path | None:
        return self._checkpoint_dir

    def load(self, checkpoint_dir: Path) -> None:
        """Load a checkpoint dir; with one of the same architecture loaded, swap weights in place."""
        checkpoint_dir = Path(checkpoint_dir)
        config = read_checkpoint_config(checkpoint_dir)
        step = checkpoint_step(checkpoint_dir)
        t0 = time.perf_counter()
        if self._has_model() and self._same_architecture(config):
            self._swap_weights(checkpoint_dir)
        else:
            self._load_fresh(checkpoint_dir)
        self._checkpoint_dir = checkpoint_dir
        self._config = config
        self.policy_step = step
        self.stats["loads"] += 1
        log.info("%s loaded %s (step %s) in %.2fs", type(self).__name__, checkpoint_dir, step,
                 time.perf_counter() - t0)

    def _same_architecture(self, config: dict[str, Any]) -> bool:
        """Whether a checkpoint of this config.json can be swapped into the loaded model in place."""
        old = self._config
        return old is not None and all(config.get(k) == old.get(k) for k in ARCHITECTURE_KEYS)

    @abstractmethod
    def _has_model(self) -> bool: ...

    @abstractmethod
    def _swap_weights(self, checkpoint_dir: Path) -> None: ...

    @abstractmethod
    def _load_fresh(self, checkpoint_dir: Path) -> None: ...
