"""`/status` costs the same after a year as after an hour (issue 32): the validator's and the trainer's status
lists the newest `server.status_items` records of each kind (verdicts, challenges, steps, evaluations,
submissions, consumed ids) with each list's total beside it, read backwards in the state's indexes; it used to
load and decode every record of every kind on each build."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from role_config import role_config  # type: ignore[import-not-found]
from test_roles_attestation_paging import count_decodes  # type: ignore[import-not-found]

from intellect.agents.roles import _state
from intellect.agents.roles._state import StateStore

N = 20_000


def fill(store: StateStore, kind: str, n: int, *, status: Any = "done", t0: float = 1_700_000_000.0,
         ties: int = 5, data: Any = None) -> None:
    """`n` records of `kind` with ids 0..n-1, `ties` of them per clock value (so "9" and "10" share one);
    `status` and `data` may be functions of the id."""
    ticks = iter(t0 + i // ties for i in range(n))
    with pytest.MonkeyPatch.context() as mp, store.transaction():
        mp.setattr(_state, "time", SimpleNamespace(time=lambda: next(ticks)))
        for i in range(n):
            st = status(i) if callable(status) else status
            d = data(i) if callable(data) else (data or {"pad": "x" * 64})
            store.put(kind, i, st, d)


@pytest.fixture
def store(tmp_path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state.sqlite")
    yield s
    s.close()


def plan(store: StateStore, sql: str, args: tuple[Any, ...]) -> str:
    return " ".join(r[3] for r in store._reader.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_latest_is_the_newest_records_newest_first_in_each_filter(store, monkeypatch):
    fill(store, "submission", N, status=lambda i: "queued" if i % 3 == 0 else ("consumed" if i % 3 == 1 else "rejected"))
    fill(store, "step", 10)
    decoded = count_decodes(monkeypatch)
    got = store.latest("submission", 7)
    assert [r["id"] for r in got] == [str(i) for i in range(N - 1, N - 8, -1)]  # ties broken by numeric id
    assert decoded[0] == 7
    assert [r["id"] for r in store.latest("submission", 4, status="consumed")] == [
        str(i) for i in range(N - 1, 0, -1) if i % 3 == 1][:4]
    assert [r["id"] for r in store.latest("submission", 4, not_status="queued")] == [
        str(i) for i in range(N - 1, 0, -1) if i % 3 != 0][:4]
    assert store.latest("submission", 0) == []
    assert len(store.latest("step", 500)) == 10  # fewer than asked: all of them
    assert decoded[0] == 7 + 4 + 4 + 10


def test_latest_walks_an_index_backwards_and_never_sorts_the_history(store):
    fill(store, "submission", 2_000)
    for sql, args in (
        ("SELECT id FROM records WHERE kind = ? ORDER BY updated_at DESC, CAST(id AS INTEGER) DESC LIMIT ?",
         ("submission", 5)),
        ("SELECT id FROM records WHERE kind = ? AND status = ? ORDER BY updated_at DESC LIMIT ?",
         ("submission", "done", 5)),
    ):
        p = plan(store, sql, args)
        assert "TEMP B-TREE" not in p and ("records_by_time" in p or "records_by_status_time" in p), p


def test_with_prefix_finds_one_submissions_attestations_and_not_its_neighbours(store):
    for sid in (1, 10, 11, 100, 2):
        for v in ("0xaa", "0xbb"):
            store.put("attestation", f"{sid}:{v}", "valid", {"submission_id": sid, "validator": v})
    assert [r["id"] for r in store.with_prefix("attestation", "1:")] == ["1:0xaa", "1:0xbb"]
    assert [r["id"] for r in store.with_prefix("attestation", "10:")] == ["10:0xaa", "10:0xbb"]
    assert store.with_prefix("attestation", "3:") == []
    with pytest.raises(ValueError, match="prefix"):
        store.with_prefix("attestation", "")


def _config(devnet, tmp_path, role: str, items: int):
    return role_config(devnet, role, tmp_path / role, 0, {"server.status_items": str(items)})


def test_the_validators_status_lists_the_newest_verdicts_with_totals(devnet, tmp_path, monkeypatch):
    from intellect.agents.roles.validator import Validator

    v = Validator(_config(devnet, tmp_path, "validator", 50))
    try:
        v.connect()
        fill(v.state, "submission", 3_000, status=lambda i: "queued" if i >= 2_990 else "accepted",
             data=lambda i: {"node": "0x" + "11" * 20, "verdict": {"reason": None}})
        fill(v.state, "challenge", 120, data={"evidence_cid": "bafy", "mine": True})
        decoded = count_decodes(monkeypatch)
        doc = v.status()
        assert doc["backlog"] == 10
        assert [x["submission_id"] for x in doc["verdicts"]] == list(range(2_989, 2_939, -1))
        assert doc["verdicts_total"] == 2_990
        assert len(doc["challenges"]) == 50 and doc["challenges_total"] == 120
        assert decoded[0] <= 50 + 50 + 10, decoded[0]  # the old status decoded all 3,120
    finally:
        v.state.close()


def test_the_trainers_status_lists_the_newest_steps_and_submissions_with_totals(devnet, tmp_path, monkeypatch):
    from intellect.agents.roles.trainer import Trainer

    t = Trainer(_config(devnet, tmp_path, "trainer", 40))
    try:
        t.connect()
        fill(t.state, "submission", 2_000, status=lambda i: "consumed" if i % 2 else "attested",
             data=lambda i: {"node": "0x" + "22" * 20, "policy_step": 0})
        fill(t.state, "step", 300, data=lambda i: {"checkpoint_cid": f"c{i}", "stats": {"loss": 1.0}})
        fill(t.state, "eval", 300, data=lambda i: {"pass_at_1": 0.5, "mean_reward": 0.25})
        for sid in (1_999, 1_998, 3):
            for val in ("0x" + "aa" * 20, "0x" + "bb" * 20):
                t.state.put("attestation", f"{sid}:{val}", "valid", {"submission_id": sid, "validator": val})
        decoded = count_decodes(monkeypatch)
        doc = t.status()
        assert [s["step"] for s in doc["steps"]] == list(range(260, 300)) and doc["steps_total"] == 300
        assert doc["steps"][-1]["eval_pass_at_1"] == 0.5 and doc["evals_total"] == 300
        subs = doc["submissions"]
        assert [s["submission_id"] for s in subs] == list(range(1_960, 2_000)) and doc["submissions_total"] == 2_000
        assert subs[-1]["attestations"] == ["0x" + "aa" * 20, "0x" + "bb" * 20] and subs[0]["attestations"] == []
        assert doc["consumed"] == [i for i in range(1_921, 2_000, 2)] and doc["consumed_total"] == 1_000
        assert decoded[0] <= 4 * 40 + 4, decoded[0]  # the old status decoded every submission and attestation
    finally:
        t.state.close()
