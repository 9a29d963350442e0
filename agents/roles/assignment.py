"""The validators the chain assigned to a pool's submissions, for the trainer (whose quorum counts only
theirs) and the validators (who check their assigned submissions first).

    assigner = Assigner(protocol, k=assignment_size(quorum, rules.assigned_validators), quorum=quorum)
    assigner.for_task(task_id)   # [validator, ...] its k slots, slot 0 first; None while the claim is not visible

The rule is `intellect.verifier.assignment.assigned_validators` over the validators' stakes at the end of the
block before the claim's block (`intellect.sdk.ValidatorHistory`: from registration, minimum-stake and
weight events, no archive state), leaving out the worker's own operator: k stake-weighted draws with
replacement (a validator may hold several slots). A set with fewer than `quorum` eligible validators gives no
slots (such a claim's submission is never trainable). The one exception is a
development chain (anvil): a claim made before `quorum` validators were staked there (a swarm's processes
start together) is assigned from the set at the end of the first block after the claim's at which the set
gives it `quorum` validators (`ValidatorHistory.change_blocks`: the set changes only at those blocks), and is
unassigned (None: asked again later) until that block is mined. Every party (the trainer, each validator)
computes the same block from the chain alone, whenever it asks: the earlier fallback took the set as of "now",
so the trainer and a validator asking at different times could disagree and keep different lists. Every other
chain keeps the claim's set, and such a claim's submission is never trainable.
"""

from __future__ import annotations

import logging
from typing import Any

from intellect.sdk import ValidatorHistory
from intellect.verifier.assignment import DEV_CHAIN_IDS, assigned_validators, eligible_stakes

__all__ = ["Assigner"]

log = logging.getLogger(__name__)


class Assigner:
    """Assignments of one pool's claims (cached by the callers: a claim's assignment never changes)."""

    def __init__(self, protocol: Any, *, k: int, quorum: int) -> None:
        self.protocol = protocol
        self.k = int(k)
        self.quorum = int(quorum)
        self.history = ValidatorHistory(protocol)
        self._owners: dict[str, str] = {}

    def _owner(self, node: str) -> str:
        key = node.lower()
        if key not in self._owners:  # a node's owner never changes
            self._owners[key] = self.protocol.owner_of(node).lower()
        return self._owners[key]

    def _slots(self, seed: bytes, block: int, exclude: tuple[str, str]) -> list[str] | None:
        """The slots drawn from the set at the end of `block`; None when it has fewer than `quorum` eligible
        validators (of operators other than the worker's)."""
        owners, stakes = self.history.at(block), self.history.stakes_at(block)
        if len(eligible_stakes(stakes, owners=owners, exclude=exclude)) < self.quorum:
            return None
        return assigned_validators(seed, stakes, self.k, owners=owners, exclude=exclude)

    def for_claim(self, seed: bytes, claim_block: int, worker: str) -> list[str] | None:
        """The slots (validators; one may hold several) assigned to the claim of `worker` at block `claim_block`
        whose seed is `seed`; empty when the set had fewer than `quorum` eligible validators; None only on a
        development chain while no block since the claim gave it `quorum` of them."""
        exclude = (worker, self._owner(worker))
        before = int(claim_block) - 1
        assigned = self._slots(seed, before, exclude)
        if assigned is not None:
            return assigned
        if self.protocol.chain_id not in DEV_CHAIN_IDS:
            log.warning("claim at block %d: fewer than %d validator(s) of other operators were staked (quorum %d); "
                        "its submission cannot be trained on", claim_block, self.quorum, self.quorum)
            return []
        for b in self.history.change_blocks(before, self.protocol.block_number()):  # mined: their end is final
            got = self._slots(seed, b, exclude)
            if got is not None:
                log.info("claim at block %d had fewer than %d assignable validator(s): on a development chain, "
                         "assigned from the set of block %d, the first that had enough", claim_block,
                         self.quorum, b)
                return got
        return None

    def for_task(self, task_id: int, claim: Any = None) -> list[str] | None:
        """The validators assigned to task `task_id`; `claim` = (seed, block, node) when the caller has them
        (a validator's event follower), else read from its TaskClaimed event. None: no claim found (yet), or
        on a development chain no set with `quorum` validators since the claim (yet)."""
        if claim is None:
            c = self.protocol.task_claim(task_id)
            if c is None:
                return None
            claim = (c.seed, c.block_number, c.node)
        seed, block, node = claim
        return self.for_claim(seed, block, node)
