"""Work that outlives the worker (issue 19), and `/store` only for the work it exists for (issue 32).

The trainer's `POST /store` keeps a worker's rollout file so validators fetch it by CID after the worker has
gone offline, but only from an eligible (staked) worker, for that worker's open lease (or its submission of
exactly that CID), a rollout file of that claim within the claim's size bound, within a per-worker quota
and rate; and it unpins what was never submitted and what left its window. Against a real anvil chain with
the deployed contracts, a real `Trainer` agent (its state store, embedded IPFS store and gateway) and, for
the honest push, a real `Worker` posting over HTTP to the trainer's server."""

from __future__ import annotations

import base64
import os

import pytest
from nodes import staked_node  # type: ignore[import-not-found]
from role_config import swarm_pool_config  # type: ignore[import-not-found]

from intellect.agents.roles._server import HttpError
from intellect.agents.roles.store import (
    MAX_STORE_BYTES,
    accept_pushed_file,
    claim_size_bound,
    push_file,
    store_request,
    sweep_stored,
)
from intellect.agents.roles.submission_log import record_event
from intellect.sdk import ContentNotFoundError, Role
from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid
from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow

TOKEN = 10**18


def _trainer(devnet, data_dir, **over: str):
    """The pool's real trainer agent, connected, with its embedded store and gateway (no model: `/store`
    and its sweep need none)."""
    from intellect.agents.roles.trainer import Trainer

    t = Trainer(swarm_pool_config(devnet, data_dir, "trainer", 0, **over))
    t.connect()
    t.open_ipfs()
    return t


@pytest.fixture
def pool(devnet):
    """(trainer's protocol, pool id, pool) with a checkpoint published, so workers can claim."""
    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    p.publish_checkpoint(pool_id, 1, "bafkreimanifeststore")
    return p, pool_id, p.pool(pool_id)


def _rollouts(worker: str, task_id: int | str, *, completion: int = 6, problems: int = 2, group: int = 4) -> bytes:
    """A rollout file of one claim in the trainer's default shape (2 problems × 4, budgets ≤ 8 tokens on cpu),
    random token ids and proofs (what TOPLOC gives: incompressible)."""
    rows = []
    for p in range(problems):
        prompt = list(os.urandom(24))
        for _ in range(group):
            rows.append(RolloutRow(problem_id=f"synthetic-{p}", prompt_ids=prompt, completion_ids=list(os.urandom(completion)),
                                   reward=0.0, task_reward=0.0, length_penalty=0.0, target_length=completion,
                                   advantage=0.0, policy_step=1, proofs=[os.urandom(258)], worker=worker))
    meta = RolloutMeta(task_id=str(task_id), seed="ab" * 32, model="bafkreimanifeststore", worker=worker,
                       policy_step=1, group_size=group)
    return RolloutFile(meta, rows).to_bytes()


def _push(trainer, w, task_id: int, data: bytes) -> dict:
    ledger = w.contracts["TaskLedger"].address
    return accept_pushed_file(trainer, store_request(w.account.key, w.chain_id, ledger, task_id, compute_cid(data), data))


def _refused(trainer, body_or_args, rule: str, status: int) -> str:
    with pytest.raises(HttpError) as err:
        if isinstance(body_or_args, dict):
            accept_pushed_file(trainer, body_or_args)
        else:
            _push(trainer, *body_or_args)
    assert err.value.status == status and err.value.message.startswith(rule + ":"), err.value.message
    assert "\n" not in err.value.message
    return err.value.message


