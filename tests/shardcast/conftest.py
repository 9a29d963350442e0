"""Fixtures for the Shardcast tests: checkpoints on disk and CLI processes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from shardcast_helpers import Procs, write_tiny_hf_checkpoint


@pytest.fixture(scope="session")
def hf_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_hf_checkpoint(tmp_path_factory.mktemp("hf") / "tiny-llama")


@pytest.fixture
def random_checkpoint(tmp_path: Path) -> Path:
    """A fake checkpoint of ~3 MB in several files (one empty, one nested), random bytes."""
    d = tmp_path / "ckpt"
    (d / "sub").mkdir(parents=True)
    rng = random.Random(1)
    (d / "model-00001-of-00002.safetensors").write_bytes(rng.randbytes(1_700_000))
    (d / "model-00002-of-00002.safetensors").write_bytes(rng.randbytes(1_300_123))
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "sub" / "empty.txt").write_bytes(b"")
    return d


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path)
    yield p
    p.close()
