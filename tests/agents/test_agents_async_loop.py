"""The single-process async loop's mechanics: staleness bound, hot swaps, files on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellect.agents.demo.learn import LearnConfig, plot_curve, run_async_loop
from intellect.verifier.rollouts import RolloutFile


def test_run_async_loop_respects_async_level(tmp_path: Path) -> None:
    cfg = LearnConfig(run_dir=tmp_path / "run", steps=4, async_level=1, prompts_per_step=2, group_size=4,
                      train_tasks=40, heldout_tasks=8, eval_samples=1, eval_every=2, max_operand=9,
                      warm_start_steps=10, capture_proofs=True)
    result = run_async_loop(cfg)
    lags = [s["step"] - 1 - s["policy_step"] for s in result.step_stats]  # train step t = stats.step - 1
    assert len(lags) == 4 and all(0 <= lag <= 1 for lag in lags)
    assert [s for s, _ in result.curve] == [0, 2, 4]
    assert (cfg.run_dir / "checkpoints" / "step-4" / "model.safetensors").is_file()
    rf = RolloutFile.read(cfg.run_dir / "rollouts" / "batch-3.rollouts")
    assert len(rf) == 8 and all(r.proofs for r in rf)
    assert 0.0 <= result.idle_fraction <= 1.0 and result.gen_tokens > 0
    assert plot_curve(result, tmp_path / "curve.png").stat().st_size > 1000
    # a directory that is not a run directory is never wiped
    other = tmp_path / "precious"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="refusing to wipe"):
        run_async_loop(LearnConfig(run_dir=other))
    assert (other / "keep.txt").is_file()
