"""The validator set at a past block, from the chain alone (no archive state).

    history = ValidatorHistory(protocol)
    owners = history.at(claim.block_number - 1)     # {validator: owner} active and staked at that block's end

A validator counts at block B when its validator weight at B (`StakeManager.validatorWeightAt`: its active
stake while registered and active as a validator, else 0; checkpointed by block number on-chain) is
positive and at least the validator minimum stake at B (the last `MinStakeSet` event of the validator role
up to B; 0 before any). Candidates are the nodes of `NodeRegistered` events of the validator role up to B
(the latest registration gives the owner). Events are logs and the weights are checkpoints, so any RPC node
answers for any past block: a full node that prunes old state serves them as well as an archive one.

The set of a past block never changes, so results are cached; events are scanned once, incrementally.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ._models import Role

__all__ = ["ValidatorHistory"]


class ValidatorHistory:
    """Which validators were active and staked at the end of a past block (see the module docstring)."""

    def __init__(self, protocol: Any, *, cache_blocks: int = 256) -> None:
        self.protocol = protocol
        self.cache_blocks = cache_blocks
        self._lock = threading.Lock()
        self._scanned = int(protocol.deployment.block) - 1
        self._registrations: list[tuple[int, str, str]] = []  # (block, node, owner), chain order
        self._min_stakes: list[tuple[int, int]] = []  # (block, amount), chain order
        self._sets: OrderedDict[int, dict[str, str]] = OrderedDict()

    def _scan_to(self, block: int) -> None:
        if block <= self._scanned:
            return
        role = int(Role.VALIDATOR)
        start = self._scanned + 1
        regs = self.protocol.get_events(["NodeRegistered"], from_block=start, to_block=block, filters={"role": role})
        mins = self.protocol.get_events(["MinStakeSet"], from_block=start, to_block=block, filters={"role": role})
        self._registrations += [(e.block_number, str(e.args["node"]).lower(), str(e.args["owner"]).lower())
                                for e in regs]
        self._min_stakes += [(e.block_number, int(e.args["amount"])) for e in mins]
        self._scanned = block

    def min_stake_at(self, block: int) -> int:
        """The validator minimum stake at the end of `block`."""
        with self._lock:
            self._scan_to(block)
            return next((amount for b, amount in reversed(self._min_stakes) if b <= block), 0)

    def candidates_at(self, block: int) -> dict[str, str]:
        """{node: owner} of every node registered as a validator at or before `block` (active or not)."""
        with self._lock:
            self._scan_to(block)
            return {node: owner for b, node, owner in self._registrations if b <= block}

    def at(self, block: int) -> dict[str, str]:
        """{validator: owner} (lower case) of the validators active and staked at the end of past block `block`."""
        block = int(block)
        with self._lock:
            cached = self._sets.get(block)
            if cached is not None:
                self._sets.move_to_end(block)
                return dict(cached)
        floor = self.min_stake_at(block)
        out = {}
        for node, owner in self.candidates_at(block).items():
            weight = self.protocol.validator_weight_at(node, block)
            if weight > 0 and weight >= floor:
                out[node] = owner
        with self._lock:
            self._sets[block] = out
            while len(self._sets) > self.cache_blocks:
                self._sets.popitem(last=False)
        return dict(out)
