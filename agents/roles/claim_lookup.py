"""What a node knows of a claim: its chain-drawn seed, its block, the budget class it is judged by, and the
validators the chain assigned to it.

Each is read from the state store's `claim` record (id = task id; the validator's event follower keeps one per
TaskClaimed of its pool, the worker one per claim it made), and from the chain only for a claim the store lacks.
The worker's `claim_budgets` and the validator's check of a submission read the same block, so both judge a claim
by the same class.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NoReturn

from intellect.agents.roles._runtime import bare_hex
from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.budget_class import BudgetClasses
from intellect.sdk import IntellectError
from intellect.verifier.assignment import assignment_size, effective_quorum
from intellect.verifier.isolation import ParseUnavailable
from intellect.verifier.submission import Rejection

__all__ = ["assigned_to", "assignment_of", "claim_block", "claim_class", "claim_seed", "missing_claim_event", "validator_assigner"]

log = logging.getLogger(__name__)


def claim_block(state: Any, classes: BudgetClasses, task_id: int) -> int | None:
    """The block of task `task_id`'s claim: from its `claim` record, else from the history's scan
    (`BudgetClasses.claim_block`); None when this pool has no TaskClaimed event for it."""
    rec = state.record("claim", task_id)
    block = rec["data"].get("block") if rec is not None else None
    return int(block) if block is not None else classes.claim_block(task_id)


def claim_seed(protocol: Any, state: Any, task_id: int) -> bytes:
    """The chain-drawn seed of task `task_id`'s claim: from the TaskClaimed event the follower kept (it
    precedes the WorkSubmitted event); the event log is searched only for a claim the follower did not
    see (a cursor from before claims were followed), and the seed then kept."""
    rec = state.record("claim", task_id)
    if rec is not None:
        return bytes.fromhex(rec["data"]["seed"])
    evs = protocol.get_events(["TaskClaimed"], filters={"taskId": task_id})
    if not evs:
        missing_claim_event(protocol, task_id)
    seed = bare_hex(evs[-1].args["seed"])
    state.put("claim", task_id, "claimed", {"seed": seed})
    return bytes.fromhex(seed)


def claim_class(protocol: Any, state: Any, classes: BudgetClasses, task_id: int, node: str) -> str:
    """The budget class task `task_id`'s claim is judged by (`BudgetClasses`: the lower of the node's declared
    class and the class its verified history earns, as of the block before the claim's block)."""
    block = claim_block(state, classes, task_id)
    if block is None:
        missing_claim_event(protocol, task_id)
    return classes.class_at(node, block)


def missing_claim_event(protocol: Any, task_id: int) -> NoReturn:
    """No TaskClaimed event for a task: a rejection only when the ledger has no such task. A task the ledger
    holds was claimed (submitWork takes only the claimant), so a missing event is this node's RPC missing
    logs (a node restarted from a state dump, a pruned provider): no verdict now, judged later, given up
    when the window closes (`ParseUnavailable`), never a slash on what this node could not see."""
    if protocol.known_task(task_id) is None:
        raise Rejection("unknown_task", f"no TaskClaimed event for task {task_id}")
    raise ParseUnavailable(f"task {task_id} is on the ledger but this node's RPC returns no TaskClaimed event for "
                           f"it (its claim seed and block are unknown here)")


def validator_assigner(protocol: Any, pool_quorum: int, assigned_validators: int | None) -> Assigner:
    """The `Assigner` of a pool whose quorum is `pool_quorum` and whose rules assign `assigned_validators` (None:
    the default) validators to each claim."""
    quorum = effective_quorum(None, pool_quorum, protocol.chain_id)
    return Assigner(protocol, k=assignment_size(quorum, assigned_validators), quorum=quorum)


def assignment_of(state: Any, sid: int, address: str, assigner: Callable[[], Assigner]) -> list[str] | None:
    """The validators (lower-case; one may hold several slots) the chain assigned to submission `sid`
    (`intellect.verifier.assignment`: only their attestations count towards the trainer's quorum, and only they are
    paid for it); empty when its claim had fewer than `quorum` eligible validators; None while unknown (the claim's
    validator set not readable yet: asked again on the next call). Kept in the state store's `assignment` record
    (with `mine`: whether `address` is among them) once known; `assigner` makes (or returns the kept) `Assigner`,
    asked only when the store does not know."""
    rec = state.record("assignment", sid)
    if rec is not None:
        return list(rec["data"]["validators"])
    try:
        c = (state.record("claim", sid) or {}).get("data", {})
        claim = (bytes.fromhex(c["seed"]), int(c["block"]), c["node"]) if "block" in c else None
        validators = assigner().for_task(sid, claim)
    except IntellectError as exc:
        log.debug("submission %d: assignment not readable yet: %s", sid, exc)
        return None
    if validators is None:
        return None
    validators = [v.lower() for v in validators]
    state.put("assignment", sid, "assigned", {"validators": validators, "mine": address.lower() in validators})
    return validators


def assigned_to(state: Any, sid: int, address: str, assigner: Callable[[], Assigner]) -> bool:
    """Whether the chain assigned submission `sid` to the validator `address` (`assignment_of`); False while
    unknown."""
    return address.lower() in (assignment_of(state, sid, address, assigner) or [])
