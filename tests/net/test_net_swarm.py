"""The swarm across hosts (issue 19): every agent in its own network namespace with its own address.

    chain      anvil on 10.77.N.1 (the lab's own /24)
    trainer    status :8000, IPFS gateway :8001, Shardcast origin :8002, advertised at its LAN address
    relay      the same ports; its link capped at 8 Mbit/s, its cable pulled once step 1 is out
    w-nat      behind a real NAT router (its own namespace masquerading with iptables; without iptables, a LAN host
               whose services listen on its own loopback): no inbound route, advertises nothing (server.advertise
               false), pushes its rollout files to the trainer's store and goes offline right after submitWork
    w-home     an honest worker on a home-broadband link (tbf 20 Mbit/s both ways)
    cheat      a worker generating with the wrong model
    v1         a validator on a public address
    v2         a validator behind its own NAT router (no inbound route, advertises nothing): the evidence of the challenges it
               opens is pushed to the trainer's store (validator.push_evidence), where every voter fetches it

The swarm trains, the cheater is slashed, the honest workers (the offline NAT'd one included) are paid, and
checkpoints published after the relay went away still reach the workers (from the origin).
Run: `pytest -m net tests/net` (root; skips where namespaces are not permitted).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from net_hosts import NetUnavailable

from intellect.sdk import ChallengeStatus, TaskStatus
from intellect.sdk.ipfs import EmbeddedIpfs

pytestmark = [pytest.mark.net, pytest.mark.slow, pytest.mark.timeout(1200)]

PORTS = {"port": 8000, "ipfs_port": 8001, "shardcast_port": 8002}
MAX_STEPS = 6


def _public(host: Any) -> dict[str, Any]:
    """A node on a public address: fixed ports, advertised at `public_host`."""
    return {"server": {"host": host.addr, "public_host": host.addr, **PORTS}}


def _add(swarm: Any, lab: Any, name: str, role: str, account: int, extra: dict[str, Any], *,
         cheater: bool = False) -> Any:
    base = swarm.add(name, role, account, extra)
    agent = swarm.ns_agent(base.name, base.cfg_path, base.log_path, base.env)
    agent.host = lab.hosts[name]
    agent.module = "intellect.agents.adversary" if cheater else "intellect.agents.cli"
    swarm.agents[name] = agent
    return agent


def test_swarm_across_hosts_nat_worker_paid_offline_and_relay_loss(lab, net_devnet, net_swarm, ns_agent, tmp_path):
    devnet, swarm = net_devnet, net_swarm
    swarm.ns_agent = ns_agent
    p = devnet.protocol(0)
    pool_id = p.deployment.default_pool_id
    params = p.pool(pool_id).params
    for name in ("trainer", "relay", "v1", "w-home", "cheat"):
        lab.host(name)
    for name in ("v2", "w-nat"):  # each behind its own masquerading router (iptables), without it only unreachable
        try:
            lab.nat_host(name)
        except NetUnavailable:
            lab.host(name)
    lab.cap("w-home", "20mbit")
    lab.cap("relay", "8mbit")  # slow enough that the relay is still fetching when its cable is pulled

    trainer = _add(swarm, lab, "trainer", "trainer", 0, {**_public(lab.hosts["trainer"]),
                                                          "trainer": {"max_steps": MAX_STEPS}}).start()
    relay = _add(swarm, lab, "relay", "relay", 5, _public(lab.hosts["relay"])).start()
    v1 = _add(swarm, lab, "v1", "validator", 4, _public(lab.hosts["v1"])).start()
    _add(swarm, lab, "v2", "validator", 6, {"server": {"host": "127.0.0.1", "advertise": False},
                                             "ipfs": {"gateway": False}}).start()
    v2_addr = devnet.protocol(6).address
    nat = _add(swarm, lab, "w-nat", "worker", 1, {"server": {"host": "127.0.0.1", "advertise": False},
                                                  "ipfs": {"gateway": False},
                                                  "worker": {"max_tasks": 2, "push_to": "trainer"}}).start()
    # w-home works on every checkpoint (2 tasks per policy step): the trainer always has fresh work for
    # the step after the relay cut, however far a burst of step-0 submissions carried it before the cut
    # (CI at b4e4f79: w-home had spent its 4 tasks at step 0, steps 1-3 came in one second, and nothing
    # fresh enough for step 4 was ever submitted).
    home = _add(swarm, lab, "w-home", "worker", 2, {**_public(lab.hosts["w-home"]),
                                                    "worker": {"max_tasks": 2 * (MAX_STEPS + 1),
                                                               "tasks_per_step": 2,
                                                               # each reward as its window closes: this test
                                                               # is about being paid, not about batches
                                                               "claim_batch": 1}}).start()
    cheat = _add(swarm, lab, "cheat", "worker", 3, {**_public(lab.hosts["cheat"]),
                                                    "worker": {"max_tasks": 2, "adversary": "wrong_model"}},
                 cheater=True).start()
    nat_addr = devnet.protocol(1).address

    # 1. nothing on-chain or in any /status names a bind address, a loopback address or a random port
    swarm.wait(lambda: all(a.status() is not None for a in (trainer, relay, v1, home)), 240, "agents up")
    swarm.wait(lambda: p.node(v2_addr).active, 240, "the NAT'd validator registered")
    swarm.wait(lambda: "shardcast" in relay.status()["services"], 120, "the relay serving")
    for name, agent in (("trainer", trainer), ("relay", relay), ("v1", v1), ("w-home", home)):
        addr = lab.hosts[name].addr
        node = p.node(agent.status()["node"])
        assert node.endpoint == f"http://{addr}:8000", (name, node.endpoint)
        for svc, url in agent.status()["services"].items():
            assert url.startswith(f"http://{addr}:800"), (name, svc, url)
    assert p.node(nat_addr).endpoint == "" and p.node(v2_addr).endpoint == ""  # the NAT'd nodes registered none

    # 2. the relay's cable is pulled once the first trained checkpoint is out; later ones still arrive (origin)
    swarm.wait(lambda: trainer.status()["policy_step"] >= 1, 600, "policy step 1")
    lab.cut("relay")
    cut_at = trainer.status()["policy_step"]
    assert cut_at < MAX_STEPS, f"the trainer reached its last step ({cut_at}) before the relay could be cut"
    swarm.wait(lambda: max(home.status()["local_checkpoints"] or [-1]) > cut_at, 600,
               f"w-home holding a checkpoint published after the relay went away (after step {cut_at})")

    # 3. the NAT'd worker submitted (its files pushed to the trainer's store) and goes offline
    swarm.wait(lambda: len(p.submissions(node=nat_addr)) >= 2, 600, "the NAT'd worker's submissions")
    nat.stop()
    nat_ids = {s.submission_id for s in p.submissions(node=nat_addr)}
    assert trainer.status()["counters"].get("files_stored", 0) >= 2  # pinned at the trainer's store

    # 4. the validators the chain assigned verify the offline worker's work (fetched from the trainer's store,
    #    CID-checked); each checks only its slots (validator.check: assigned, issue 33), so the trainer's list of
    #    each submission's assigned validators says who must accept it; their attestations reach the trainer (the
    #    NAT'd validator's outbound: nobody reaches its /status)
    def assigned_accepted() -> bool:
        subs = {s["submission_id"]: s for s in trainer.status()["submissions"]}
        return all(sid in subs and subs[sid]["assigned"] and set(subs[sid]["assigned"]) <= set(subs[sid]["attestations"])
                   for sid in nat_ids)

    swarm.wait(assigned_accepted, 300, "the assigned validators accepting the offline NAT'd worker's submissions")

    # 5. the cheater is slashed
    swarm.wait(lambda: cheat.status()["submitted"] >= 2, 300, "the cheater's submissions")
    cheater = cheat.status()["node"]
    cheat_ids = {s["task_id"] for s in cheat.status()["submissions"] if s["status"] == "sent"}
    # each of its submissions is challenged, or voided once an upheld challenge wiped its epoch (the first round
    # may resolve early, all the votes in, before the second submission is checked)
    handled = (TaskStatus.CHALLENGED, TaskStatus.UPHELD, TaskStatus.VOIDED)
    swarm.wait(lambda: all(p.task(i).status in handled for i in cheat_ids)
               and any(p.task(i).status != TaskStatus.VOIDED for i in cheat_ids), 300, "the cheater challenged")
    # the validator behind its NAT router takes the winning side: it opens a challenge of the cheater's or votes
    # uphold in one (its votes are transactions: outbound only)
    def v2_on_the_winning_side() -> bool:
        opened_by_v2 = [e for i in cheat_ids for e in p.get_events(["ChallengeOpened"], filters={"challengeId": i})
                        if str(e.args["challenger"]).lower() == v2_addr.lower()]
        return bool(opened_by_v2) or any(e.args["uphold"] for i in cheat_ids for e in p.get_events(
            ["VoteCast"], filters={"challengeId": i, "validator": v2_addr}))

    swarm.wait(v2_on_the_winning_side, 180, "the NAT'd validator challenging or voting uphold")
    devnet.increase_time(params.vote_period + 5)
    swarm.wait(lambda: all(p.task(i).status in (TaskStatus.UPHELD, TaskStatus.VOIDED) for i in cheat_ids)
               and any(p.challenge_info(i).status == ChallengeStatus.UPHELD for i in cheat_ids
                       if p.task(i).status == TaskStatus.UPHELD), 180, "challenges upheld")
    assert p.get_events(["Slashed"], filters={"node": cheater})
    # every round's evidence is served by the trainer's store (pushed by its challenger; v2's own store is
    # unreachable), so a voter that reaches only public nodes fetches it
    voter = EmbeddedIpfs(tmp_path / "voter-ipfs")
    voter.peers = [f"http://{lab.hosts['trainer'].addr}:8001"]
    opened = [e for i in cheat_ids for e in p.get_events(["ChallengeOpened"], filters={"challengeId": i})]
    assert opened and all(voter.cat(str(e.args["evidenceCid"])) for e in opened)
    by = {str(e.args["challenger"]).lower() for e in opened}
    print(f"cheater's challenges opened by {sorted(by)} (v2, behind NAT: {v2_addr.lower() in by})")

    # 6. windows over: the honest workers are paid; the NAT'd one, offline, claims with its key from anywhere
    swarm.wait(lambda: home.status()["submitted"] >= 4, 300, "w-home's submissions")
    devnet.increase_time(params.window_length + 5)
    swarm.wait(lambda: p.rewards(home.status()["node"]).paid > 0 and not p.rewards(home.status()["node"]).claimable_ids,
               180, "w-home claims its rewards")
    wn = devnet.protocol(1)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(s.status != TaskStatus.PAID for s in wn.submissions(node=nat_addr)):
        ids = wn.rewards(nat_addr).claimable_ids
        if ids:
            wn.claim_rewards(ids)
        time.sleep(2)
    assert all(s.status == TaskStatus.PAID for s in wn.submissions(node=nat_addr))
    assert wn.rewards(nat_addr).paid > 0
