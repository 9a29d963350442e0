"""bench/grpo/sampler_exactness.py's check 4 on TRL's own generation path (`trl_generation`): it runs only where
trl is installed (`.venv-trl`, `make bench-trl`) and is skipped elsewhere."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "bench" / "grpo"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def modules():
    try:
        yield _load("pool_vs_trl"), _load("sampler_exactness")
    finally:
        sys.modules.pop("pool_vs_trl", None)
        sys.modules.pop("sampler_exactness", None)


def test_trl_generation_samples_through_grpo_trainer(modules) -> None:
    """One decoded completion per prompt (without its prompt), no special tokens left in (TRL masks
    after the first EOS and decodes without them), reproducible (it seeds torch's generator), and sampled: the
    same prompt repeated does not always give the same text."""
    pytest.importorskip("trl")
    from transformers import AutoTokenizer

    from intellect.agents.models import tiny_model_dir

    bench, exactness = modules
    cfg = bench.BenchConfig(model="tiny", max_new_tokens=6, prompts_per_step=2, group_size=2, steps=1, threads=1)
    prompts = ["What is 2 + 3?"] * 12 + ["What is 7 + 1?"] * 4
    texts = exactness.trl_generation(cfg, tiny_model_dir(), prompts, batch=8)
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir()))
    assert len(texts) == len(prompts) and all(isinstance(t, str) for t in texts)
    assert not any(t.startswith(p) for t, p in zip(texts, prompts, strict=True))  # the completion, not the prompt
    assert not any(s in t for t in texts for s in tok.all_special_tokens if s)
    assert exactness.trl_generation(cfg, tiny_model_dir(), prompts, batch=8) == texts
    assert len(set(texts[:12])) > 1
