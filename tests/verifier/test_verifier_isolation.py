"""Parsing strangers' bytes where a crash cannot reach the node (`intellect.verifier.isolation`).

Each outcome class with a child that really ends that way (test-only targets in isolation_targets.py), then
the rollout reader's use of it: old Parquet files read in a child, the committed inputs that abort pyarrow
26.0.1 refused with a verdict naming the abort while this test process survives, a child past its deadline
`ParseUnavailable` (retry later, not a rejection).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from intellect.verifier import rollouts
from intellect.verifier.isolation import (
    ChildLimits,
    ParseCrashed,
    ParseRefused,
    ParseUnavailable,
    run_isolated,
)
from intellect.verifier.rollouts import RolloutFile, RolloutFileError, RolloutMeta, RolloutRow

HERE = Path(__file__).parent
DATA = HERE / "data"
ABORTS = sorted(DATA.glob("rollouts-v1-abort-*.parquet"))
FAST = ChildLimits(memory_bytes=1 << 30, cpu_seconds=2, wall_seconds=30)


@pytest.fixture
def targets(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PYTHONPATH", str(HERE), prepend=os.pathsep)
    return "isolation_targets"


def test_isolated_result_comes_back(targets: str) -> None:
    assert run_isolated(f"{targets}:echo", b"abc", {"tag": "!"}, FAST) == b"cba!"


def test_isolated_limits_are_set_in_the_child(targets: str) -> None:
    core, mem, cpu = json.loads(run_isolated(f"{targets}:core_limit", b"", None, FAST))
    assert core == [0, 0] and mem == [1 << 30, 1 << 30] and cpu[0] == 2


def test_isolated_clean_error_is_refused_with_its_message(targets: str) -> None:
    with pytest.raises(ParseRefused, match="bad bytes: 5 of them"):
        run_isolated(f"{targets}:refuse", b"12345", None, FAST)


@pytest.mark.parametrize(("target", "sig"), [("abort", signal.SIGABRT), ("segfault", signal.SIGSEGV)])
def test_isolated_death_by_signal_is_a_verdict(targets: str, target: str, sig: int) -> None:
    with pytest.raises(ParseCrashed, match=f"aborted on this file \\(signal {sig}, {signal.Signals(sig).name}\\)") as e:
        run_isolated(f"{targets}:{target}", b"x", None, FAST)
    assert e.value.signal == sig


def test_isolated_cpu_limit_is_a_verdict(targets: str) -> None:
    with pytest.raises(ParseCrashed, match=r"passed its 1 s CPU-time limit \(signal 24\)"):
        run_isolated(f"{targets}:spin", b"", None, ChildLimits(cpu_seconds=1, wall_seconds=60))


def test_isolated_memory_limit_is_a_verdict(targets: str) -> None:
    with pytest.raises(ParseCrashed, match="ran out of its 1024 MiB memory limit"):
        run_isolated(f"{targets}:hog", b"", None, FAST)


def test_isolated_own_exit_status_is_a_verdict(targets: str) -> None:
    with pytest.raises(ParseCrashed, match="exited with status 7"):
        run_isolated(f"{targets}:exits", b"", None, FAST)


def test_isolated_deadline_is_unavailable_not_a_verdict(targets: str) -> None:
    with pytest.raises(ParseUnavailable, match="passed its 1 s deadline"):
        run_isolated(f"{targets}:sleep", b"", None, ChildLimits(wall_seconds=1))


def test_isolated_sigkill_is_unavailable_not_a_verdict(targets: str) -> None:
    """SIGKILL is what the OOM killer sends: the node's trouble, not the bytes'."""
    with pytest.raises(ParseUnavailable, match=r"killed by SIGKILL \(signal 9\), not by the bytes"):
        run_isolated(f"{targets}:killed", b"", None, FAST)


def test_isolated_target_that_cannot_start_is_unavailable(targets: str) -> None:
    with pytest.raises(ParseUnavailable, match="could not start"):
        run_isolated(f"{targets}:no_such_function", b"", None, FAST)
    with pytest.raises(ParseUnavailable, match="could not start"):
        run_isolated("no_such_module_anywhere:f", b"", None, FAST)


# -- rollout files ---------------------------------------------------------------------------------------------


def _file() -> RolloutFile:
    w = "0x" + "ab" * 20
    rows = [RolloutRow(problem_id=f"p{p}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 40)), reward=0.9,
                       task_reward=1.0, length_penalty=0.1, target_length=64, advantage=0.5 * (k - 1),
                       policy_step=7, proofs=[bytes(258), bytes(258)], worker=w)
            for p in range(2) for k in range(2)]
    meta = RolloutMeta(task_id="42", seed="0xdeadbeef", model="step-7", worker=w, policy_step=7, group_size=2)
    return RolloutFile(meta, rows, name="fuzz")


@pytest.mark.parametrize("path", ABORTS, ids=[p.stem for p in ABORTS])
def test_rollout_file_that_aborts_pyarrow_is_rejected_and_the_node_survives(path: Path) -> None:
    """The regression inputs: a 1- and a 3-byte mutation of a valid v1 file (found by mutating its footer and
    parsing each mutant in a child until one died), on which pyarrow 26.0.1 throws a C++ ParquetException
    ("... level histogram size mismatch") through a noexcept frame: std::terminate, SIGABRT."""
    data = path.read_bytes()
    plain = subprocess.run(  # the v1 reader in a process of its own, unisolated: what a node did before
        [sys.executable, "-c", "import sys; from intellect.verifier._rollouts_v1 import read_v1; "
         "from intellect.verifier.rollouts import RolloutLimits; read_v1(sys.stdin.buffer.read(), 'x', RolloutLimits())"],
        input=data, capture_output=True, timeout=120)
    with pytest.raises(RolloutFileError, match=f"rollout file {path.stem}: ") as info:
        RolloutFile.from_bytes(data, name=path.stem)
    if plain.returncode == -signal.SIGABRT:  # pyarrow as pinned: it still aborts on this file
        assert b"histogram size mismatch" in plain.stderr
        assert "the Parquet reader aborted on this file (signal 6, SIGABRT)" in str(info.value)
    else:  # a later pyarrow refuses it cleanly: the verdict is still a refusal
        assert plain.returncode == 1, plain.stderr[-500:]


def test_rollout_file_v1_mutants_only_rollout_file_errors() -> None:
    """A few seeded footer mutations of a v1 file, each through the child: refused or read, nothing else."""
    import random

    good = _file().to_bytes(version=1)
    rnd = random.Random(5)
    for _ in range(6):
        buf = bytearray(good)
        for _ in range(3):
            buf[rnd.randrange(len(buf) - 600, len(buf) - 8)] = rnd.randrange(256)
        try:
            RolloutFile.from_bytes(bytes(buf), name="mutant")
        except RolloutFileError as exc:
            assert "rollout file mutant" in str(exc)


def test_rollout_file_v1_past_the_deadline_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rollouts, "V1_CHILD_LIMITS", ChildLimits(wall_seconds=0.01))
    with pytest.raises(ParseUnavailable, match="deadline") as info:
        RolloutFile.from_bytes(_file().to_bytes(version=1), name="slow")
    assert not isinstance(info.value, RolloutFileError)  # not a verdict: the validator retries later


def test_rollout_file_v2_is_never_parsed_in_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> bytes:
        raise AssertionError("a v2 file went to a child process")
    monkeypatch.setattr(rollouts, "run_isolated", refuse)
    assert RolloutFile.from_bytes(_file().to_bytes()).rows == _file().rows
