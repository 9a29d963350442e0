"""The budget class of a pool's claims, for the worker (which budgets to generate with), the validators (which
to check against) and the trainer's canaries: one computation from the chain, so all three agree.

    classes = BudgetClasses(protocol, pool_id, pool_params, cfg)
    classes.class_at(node, claim_block)       # `cpu` | `gpu-small` | `gpu-large`
    classes.budgets_at(node, claim_block)     # the target lengths of that class (the pool's budgets)

The class is `intellect.verifier.budget_class.budget_class` over the node's declared hardware and decided
leases as of the end of the block before the claim's block (`intellect.sdk.WorkHistory`: events only).
A claim's class never changes, so it is cached by task.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from intellect.sdk import WorkHistory
from intellect.verifier.budget_class import ClassRule, budget_class
from intellect.verifier.submission import class_budgets, hardware_class

__all__ = ["BudgetClasses"]

log = logging.getLogger(__name__)


class BudgetClasses:
    """Budget classes of one pool's claims (see the module docstring)."""

    def __init__(self, protocol: Any, pool_id: int, params: Any, cfg: Any) -> None:
        w, t = cfg.worker, cfg.tasks
        self.budgets = {k: [int(x) for x in v] for k, v in t.budgets.items()}
        self.rule = ClassRule.of(t.class_history, t.class_lease_share)
        self.thresholds = self.rule.thresholds(self.budgets, w.group_size, w.problems_per_task, params.lease_duration)
        self.history = WorkHistory(protocol, pool_id, lease_duration=params.lease_duration,
                                   window_length=params.window_length)
        self._lock = threading.Lock()
        self._by_claim: dict[tuple[str, int], str] = {}

    def class_at(self, node: str, claim_block: int) -> str:
        """The class a claim of `node` made in block `claim_block` is judged by."""
        key = (node.lower(), int(claim_block))
        with self._lock:
            if key in self._by_claim:
                return self._by_claim[key]
        before = int(claim_block) - 1
        hw = self.history.declared(node, before)
        declared = hardware_class(*hw) if hw is not None else "cpu"
        outcomes = self.history.outcomes(node, before, limit=self.rule.history) if self.rule.history > 0 else []
        cls = budget_class(declared, outcomes, self.thresholds, self.rule.history)
        if cls != declared:
            log.info("node %s declared %s; its claim at block %d is judged as %s (%d decided leases, thresholds %s)",
                     node, declared, claim_block, cls, len(outcomes), self.thresholds)
        with self._lock:
            self._by_claim[key] = cls
            if len(self._by_claim) > 4096:
                self._by_claim.pop(next(iter(self._by_claim)))
        return cls

    def budgets_at(self, node: str, claim_block: int) -> list[int]:
        """The target lengths of that class (`cpu`'s when the pool gives the class none)."""
        return class_budgets(self.budgets, self.class_at(node, claim_block))

    def claim_block(self, task_id: int) -> int | None:
        """The block of task `task_id`'s claim (from the history's scan up to the chain head), None if unseen."""
        return self.history.claim_block(task_id)
