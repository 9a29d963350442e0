"""Issue 37: a trainer whose attested rollouts carry no group with learning signal says so (solve rate of what it
saw and what to change) instead of "waiting for attested rollouts"; /status carries it for the dashboard."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellect.agents.config import load_config
from intellect.agents.grpo_trainer import Sample, signal_groups
from intellect.agents.roles.signal import no_signal_report, signal_chance
from intellect.agents.roles.trainer import Trainer


def _group(pid: str, rewards: list[float], source: str = "7") -> list[Sample]:
    return [Sample(pid, [1, 2], [3, 4], 0.0, 0, r, source) for r in rewards]


def test_signal_chance() -> None:
    assert signal_chance(0.0, 4) == 0 and signal_chance(1.0, 4) == 0
    assert signal_chance(0.5, 2) == pytest.approx(0.5) and signal_chance(0.1, 8) > signal_chance(0.1, 4)


def test_report_of_unsolved_groups_says_too_hard() -> None:
    samples = _group("a", [0, 0, 0, 0]) + _group("b", [0, 0, 0, 0]) + _group("c", [0, 0, 0, 0], source="8")
    assert signal_groups(samples) == 0
    r = no_signal_report(samples, step=3, submissions=2, waited_s=75, group_size=4, length_alpha=0.0, batch_groups=4)
    assert (r.groups, r.groups_never_solved, r.groups_always_solved, r.solve_rate) == (3, 3, 0, 0.0)
    assert r.message.startswith("step 3: no group with learning signal for 75 s: 2 attested submission(s), 3 groups "
                                "of 4, solve rate 0.0% (3 groups never solved, 0 always solved)")
    assert "too hard" in r.message and "taskset filter --low 0.1 --high 0.8" in r.message


def test_report_of_solved_groups_without_length_term_suggests_it() -> None:
    samples = _group("a", [1, 1, 1, 1]) + _group("b", [1, 1, 1, 1]) + _group("c", [0, 0, 0, 0])
    r = no_signal_report(samples, step=1, submissions=1, waited_s=61, group_size=4, length_alpha=0.0, batch_groups=2)
    assert r.solve_rate == pytest.approx(8 / 12, abs=1e-4) and r.groups_always_solved == 2
    assert "too easy" in r.message and "length term" in r.message
    r = no_signal_report(samples, step=1, submissions=1, waited_s=61, group_size=4, length_alpha=0.001, batch_groups=2)
    assert "larger length_alpha" in r.message


def test_trainer_reports_no_signal_in_doing_and_status_fields(tmp_path: Path) -> None:
    cfg = load_config(None, env={}, overrides={"role": "trainer", "data_dir": str(tmp_path / "t")})
    t = Trainer(cfg)
    samples = _group("a", [0, 0, 0, 0]) + _group("b", [0, 0, 0, 0])
    report = t.report_no_signal({"step": 5, "submissions": [11, 12]}, samples, 90.0)
    assert t.no_signal is report and t.doing == report.message
    assert "waiting for attested rollouts" not in t.doing and "solve rate 0.0%" in t.doing
