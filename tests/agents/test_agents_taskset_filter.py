"""`intellect taskset filter`: the offline difficulty filter with a model (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run_cli

from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.tasks import TaskSet


def _run(args: list[str]) -> tuple[int, str]:
    code, out, err = run_cli(args)
    return code, out + err


def test_filter_keeps_rates_in_range_and_records_them(tmp_path: Path) -> None:
    src = synthetic_task_set(6, seed=2, max_operand=9, ops=("+",)).save(tmp_path / "t.jsonl")
    out, rates = tmp_path / "f.jsonl", tmp_path / "rates.json"
    args = ["taskset", "filter", str(src), "--model", "tiny", "-k", "3", "--max-tokens", "4", "--low", "0",
            "--high", "1", "-o", str(out), "--rates", str(rates)]
    code, text = _run(args)
    assert code == 0 and "kept 6/6" in text, text
    assert "t.jsonl: 3 samples per problem: 6/6 problems scored" in text  # progress, on stderr when not a terminal
    kept = TaskSet.load(out)
    got = json.loads(rates.read_text())
    assert all(t.difficulty == got[t.id] for t in kept) and all(r in (0, 1 / 3, 2 / 3, 1) for r in got.values())
    code, _ = _run([*args[:-4], "-o", str(tmp_path / "g.jsonl")])
    assert code == 0 and TaskSet.load(tmp_path / "g.jsonl").digest() == kept.digest()  # seeded: same rates


def test_filter_that_keeps_nothing_is_an_error(tmp_path: Path) -> None:
    src = synthetic_task_set(4, seed=2, max_operand=9, ops=("+",)).save(tmp_path / "t.jsonl")
    rates = tmp_path / "rates.json"
    code, text = _run(["taskset", "filter", str(src), "--model", "tiny", "-k", "2", "--max-tokens", "3",
                       "--low", "0.99", "--high", "1", "-o", str(tmp_path / "f.jsonl"), "--rates", str(rates)])
    # says why (the random tiny model solves nothing: the data is too hard for it) and still writes the rates
    assert code == 2 and "kept no task with solve rate in [0.99, 1.0]: of 4 problems" in text, text
    assert "4 never solved" in text and "too hard for it" in text, text
    assert not (tmp_path / "f.jsonl").exists()
    assert json.loads(rates.read_text()) == {t.id: 0.0 for t in TaskSet.load(src)}
    code, text = _run(["taskset", "filter", str(src), "--model", str(tmp_path), "-o", str(tmp_path / "x.jsonl")])
    assert code == 2 and "not 'smollm2', 'tiny' or an HF model directory" in text
