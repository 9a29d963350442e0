"""bench/grpo/seeds.py: several pool_vs_trl.py runs read as one comparison (mean curves, paired differences, the
tax to the same accuracy on the mean curves), on reports written here in pool_vs_trl.py's format."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpo" / "seeds.py"


@pytest.fixture(scope="module")
def seeds():
    spec = importlib.util.spec_from_file_location("bench_seeds", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_seeds"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("bench_seeds", None)


def _run(tmp_path: Path, seed: int, pool: list[tuple[float, float, float]], trl: list[tuple[float, float, float]],
         **config) -> Path:
    """A finished run: points (wall, held-out, train) at steps 0, 2, 4, ..."""
    def side(name, pts):
        return {"name": name, "wall_s": pts[-1][0], "points": [
            {"step": 2 * i, "samples": 64 * i, "wall_s": w, "heldout": h, "train": t} for i, (w, h, t) in enumerate(pts)]}
    d = tmp_path / f"s{seed}"
    d.mkdir()
    pool_side = side("pool", pool)
    # a checkpoint kept at one of TRL's generated counts (the equal-samples table): not an evaluated step
    pool_side["points"].insert(1, {"step": 1, "samples": 40, "wall_s": 1.0, "heldout": 0.99, "train": 0.99})
    report = {"config": {"seed": seed, "steps": 2 * (len(pool) - 1), "eval_every": 2, "lr": 2e-5, **config},
              "sides": [pool_side, side("trl", trl)],
              "summary": {"tax_equal_steps": pool[-1][0] / trl[-1][0], "heldout": {"target": None}}}
    (d / "pool-vs-trl.json").write_text(json.dumps(report))
    return d


def test_mean_curves_paired_differences_and_the_tax(seeds, tmp_path: Path) -> None:
    a = _run(tmp_path, 0, [(0, 0.2, 0.5), (30, 0.4, 0.6), (60, 0.6, 0.8)], [(0, 0.2, 0.5), (20, 0.5, 0.7), (40, 0.6, 0.8)])
    b = _run(tmp_path, 1, [(0, 0.4, 0.5), (30, 0.4, 0.6), (60, 0.4, 0.8)], [(0, 0.4, 0.5), (20, 0.5, 0.7), (40, 0.4, 0.8)])
    agg = seeds.aggregate(seeds.load_runs([a, b]))
    assert agg["seeds"] == [0, 1] and agg["pool"]["heldout"] == pytest.approx([0.3, 0.4, 0.5])
    assert agg["pool"]["heldout_se"][0] == pytest.approx(0.1)  # sd 0.1414 / sqrt(2)
    assert agg["trl"]["heldout"] == pytest.approx([0.3, 0.5, 0.5])
    assert agg["paired_heldout"][1] == pytest.approx((-0.1, 0.0))
    assert agg["tax_equal_steps"] == pytest.approx(120 / 80)
    h = agg["heldout"]
    assert h["target"] == pytest.approx(0.5)  # the best mean level both reach
    # first evaluated point: pool at step 4 (60 s), TRL at step 2 (20 s)
    assert h["first_point"] == {"pool_s": pytest.approx(60), "trl_s": pytest.approx(20), "tax": pytest.approx(3.0)}
    # interpolated: the pool's mean crosses 0.5 at its last point too (0.4 at 30 s -> 0.5 at 60 s)
    assert h["interpolated"]["pool_s"] == pytest.approx(60) and h["interpolated"]["trl_s"] == pytest.approx(20)
    t = agg["train"]
    assert t["target"] == pytest.approx(0.8)
    assert t["interpolated"]["tax"] == pytest.approx(60 / 40)
    text = seeds.render(agg)
    assert "| 2 | 0.400 ± 0.000 | 0.500 ± 0.000 | -0.100 ± 0.000 |" in text
    assert "heldout: tax to the same mean accuracy 0.500" in text


def test_interpolation_between_points(seeds, tmp_path: Path) -> None:
    a = _run(tmp_path, 0, [(0, 0.0, 0.0), (100, 0.8, 0.8)], [(0, 0.0, 0.0), (50, 0.4, 0.4)])
    agg = seeds.aggregate(seeds.load_runs([a]))
    h = agg["heldout"]
    assert h["target"] == pytest.approx(0.4)
    assert h["first_point"]["tax"] == pytest.approx(2.0)
    assert h["interpolated"]["pool_s"] == pytest.approx(50.0) and h["interpolated"]["tax"] == pytest.approx(1.0)


def test_no_common_level_above_the_start(seeds, tmp_path: Path) -> None:
    a = _run(tmp_path, 0, [(0, 0.5, 0.5), (10, 0.4, 0.6)], [(0, 0.5, 0.5), (10, 0.6, 0.6)])
    assert seeds.aggregate(seeds.load_runs([a]))["heldout"] == {"start": 0.5, "target": None}


def test_runs_that_differ_in_more_than_the_seed_are_refused(seeds, tmp_path: Path) -> None:
    pts = [(0, 0.1, 0.1), (10, 0.2, 0.2)]
    a = _run(tmp_path, 0, pts, pts)
    b = _run(tmp_path, 1, pts, pts, refill=False)
    result = CliRunner().invoke(seeds.main, [str(a), str(b)])
    assert result.exit_code != 0 and "config field 'refill'" in result.output
    longer = [*pts, (20, 0.3, 0.3)]
    c = _run(tmp_path, 2, longer, longer)
    result = CliRunner().invoke(seeds.main, [str(a), str(c)])
    assert result.exit_code != 0 and "'steps'" in result.output
    result = CliRunner().invoke(seeds.main, [str(a), str(a)])
    assert result.exit_code != 0 and "a seed appears twice" in result.output
    # a field newer than a stored report reads as the value that means what the report ran, and no other value
    assert CliRunner().invoke(seeds.main, [str(a), str(_run(tmp_path, 3, pts, pts, min_signal_groups=0))]).exit_code == 0
    result = CliRunner().invoke(seeds.main, [str(a), str(_run(tmp_path, 4, pts, pts, min_signal_groups=2))])
    assert result.exit_code != 0 and "config field 'min_signal_groups' is 2" in result.output
    report = json.loads((c / "pool-vs-trl.json").read_text())
    report["sides"][1]["points"].pop(2)
    (c / "pool-vs-trl.json").write_text(json.dumps(report))
    result = CliRunner().invoke(seeds.main, [str(c)])
    assert result.exit_code != 0 and "the trl side has no evaluated point at step(s) [4]" in result.output
    result = CliRunner().invoke(seeds.main, [str(tmp_path / "missing")])
    assert result.exit_code != 0 and "not found" in result.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "pool-vs-trl.json").write_text("{")
    result = CliRunner().invoke(seeds.main, [str(tmp_path / "bad")])
    assert result.exit_code != 0 and "not JSON" in result.output
    (tmp_path / "bad" / "pool-vs-trl.json").write_text("[]")
    result = CliRunner().invoke(seeds.main, [str(tmp_path / "bad")])
    assert result.exit_code != 0 and "not a pool_vs_trl.py report" in result.output


def test_cli_prints_the_table_and_writes_json(seeds, tmp_path: Path) -> None:
    a = _run(tmp_path, 0, [(0, 0.2, 0.2), (10, 0.4, 0.4)], [(0, 0.2, 0.2), (8, 0.4, 0.4)])
    out = tmp_path / "agg.json"
    result = CliRunner().invoke(seeds.main, [str(a), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "wall-clock at equal steps (sum over runs): 1.25x" in result.output
    assert json.loads(out.read_text())["heldout"]["interpolated"]["tax"] == pytest.approx(1.25)
