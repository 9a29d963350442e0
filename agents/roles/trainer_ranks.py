"""The trainer role over several processes (issue 38): one pool trainer whose model is sharded with FSDP2.

    torchrun --nproc-per-node 2 -m intellect.agents.cli --role trainer --config trainer.yaml     # one host
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m intellect.agents.cli --role trainer --config trainer.yaml                             # every host

Every rank joins the process group (`join`: gloo on CPU, NCCL on CUDA, each rank its LOCAL_RANK GPU).

- **Rank 0 is the whole trainer agent**: the chain, the key, attestations, the batch, the HTTP server, Shardcast,
  the state store; its policy is a `LeaderPolicy` that, before each collective, tells every other rank what it
  needs, in one `broadcast_object_list` message: `("open", model dir, checkpoint dir, recipe, fresh)` when it opens
  the policy (the recipe as rank 0 resolved it, the pool's rules included: nothing is recomputed elsewhere),
  `("train", samples)` before each training step, `("stop", None)` when the agent has stopped.
- **Every other rank follows** (`follow`): no chain, no key, no server, no state store; it opens the same
  `GRPOTrainer` (its own FSDP2 shard; its optimizer and RNG state in its own file,
  `trainer-state/step-N-rank<k>.pt`), trains each batch rank 0 sends (a step that every rank refuses alike, a
  batch with no signal or non-finite weights, is logged and followed by the next message) and exits 0 on stop.

A step is the same collective work on every rank: rank 0 writes the checkpoint (the full state dict gathered from
the shards) and publishes it as a one-process trainer does. After opening, the ranks compare the step each
resumed: a rank that cannot see rank 0's checkpoint directory (another host without a shared filesystem) is
refused by name on every rank. `kill -9` of any rank: torchrun stops the others; with `--max-restarts N` it starts
them again and each resumes its step, optimizer and RNG state from the newest checkpoint, as one process does.
Rank 0 may wait for attested work for hours between two messages: the group's timeout is
`TRAINER_RANK_TIMEOUT_S` (env, seconds; 7 days by default), and a dead rank ends the group through torchrun,
not through the timeout.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from intellect.agents.grpo import UntrustedValueError
from intellect.agents.grpo_trainer import (
    GRPOConfig,
    GRPOTrainer,
    NonFiniteWeightsError,
    NoSignalError,
    init_distributed,
)
from intellect.agents.roles._runtime import AgentError

__all__ = ["DEFAULT_TIMEOUT_S", "Follower", "LeaderPolicy", "OpenMessage", "follow", "group_size", "join", "joined",
           "lead_open", "release"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 7 * 24 * 3600.0
"""How long a rank waits for the next message (rank 0 may wait that long for attested work)."""
REFUSED_STEPS = (NoSignalError, NonFiniteWeightsError, UntrustedValueError)
"""What every rank raises alike for one batch (the same samples, the same reductions): the step is not trained,
rank 0 marks its submissions unusable, the others follow with the next message."""

_state: dict[str, Any] = {"rank": None, "world": 1}


@dataclass(frozen=True)
class OpenMessage:
    """What a follower needs to open the policy rank 0 opened (paths as rank 0 sees them)."""

    model_dir: str
    out_dir: str
    config: dict[str, Any]
    fresh: bool
    """True: no local checkpoint yet, step 0 is written from the base model (a collective: every rank saves)"""


def group_size() -> int:
    """The number of processes torchrun started for this trainer (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def joined() -> bool:
    return _state["rank"] is not None


def join(device: str) -> tuple[int, int, str]:
    """Join torchrun's process group (once); returns (rank, world size, this rank's device)."""
    if joined():
        return _state["rank"], _state["world"], _state["device"]
    timeout = float(os.environ.get("TRAINER_RANK_TIMEOUT_S", DEFAULT_TIMEOUT_S))
    rank, world, dev = init_distributed(device, timeout=timedelta(seconds=timeout))
    _state.update(rank=rank, world=world, device=dev)
    log.info("trainer rank %d of %d on %s", rank, world, dev)
    return rank, world, dev


def _send(kind: str, body: Any) -> None:
    import torch.distributed as dist

    dist.broadcast_object_list([(kind, body)], src=0)


def _recv() -> tuple[str, Any]:
    import torch.distributed as dist

    box: list[Any] = [None]
    dist.broadcast_object_list(box, src=0)
    kind, body = box[0]
    return str(kind), body


class LeaderPolicy:
    """Rank 0's `GRPOTrainer`, which sends every other rank the batch before it trains on it; every other
    attribute is the trainer's own."""

    def __init__(self, gt: GRPOTrainer) -> None:
        self._gt = gt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gt, name)

    def train_step(self, samples: Any) -> Any:
        _send("train", list(samples))
        return self._gt.train_step(samples)


