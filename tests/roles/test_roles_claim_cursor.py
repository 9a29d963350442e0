"""The worker's restart paths (`unfinished_claims`, `free_expired_leases`) read the chain's log incrementally
(issue 21/22: events, not rescans): a persisted cursor in the worker's state store, so a pass scans only the
blocks after the last pass and asks the chain only about its open leases whose lease ran out. Before, each
pass scanned TaskClaimed from the deployment block and read every task the node ever claimed. Real anvil."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]
from rpc_counter import count_rpc, log_ranges  # type: ignore[import-not-found]

from intellect.agents.roles import leases
from intellect.agents.roles.leases import claimable_submissions, free_expired_leases, unfinished_claims
from intellect.sdk import TaskStatus


def _worker_agent(devnet, tmp_path, account: int):
    from intellect.agents.roles.worker import Worker

    cfg = role_config(devnet, "worker", tmp_path / "w", account)
    w = Worker(cfg)
    w.connect()
    return w


def test_restart_paths_scan_only_new_blocks_and_ask_only_about_open_leases(devnet, tmp_path):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    pool = trainer.pool(pool_id)
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestclaimcursor")
    node = staked_node(devnet, 1, "worker")
    history = 6  # claims this node made and submitted (its past)
    for i in range(history):
        c = node.claim_task(pool_id)
        node.submit_work(c.task_id, f"bafkreicursor{i}", bytes([i + 1]) * 32, 2, 1)
    cap = pool.params.max_open_leases
    held = [node.claim_task(pool_id) for _ in range(cap)]  # then the node dies holding every slot

    w = _worker_agent(devnet, tmp_path, 1)
    with count_rpc(w.protocol.w3) as calls, log_ranges(w.protocol.w3) as ranges:
        # first pass: imports the claims once; every lease still runs
        assert free_expired_leases(w.protocol, w.state, w.pool_id) == 0
    first_head = max(hi for _, hi in ranges)
    assert "eth_call" not in calls, calls  # all leases alive (from the events): nothing to ask
    assert {int(r["id"]) for r in w.state.records("claim", "claimed")} >= {h.task_id for h in held}

    devnet.increase_time(pool.params.lease_duration + 1)
    trainer.publish_checkpoint(pool_id, 2, "bafkreimanifestclaimcursor2")  # blocks after the first pass
    with count_rpc(w.protocol.w3) as calls, log_ranges(w.protocol.w3) as ranges:
        assert free_expired_leases(w.protocol, w.state, w.pool_id) == cap
    assert ranges and all(lo > first_head for lo, _ in ranges), ranges  # only blocks after the last pass
    second_head = max(hi for _, hi in ranges)
    # each claim whose lease ran out is read once (the submitted ones close), the held ones are expired
    assert calls.count("eth_sendRawTransaction") == cap
    assert all(trainer.task(h.task_id).status == TaskStatus.EXPIRED for h in held)
    assert w.state.count("claim", "claimed") == 0

    with count_rpc(w.protocol.w3) as calls, log_ranges(w.protocol.w3) as ranges:
        assert free_expired_leases(w.protocol, w.state, w.pool_id) == 0
        assert unfinished_claims(w.protocol, w.state, w.pool_id) == []
    assert "eth_call" not in calls, calls  # nothing open: no task read, whatever the history
    assert all(lo > second_head for lo, _ in ranges), ranges

    # a claim the loop made (recorded locally) is resumed from its record; the restart path still reads no
    # claim of the node's history
    c = w.protocol.claim_task(pool_id)
    w.state.put("claim", c.task_id, "claimed", {"seed": c.seed.hex(), "pool": pool_id, "lease_expiry": c.lease_expiry})
    with count_rpc(w.protocol.w3) as calls:
        assert unfinished_claims(w.protocol, w.state, w.pool_id) == [(c.task_id, c.seed)]
    assert calls.count("eth_call") == 1  # the one open claim's task
    w.state.close()


def test_a_claim_lost_by_a_crash_is_found_from_the_events_after_the_cursor(devnet, tmp_path):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestclaimlost")
    node = staked_node(devnet, 1, "worker")
    w = _worker_agent(devnet, tmp_path, 1)
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == []  # cursor at the head
    c = node.claim_task(pool_id)  # sent, then the process died before writing its record
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == [(c.task_id, c.seed)]
    w.state.close()


def test_claims_and_submissions_the_chain_lost_are_forgotten_not_retried_forever(devnet, tmp_path, monkeypatch):
    """CI failure of stop 43: the RPC node restarted from a state dump that missed its last blocks, and a worker
    restarted with a claim on its record that the ledger no longer held. `protocol.task` reverted
    (TaskLedgerUnknownTask) in the restart pass on every loop, so the worker never claimed again. Here the
    chain loses the blocks by `evm_revert`: the lost claim and the lost submission are forgotten (they do
    not count as `sent`), the restart and reward passes go on, the claim cursor past the head rescans, and the worker's
    other work is untouched."""
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestvanished")
    w = _worker_agent(devnet, tmp_path, 1)
    staked_node(devnet, 1, "worker")
    kept = w.protocol.claim_task(pool_id)  # before the fork: the chain keeps it
    w.state.put("claim", kept.task_id, "claimed", {"seed": kept.seed.hex(), "pool": pool_id,
                                                    "lease_expiry": kept.lease_expiry, "block": kept.block_number})
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == [(kept.task_id, kept.seed)]
    snap = devnet.anvil.snapshot()
    lost_sub = w.protocol.claim_task(pool_id)
    sub = w.protocol.submit_work(lost_sub.task_id, "bafkreivanishedsub", b"\x01" * 32, 2, 1)
    w.state.put("claim", lost_sub.task_id, "claimed", {"seed": lost_sub.seed.hex(), "pool": pool_id})
    w.state.put("submission", lost_sub.task_id, "sent", {"window_end": sub.window_end})
    lost = w.protocol.claim_task(pool_id)
    w.state.put("claim", lost.task_id, "claimed", {"seed": lost.seed.hex(), "pool": pool_id,
                                                    "lease_expiry": lost.lease_expiry})
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == [(kept.task_id, kept.seed), (lost.task_id, lost.seed)]
    assert devnet.anvil.revert(snap)  # the chain loses the blocks after the snapshot
    w.state.close()
    w = _worker_agent(devnet, tmp_path, 1)  # the worker restarts (its transaction nonce read from the node again)

    devnet.increase_time(10 ** 6)  # every window closed, every lease ran out
    # first "no such task": the records are only marked (an RPC backend may lag); every pass goes on
    assert claimable_submissions(w.protocol, w.state) == []
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == []
    assert w.state.record("submission", lost_sub.task_id)["status"] == "sent"
    assert "unknown_since" in w.state.record("claim", lost.task_id)["data"]
    monkeypatch.setattr(leases, "VANISH_AFTER_S", 0.0)  # ... and dropped once unknown for that long
    assert claimable_submissions(w.protocol, w.state) == []
    assert w.state.record("submission", lost_sub.task_id) is None
    assert free_expired_leases(w.protocol, w.state, w.pool_id) == 1  # the kept claim's lease is freed
    assert trainer.task(kept.task_id).status == TaskStatus.EXPIRED
    for tid in (lost.task_id, lost_sub.task_id):
        assert w.state.record("claim", tid) is None
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == []
    assert w.state.count("submission", "sent") == 0  # a lost submission does not count towards max_tasks

    # the cursor had scanned past the shorter chain's head: the next pass rescans and finds a new claim
    again = w.protocol.claim_task(pool_id)  # sent, then the process died before writing its record
    assert again.task_id == lost_sub.task_id  # the id the lost claim had, now a different claim
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == [(again.task_id, again.seed)]
    w.state.close()
