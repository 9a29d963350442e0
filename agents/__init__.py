"""intellect.agents: GRPO (pure functions and trainer), inference engines, rollout files, tasks.

The role agents (worker, validator, trainer, relay) and the `intellect-agent` CLI build on these.
Heavy modules (torch, transformers) load on first use of the names that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "GRPOConfig",
    "GRPOTrainer",
    "Generation",
    "InferenceEngine",
    "RolloutFile",
    "RolloutFileError",
    "RolloutMeta",
    "RolloutRow",
    "Sample",
    "SamplingParams",
    "StaleRolloutError",
    "TransformersEngine",
    "VllmEngine",
]

_LAZY = {
    "GRPOConfig": "intellect.agents.grpo_trainer",
    "GRPOTrainer": "intellect.agents.grpo_trainer",
    "Sample": "intellect.agents.grpo_trainer",
    "Generation": "intellect.agents.engines",
    "InferenceEngine": "intellect.agents.engines",
    "SamplingParams": "intellect.agents.engines",
    "TransformersEngine": "intellect.agents.engines",
    "VllmEngine": "intellect.agents.engines",
    "RolloutFile": "intellect.verifier.rollouts",
    "RolloutFileError": "intellect.verifier.rollouts",
    "RolloutMeta": "intellect.verifier.rollouts",
    "RolloutRow": "intellect.verifier.rollouts",
    "StaleRolloutError": "intellect.agents.grpo",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'intellect.agents' has no attribute {name!r}")
