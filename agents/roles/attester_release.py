"""The trainer gives back what its attestation roots reserved for work that can never be paid (issue 38): a root's
leaves of a submission later upheld as bad, or voided because its worker was slashed, return to the pool's
validator budget instead of staying reserved for good.

    trainer's event follower:
        ChallengeResolved(upheld)  → `attester_slash` record (`attester_slash.mark_upheld`; released once `done`)
        WorkerWiped(node)          → `mark_wiped`: each of the node's recorded submissions gets an `attester_void`
                                     record `wiped` (it may be void: its window was open when the epoch ended)
        SubmissionVoided(sid)      → `mark_voided`: its `attester_void` record becomes `voided`
    trainer loop, after recording its roots → release_unpayable_leaves(protocol, state, ipfs):
        wiped ones: an eth_call of `voidSubmissions([sid])` says which are void; the trainer voids those itself (one
            transaction: nobody else may, the challenger's `void_wiped_submissions` voids only what its own
            challenge wiped) → `voided`; a revert means not void (`not_void`) or voided by someone else (read back)
        upheld (`attester_slash` done) and voided ones whose root is recorded: their leaves not settled yet, one
            `releaseAttesterRewards` per (root, validator), each multiproof at most 256 leaves; a refused batch is
            tried leaf by leaf, a refused leaf is logged and not tried again

Each submission is released once (its `attester_record` gets `released`). At most `max_tx` transactions a pass;
what is left goes next pass. A wiped submission the trainer never trained (no root leaves, its record final) is
dropped (`attester_void` `nothing`); one it may still train waits.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from intellect.agents.roles._state import StateStore
from intellect.sdk import ContractRevert, TaskStatus
from intellect.sdk.attestation_root import MAX_LEAVES_PER_CALL, AttestationRootFile

__all__ = ["KIND", "mark_voided", "mark_wiped", "release_unpayable_leaves"]

log = logging.getLogger(__name__)

KIND = "attester_void"
"""Records of the trainer's submissions that were, or may have been, voided: id = submission id; status `wiped`
(its worker was slashed while it was open: void or not, the chain says) → `voided` (released once its root is
recorded) | `not_void` (the chain says so: paid, upheld, still payable) | `nothing` (no root leaves of it to
release)."""
_UNSETTLED_SUBMISSION = ("pending", "consumed")
"""`submission` statuses that may still get root leaves (trained, or not yet decided)"""


def mark_wiped(state: StateStore, node: str) -> int:
    """`WorkerWiped(node)`: mark each recorded submission of `node` that is not settled in this module's records
    yet as possibly void (`wiped`). Returns how many it marked."""
    node = node.lower()
    marked = 0
    for r in state.records("submission"):
        sid = int(r["id"])
        if str(r["data"].get("node", "")).lower() != node:
            continue
        prev = state.record(KIND, sid)
        if prev is None or prev["status"] in ("not_void", "nothing"):  # a later epoch may void it after all
            state.put(KIND, sid, "wiped")
            marked += 1
    return marked


def mark_voided(state: StateStore, sid: int) -> bool:
    """`SubmissionVoided(sid)` of a recorded submission (voided by anyone): its leaves are to be released. True if
    it marked it."""
    if state.record("submission", sid) is None:
        return False
    state.put(KIND, sid, "voided")
    return True


def _void_wiped(protocol: Any, state: StateStore, budget: int) -> int:
    """The `wiped` records: ask the chain which are void, void those in one transaction. Returns the transactions
    sent (0 or 1)."""
    void: list[int] = []
    for r in state.records(KIND, "wiped"):
        sid = int(r["id"])
        rec = state.record("attester_record", sid)
        if rec is None or rec["status"] == "recording":  # no root yet: one may come while it can still be trained
            sub = state.record("submission", sid)
            if rec is None and (sub is None or sub["status"] not in _UNSETTLED_SUBMISSION):
                state.put(KIND, sid, "nothing")
            continue
        if "cid" not in rec["data"] or rec["data"].get("released"):  # no root leaves, or released already
            state.put(KIND, sid, "nothing")
            continue
        try:
            protocol.call("TaskLedger", "voidSubmissions", [sid])
            void.append(sid)
        except ContractRevert as exc:
            status = protocol.task(sid).status
            state.put(KIND, sid, "voided" if status == TaskStatus.VOIDED else "not_void", {"chain_status": status.name})
            log.debug("submission %d is not voidable (%s): %s", sid, exc.name, status.name)
    if not void or budget <= 0:
        return 0
    released = protocol.void_submissions(void)
    for sid in void:
        state.put(KIND, sid, "voided")
    log.info("voided %d wiped submission(s) in the trainer's roots (%s): %d wei of work reward released",
             len(void), ", ".join(map(str, void)), released)
    return 1


def _unpayable(state: StateStore) -> list[int]:
    """Submissions whose root leaves can never be paid and are not released yet: upheld ones whose attesters were
    handled and window closed (`attester_slash` done), and voided ones, each with a recorded root."""
    sids = [int(r["id"]) for r in state.records("attester_slash", "done")]
    sids += [int(r["id"]) for r in state.records(KIND, "voided")]
    out = []
    for sid in dict.fromkeys(sids):
        rec = state.record("attester_record", sid)
        if rec is not None and rec["status"] == "recorded" and "cid" in rec["data"] and not rec["data"].get("released"):
            out.append(sid)
    return out


def _release(protocol: Any, f: AttestationRootFile, validator: str, indices: list[int],
             budget: int) -> tuple[int, int]:
    """Release `validator`'s leaves `indices` of root `f`, `MAX_LEAVES_PER_CALL` a transaction; a refused batch is
    tried leaf by leaf, a refused leaf logged and left. At most `budget` transactions. Returns (wei released, the
    budget left), the budget -1 when it ran out before the last leaf was sent."""
    total = 0
    for i in range(0, len(indices), MAX_LEAVES_PER_CALL):
        part = indices[i:i + MAX_LEAVES_PER_CALL]
        for attempt in (part, *([[x] for x in part] if len(part) > 1 else [])):
            if budget <= 0:
                return total, -1
            budget -= 1
            try:
                total += protocol.release_attester_leaves(f, validator, attempt)
            except ContractRevert as exc:
                log.info("leaves %s of %s in root %s not released: %s", attempt, validator, f.root, exc)
                continue
            if attempt is part:
                break  # the whole batch went: no leaf by leaf
    return total, budget


def release_unpayable_leaves(protocol: Any, state: StateStore, ipfs: Any, *, max_tx: int = 8) -> int:
    """One pass (see the module's docstring): void the trainer's wiped submissions that are void, then return to
    the pool's budget the unsettled root leaves of every upheld or voided one. Returns the wei released.
    Reverts are logged, not retried; an RPC or IPFS failure raises (the caller retries next pass)."""
    budget = max_tx - _void_wiped(protocol, state, max_tx)
    sids = _unpayable(state)
    if not sids:
        return 0
    files: dict[str, AttestationRootFile] = {}
    todo: dict[tuple[str, str], list[int]] = defaultdict(list)  # (cid, validator) -> leaf indices
    for sid in sids:
        data = state.record("attester_record", sid)["data"]
        cid = data["cid"]
        if cid not in files:
            files[cid] = AttestationRootFile.parse(ipfs.cat(cid), expect_root=data["root"])
        f = files[cid]
        for leaf in (x for x in f.leaves if x.submission_id == sid):
            if not protocol.attester_leaf_settled(f.pool_id, f.root, leaf.index):
                todo[(cid, leaf.validator)].append(leaf.index)
    total, unfinished = 0, set()
    for (cid, validator), indices in todo.items():
        released, budget = _release(protocol, files[cid], validator, indices, budget)
        total += released
        if budget < 0:  # ran out before every leaf was sent: the rest next pass
            unfinished.add((cid, validator))
            budget = 0
    for sid in sids:
        cid = state.record("attester_record", sid)["data"]["cid"]
        if not any((cid, leaf.validator) in unfinished for leaf in files[cid].leaves if leaf.submission_id == sid):
            state.put("attester_record", sid, "recorded", {"released": True})
            log.info("submission %d can never be paid: its attestation leaves went back to the pool's budget", sid)
    return total
