"""The trainer's part in its pool's life on-chain (issue 37; moved out of `Trainer` by issue 34): the heartbeat
that keeps the pool open for claims, and finishing it at `trainer.max_steps`.

    beat = Heartbeat(protocol, pool_id, lease_duration)
    beat.beat()               # setPoolState(open) when due; True if sent
    beat.checkpoint()         # a published checkpoint counts as a heartbeat (once heartbeats started)
    finish_pool(protocol, state, pool_id, step)
"""

from __future__ import annotations

import logging
import time
from typing import Any

from intellect.agents.roles._state import StateStore
from intellect.sdk import ContractRevert, PoolState

__all__ = ["STALL_CHECK_S", "Heartbeat", "finish_pool"]

log = logging.getLogger(__name__)

STALL_CHECK_S = 5.0
"""between heartbeats, how often the pool's on-chain state is read to beat at once if it stalled"""


class Heartbeat:
    """Tells the chain the trainer is alive (`setPoolState(open)`, issue 37): at once the first time, then when a
    quarter of the pool's lease duration passed since its last checkpoint or heartbeat (`last`, monotonic
    seconds). From the first heartbeat on, the ledger takes claims only up to a lease duration after the latest
    of either, so a trainer that dies stops its pool's claims within one lease."""

    def __init__(self, protocol: Any, pool_id: int, lease_duration: float) -> None:
        self.protocol, self.pool_id, self.lease_duration = protocol, pool_id, lease_duration
        self.last = 0.0
        self.beats = 0
        self._state_checked = 0.0

    def beat(self) -> bool:
        """Send a heartbeat if one is due; True if sent."""
        if self.beats and time.monotonic() - self.last < self.lease_duration / 4:
            # chain time can outrun this clock (a devnet's evm_increaseTime): every 5 s, beat at once if stalled
            if time.monotonic() - self._state_checked < STALL_CHECK_S:
                return False
            self._state_checked = time.monotonic()
            if self.protocol.pool_state(self.pool_id).state != PoolState.STALLED:
                return False
        self.last = time.monotonic()
        try:
            self.protocol.heartbeat(self.pool_id)
        except ContractRevert as exc:  # paused or finished by its owner: nothing to keep alive
            log.info("pool %d heartbeat not taken: %s", self.pool_id, exc)
            return False
        self.beats += 1
        return True

    def checkpoint(self) -> None:
        """A checkpoint was published: once heartbeats started, it is one too (issue 37)."""
        if self.beats:
            self.last = time.monotonic()


def finish_pool(protocol: Any, state: StateStore, pool_id: int, step: int) -> None:
    """Finish the pool on-chain at `max_steps` (`trainer.finish_pool`), once (state `pool_finished`): claims
    stop, the work submitted stays payable, the unreserved budget goes back to the pool's owner."""
    if state.get("pool_finished"):
        return
    try:
        if protocol.pool_state(pool_id).state != PoolState.FINISHED:
            protocol.set_pool_state(pool_id, PoolState.FINISHED)
            log.info("pool %d finished at step %d (trainer.max_steps): claims stop, the unreserved budget "
                     "went back to its owner", pool_id, step)
    except ContractRevert as exc:
        log.warning("pool %d not finished: %s", pool_id, exc)
    state.set("pool_finished", True)
