"""Which queued submissions a validator checks (issue 33, `validator.check`).

Attesters are paid per assigned slot and a worker's slash goes wholly to the treasury, so checking a submission one
holds no slot of costs the check and earns nothing (docs/economics.md, "Validators check their slots"). Under
`assigned` (the default) the validator checks a queued submission when

- the chain assigned it to this validator (it holds a slot of it: paid for it);
- a challenge round of it is open, or ended Rejected or NoQuorum inside its window (`disputed`): its vote, or its
  next round, needs a verdict of its own (issue 33: honest agents vote every open round they have a verdict for);
- an evidence claim it must vote on cites it (`vote_of`, `requeue_cited`, flag `cited`);
- its claim has no slots (fewer than `quorum` eligible validators: nobody is paid to check it, and unchallenged
  work is paid after its window);
- its assignment is still unreadable (`claim_lookup.assignment_of` is None) while its window nears its end: checked
  rather than left unjudged. Until then it waits (`retry_at`, backoff) and is asked again.

Any other gets the status `unassigned` (not counted in `backlog`); a `ChallengeOpened` of it queues it again
(`requeue_challenged`). `all` (a volunteer) checks every submission. Plain functions over the state store
(`submission`, `challenge` and `assignment` records); the validator's dispatcher and event handler call them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.claim_lookup import assigned_to, assignment_of
from intellect.agents.roles.evidence import challenge_claim, vote_on_challenge
from intellect.verifier.evidence import EvidenceClaim

__all__ = ["UNJUDGED", "disputed", "requeue_challenged", "requeue_cited", "select", "to_check", "unjudged", "vote_of"]

log = logging.getLogger(__name__)

UNJUDGED = ("queued", "unassigned")
"""Statuses of a `submission` record without a verdict of this validator (`/status` lists the others)."""


def unjudged(state: Any) -> int:
    """How many `submission` records have no verdict of this validator (`UNJUDGED`)."""
    return sum(state.count("submission", s) for s in UNJUDGED)


def disputed(state: Any, sid: int) -> bool:
    """Whether submission `sid` has a challenge round open, or one that ended Rejected or NoQuorum (another may follow
    inside the window): an honest validator votes it, and challenges again, from its own verdict."""
    rec = state.record("challenge", sid)
    return rec is not None and rec["status"] in ("open", "rejected", "no_quorum")


def to_check(state: Any, sid: int, sub: dict[str, Any], *, me: str, assigner: Callable[[], Assigner],
             chain_time: Callable[[], int], margin: int) -> bool:
    """Whether queued submission `sid` (its record's data `sub`) is checked now by validator `me` (the module's
    rule; `margin`: seconds before its window's end from which an unreadable assignment no longer waits). Marks it
    `unassigned`, or sets its `retry_at`, when it is not."""
    if disputed(state, sid) or sub.get("cited"):
        return True
    slots = assignment_of(state, sid, me, assigner)
    if slots is not None:
        if not slots or me.lower() in slots:
            return True
        state.put("submission", sid, "unassigned", {"retry_at": 0})
        if disputed(state, sid):  # a ChallengeOpened handled meanwhile found it still queued
            state.put("submission", sid, "queued")
            return True
        log.debug("submission %d: not assigned to this validator; left unchecked unless challenged", sid)
        return False
    window_left = int(sub.get("window_end", 0)) - chain_time()
    if window_left <= margin:
        log.info("submission %d: its assignment is still unreadable and its window ends in %d s: checked", sid,
                 window_left)
        return True
    tries = int(sub.get("assignment_tries", 0)) + 1
    state.put("submission", sid, "queued", {"assignment_tries": tries, "retry_at": time.time() + min(5 * tries, 60)})
    return False


def select(state: Any, queued: list[dict[str, Any]], check: str, protocol: Any, assigner: Callable[[], Assigner], *,
           margin: int, now: float, busy: Any) -> list[dict[str, Any]]:
    """The `queued` submission records the dispatcher hands to the checks of the validator of `protocol` (its chain
    client), those assigned to it first (stable): under `check` `assigned` those `to_check` keeps (a record in
    `busy`, being checked, or waiting for its `retry_at` after `now`, is kept as it is); under `all` every one."""
    me, chain_time = protocol.address, protocol.chain_time
    if check == "assigned":
        queued = [r for r in queued if int(r["id"]) in busy or r["data"].get("retry_at", 0) > now
                  or to_check(state, int(r["id"]), r["data"], me=me, assigner=assigner, chain_time=chain_time,
                              margin=margin)]
        # `to_check` read every assignment it could: the order asks the store only (an unreadable one waits)
        return sorted(queued, key=lambda r: not (state.record("assignment", r["id"]) or {}).get("data", {}).get("mine"))
    return sorted(queued, key=lambda r: not assigned_to(state, int(r["id"]), me, assigner))


def requeue_challenged(state: Any, sid: int) -> None:
    """A challenge round of submission `sid` opened: an `unassigned` one is queued again, so that the validator votes
    from a verdict of its own."""
    rec = state.record("submission", sid)
    if rec is not None and rec["status"] == "unassigned":
        log.info("submission %d: challenged; checked so that this validator votes", sid)
        state.put("submission", sid, "queued", {"retry_at": 0})


def vote_of(state: Any, rules: Any, ipfs: Any, challenge: dict[str, Any], sub: dict[str, Any]) -> bool | None:
    """How a validator votes on an open challenge (its `challenge` record's data; `sub` the challenged submission's
    record), None: not now (`evidence.vote_on_challenge` under the evidence `rules`); while it is None, the cited
    submissions of an evidence claim left `unassigned` are queued (`requeue_cited`). The evidence is fetched once."""
    claim = challenge_claim(ipfs, challenge)
    vote = vote_on_challenge(state, rules, claim, challenge, sub)
    if vote is None and claim is not None:
        requeue_cited(state, claim, str(challenge.get("evidence_cid")))
    return vote


def requeue_cited(state: Any, claim: EvidenceClaim, cid: str) -> None:
    """A challenge whose evidence (`cid`) is an evidence claim (issue 35) citing submissions this validator left
    `unassigned`: they are queued (flag `cited`), its vote needing its own verdict of each."""
    for c in claim.cited:
        rec = state.record("submission", c.submission_id)
        if rec is not None and rec["status"] == "unassigned":
            log.info("submission %d: cited by the evidence of challenge %s; checked so that this validator votes",
                     c.submission_id, cid)
            state.put("submission", c.submission_id, "queued", {"retry_at": 0, "cited": True})