def test_honest_push_over_http_is_pinned_and_served_by_cid(devnet, pool, tmp_path):
    """A NAT'd worker (no endpoint) pushes its claim's file over HTTP; the trainer pins it, records it in its
    state store, and a validator that never met the worker fetches it from the trainer's gateway."""
    from intellect.agents.roles.worker import Worker

    _, pool_id, _ = pool
    trainer = _trainer(devnet, tmp_path / "trainer")
    trainer.start_server()
    trainer.server.route("POST", "/store", lambda _q, body: accept_pushed_file(trainer, body))  # as Trainer.start
    trainer.ensure_node(stake_amount=0.0001, auto_stake=True)  # registers the endpoint workers push to
    staked_node(devnet, 1, "worker")
    worker = Worker(swarm_pool_config(devnet, tmp_path / "worker", "worker", 1, **{"worker.push_to": "trainer"}))
    worker.connect()
    try:
        claim = worker.protocol.claim_task(pool_id)
        path = tmp_path / "task.rollouts"
        path.write_bytes(_rollouts(worker.protocol.address, claim.task_id))
        cid = compute_cid(path.read_bytes())

        assert push_file(worker, path, cid, claim.task_id) == trainer.public_url
        assert cid in trainer.ipfs.pins() and trainer.counters["files_stored"] == 1
        rec = trainer.state.record("stored", cid)
        assert rec["status"] == "pinned" and rec["data"]["task_id"] == claim.task_id
        assert rec["data"]["node"].lower() == worker.protocol.address.lower()
        validator = EmbeddedIpfs(tmp_path / "validator-ipfs")
        validator.peers = [trainer.gateway.url]
        assert validator.cat(cid) == path.read_bytes()
        # a refusal comes back over HTTP as a 4xx naming its rule: a file for a task this worker does not hold
        with pytest.raises(RuntimeError, match=r"HTTP 404 .*store\.lease: task 999 does not exist"):
            push_file(worker, path, cid, 999)
        with pytest.raises(RuntimeError, match="no task id"):
            push_file(worker, path, cid)
    finally:
        worker.close()
        trainer.close()


def test_store_refuses_strangers_unstaked_others_leases_closed_leases_and_junk(devnet, pool, tmp_path):
    _, pool_id, params = pool
    trainer = _trainer(devnet, tmp_path / "trainer")
    w = staked_node(devnet, 1, "worker")
    other = staked_node(devnet, 3, "worker")
    unstaked = devnet.protocol(2)
    unstaked.drip()
    unstaked.register_node(Role.WORKER, gpu_model="cpu", endpoint="")  # registration is free, storage is not
    stranger = devnet.protocol(7)  # no node at all
    try:
        claim = w.claim_task(pool_id)
        good = _rollouts(w.address, claim.task_id)
        cid = compute_cid(good)

        msg = _refused(trainer, (stranger, claim.task_id, good), "store.eligible", 403)
        assert "not an active worker" in msg
        msg = _refused(trainer, (unstaked, claim.task_id, _rollouts(unstaked.address, claim.task_id)),
                       "store.eligible", 403)
        assert "under the worker minimum" in msg
        # another staked worker, its own signature, pushing a file for the first worker's lease
        msg = _refused(trainer, (other, claim.task_id, _rollouts(other.address, claim.task_id)),
                       "store.lease", 403)
        assert f"leased to {w.address}" in msg
        _refused(trainer, (w, 10**9, _rollouts(w.address, 10**9)), "store.lease", 404)
        # the bytes must be a rollout file of this claim, naming this worker
        msg = _refused(trainer, (w, claim.task_id, b"PAR1" + os.urandom(4096)), "store.rollout", 422)
        assert "send intellect.rollouts/v2" in msg  # Parquet is refused unread: no child process per push
        _refused(trainer, (w, claim.task_id, b"not a rollout file"), "store.rollout", 422)
        msg = _refused(trainer, (w, claim.task_id, _rollouts(w.address, claim.task_id + 1)), "store.rollout", 422)
        assert "answers task" in msg
        msg = _refused(trainer, (w, claim.task_id, _rollouts(other.address, claim.task_id)), "store.rollout", 422)
        assert "names worker" in msg
        _refused(trainer, (w, claim.task_id, _rollouts(w.address, claim.task_id, group=8)), "store.rollout", 422)
        _refused(trainer, (w, claim.task_id, _rollouts(w.address, claim.task_id, completion=9)),
                 "store.rollout", 422)  # over the largest budget (8)
        # over the claim's bound (2 × 4 rows of at most 8 tokens), before anything is parsed
        shape = (2, 4, 8, 8192)
        big = os.urandom(claim_size_bound(*shape) + 1)
        assert claim_size_bound(*shape) < MAX_STORE_BYTES
        _refused(trainer, (w, claim.task_id, big), "store.claim", 413)
        # signature, CID and schema
        lie = store_request(w.account.key, w.chain_id, w.contracts["TaskLedger"].address, claim.task_id, cid, good)
        lie["data"] = base64.b64encode(b"other bytes").decode()
        _refused(trainer, lie, "store.cid", 400)
        forged = store_request(stranger.account.key, w.chain_id, w.contracts["TaskLedger"].address, claim.task_id,
                               cid, good)
        forged["node"] = w.address
        _refused(trainer, forged, "store.signature", 403)
        moved = store_request(w.account.key, w.chain_id, w.contracts["TaskLedger"].address, claim.task_id, cid, good)
        moved["task_id"] = claim.task_id + 1  # the signature covers the task: it cannot be moved to another lease
        _refused(trainer, moved, "store.signature", 403)
        v1 = {"schema": "intellect.store/v1", "cid": cid, "node": w.address, "data": "", "signature": "0x"}
        assert "no longer accepted" in _refused(trainer, v1, "store.schema", 400)
        assert trainer.ipfs.pins() == [] and trainer.state.records("stored") == []

        # a closed lease: expired unsubmitted
        devnet.increase_time(params.params.lease_duration + 1)
        devnet.protocol(0).drip()  # a block at the new time
        msg = _refused(trainer, (w, claim.task_id, good), "store.lease", 409)
        assert "expired" in msg
        # submitted with another file: a different CID for the same task is refused
        fresh = w.claim_task(pool_id)
        w.submit_work(fresh.task_id, "bafkreiothersubmitted", b"\x01" * 32, 16, 1)
        msg = _refused(trainer, (w, fresh.task_id, _rollouts(w.address, fresh.task_id)), "store.lease", 409)
        assert "submitted with bafkreiothersubmitted" in msg
        assert trainer.ipfs.pins() == []
    finally:
        trainer.close()


