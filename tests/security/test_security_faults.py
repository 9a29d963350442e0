"""Faults (issue 5, slow): during one pool run the RPC node is restarted (anvil with a state file), the relay
is killed, one of three honest workers (a third) is killed -9 and restarted at random, and one worker's IPFS
store (its gateway: it serves its own rollout files) is unavailable for a while right after it submitted.
The run must complete (two policy steps), no honest work may be slashed, and the books must balance."""

from __future__ import annotations

import random
import time

import pytest
from security_helpers import running_devnet, running_swarm  # type: ignore[import-not-found]
from test_security_cheaters import assert_books_balance  # type: ignore[import-not-found]

from intellect.sdk import ChallengeStatus


@pytest.fixture
def stateful_devnet(tmp_path):
    with running_devnet(tmp_path, state_file=tmp_path / "anvil-state.json") as net:
        yield net


@pytest.fixture
def fault_swarm(stateful_devnet, tmp_path):
    with running_swarm(stateful_devnet, tmp_path) as s:
        yield s


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_faults_rpc_restart_relay_kill_worker_kills_run_completes_books_balance(fault_swarm, stateful_devnet):
    swarm, devnet = fault_swarm, stateful_devnet
    rng = random.Random(5)
    p = devnet.protocol(0)
    trainer = swarm.add("trainer", "trainer", 0, {"trainer": {"max_steps": 2}}).start()
    relay = swarm.add("relay", "relay", 5).start()
    validator = swarm.add("validator", "validator", 4).start()
    workers = [swarm.add(f"w{i}", "worker", a, {"worker": {"max_tasks": 3}}).start() for i, a in enumerate((1, 2, 3))]
    swarm.wait(lambda: all((w.status() or {}).get("submitted", 0) >= 1 for w in workers), 900, "first submissions", 2)

    # IPFS of w0 unavailable for a while right after a submission (its gateway serves its files)
    outage = workers[0]
    outage.kill9()
    # the RPC node restarts meanwhile (state kept)
    devnet.anvil.stop()
    time.sleep(3)
    devnet.anvil.start()
    time.sleep(rng.uniform(8, 15))
    outage.start()
    # the relay dies for good
    relay.kill9()
    # a third of the workers killed -9 at a random moment and restarted
    victim = rng.choice(workers[1:])
    time.sleep(rng.uniform(1, 10))
    victim.kill9()
    time.sleep(rng.uniform(0, 3))
    victim.start()

    swarm.wait(lambda: (trainer.status() or {}).get("policy_step", 0) >= 2, 1200, "the run completes (2 steps)", 2)
    swarm.wait(lambda: all((w.status() or {}).get("done") for w in workers), 900, "workers finish their tasks", 2)
    swarm.wait(lambda: (validator.status() or {}).get("backlog", 1) == 0, 600, "validator backlog drained", 2)
    upheld = [c for c in validator.status()["challenges"]
              if p.challenge_info(c["challenge_id"]).status == ChallengeStatus.UPHELD]
    assert not upheld, f"honest work slashed: {upheld}"
    assert_books_balance(p)
    for a in swarm.agents.values():
        if a.name != "relay":
            assert a.stop(timeout=120) == 0, a.name
