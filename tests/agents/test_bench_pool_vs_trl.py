"""bench/grpo/pool_vs_trl.py's pure parts, without trl: argument parsing (`--dry-run`), the settings handed to
TRL's GRPOConfig, the verifier reward adapter TRL calls, and the table / summary built from the two curves.
With trl installed (`.venv-trl`, `make bench-trl`) one more test checks that TRL's own GRPOConfig accepts
those settings; it is skipped elsewhere."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpo" / "pool_vs_trl.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("pool_vs_trl", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["pool_vs_trl"] = module  # its dataclasses resolve their annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("pool_vs_trl", None)


def test_dry_run_parses_arguments_into_both_sides_settings(bench) -> None:
    result = CliRunner().invoke(bench.main, ["--dry-run", "--steps", "30", "--eval-every", "8", "--group-size", "4",
                                             "--prompts-per-step", "6", "--optimizer-steps", "3", "--lr", "1e-4",
                                             "--kl", "0.02", "--max-new-tokens", "12", "--no-proofs"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    cfg, trl = out["config"], out["trl_args"]
    assert cfg["steps"] == 30 and cfg["proofs"] is False and cfg["kl_coef"] == 0.02
    assert out["eval_steps"] == [0, 8, 16, 24, 30]  # the base model, every 8 rollout steps, and the last
    # one rollout step = 6 problems x 4 completions = 24 samples, in 3 optimizer updates of 8
    assert trl["per_device_train_batch_size"] == 8 and trl["steps_per_generation"] == 3
    assert trl["num_generations"] == 4 and trl["max_steps"] == 90
    assert trl["learning_rate"] == 1e-4 and trl["beta"] == 0.02 and trl["max_completion_length"] == 12
    assert trl["loss_type"] == "dr_grpo" and trl["lr_scheduler_type"] == "constant" and trl["delta"] == 4.0


def test_settings_that_cannot_split_into_optimizer_steps_are_refused(bench) -> None:
    result = CliRunner().invoke(bench.main, ["--dry-run", "--prompts-per-step", "5", "--group-size", "3",
                                             "--optimizer-steps", "2"])
    assert result.exit_code != 0
    assert "not divisible by optimizer_steps" in str(result.exception)
    with pytest.raises(ValueError, match="group_size"):
        bench.BenchConfig(group_size=1)


def test_verifier_reward_scores_completions_like_the_pool(bench) -> None:
    from intellect.agents.tasks import synthetic_task_set

    tasks = synthetic_task_set(3, seed=5, max_operand=20, ops=("+",), name="t")
    reward = bench.verifier_reward(tasks)
    a, b = list(tasks)[:2]
    prompts = [a.prompt, a.prompt, b.prompt]
    completions = [f" {a.answer}", " 999", [{"role": "assistant", "content": f" {b.answer}"}]]
    assert reward(prompts, completions, task_id=[a.id, a.id, b.id], extra_column=[1, 2, 3]) == [1.0, 0.0, 1.0]
    with pytest.raises(KeyError, match="not in the training set"):
        reward([a.prompt], [" 1"], task_id=["nope"])
    with pytest.raises(ValueError, match="task ids"):
        reward([a.prompt], [" 1"], task_id=[a.id, b.id])


def _side(bench, name: str, rows: list[tuple[int, float, float, float]]):
    points = [bench.Point(step, step * 128, wall, heldout=h, train=t) for step, wall, h, t in rows]
    return bench.SideResult(name, points, wall_s=rows[-1][1])


def test_table_and_summary(bench) -> None:
    pool = _side(bench, "pool", [(0, 0.0, 0.10, 0.10), (10, 20.0, 0.30, 0.50), (20, 40.0, 0.50, 0.90)])
    trl = _side(bench, "trl", [(0, 0.0, 0.10, 0.10), (10, 25.0, 0.40, 0.60), (20, 50.0, 0.45, 0.80)])
    table = bench.build_table(pool, trl).splitlines()
    assert len(table) == 2 + 3
    assert table[3] == "| 10 | 1280 | 0.300 | 0.400 | 0.500 | 0.600 | 20.0 | 25.0 | 0.80 |"
    s = bench.summarize(pool, trl)
    assert s["tax_equal_samples"] == pytest.approx(40.0 / 50.0)
    h = s["heldout"]
    assert h["target"] == pytest.approx(0.45)  # the best level both reach
    assert h["time_to_target_pool_s"] == 40.0 and h["time_to_target_trl_s"] == 50.0
    assert h["tax_to_target"] == pytest.approx(0.8) and h["final_diff"] == pytest.approx(0.05)
    assert s["train"]["target"] == pytest.approx(0.8) and s["train"]["samples_to_target_pool"] == 2560
    flat = _side(bench, "trl", [(0, 0.0, 0.10, 0.10), (10, 25.0, 0.10, 0.10), (20, 50.0, 0.05, 0.10)])
    assert bench.summarize(pool, flat)["heldout"]["target"] is None  # TRL learnt nothing: no common target


def test_trl_accepts_the_settings(bench, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from trl import GRPOConfig

    cfg = bench.BenchConfig(steps=3)
    args = GRPOConfig(output_dir=str(tmp_path), **cfg.trl_args())
    assert args.generation_batch_size == cfg.samples_per_step  # 16 problems x 8 completions per generation
    assert args.max_steps == 6 and args.delta == 4.0 and args.loss_type == "dr_grpo"