def test_store_quota_replacement_and_rate_per_worker(devnet, pool, tmp_path):
    _, pool_id, _ = pool
    trainer = _trainer(devnet, tmp_path / "trainer", **{"trainer.store.max_files": "1",
                                                         "trainer.store.pushes_per_minute": "5"})
    w = staked_node(devnet, 1, "worker")
    other = staked_node(devnet, 3, "worker")
    try:
        a, b = w.claim_task(pool_id), w.claim_task(pool_id)  # the pool's two open leases
        first = _rollouts(w.address, a.task_id)
        assert _push(trainer, w, a.task_id, first)["pinned"]  # push 1
        assert _push(trainer, w, a.task_id, first)["pinned"]  # push 2: a retry, nothing more kept
        msg = _refused(trainer, (w, b.task_id, _rollouts(w.address, b.task_id)), "store.quota", 429)  # 3
        assert "max_files" in msg
        # a regenerated file for the same lease replaces the first: the quota holds one file, the new one
        second = _rollouts(w.address, a.task_id)
        assert _push(trainer, w, a.task_id, second)["pinned"]  # push 4
        assert trainer.ipfs.pins() == [compute_cid(second)]
        assert trainer.state.record("stored", compute_cid(first))["status"] == "unpinned"
        with pytest.raises(ContentNotFoundError):
            trainer.ipfs.get_local_block(compute_cid(first))  # its blocks are gone: the gateway serves nothing
        assert _push(trainer, w, a.task_id, second)["pinned"]  # push 5
        msg = _refused(trainer, (w, a.task_id, second), "store.rate", 429)  # push 6 in the same minute
        assert "pushes_per_minute" in msg
        # the quota and rate are per worker: another worker pushes meanwhile
        c = other.claim_task(pool_id)
        assert _push(trainer, other, c.task_id, _rollouts(other.address, c.task_id))["pinned"]
    finally:
        trainer.close()
    small = _trainer(devnet, tmp_path / "small", **{"trainer.store.max_bytes": "4096"})
    try:
        msg = _refused(small, (w, b.task_id, _rollouts(w.address, b.task_id)), "store.quota", 429)
        assert "max_bytes" in msg
    finally:
        small.close()


