"""bench/grpo/mixed_taskset.py: the online-difficulty-filtering bench's task set, learnable and unsolvable problems
in one file, written and read back as a pool would load it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from click.testing import CliRunner

from intellect.verifier.tasks import TaskSet

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpo" / "mixed_taskset.py"


def test_mixed_taskset_writes_learnable_and_unsolvable_problems_and_a_disjoint_heldout(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_mixed_taskset", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = CliRunner().invoke(module.main, ["--out", str(tmp_path), "--hard", "24"])
    assert result.exit_code == 0, result.output
    train, held = TaskSet.load(tmp_path / "train.jsonl"), TaskSet.load(tmp_path / "heldout.jsonl")
    assert (len(train), len(held), train.name) == (88, 100, "mixed-64-learnable-24-hard")
    assert sum(1 for t in train if "*" in t.prompt) == 24 and all(t.id.startswith("hard-") for t in list(train)[64:])
    assert not {t.prompt for t in train} & {t.prompt for t in held}
    assert train.digest() == module.mixed_sets(24)[0].digest()  # deterministic: the same file every run
