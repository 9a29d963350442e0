"""Honest false-positive check (issue 5): honest submissions across engine batch sizes, worker/validator
thread counts and validator prefill batching, verified as a validator does; none may be rejected.
Slow (opt-in): 200 submissions × 16 short completions (target lengths 8..40 tokens), 12 engine batch / thread /
prefill-batching variations, verified with the validator's fp32 TOPLOC profile and the sampling check. The driver
is bench/security/honest_fp.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _driver():
    name = "_intellect_bench_security_honest_fp"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "security" / "honest_fp.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_honest_submissions_200_zero_rejected():
    driver = _driver()
    out = driver.run(200)
    print("honest false positives:", out)
    assert out["submissions"] == 200 and out["profile"] == "fp32"
    assert out["samples"] == 200 * driver.PROBLEMS * driver.GROUP
    assert out["rejected"] == 0 and out["submissions_rejected"] == 0, out["reasons"]
    # the same verification does bite: one altered token per completion (proofs kept) is rejected
    assert out["control_caught"] >= 0.95 * out["control_altered"] > 0, out

