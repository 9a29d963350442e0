"""A worker claims its rewards in batches (issue 38: the chain bill): one `claimRewards` once `worker.claim_batch`
submissions are claimable, or once the oldest claimable one has waited `worker.claim_wait_s` chain seconds, or at
once when the worker is done. Before, it claimed each submission the moment its window closed: 68k gas a
submission instead of a sixth of a 143k-gas batch, ~0.26 against ~0.09 US cents in the Base cost model. Deciding
costs no per-submission call: only the chain's time, against the windows' ends the worker keeps. Real anvil,
the real worker agent. A worker's first pass after a start claims whatever is claimable (a restarted one catches
up at once)."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.sdk import TaskStatus


def _worker(devnet, tmp_path, overrides):
    from intellect.agents.roles.worker import Worker

    w = Worker(role_config(devnet, "worker", tmp_path / "w", 1, overrides))
    w.connect()
    return w


def _pool(devnet, tag):
    """The default pool with a checkpoint at step 1, its window length, and a staked worker node (account 1)."""
    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    p.publish_checkpoint(pool_id, 1, f"bafkreimanifestreward{tag}")
    return p, pool_id, p.pool(pool_id).params.window_length, staked_node(devnet, 1, "worker")


def _submit(node, w, pool_id, n):
    """`n` submissions of `node`, kept in the worker agent's state as its own `_work_on` keeps them."""
    sids = []
    for _ in range(n):
        sid = node.claim_task(pool_id).task_id
        sub = node.submit_work(sid, f"bafkreirewardbatch{sid}", bytes([sid % 250 + 1]) * 32, 2, 1)
        w.state.put("submission", sid, "sent", {"window_end": sub.window_end, "reward": sub.reward})
        sids.append(sid)
    return sids


def test_a_worker_claims_its_rewards_in_one_transaction_per_batch(devnet, tmp_path):
    p, pool_id, window, node = _pool(devnet, "batch")
    w = _worker(devnet, tmp_path, {"worker.claim_batch": "3", "worker.claim_wait_s": "7200"})

    w.maybe_claim_rewards(force=False)  # the first pass after a start: nothing claimable yet
    first = _submit(node, w, pool_id, 2)
    devnet.increase_time(window + 1)
    w.last_reward_check = 1.0  # past the 3 s throttle (0.0 is a start's first pass)
    with count_rpc(w.protocol.w3) as calls:
        w.maybe_claim_rewards(force=False)
    assert w.rewards_claimed == 0  # 2 claimable, a batch is 3, the oldest waited 1 s
    assert "eth_call" not in calls and "eth_sendRawTransaction" not in calls, calls  # the chain's time only

    second = _submit(node, w, pool_id, 2)
    devnet.increase_time(window + 1)
    w.last_reward_check = 1.0
    w.maybe_claim_rewards(force=False)  # 4 claimable: one transaction for all of them
    paid = p.get_events(["RewardClaimed"])
    assert sorted(int(e.args["submissionId"]) for e in paid) == sorted(first + second)
    assert len({e.tx_hash for e in paid}) == 1 and w.rewards_claimed == sum(int(e.args["amount"]) for e in paid)

    third = _submit(node, w, pool_id, 1)
    devnet.increase_time(window + 1)
    w.last_reward_check = 1.0
    w.maybe_claim_rewards(force=False)
    assert p.task(third[0]).status == TaskStatus.SUBMITTED  # alone, and it waited 1 s of 7,200
    devnet.increase_time(7200)
    w.last_reward_check = 1.0
    w.maybe_claim_rewards(force=False)  # waited long enough: claimed alone
    assert p.task(third[0]).status == TaskStatus.PAID


def test_a_worker_that_is_done_claims_at_once(devnet, tmp_path):
    p, pool_id, window, node = _pool(devnet, "done")
    w = _worker(devnet, tmp_path, {"worker.max_tasks": "1"})  # the defaults: a batch of 6, an hour's wait
    assert (w.cfg.worker.claim_batch, w.cfg.worker.claim_wait_s) == (6, 3600)
    (sid,) = _submit(node, w, pool_id, 1)
    devnet.increase_time(window + 1)
    assert w.done()  # its one task sent: nothing more will join a batch
    w.last_reward_check = 1.0
    w.maybe_claim_rewards(force=False)
    assert p.task(sid).status == TaskStatus.PAID


def test_a_restarted_worker_claims_what_is_claimable_on_its_first_pass(devnet, tmp_path):
    p, pool_id, window, node = _pool(devnet, "restart")
    w = _worker(devnet, tmp_path, {})
    w.maybe_claim_rewards(force=False)
    sids = _submit(node, w, pool_id, 2)
    devnet.increase_time(window + 1)
    w.last_reward_check = 1.0
    w.maybe_claim_rewards(force=False)
    assert all(p.task(s).status == TaskStatus.SUBMITTED for s in sids)  # 2 of a batch of 6, waited 1 s
    w.state.close()
    again = _worker(devnet, tmp_path, {})  # the same data folder: a restart
    again.maybe_claim_rewards(force=False)
    assert all(p.task(s).status == TaskStatus.PAID for s in sids)
