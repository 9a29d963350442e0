"""requirements.lock is the resolution of pyproject.toml: tools/check_lock.py (which the bootstrap runs
before installing) must accept the committed pair and name what disagrees in an edited one. The refusals are
checked by exit code and by the kind and package of each problem (`--json`), not by the messages' wording."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "tools" / "check_lock.py"


def _check(pyproject: Path, lock: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), "--json", "--pyproject", str(pyproject), "--lock", str(lock)],
        capture_output=True,
        text=True,
        check=False,
    )


def _problems(result: subprocess.CompletedProcess[str]) -> set[tuple[str, str | None]]:
    """(kind, package) of each problem the check reported."""
    return {(p["kind"], p["package"]) for p in json.loads(result.stdout)}


def test_check_lock_committed_pair_agrees() -> None:
    result = _check(ROOT / "pyproject.toml", ROOT / "requirements.lock")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_bootstrap_installs_from_the_lock() -> None:
    script = (ROOT / "tools" / "bootstrap.sh").read_text()
    assert "--require-hashes --no-deps -r requirements.lock" in script
    assert "tools/check_lock.py" in script


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    pyproject = tmp_path / "pyproject.toml"
    lock = tmp_path / "requirements.lock"
    pyproject.write_text((ROOT / "pyproject.toml").read_text())
    lock.write_text((ROOT / "requirements.lock").read_text())
    return pyproject, lock


def test_check_lock_new_dependency_without_relock_refused(pair: tuple[Path, Path]) -> None:
    pyproject, lock = pair
    pyproject.write_text(pyproject.read_text().replace('"click>=8.1",', '"click>=8.1",\n    "left-pad>=1",'))
    result = _check(pyproject, lock)
    assert result.returncode == 1
    assert _problems(result) == {("digest-mismatch", None), ("unpinned", "left-pad")}


def test_check_lock_range_that_excludes_the_pin_refused(pair: tuple[Path, Path]) -> None:
    pyproject, lock = pair
    pyproject.write_text(pyproject.read_text().replace('"pyarrow>=15"', '"pyarrow>=15,<16"'))
    result = _check(pyproject, lock)
    assert result.returncode == 1
    assert _problems(result) == {("digest-mismatch", None), ("pin-outside-range", "pyarrow")}


def test_check_lock_hand_edited_lock_refused(pair: tuple[Path, Path]) -> None:
    pyproject, lock = pair
    text = "\n".join(line for line in lock.read_text().splitlines() if not line.startswith("# input-sha256"))
    lock.write_text(text.replace("\npyarrow==", "\npyarrrow=="))
    result = _check(pyproject, lock)
    assert result.returncode == 1
    assert _problems(result) == {("no-digest", None), ("unpinned", "pyarrow")}


def test_check_lock_torch_local_version_satisfies_pin(pair: tuple[Path, Path]) -> None:
    # torch is locked as 2.13.0+cpu (the CPU wheel on disk) and pyproject asks for ==2.13.0
    _, lock = pair
    assert "\ntorch==2.13.0+cpu " in lock.read_text()
    assert _check(*pair).returncode == 0


def test_check_lock_unreadable_lock_refused(pair: tuple[Path, Path]) -> None:
    pyproject, lock = pair
    lock.write_text(lock.read_text() + "\nclick==8.1.0\nclick==8.1.1\n")  # a package pinned twice
    result = _check(pyproject, lock)
    assert result.returncode == 1
    assert _problems(result) == {("unreadable", None)}
    lock.unlink()
    assert _check(pyproject, lock).returncode == 1
