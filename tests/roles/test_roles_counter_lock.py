"""An agent's counters and its state store share one lock (found by tests/image: a trainer hung for good).

`Agent.count` used a lock of its own and wrote through the state store inside it, while the trainer's publish
(`checkpoint_publish.finish_plan`) counted inside a state transaction: the loop held the store's lock and waited
for the counters' lock, an HTTP thread counting an attestation held the counters' lock and waited for the store's.
The loop, `/status`, `/store` and every attestation POST stopped; SIGTERM could not end it."""

from __future__ import annotations

import threading
import time

from intellect.agents.config import AgentConfig
from intellect.agents.roles._runtime import Agent
from intellect.agents.roles.checkpoint_publish import finish_plan


def test_counting_inside_a_state_transaction_while_another_thread_counts_does_not_deadlock(tmp_path):
    agent = Agent(AgentConfig(role="relay", data_dir=tmp_path))
    agent.state.set("plan", {"step": 3, "submissions": [7, 8]})
    in_transaction, done = threading.Event(), []

    def http_thread() -> None:  # an attestation counted while the loop publishes
        in_transaction.wait(5)
        agent.count("attestations_received")
        done.append("http")

    def count_in_transaction(name: str, amount: int) -> None:  # finish_plan counts inside its transaction
        in_transaction.set()
        time.sleep(0.3)  # the other thread is inside `count` by now, waiting for the store
        agent.count(name, amount)

    def loop() -> None:
        finish_plan(agent.state, 3, "bafkreicid", count_in_transaction)
        done.append("loop")

    threads = [threading.Thread(target=http_thread, daemon=True), threading.Thread(target=loop, daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(done) == ["http", "loop"], f"deadlocked: only {done} finished"
    assert agent.counters == {"attestations_received": 1, "submissions_consumed": 2}
    assert agent.state.get("counter:submissions_consumed") == 2
    assert agent.state.get("plan") is None
    assert agent.state.record("submission", 7)["status"] == "consumed"
    agent.state.close()