def _same_step(gt: GRPOTrainer) -> None:
    """Every rank resumed the same step, or every rank raises naming who resumed what."""
    import torch.distributed as dist

    steps: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(steps, gt.step)
    if len(set(steps)) > 1:
        resumed = ", ".join(f"rank {r}: step {s}" for r, s in enumerate(steps))
        raise AgentError(f"the trainer's ranks resumed different steps ({resumed}): every rank must see the "
                         f"checkpoint directory {gt.out_dir} (a shared filesystem for several hosts)")


def _open(msg: OpenMessage, device: str | None = None) -> GRPOTrainer:
    """Open `msg`'s policy on this rank (`device`: the rank's own, for a follower); step 0 written when fresh."""
    config = GRPOConfig(**(msg.config | {"device": device} if device else msg.config))
    gt = GRPOTrainer(Path(msg.model_dir), Path(msg.out_dir), config)
    if msg.fresh:
        gt.save_checkpoint()
    _same_step(gt)
    return gt


def lead_open(model_dir: Path, out_dir: Path, config: GRPOConfig, fresh: bool) -> LeaderPolicy:
    """Rank 0: tell every rank which policy to open, open it (sharded), write step 0 when `fresh`."""
    msg = OpenMessage(str(model_dir), str(out_dir), config.model_dump(), fresh)
    _send("open", msg)
    return LeaderPolicy(_open(msg))


def follow() -> int:
    """A rank other than 0: open what rank 0 opens, train what it trains, until it says stop. Returns 0; raises
    `AgentError` (the CLI's exit 3) on a message out of order or ranks that resumed different steps."""
    rank, device = _state["rank"], _state["device"]
    gt: GRPOTrainer | None = None
    while True:
        kind, body = _recv()
        if kind == "stop":
            log.info("rank %d: rank 0 stopped; leaving", rank)
            return 0
        if kind == "open":
            gt = _open(body, device)
            log.info("rank %d: policy open at step %d", rank, gt.step)
        elif kind == "train":
            if gt is None:
                raise AgentError(f"rank {rank}: asked to train before the policy was opened")
            try:
                gt.train_step(body)
            except REFUSED_STEPS as exc:
                log.warning("rank %d: step %d refused on every rank: %s", rank, gt.step + 1, exc)
        else:
            raise AgentError(f"rank {rank}: unknown message {kind!r} from rank 0")


class Follower:
    """What `intellect-agent --role trainer` runs on a rank above 0 (`trainer.trainer_agent`): `run` follows rank 0
    until it says stop. No chain, no server, no signal handlers (torchrun's SIGTERM ends the process)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def install_signals(self) -> None:
        pass

    def run(self) -> None:
        follow()


def release() -> None:
    """Rank 0, once its agent has stopped: tell the other ranks to leave, then leave the group. Never raises (a
    rank that died already is torchrun's to handle)."""
    if not joined():
        return
    import torch.distributed as dist

    try:
        if _state["rank"] == 0:
            _send("stop", None)
        dist.destroy_process_group()
    except Exception as exc:  # a peer gone: torchrun tears the group down
        log.warning("leaving the trainer's process group: %s", exc)
    _state.update(rank=None, world=1)

