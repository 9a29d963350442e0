"""A worker started with another key over the same data_dir (its owner rotated the node, issue 36): the old key's
unsettled submissions are left to the owner and its open claims closed, so the new key never sends a claim of
ids it cannot claim (`TaskLedgerNotNodeOrOwner` reverted the whole batch, every pass, before)."""

from __future__ import annotations

from intellect.agents.roles._state import StateStore
from intellect.agents.roles.leases import adopt_key, claimable_submissions

OLD = "0x00000000000000000000000000000000000000A1"
NEW = "0x00000000000000000000000000000000000000B2"


def _store(tmp_path) -> StateStore:
    state = StateStore(tmp_path / "state.db")
    state.put("submission", 1, "sent", {"window_end": 10, "paid": True})
    state.put("submission", 2, "sent", {"window_end": 10})
    state.put("submission", 3, "sent", {"window_end": 10, "settled": "upheld"})
    state.put("claim", 4, "claimed", {"seed": "00"})
    state.put("claim", 5, "closed", {"submission": "sent"})
    return state


def test_the_first_key_is_recorded_and_the_same_key_changes_nothing(tmp_path) -> None:
    state = _store(tmp_path)
    assert adopt_key(state, OLD) is None and state.get("node_key") == OLD
    assert adopt_key(state, OLD.lower()) is None  # the same address in another spelling
    assert state.record("submission", 2)["data"] == {"window_end": 10}
    assert state.record("claim", 4)["status"] == "claimed"


def test_another_key_sets_the_old_keys_unsettled_work_aside(tmp_path) -> None:
    state = _store(tmp_path)
    adopt_key(state, OLD)
    assert adopt_key(state, NEW) == OLD and state.get("node_key") == NEW
    assert state.record("submission", 2)["data"] == {"window_end": 10, "settled": "other_key", "node": OLD}
    assert state.record("submission", 1)["data"] == {"window_end": 10, "paid": True}  # settled ones untouched
    assert state.record("submission", 3)["data"]["settled"] == "upheld"
    assert state.record("claim", 4)["status"] == "closed"
    assert state.record("claim", 4)["data"] == {"seed": "00", "task_status": "other_key", "node": OLD}
    assert state.record("claim", 5)["data"] == {"submission": "sent"}
    # nothing of the old key's is asked or claimed any more (the protocol is never reached)
    assert claimable_submissions(None, state) == []
    assert adopt_key(state, NEW) is None
