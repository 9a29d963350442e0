"""`Protocol`'s calls of the pools and checkpoints: one concern of the SDK's contract client (issue 34 split
the class; use them through `intellect.sdk.Protocol`).

`_PoolCalls` is a mixin of `intellect.sdk._client.Protocol`: its methods use the client's `call`, `transact`,
`get_events`, `_ask`, `contracts`, `account` and friends, and are public on `Protocol` under the same names.
"""

from __future__ import annotations

import logging

from ._client_util import _addr, _built
from ._errors import ContractRevert
from ._models import (
    Checkpoint,
    Pool,
    PoolParams,
    PoolState,
    PoolStatus,
    Receipt,
)

__all__ = ["_PoolCalls"]

log = logging.getLogger(__name__)


class _PoolCalls:
    """TaskLedger's pools and checkpoints (create, fund, defund, state, heartbeat, publish)."""

    # -- TaskLedger: pools and checkpoints --------------------------------------------------------
    def create_pool(self, params: PoolParams) -> int:
        rc = self.transact("TaskLedger", "createPool", params.as_tuple())
        return int(rc.event("PoolCreated").args["poolId"])

    def fund_pool(self, pool_id: int, amount: int, *, approve: bool = True) -> Pool:
        if approve:
            self._ensure_allowance("TaskLedger", amount)
        self.transact("TaskLedger", "fundPool", int(pool_id), int(amount))
        return self.pool(pool_id)

    def announce_defund(self, pool_id: int, amount: int) -> int:
        """Pool owner: announce taking back up to `amount` of budget; returns the chain time from which
        `defund_pool` may take it (one lease duration later: every lease open now has ended by then)."""
        rc = self.transact("TaskLedger", "announceDefund", int(pool_id), int(amount))
        return int(rc.event("PoolDefundAnnounced").args["executableAt"])

    def defund_pool(self, pool_id: int, amount: int, to: str | None = None) -> Pool:
        """Pool owner: take `amount` of unreserved budget, at most what `announce_defund` announced at least
        one lease duration ago (TaskLedgerDefundNotAnnounced otherwise)."""
        self.transact("TaskLedger", "defundPool", int(pool_id), int(amount), _addr(to or self.address))
        return self.pool(pool_id)

    def publish_checkpoint(self, pool_id: int, step: int, manifest_cid: str) -> Checkpoint:
        rc = self.transact("TaskLedger", "publishCheckpoint", int(pool_id), int(step), manifest_cid)
        return Checkpoint(pool_id=pool_id, step=step, manifest_cid=manifest_cid, block_number=rc.block_number,
                          tx_hash=rc.tx_hash)

    def pool(self, pool_id: int) -> Pool:
        v = self.call("TaskLedger", "pool", int(pool_id))
        return _built("TaskLedger.pool", lambda: Pool(
            pool_id=pool_id, owner=v[0], params=PoolParams.from_tuple(v[1]), budget=v[2], reserved=v[3],
            has_checkpoint=v[4], latest_step=v[5] if v[4] else None))

    def pool_state(self, pool_id: int) -> PoolStatus:
        """The pool's state (open, paused, finished, or stalled: its trainer's heartbeat lapsed) and until when it
        takes claims (issue 37)."""
        state, open_until = self.call("TaskLedger", "poolState", int(pool_id))
        return PoolStatus(pool_id=int(pool_id), state=PoolState(int(state)), open_until=int(open_until))

    def set_pool_state(self, pool_id: int, state: PoolState | str) -> Receipt:
        """Pause or resume (pool owner), or finish (owner or trainer; anyone once the trainer's heartbeat lapsed:
        the unreserved budget goes back to the owner) a pool; the trainer's `open` is its heartbeat."""
        st = state if isinstance(state, PoolState) else PoolState[str(state).upper()]
        return self.transact("TaskLedger", "setPoolState", int(pool_id), int(st))

    def heartbeat(self, pool_id: int) -> Receipt:
        """The pool trainer's heartbeat: its open pool takes claims for another lease duration (as a checkpoint
        publish does)."""
        return self.set_pool_state(pool_id, PoolState.OPEN)

    def pool_count(self) -> int:
        return int(self.call("TaskLedger", "poolCount"))

    def pools(self) -> list[Pool]:
        return [self.pool(i) for i in range(1, self.pool_count() + 1)]

    def checkpoint(self, pool_id: int, step: int) -> Checkpoint:
        cid = self.call("TaskLedger", "checkpoint", int(pool_id), int(step))
        return Checkpoint(pool_id=pool_id, step=step, manifest_cid=str(cid))

    def latest_step(self, pool_id: int) -> int | None:
        """The latest published step, None when the pool has none yet."""
        try:
            return int(self.call("TaskLedger", "latestStep", int(pool_id)))
        except ContractRevert as exc:
            if exc.name == "TaskLedgerNoCheckpoint":
                return None
            raise

    def latest_checkpoint(self, pool_id: int) -> Checkpoint | None:
        step = self.latest_step(pool_id)
        return None if step is None else self.checkpoint(pool_id, step)

    def checkpoints(self, pool_id: int, *, from_block: int | None = None) -> list[Checkpoint]:
        """Every CheckpointPublished of the pool, oldest first (from the event log)."""
        return [Checkpoint(pool_id=e.args["poolId"], step=e.args["step"], manifest_cid=e.args["manifestCid"],
                           block_number=e.block_number, tx_hash=e.tx_hash)
                for e in self.get_events(["CheckpointPublished"], from_block=from_block,
                                         filters={"poolId": int(pool_id)})]

    def set_min_window_length(self, seconds: int) -> Receipt:
        """Admin only."""
        return self.transact("TaskLedger", "setMinWindowLength", int(seconds))

    def min_window_length(self) -> int:
        return int(self.call("TaskLedger", "minWindowLength"))

    def pool_bounds(self) -> tuple[int, int]:
        """(minChallengeBond, minQuorum): the ledger's floors on new pools."""
        v = self.call("TaskLedger", "poolBounds")
        return int(v[0]), int(v[1])

    def reservation_leverage(self) -> int:
        """Tokens of reservations a node may hold in a pool per token of its active stake (0: no bound)."""
        return int(self.call("TaskLedger", "poolBounds")[2])
