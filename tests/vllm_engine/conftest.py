"""Fixtures of the vLLM tests (opt-in: `pytest -m vllm tests/vllm_engine`, in `.venv-vllm`).

One `VllmEngine` for the whole session: vLLM builds one in-process engine core at a time, and
an engine start costs 20-60 s on 2 cores. Tests `load()` the checkpoint they need first (a hot
swap for the same architecture, a rebuild for another).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


@pytest.fixture(scope="session")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trainer checkpoint (step 0) of the tiny Llama with its locally trained tokenizer."""
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer
    from intellect.agents.models import tiny_model_dir

    trainer = GRPOTrainer(tiny_model_dir(), tmp_path_factory.mktemp("tiny") / "ckpt", GRPOConfig(lr=1e-2))
    path = trainer.save_checkpoint()
    assert path is not None
    return path


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from intellect.verifier.models import smollm2_path

    return smollm2_path()


@pytest.fixture(scope="session")
def engine(tiny_ckpt: Path) -> Iterator[object]:
    from intellect.agents.engines import VllmEngine

    eng = VllmEngine(tiny_ckpt, dtype="float32", max_model_len=512)
    yield eng
    eng.close()
