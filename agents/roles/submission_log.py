"""The trainer's records of its pool's chain events (issue 34: moved out of `Trainer`): what the event follower
turns into local state, and the lookups built on those records.

    record_event(state, pool_id, e)             # TaskClaimed / WorkSubmitted / ChallengeResolved / WorkerWiped /
                                                # SubmissionVoided → state records
    lookup_submission(protocol, state, pool_id, sid)   # the record, or the chain's event after the cursor
    assigned_slots(sid, state=..., assigner=..., cache=...)   # the validators the chain assigned it
    left_out(state, sid, status)                # challenged / voided → excluded; upheld → rejected

Records: `submission` (pending → consumed | stale | excluded | rejected | unusable), `claim` (the claim's seed,
block and node: the assignment's inputs, so no search of the chain's logs), `assignment` (never changes once
computed).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from intellect.agents.roles._runtime import StateCursorStore, bare_hex
from intellect.agents.roles._state import StateStore
from intellect.agents.roles.attester_release import mark_voided, mark_wiped
from intellect.agents.roles.attester_slash import mark_upheld
from intellect.sdk import IntellectError, TaskStatus

__all__ = ["CURSOR", "FOLLOWED_EVENTS", "assigned_slots", "left_out", "lookup_submission", "record_event",
           "record_submission"]

log = logging.getLogger(__name__)

CURSOR = "trainer"
"""the name of the trainer's event follower's cursor in its state store"""
FOLLOWED_EVENTS = ("TaskClaimed", "WorkSubmitted", "ChallengeResolved", "WorkerWiped", "SubmissionVoided")
"""the events the trainer's follower hands to `record_event`"""


def record_submission(state: StateStore, pool_id: int, e: Any) -> None:
    """Record a WorkSubmitted event of pool `pool_id` as a `pending` submission (once; other pools' are ignored)."""
    a = e.args
    sid = int(a["submissionId"])
    if int(a["poolId"]) != pool_id or state.record("submission", sid) is not None:
        return
    ph = a["proofsHash"] if isinstance(a["proofsHash"], str) else bytes(a["proofsHash"]).hex()
    state.put("submission", sid, "pending", {
        "node": a["node"], "rollouts_cid": a["rolloutsCid"], "proofs_hash": "0x" + ph.removeprefix("0x"),
        "policy_step": int(a["policyStep"]), "work_units": int(a["workUnits"]),
        "seen_at": time.time()})  # `trainer.attestation_wait` counts from here


def record_event(state: StateStore, pool_id: int, e: Any) -> None:
    """The follower's events: a TaskClaimed and a WorkSubmitted of this pool are recorded (the claim's seed and
    block give the submission's assigned validators); a ChallengeResolved upholding one of its recorded
    submissions marks it `rejected` (whatever its status but consumed) and its attesters for slashing
    (`attester_slash.mark_upheld`); a WorkerWiped marks the node's recorded submissions as possibly void and a
    SubmissionVoided of one marks it `excluded` and void, so that their attestation root leaves go back to the
    pool (`attester_release`)."""
    if e.event == "WorkSubmitted":
        record_submission(state, pool_id, e)
    elif e.event == "TaskClaimed" and int(e.args["poolId"]) == pool_id:  # its seed and block: the assignment
        state.put("claim", int(e.args["taskId"]), "claimed", {
            "seed": bare_hex(e.args["seed"]), "block": e.block_number, "node": e.args["node"]})
    elif e.event == "ChallengeResolved" and e.args["upheld"]:
        left_out(state, int(e.args["challengeId"]), TaskStatus.UPHELD)
        mark_upheld(state, int(e.args["challengeId"]))  # its attesters are slashed (`attester_slash`, issue 33)
    elif e.event == "WorkerWiped":
        mark_wiped(state, str(e.args["node"]))
    elif e.event == "SubmissionVoided" and mark_voided(state, int(e.args["submissionId"])):
        left_out(state, int(e.args["submissionId"]), TaskStatus.VOIDED)


def left_out(state: StateStore, sid: int, status: Any) -> None:
    """Record a submission the trainer will not train on because of its chain status: `rejected` once its
    challenge is upheld (bad work, whoever sent it), `excluded` otherwise (challenged, voided). Canaries go
    the same way (issue 21: the public /status must not tell them apart); a consumed one stays consumed."""
    upheld = status == TaskStatus.UPHELD
    with state.transaction():  # read and write as one: a step consuming it meanwhile is never undone
        rec = state.record("submission", sid)
        if rec is None or rec["status"] in ("consumed", "rejected"):
            return
        state.put("submission", sid, "rejected" if upheld else "excluded", {"chain_status": status.name.lower()})


def lookup_submission(protocol: Any, state: StateStore, pool_id: int, sid: int) -> dict[str, Any] | None:
    """Submission `sid`'s record (its data and `status`), or None if it is not of pool `pool_id`. One not recorded
    yet is looked up on the chain, in the blocks after the follower's cursor only: the follower recorded every
    event up to it (an attestation may come before the follower does)."""
    rec = state.record("submission", sid)
    if rec is None:
        cursor = StateCursorStore(state, CURSOR).load()
        evs = protocol.get_events(["WorkSubmitted"], from_block=None if cursor is None else cursor.block,
                                  filters={"submissionId": sid, "poolId": pool_id})
        if not evs:
            return None
        record_submission(state, pool_id, evs[-1])
        rec = state.record("submission", sid)
    return None if rec is None else rec["data"] | {"status": rec["status"]}


def assigned_slots(sid: int, *, state: StateStore, assigner: Any,
                   cache: dict[int, tuple[str, ...]]) -> tuple[str, ...]:
    """The slots (validators, lower case; one may hold several) the chain assigned to submission `sid`: only
    their attestations count. Computed once (kept in the state store and `cache`: an assignment never changes)
    by `assigner` (`roles.assignment.Assigner`) from the followed claim; empty while it cannot be."""
    got = cache.get(sid)
    if got is not None:
        return got
    rec = state.record("assignment", sid)
    if rec is None:
        c = (state.record("claim", sid) or {}).get("data", {})  # followed: no search of the chain's logs
        claim = (bytes.fromhex(c["seed"]), int(c["block"]), c["node"]) if "block" in c else None
        try:
            validators = assigner.for_task(sid, claim)
        except IntellectError as exc:
            log.warning("submission %d: its assigned validators could not be read (retried): %s", sid, exc)
            return ()
        if validators is None:
            return ()
        state.put("assignment", sid, "assigned", {"validators": validators})
        log.info("submission %d: assigned validators %s", sid, ", ".join(validators) or "none")
    else:
        validators = rec["data"]["validators"]
    got = cache[sid] = tuple(validators)
    return got
