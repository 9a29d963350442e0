"""The pool's trainer over two processes (issue 38): `torchrun --nproc-per-node 2 -m intellect.agents.cli --role
trainer`, against anvil with a worker and a validator, each its own `intellect-agent` process, the tiny model on
CPU (gloo). Rank 0 is the agent; rank 1 trains its FSDP2 shard of every step. Killed -9 after step 2, rank 1 is
restarted by torchrun with rank 0 (`--max-restarts 1`), both resume step 2 and train step 3; a SIGTERM to rank 0 stops the
agent, which tells rank 1 to leave: torchrun exits 0.

Slow (torch started four times, ~2-3 min on 2 cores): `make test-dist`, which CI runs."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from intellect.agents.grpo_trainer import latest_checkpoint

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            "--max-restarts", "1", "-m", "intellect.agents.cli"]


def _ranks(pid: int) -> dict[int, int]:
    """RANK -> pid of torchrun's worker processes (its children)."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            rank = next((int(e[5:]) for e in env if e.startswith(b"RANK=")), None)
            if rank is not None:
                out[rank] = int(child)
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_trainer_on_two_ranks_trains_restarts_and_stops(swarm, devnet):
    p = devnet.protocol(0)
    pool_id = p.deployment.default_pool_id
    trainer = swarm.add("trainer", "trainer", 0, {"trainer": {"max_steps": 3}}, launcher=TORCHRUN).start()
    swarm.add("validator", "validator", 4).start()
    swarm.add("w1", "worker", 1, {"worker": {"max_tasks": 2}}).start()  # one submission per step: steps 1 and 2

    swarm.wait(lambda: (trainer.status() or {}).get("policy_step", 0) >= 2, 420, "steps 1 and 2 on two ranks", 2)
    assert trainer.proc is not None
    ranks = _ranks(trainer.proc.pid)
    assert sorted(ranks) == [0, 1] and ranks[0] == trainer.status()["pid"]
    ckpts = trainer.data_dir / "checkpoints"
    assert (ckpts / "trainer-state" / "step-2-rank1.pt").is_file()  # rank 1 trained its shard of step 2

    os.kill(ranks[1], signal.SIGKILL)  # torchrun stops rank 0 and starts both again
    swarm.wait(lambda: (_ranks(trainer.proc.pid).get(0) not in (None, ranks[0])
                        and (trainer.status() or {}).get("pid") not in (None, ranks[0])), 240,
               "both ranks restarted by torchrun", 2)
    swarm.add("w2", "worker", 2, {"worker": {"max_tasks": 2}}).start()  # the work of step 3
    swarm.wait(lambda: (trainer.status() or {}).get("policy_step", 0) >= 3, 420, "step 3 after the restart", 2)
    # the status counts a step once trained; its checkpoint and each rank's state file follow within the step
    def published() -> list[int]:
        return [s["step"] for s in (trainer.status() or {}).get("steps", []) if s["status"] == "published"]

    swarm.wait(lambda: (latest_checkpoint(ckpts) == ckpts / "step-3" and 3 in published()
                        and (ckpts / "trainer-state" / "step-3-rank1.pt").is_file()), 60,
               "step 3 saved by both ranks and published")
    st = trainer.status()
    assert sorted(published())[:4] == [0, 1, 2, 3]
    for s in st["steps"]:
        if s["status"] == "published":
            assert p.checkpoint(pool_id, s["step"]).manifest_cid == s["checkpoint_cid"]
    log = trainer.log_text()
    assert "trainer rank 1 of 2 on cpu" in log and "rank 1: policy open at step 0" in log
    assert "rank 1: policy open at step 2" in log  # the restarted rank 1 resumed step 2 ...
    assert log.count("resumed optimizer and RNG state of step 2") == 2  # ... each rank with its own state ...
    swarm.wait(lambda: "trainer-rank1 intellect.agents.grpo_trainer: step 3:" in trainer.log_text(), 30,
               "rank 1's log of step 3")  # ... and trained step 3

    # a clean stop: SIGTERM to rank 0 (the agent); it tells rank 1 to leave; torchrun exits 0
    os.kill(_ranks(trainer.proc.pid)[0], signal.SIGTERM)
    assert trainer.proc.wait(timeout=120) == 0, trainer.log_text()[-3000:]
    assert "rank 1: rank 0 stopped; leaving" in trainer.log_text()
