"""The validator set at a past block, from the chain's event log alone (no archive state, no per-validator calls).

    history = ValidatorHistory(protocol)
    owners = history.at(claim.block_number - 1)     # {validator: owner} active and staked at that block's end
    stakes = history.stakes_at(claim.block_number - 1)  # {validator: weight} of the same validators

A validator counts at block B when its validator weight at B is positive and at least the validator minimum
stake at B (the last `MinStakeSet` event of the validator role up to B; 0 before any). Candidates are the
nodes of `NodeRegistered` events of the validator role up to B (the latest registration gives the owner), and
the new keys of `NodeKeyRotated` events of that role (issue 36: the owner moved a validator to a new key; its
weight moved with it, so the old key's weight event says 0 from that block on).

The weight at B is the last `ValidatorWeightUpdated(node, weight, total)` event of the node up to B (0 before
any). `StakeManager._syncWeight` is the one path by which a weight changes, and it emits that event each time
it pushes a checkpoint, so this is exactly what `StakeManager.validatorWeightAt(node, B)` answers (the
checkpoint of the last push at or before B; several in one block keep the last, as the last log does):
`tests/sdk/test_sdk_validator_history.py` compares the two at every block of a chain with registrations,
stakes, unstakes, exits, slashes and minimum changes.

Cost: each call scans only the blocks after the last one scanned (one `eth_blockNumber`, then one
`eth_getLogs` request per 10,000 blocks for all three events together) and makes no `eth_call`; results per
block are cached. Before (main at
98bd84d) each new block cost one `validatorWeightAt` call per validator ever registered (the set grows).
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections import OrderedDict
from typing import Any

from ._errors import RpcError
from ._models import Role

__all__ = ["ValidatorHistory"]

EVENTS = ("NodeRegistered", "NodeKeyRotated", "MinStakeSet", "ValidatorWeightUpdated")


class ValidatorHistory:
    """Which validators were active and staked at the end of a past block (see the module docstring)."""

    def __init__(self, protocol: Any, *, cache_blocks: int = 256) -> None:
        self.protocol = protocol
        self.cache_blocks = cache_blocks
        self._lock = threading.Lock()
        self._scanned = int(protocol.deployment.block) - 1
        self._registrations: list[tuple[int, str, str]] = []  # (block, node, owner), chain order
        self._min_stakes: list[tuple[int, int]] = []  # (block, amount), chain order
        self._weights: dict[str, tuple[list[int], list[int]]] = {}  # node -> (blocks, weights), chain order
        self._changes: list[int] = []  # blocks where any of the three events occurred, ascending, distinct
        self._sets: OrderedDict[int, dict[str, tuple[str, int]]] = OrderedDict()  # block -> {node: (owner, weight)}

    def _scan_to(self, block: int) -> None:
        if block <= self._scanned:
            return
        head = self.protocol.block_number()
        if block > head:  # a log range past the head would be answered short, and then never scanned again
            raise RpcError(f"block {block} is past the RPC node's head {head} (not mined yet, or the node lags)")
        validator = int(Role.VALIDATOR)
        for e in self.protocol.get_events(list(EVENTS), from_block=self._scanned + 1, to_block=block):
            b, a = e.block_number, e.args
            if e.event == "NodeRegistered":
                if int(a["role"]) != validator:
                    continue
                self._registrations.append((b, str(a["node"]).lower(), str(a["owner"]).lower()))
            elif e.event == "NodeKeyRotated":
                if int(a["role"]) != validator:
                    continue
                self._registrations.append((b, str(a["newNode"]).lower(), str(a["owner"]).lower()))
            elif e.event == "MinStakeSet":
                if int(a["role"]) != validator:
                    continue
                self._min_stakes.append((b, int(a["amount"])))
            else:
                blocks, weights = self._weights.setdefault(str(a["node"]).lower(), ([], []))
                if blocks and blocks[-1] == b:  # the block's last push is its checkpoint
                    weights[-1] = int(a["weight"])
                else:
                    blocks.append(b)
                    weights.append(int(a["weight"]))
            if not self._changes or self._changes[-1] != b:
                self._changes.append(b)
        self._scanned = block

    def min_stake_at(self, block: int) -> int:
        """The validator minimum stake at the end of `block`."""
        with self._lock:
            self._scan_to(block)
            return self._min_stake_at(block)

    def _min_stake_at(self, block: int) -> int:
        return next((amount for b, amount in reversed(self._min_stakes) if b <= block), 0)

    def candidates_at(self, block: int) -> dict[str, str]:
        """{node: owner} of every node registered as a validator at or before `block` (active or not)."""
        with self._lock:
            self._scan_to(block)
            return self._candidates_at(block)

    def _candidates_at(self, block: int) -> dict[str, str]:
        return {node: owner for b, node, owner in self._registrations if b <= block}

    def weight_at(self, node: str, block: int) -> int:
        """`node`'s validator weight at the end of `block` (what `StakeManager.validatorWeightAt` answers)."""
        with self._lock:
            self._scan_to(block)
            return self._weight_at(node.lower(), block)

    def _weight_at(self, node: str, block: int) -> int:
        hist = self._weights.get(node)
        if hist is None:
            return 0
        i = bisect_right(hist[0], block)
        return hist[1][i - 1] if i else 0

    def change_blocks(self, after: int, upto: int) -> list[int]:
        """The blocks in (`after`, `upto`] where the set may have changed (a registration, a minimum or a weight
        moved): `at(b)` is constant between two consecutive ones."""
        with self._lock:
            self._scan_to(upto)
            return [b for b in self._changes if after < b <= upto]

    def at(self, block: int) -> dict[str, str]:
        """{validator: owner} (lower case) of the validators active and staked at the end of past block `block`."""
        return {node: owner for node, (owner, _) in self._set_at(int(block)).items()}

    def stakes_at(self, block: int) -> dict[str, int]:
        """{validator: weight} (lower case; the weight is its active stake) of the same validators as `at(block)`:
        what the stake-weighted assignment draws from (`intellect.verifier.assignment`)."""
        return {node: weight for node, (_, weight) in self._set_at(int(block)).items()}

    def _set_at(self, block: int) -> dict[str, tuple[str, int]]:
        with self._lock:
            cached = self._sets.get(block)
            if cached is not None:
                self._sets.move_to_end(block)
                return cached
            self._scan_to(block)
            floor = self._min_stake_at(block)
            out = {}
            for node, owner in self._candidates_at(block).items():
                weight = self._weight_at(node, block)
                if weight > 0 and weight >= floor:
                    out[node] = (owner, weight)
            self._sets[block] = out
            while len(self._sets) > self.cache_blocks:
                self._sets.popitem(last=False)
            return out
