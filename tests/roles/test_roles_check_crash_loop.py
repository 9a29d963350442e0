"""A submission whose check ends the validator's process is not checked forever (issue 32).

The validator records "check of sid running" (its SQLite state store) before a check and "done" after; on
start, a check still running is one that ended the process. Here a real validator process (no chain: its
state store, `_recover_checks` as `start()` runs it, and `_process`) has a check that really aborts the process
(os.abort, what pyarrow's C++ did), three times in a row: two ends, then the validator gives the submission up
(no verdict, no vote, no challenge; `/status` says why) and its process lives. The in-process tests' validators
are real agents connected to a real devnet, whose chain time decides whether a submission's window is still open.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles._inflight import InFlightChecks
from intellect.agents.roles._state import StateStore
from intellect.verifier.isolation import ParseUnavailable

SUB = {"node": "0x" + "ab" * 20, "rollouts_cid": "bafk", "proofs_hash": "0x" + "00" * 32, "work_units": 1,
       "policy_step": 0, "window_end": 10**10, "attempts": 0}

_RESTART = r"""
import json, os, sys
from intellect.agents.config import load_config
from intellect.agents.roles.validator import Validator

cfg = load_config(None, env={}, overrides={"role": "validator", "data_dir": sys.argv[1]})
v = Validator(cfg)
if v.state.record("submission", 7) is None:
    v.state.put("submission", 7, "queued", json.loads(sys.argv[2]))
v._recover_checks()                                    # what start() does
v.verify_submission = lambda sid, sub: os.abort()      # a checker that ends the process on this submission
v._process(7)                                          # what the dispatcher runs for a queued submission
doc = v.status()
print(json.dumps({"status": v.state.record("submission", 7)["status"],
                  "shown": [d for d in doc["verdicts"] if d["submission_id"] == 7]}))
"""


def test_validator_gives_up_a_submission_whose_check_ended_it_twice(tmp_path: Path) -> None:
    runs = [subprocess.run([sys.executable, "-c", _RESTART, str(tmp_path / "v"), json.dumps(SUB)],
                           capture_output=True, text=True, timeout=120) for _ in range(3)]
    assert [r.returncode for r in runs[:2]] == [-signal.SIGABRT] * 2, [r.stderr[-800:] for r in runs]
    assert runs[2].returncode == 0, runs[2].stderr[-2000:]  # the third start lives: no crash loop
    out = json.loads(runs[2].stdout.splitlines()[-1])
    assert out["status"] == "given_up"
    assert out["shown"] == [{"submission_id": 7, "status": "given_up", "node": SUB["node"],
                             "reason": "its check ended the validator's process 2 times"}]
    state = StateStore(tmp_path / "v" / "state.sqlite")
    try:
        assert state.record("check", 7)["data"]["crashes"] == 2
        assert state.records("challenge") == [] and state.records("attestation") == []
    finally:
        state.close()


def test_inflight_checks_counts_only_checks_that_ended_the_process(tmp_path: Path) -> None:
    state = StateStore(tmp_path / "s.sqlite")
    checks = InFlightChecks(state)
    with checks.running(1):
        pass
    with pytest.raises(ValueError), checks.running(2):  # a Python error: the process survived it
        raise ValueError("x")
    state.put(InFlightChecks.KIND, 3, "running", {"since": 0})  # as left by a process that died mid-check
    assert checks.recover() == [(3, 1)]
    assert checks.suspects() == {3} and checks.crashes(1) == 0
    with checks.running(3):  # checked to the end since: no longer a suspect, its count kept
        pass
    assert checks.suspects() == set() and checks.crashes(3) == 1
    state.close()


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory):
    """One devnet (anvil + the deployed contracts) for this module's validators: they only read its time."""
    from intellect.sdk import devnet as dn

    net = dn.start(tmp_path_factory.mktemp("deployments"))
    try:
        yield net
    finally:
        net.stop()


@pytest.fixture
def validator(chain, tmp_path: Path):
    """A real validator agent (dev account 2) connected to the devnet (not started: no threads)."""
    from intellect.agents.roles.validator import Validator

    v = Validator(role_config(chain, "validator", tmp_path / "v", 2))
    v.connect()
    yield v
    v.state.close()


def _unavailable(sid: int, sub: dict) -> None:
    raise ParseUnavailable("isolated parser passed its 120 s deadline")


def test_validator_requeues_what_it_cannot_judge_now(validator) -> None:
    now = validator.protocol.chain_time()
    validator.state.put("submission", 7, "queued", {**SUB, "window_end": now + 300})  # its window still open
    validator.verify_submission = _unavailable
    validator._process(7)
    rec = validator.state.record("submission", 7)
    assert rec["status"] == "queued" and rec["data"]["parse_attempts"] == 1
    assert rec["data"]["retry_at"] > time.time()  # backoff: not picked up by the next poll
    assert validator.state.records("challenge") == [] and validator.counters.get("rejected", 0) == 0


def test_validator_gives_up_what_it_could_not_judge_within_the_window(validator) -> None:
    now = validator.protocol.chain_time()
    validator.state.put("submission", 7, "queued", {**SUB, "window_end": now})  # its window ends now: closed
    validator.verify_submission = _unavailable
    validator._process(7)
    rec = validator.state.record("submission", 7)
    assert rec["status"] == "given_up" and "could not judge it" in rec["data"]["given_up"]
    assert validator.state.records("challenge") == []


def test_validator_checks_a_suspect_alone(validator) -> None:
    """After a restart, a submission whose check ended the process runs with nothing beside it, so that a
    second end is its own (an honest submission checked beside it is not counted twice)."""
    for sid in (1, 2, 3):
        validator.state.put("submission", sid, "queued", dict(SUB))
        # the chain's assignment, as `claim_lookup.assigned_to` keeps it once read: none is this validator's
        validator.state.put("assignment", sid, "assigned", {"validators": [], "mine": False})
    validator.state.put(InFlightChecks.KIND, 2, "running")
    validator._recover_checks()
    release = threading.Event()
    validator._process = lambda sid: release.wait(10)
    validator._executor = ThreadPoolExecutor(max_workers=4)
    try:
        validator._dispatch()
        assert set(validator._inflight) == {2}
        validator._dispatch()
        assert set(validator._inflight) == {2}
        release.set()
        validator._inflight[2].result(timeout=10)
        validator.state.put(InFlightChecks.KIND, 2, "done")  # its check finished this time
        validator._dispatch()  # no suspect left: all at once again (2 is still queued: this _process decides nothing)
        assert set(validator._inflight) == {1, 2, 3}
    finally:
        release.set()
        validator._executor.shutdown(wait=True)
