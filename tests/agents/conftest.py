"""Fixtures of the agents tests: the tiny model (cached), a short noisy warm start, one thread."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The machine is shared and has 2 cores: torch's default of one intra-op thread per core spins
# and slows tiny-model ops ~10x under load.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    """The tiny Llama + locally trained tokenizer (built once into the user cache)."""
    from intellect.agents.models import tiny_model_dir

    return tiny_model_dir()


@pytest.fixture(scope="session")
def learn_tasks():
    """16 single-digit additions: small enough that a short warm start fits them."""
    from intellect.agents.tasks import synthetic_task_set

    return synthetic_task_set(16, seed=3, max_operand=9, ops=("+",), name="learn-test")


@pytest.fixture(scope="session")
def warm_dir(tiny_dir: Path, learn_tasks, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model after a short noisy warm start on `learn_tasks` (right 20% of the time)."""
    from intellect.agents.warmstart import warm_start

    out = tmp_path_factory.mktemp("warm") / "model"
    return warm_start(tiny_dir, out, learn_tasks, steps=150, batch_size=32, correct=0.2, max_offset=2, seed=0)
