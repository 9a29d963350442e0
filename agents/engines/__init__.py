"""Inference engines behind one interface (`InferenceEngine`): transformers and vLLM."""

from intellect.agents.engines._base import (
    CHECKPOINT_META,
    EngineError,
    Generation,
    InferenceEngine,
    SamplingParams,
    checkpoint_step,
)
from intellect.agents.engines._transformers import TransformersEngine, sample_next
from intellect.agents.engines._vllm import VllmEngine

__all__ = [
    "CHECKPOINT_META",
    "EngineError",
    "Generation",
    "InferenceEngine",
    "SamplingParams",
    "TransformersEngine",
    "VllmEngine",
    "checkpoint_step",
    "sample_next",
]
