"""bench/gpu/bench_gpu.py in its smoke size on CPU (the tiny model): every figure of the GPU run is produced,
so a session with a GPU runs the same code with `--device cuda` (docs/benchmarks.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gpu" / "bench_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_bench_gpu_smoke_on_cpu_produces_every_figure(bench, dtype: str) -> None:
    out = bench.run("transformers", "cpu", dtype, "tiny", prompts_n=2, max_tokens=4, steps=1, batch=2)
    assert out["device"] == "cpu" and out["dtype"] == {"fp32": "float32", "bf16": "bfloat16"}[dtype]
    gen = out["generation"]
    for label in ("baseline", "replay_sampler", "replay_sampler_and_proofs"):
        assert gen[label]["tokens"] > 0 and gen[label]["tokens_per_s"] > 0
    v = out["validation"]
    assert v["samples"] == 2 and v["accepted"] == 2  # the worker's own completions pass the mixed profile
    assert v["ratio_to_generation"] > 0 and v["workers_one_validator_keeps_up_with"] == v["ratio_to_generation"]
    assert out["trainer"]["steps"] == 1 and out["trainer"]["seconds_per_step"] > 0