def test_unsubmitted_file_is_unpinned_after_its_lease_even_across_a_restart(devnet, pool, tmp_path):
    _, pool_id, params = pool
    trainer = _trainer(devnet, tmp_path / "trainer")
    w = staked_node(devnet, 1, "worker")
    claim = w.claim_task(pool_id)
    data = _rollouts(w.address, claim.task_id)
    cid = compute_cid(data)
    try:
        _push(trainer, w, claim.task_id, data)
        assert sweep_stored(trainer, force=True) == 0 and cid in trainer.ipfs.pins()  # the lease is open
    finally:
        trainer.close()
    devnet.increase_time(params.params.lease_duration + 1)
    devnet.protocol(0).drip()
    restarted = _trainer(devnet, tmp_path / "trainer")  # the pins are in its state store, not its memory
    try:
        assert sweep_stored(restarted, force=True) == 1
        assert restarted.ipfs.pins() == []
        rec = restarted.state.record("stored", cid)
        assert rec["status"] == "unpinned" and "without a submission" in rec["data"]["reason"]
        with pytest.raises(ContentNotFoundError):
            restarted.ipfs.get_local_block(cid)
        assert sweep_stored(restarted, force=True) == 0
    finally:
        restarted.close()


def test_submitted_file_is_kept_through_its_window_then_unpinned(devnet, pool, tmp_path):
    _, pool_id, params = pool
    trainer = _trainer(devnet, tmp_path / "trainer")
    w = staked_node(devnet, 1, "worker")
    try:
        claim = w.claim_task(pool_id)
        data = _rollouts(w.address, claim.task_id)
        cid = compute_cid(data)
        _push(trainer, w, claim.task_id, data)
        sub = w.submit_work(claim.task_id, cid, b"\x02" * 32, 48, 1)
        assert _push(trainer, w, claim.task_id, data)["pinned"]  # a re-push of the submitted CID is accepted
        for e in trainer.protocol.get_events(["WorkSubmitted"]):
            record_event(trainer.state, trainer.pool_id, e)  # what the trainer's event follower does with it
        assert sweep_stored(trainer, force=True) == 0 and cid in trainer.ipfs.pins()  # in its window
        assert trainer.state.record("stored", cid)["data"]["window_end"] == sub.window_end
        devnet.increase_time(params.params.window_length + 1)
        devnet.protocol(0).drip()
        _refused(trainer, (w, claim.task_id, data), "store.lease", 409)  # out of its window
        assert sweep_stored(trainer, force=True) == 1
        assert trainer.ipfs.pins() == []
        assert "window ended (submitted)" in trainer.state.record("stored", cid)["data"]["reason"]
    finally:
        trainer.close()


def test_worker_pushes_to_any_kubo_node_through_its_rpc_api(tmp_path):
    """`worker.push_to: kubo:<RPC URL>`: the file lands, pinned, in a real IPFS daemon (js-ipfs 0.66 through
    the Kubo RPC API, tools/ipfs) under the worker's CID, and the node serves it back."""
    from intellect.agents.config import load_config
    from intellect.agents.roles.worker import Worker
    from intellect.sdk.ipfs import IpfsDaemon, KuboIpfs

    path = tmp_path / "task-1.rollouts"
    path.write_bytes(b"rollouts " * 40_000)
    cid = compute_cid(path.read_bytes())
    with IpfsDaemon(repo=tmp_path / "repo") as daemon:
        # a real worker agent configured so (no chain: pushing to Kubo needs none)
        worker = Worker(load_config(None, env={}, overrides={"role": "worker", "data_dir": str(tmp_path / "w"),
                                                             "worker.push_to": f"kubo:{daemon.api_url}"}))
        assert push_file(worker, path, cid) == daemon.api_url
        node = KuboIpfs(daemon.api_url)
        assert node.cat(cid) == path.read_bytes()  # the client checks every block against the CID
        # a Kubo-backed trainer unpins what it stored the same way (`sweep_stored` calls `unpin`)
        assert node.is_pinned(cid)
        node.unpin(cid)
        assert not node.is_pinned(cid)
        node.unpin(cid)  # not pinned any more: no error
        with pytest.raises(RuntimeError, match="stored the file as"):
            push_file(worker, path, compute_cid(b"another file"))
    worker.state.close()


