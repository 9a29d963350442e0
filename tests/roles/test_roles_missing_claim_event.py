"""A validator never rejects work for logs its own RPC lost: a task the ledger holds but whose TaskClaimed event this
node's RPC does not return (an anvil restarted from a state dump drops the logs of its last blocks; a pruned
provider) gets no verdict now and is judged later (`ParseUnavailable`, given up when its window closes); only a task
the ledger does not hold is `unknown_task`. Seen in the slow faults suite: a claim sent as the RPC node stopped lost
its event, the validator rejected the honest submission as unknown_task, challenged it, and it was slashed."""

from __future__ import annotations

import pytest
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles.claim_lookup import claim_seed
from intellect.agents.roles.validator import Validator
from intellect.verifier.isolation import ParseUnavailable
from intellect.verifier.submission import Rejection

POOL = 1  # the devnet's default pool (trainer and owner: dev account 0)


def test_a_claim_event_the_rpc_lost_is_no_verdict_and_an_unknown_task_is_a_rejection(devnet, tmp_path, monkeypatch):
    trainer, w = devnet.protocol(0), devnet.protocol(3)
    w.drip()
    w.register_node("worker")
    w.stake(w.address, w.min_stake("worker"))
    trainer.publish_checkpoint(POOL, 0, "bafkreistep0")
    claim = w.claim_task(POOL)

    cfg = role_config(devnet, "validator", tmp_path / "v", 4)
    v = Validator(cfg)
    try:
        v.connect()
        assert claim_seed(v.protocol, v.state, claim.task_id) == claim.seed  # the event is there: the seed it drew
        v.state._db.execute("DELETE FROM records WHERE kind = 'claim'")  # forget the seed it kept
        # this node's RPC lost the event (the RPC is what is faked here: the ledger and the validator are real)
        monkeypatch.setattr(v.protocol, "get_events", lambda *a, **k: [])
        with pytest.raises(ParseUnavailable, match=f"task {claim.task_id} is on the ledger"):
            claim_seed(v.protocol, v.state, claim.task_id)
        with pytest.raises(Rejection) as rej:
            claim_seed(v.protocol, v.state, claim.task_id + 1000)  # no such task on the ledger
        assert rej.value.reason == "unknown_task"
    finally:
        v.state.close()
