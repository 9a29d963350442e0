"""tools/mutate.py applies a Python mutant to a private copy, never to the working tree (issue 39).

Several mutation runs (mutmut, scripted mutants, plain tests) go on side by side in one checkout: a scripted mutant
written into verifier/ would be seen by all of them. The runner copies verifier/ and agents/ into
build/mutate/<pid>/src/intellect/, mutates the copy, puts it first on PYTHONPATH for the test run (and every child
it starts), and removes it afterwards.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TARGET = "verifier/prompts.py"

spec = importlib.util.spec_from_file_location("intellect_tools_mutate", ROOT / "tools" / "mutate.py")
assert spec and spec.loader
mutate = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mutate
spec.loader.exec_module(mutate)

PROBE = '''
import hashlib, json, os, pathlib, subprocess, sys
import intellect.verifier.prompts as p

def test_probe():
    child = subprocess.run([sys.executable, "-c", "import intellect.verifier.prompts as p; print(p.__file__)"],
                           capture_output=True, text=True, check=True).stdout.strip()
    tree = pathlib.Path(os.environ["MUTATE_ROOT"]) / "verifier" / "prompts.py"
    pathlib.Path(os.environ["MUTATE_PROBE"]).write_text(json.dumps({
        "loaded": p.__file__, "child": child, "tree_sha": hashlib.sha256(tree.read_bytes()).hexdigest()}))
    assert "MUTATED" not in pathlib.Path(p.__file__).read_text()
'''


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    # inside the checkout (build/ is ignored by git): the brownie pytest plugin refuses test files outside it
    folder = ROOT / "build" / "mutate-probe" / tmp_path.name
    folder.mkdir(parents=True)
    test = folder / "test_mutate_probe.py"
    test.write_text(PROBE)
    out = tmp_path / "probe.json"
    monkeypatch.setenv("MUTATE_PROBE", str(out))
    monkeypatch.setenv("MUTATE_ROOT", str(ROOT))
    yield test, out
    shutil.rmtree(folder, ignore_errors=True)


def _run(old: str, new: str, test: Path) -> str:
    verdict, _ = mutate.run_mutant(mutate.Mutant("probe", TARGET, old, new, (str(test),)), timeout=120)
    return verdict


def test_a_python_mutant_runs_in_a_copy_and_the_working_tree_never_changes(probe: tuple[Path, Path]) -> None:
    test, out = probe
    before = _sha(ROOT / TARGET)
    assert _run("    text = task.prompt\n", "    text = task.prompt  # MUTATED\n", test) == "killed"
    seen = json.loads(out.read_text())
    stage = ROOT / "build" / "mutate"
    for loaded in (seen["loaded"], seen["child"]):  # the test process and a child it starts both load the copy
        assert Path(loaded).is_relative_to(stage) and loaded.endswith("/src/intellect/verifier/prompts.py")
    assert seen["tree_sha"] == before  # during the run
    assert _sha(ROOT / TARGET) == before  # after it
    assert not Path(seen["loaded"]).exists()  # the copy is removed


def test_a_mutant_the_tests_cannot_see_survives(probe: tuple[Path, Path]) -> None:
    test, out = probe
    assert _run("    text = task.prompt\n", "    text = task.prompt  # same code\n", test) == "survived"
    assert json.loads(out.read_text())["tree_sha"] == _sha(ROOT / TARGET)


def test_a_mutant_that_does_not_match_exactly_once_is_not_applied(probe: tuple[Path, Path]) -> None:
    test, _ = probe
    assert _run("no such line in the file\n", "x", test) == "not-applied: 0 matches"