def test_a_push_the_trainer_missed_while_restarting_is_kept_and_stored_on_a_later_try(devnet, pool, tmp_path):
    """A worker behind NAT depends on its push: one that failed (the trainer restarting) is kept in the worker's
    state store and pushed again from its loop once due (`push_retry`), not lost; one whose file is gone is
    forgotten. A real trainer stopped and started again on its registered port, a real worker."""
    import socket
    import time

    from intellect.agents.roles import push_retry
    from intellect.agents.roles.worker import Worker

    _, pool_id, _ = pool
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])

    def trainer_up():
        t = _trainer(devnet, tmp_path / "trainer", **{"server.port": port})
        t.start_server()
        t.server.route("POST", "/store", lambda _q, body: accept_pushed_file(t, body))  # as Trainer.start
        return t

    first = trainer_up()
    first.ensure_node(stake_amount=0.0001, auto_stake=True)  # the endpoint workers push to
    staked_node(devnet, 1, "worker")
    worker = Worker(swarm_pool_config(devnet, tmp_path / "worker", "worker", 1, **{"worker.push_to": "trainer"}))
    worker.connect()
    second = None
    try:
        claim = worker.protocol.claim_task(pool_id)
        path = tmp_path / "task.rollouts"
        path.write_bytes(_rollouts(worker.protocol.address, claim.task_id))
        cid = compute_cid(path.read_bytes())
        first.close()  # the trainer restarting: nothing listens on its port

        assert push_retry.push_or_keep(worker, claim.task_id, cid, path) is None
        kept = worker.state.record(push_retry.KIND, cid)
        assert kept["status"] == "pending" and kept["data"]["attempts"] == 1
        assert kept["data"]["retry_at"] >= time.time() + push_retry.RETRY_FIRST_S - 5
        assert push_retry.retry_pushes(worker) == 0  # not due yet: nothing tried
        assert worker.state.record(push_retry.KIND, cid)["data"]["attempts"] == 1

        second = trainer_up()
        later = time.time() + push_retry.RETRY_FIRST_S + 1
        assert push_retry.retry_pushes(worker, now=later) == 1
        assert worker.state.record(push_retry.KIND, cid) is None and worker.counters["pushes_retried"] == 1
        assert cid in second.ipfs.pins() and second.state.record("stored", cid)["status"] == "pinned"

        # a kept push whose file is gone is forgotten, not tried
        gone = compute_cid(b"a file deleted since")
        worker.state.put(push_retry.KIND, gone, "pending", {"task_id": claim.task_id, "attempts": 1, "retry_at": 0,
                                                            "path": str(tmp_path / "gone.rollouts")})
        assert push_retry.retry_pushes(worker, now=later) == 0
        assert worker.state.record(push_retry.KIND, gone) is None
        # one the store refuses for good (a 4xx other than its rate: here not a rollout file of the claim) is
        # forgotten after that answer, not tried 12 times
        junk = tmp_path / "junk.rollouts"
        junk.write_bytes(b"not a rollout file")
        worker.state.put(push_retry.KIND, compute_cid(junk.read_bytes()), "pending",
                         {"task_id": claim.task_id, "attempts": 1, "retry_at": 0, "path": str(junk)})
        assert push_retry.retry_pushes(worker, now=later) == 0
        assert worker.state.records(push_retry.KIND) == []
        assert push_retry.retry_in(1) == 30 and push_retry.retry_in(2) == 60 and push_retry.retry_in(9) == 600
    finally:
        worker.close()
        if second is not None:
            second.close()
