"""A node killed at random for over 30 minutes of chain time (issue 36, opt-in: `make test-soak`): one honest
worker is killed -9 again and again at random moments and restarted (as its service unit would), while the chain
moves on by minutes each time (anvil time travel: leases run out, windows close, rewards become claimable while it
is down). It must lose no submission (every one its state store says it sent is on the ledger, none voided or
upheld), no honest work may be slashed, the run goes on, and the books balance. Real anvil, the real agents with the
tiny model, SIGKILL."""

from __future__ import annotations

import random
import time

import pytest
from swarm_loader import roles_helpers
from test_security_cheaters import assert_books_balance  # type: ignore[import-not-found]

from intellect.sdk import TaskStatus

pytestmark = [pytest.mark.slow, pytest.mark.soak, pytest.mark.timeout(3000)]

CHAIN_SOAK_S = 1800


def test_a_worker_killed_at_random_for_30_minutes_of_chain_time_loses_no_submission(sec_swarm, big_devnet):
    swarm, devnet = sec_swarm, big_devnet
    h = roles_helpers()
    rng = random.Random(36)
    p = devnet.protocol(0)
    trainer = swarm.add("trainer", "trainer", 0, {"trainer": {"max_steps": 1000}}).start()
    validator = swarm.add("validator", "validator", 4).start()
    steady = swarm.add("w0", "worker", 1).start()
    victim = swarm.add("w1", "worker", 2).start()
    swarm.wait(lambda: (victim.status() or {}).get("submitted", 0) >= 1, 900, "the victim's first submission", 2)
    node = victim.status()["node"]
    t0, kills = p.chain_time(), 0
    while p.chain_time() - t0 < CHAIN_SOAK_S:
        time.sleep(rng.uniform(3, 25))  # at a random moment: generating, submitting, claiming rewards
        victim.kill9()
        kills += 1
        devnet.increase_time(rng.randint(60, 240))  # the chain moves on while it is down
        time.sleep(rng.uniform(0, 3))
        victim.start()
        swarm.wait(lambda: victim.status() is not None, 300, "the victim back up", 1)
    swarm.wait(lambda: len(h.sent_submissions(victim.data_dir)) >= kills // 2, 900,
               "the victim submitting after the soak", 2)
    submitted_after = len(h.sent_submissions(victim.data_dir))
    swarm.wait(lambda: (validator.status() or {}).get("backlog", 1) == 0, 600, "validator backlog drained", 2)
    for a in (victim, steady, trainer, validator):
        assert a.stop(timeout=120) == 0, a.name

    sent = h.sent_submissions(victim.data_dir)
    assert kills >= 10 and p.chain_time() - t0 >= CHAIN_SOAK_S and sent
    tasks = h.assert_sent_kept_and_nobody_slashed(p, sent, node, "the victim")
    assert_books_balance(p)
    print(f"soak: {kills} kills over {p.chain_time() - t0} s of chain time; the victim sent {len(sent)} "
          f"({submitted_after} when the soak ended), {sum(t.status == TaskStatus.PAID for t in tasks.values())} paid")
