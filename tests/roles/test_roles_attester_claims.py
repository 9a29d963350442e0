"""The validator agent's attester-reward claiming (issue 21) against a real anvil: its unsettled set is the
AttestationRecorded events the follower kept; a settle pass asks the chain nothing about records whose window
is open, claims each due one with one eth_call before its transaction, and drops the settled ones."""

from __future__ import annotations

import threading

from role_config import role_config  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.agents.roles.attester_rewards import claim_attester_rewards
from intellect.sdk import Role

TOKEN = 10**18
REWARD = 2 * TOKEN


def _validator_agent(devnet, tmp_path, account: int):
    from intellect.agents.roles.validator import Validator

    cfg = role_config(devnet, "validator", tmp_path / "v", account)
    v = Validator(cfg)
    v.connect()
    v.protocol.drip()
    v.protocol.register_node(Role.VALIDATOR, gpu_model="cpu")
    v.protocol.stake(v.protocol.address, 100 * TOKEN)
    return v


def _pool_and_worker(devnet, budget: int, manifest: str):
    """The pool's trainer with a reward per attestation and `budget` funded, step 1 published, and a staked worker
    (dev account 1)."""
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.set_attester_reward(pool_id, REWARD)
    trainer.fund_attester_rewards(pool_id, budget)
    trainer.publish_checkpoint(pool_id, 1, manifest)
    w = devnet.protocol(1)
    w.drip()
    w.register_node("worker", gpu_model="cpu")
    w.stake(w.address, 100 * TOKEN)
    return trainer, pool_id, w


def test_validator_claims_attester_rewards_without_asking_about_open_windows(devnet, tmp_path):
    trainer, pool_id, w = _pool_and_worker(devnet, 20 * TOKEN, "bafkreimanifestclaims")
    v = _validator_agent(devnet, tmp_path, 2)
    me = v.protocol.address
    lock = threading.Lock()  # the validator's transaction lock
    sids = []
    for i in range(2 * 2):  # two leases open at a time (the pool's cap): claim and submit in turn
        claim = w.claim_task(pool_id)
        w.submit_work(claim.task_id, f"bafkreirollouts{i}", bytes([i + 1]) * 32, 2, 1)
        trainer.record_attestations(claim.task_id, [me])
        sids.append(claim.task_id)
    for e in v.protocol.get_events(["WorkSubmitted", "AttestationRecorded"]):
        v.on_event(e)  # what the event follower hands the agent
    assert {int(r["id"]) for r in v.state.records("attester", "recorded")} == set(sids)

    with count_rpc(v.protocol.w3) as calls:  # every window open: one block read, no contract call
        claim_attester_rewards(v.protocol, v.state, lock=lock)
    assert "eth_call" not in calls and "eth_getLogs" not in calls, calls
    assert v.state.count("attester", "recorded") == len(sids)

    devnet.increase_time(v.pool.params.window_length + 1)
    w.claim_attester_reward(sids[0], me)  # anyone may send it: paid to the validator's owner already
    before = v.protocol.balance_of()
    with count_rpc(v.protocol.w3) as calls:
        claim_attester_rewards(v.protocol, v.state, lock=lock)
    assert v.protocol.balance_of() == before + REWARD * (len(sids) - 1)
    assert v.state.record("attester", sids[0])["status"] == "settled"
    assert {int(r["id"]) for r in v.state.records("attester", "paid")} == set(sids[1:])
    # one check per due record, one transaction per payable one; no log scan
    assert calls.count("eth_call") == len(sids) and "eth_getLogs" not in calls
    assert calls.count("eth_sendRawTransaction") == len(sids) - 1

    with count_rpc(v.protocol.w3) as calls:  # nothing left unsettled: the pass costs nothing
        claim_attester_rewards(v.protocol, v.state, lock=lock)
    assert calls == []
    v.state.close()


def test_validator_claims_its_leaves_of_an_attestation_root_in_one_transaction(devnet, tmp_path):
    """Issue 38: the trainer records a step's attestations as one root and publishes its leaves on IPFS; the
    validator reads the file by the event's CID (checked against the recorded root), asks nothing while the windows
    are open, then claims all its due leaves with one multiproof transaction. A leaves file that does not rebuild
    its root is refused and pays nothing."""
    from intellect.agents.roles.attester_rewards import read_roots
    from intellect.sdk.attestation_root import AttestationRootFile
    from intellect.sdk.ipfs import EmbeddedIpfs

    trainer, pool_id, w = _pool_and_worker(devnet, 40 * TOKEN, "bafkreimanifestroots")
    v = _validator_agent(devnet, tmp_path, 2)
    other = _validator_agent(devnet, tmp_path / "o", 3)
    me = v.protocol.address
    v.ipfs = EmbeddedIpfs(tmp_path / "ipfs")  # the store the trainer publishes to and the validator reads
    sids = []
    for i in range(4):
        claim = w.claim_task(pool_id)
        w.submit_work(claim.task_id, f"bafkreirollouts{i}", bytes([i + 1]) * 32, 2, 1)
        sids.append(claim.task_id)
    book = trainer.contracts["AttesterBook"].address
    entries = [(sid, me, REWARD) for sid in sids] + [(sids[0], other.protocol.address, 2 * REWARD)]
    f = AttestationRootFile.build(chain_id=trainer.chain_id, book=book, pool_id=pool_id, step=1, entries=entries)
    trainer.record_attestation_root(f, v.ipfs.add(f.to_bytes()))
    # a second root whose published leaves are another tree's: refused when read
    g = AttestationRootFile.build(chain_id=trainer.chain_id, book=book, pool_id=pool_id, step=2,
                                  entries=[(sids[1], me, 3 * REWARD)])
    trainer.record_attestation_root(g, v.ipfs.add(f.to_bytes()))
    for e in v.protocol.get_events(["WorkSubmitted", "AttestationRootRecorded"]):
        v.on_event(e)
    assert v.state.count("attester_root", "pending") == 2
    assert read_roots(v.protocol, v.state, v.ipfs, tmp_path / "attestation-roots") == len(sids)
    assert v.state.record("attester_root", f.root)["status"] == "read"
    refused = v.state.record("attester_root", g.root)
    assert refused["status"] == "refused" and "not the recorded" in refused["data"]["error"]
    assert {int(r["id"]) for r in v.state.records("attester", "recorded")} == set(sids)

    lock = threading.Lock()
    with count_rpc(v.protocol.w3) as calls:  # every window open: no contract call
        claim_attester_rewards(v.protocol, v.state, lock=lock, ipfs=v.ipfs, data_dir=tmp_path)
    assert "eth_call" not in calls, calls
    devnet.increase_time(v.pool.params.window_length + 1)
    before = v.protocol.balance_of()
    with count_rpc(v.protocol.w3) as calls:
        claim_attester_rewards(v.protocol, v.state, lock=lock, ipfs=v.ipfs, data_dir=tmp_path)
    assert v.protocol.balance_of() == before + REWARD * len(sids)
    assert calls.count("eth_sendRawTransaction") == 1  # one multiproof for the four leaves
    assert {int(r["id"]) for r in v.state.records("attester", "paid")} == set(sids)
    assert all(trainer.attester_leaf_settled(pool_id, f.root, leaf.index) for leaf in f.of(me))
    assert not trainer.attester_leaf_settled(pool_id, f.root, f.of(other.protocol.address)[0].index)
    v.state.close()
    other.state.close()
