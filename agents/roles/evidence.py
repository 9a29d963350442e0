"""The validator's side of issue 35: each worker's running evidence in the state store, the challenge of a flagged
worker, and the vote on such a challenge (`intellect.verifier.evidence` holds the statistic itself).

State (the validator's SQLite store, so it survives restarts): one record of kind `evidence` per worker (id = the
worker's address, lower case; status `tracking`, `flagged` or `challenged`; data = `WorkerEvidence`). Every
submission judged `accept` or `ambiguous` adds its LLR (a rejected one is challenged on its own).

A flagged worker is challenged through the ledger's existing challenge: one cited submission, the newest whose
window is still open, with `Evidence` (schema `intellect.evidence/v1`) whose reason is `evidence_accumulated` and
whose `stats["evidence"]` is the `EvidenceClaim` (the cited run: ids, rollout CIDs, LLRs, the rules' digest). An
upheld challenge slashes the worker and voids every submission of it whose window is still open (the ledger's
slash epoch): that is how an ambiguous submission's held reward is lost. No contract change.

A voter of such a challenge recomputes: for each cited submission its own LLR (from its own verdict of it, in its
state store; a submission it has not judged yet leaves the vote for a later pass) and the worker's submissions it
knows in the cited range (from `WorkSubmitted`), and upholds iff `recheck_claim` does.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from intellect.verifier.evidence import EvidenceClaim, EvidenceRules, WorkerEvidence, recheck_claim
from intellect.verifier.submission import Verdict

__all__ = [
    "EVIDENCE_REASON",
    "KIND",
    "challenge_claim",
    "claim_of",
    "due_challenge",
    "flagged_target",
    "last_upheld",
    "open_challenge",
    "record_verdict",
    "vote_on_challenge",
    "vote_on_claim",
]

log = logging.getLogger(__name__)

KIND = "evidence"
EVIDENCE_REASON = "evidence_accumulated"
"""The `Evidence.reason` of a challenge of a flagged worker (its `stats["evidence"]` is the `EvidenceClaim`)."""
OPENING_GRACE_S = 120.0
"""How long a challenge being opened (its transaction sent, not yet seen on chain) stops another of the same worker."""
JUDGED = ("accepted", "ambiguous")
"""Submission statuses whose LLR is part of a worker's evidence."""


def worker_evidence(state: Any, worker: str, rules: EvidenceRules) -> WorkerEvidence:
    rec = state.record(KIND, worker.lower())
    if rec is None:
        return WorkerEvidence(worker=worker.lower(), compute_class=rules.default_class)
    return WorkerEvidence.model_validate(rec["data"]["evidence"])


def record_verdict(state: Any, rules: EvidenceRules, sid: int, sub: dict[str, Any], llr: float | None) -> WorkerEvidence | None:
    """Add one judged submission's LLR to its worker's evidence (persisted); the evidence, or None without an LLR."""
    if llr is None:
        return None
    worker = str(sub["node"]).lower()
    ev = worker_evidence(state, worker, rules)
    old = state.record(KIND, worker)
    data = old["data"] if old is not None else {}
    spent = int(data.get("spent_until", -1))
    upheld = last_upheld(state, worker)
    if upheld is not None and upheld > int(data.get("upheld", -1)):
        # the worker was slashed and its open-window submissions voided: its evidence restarts after every
        # submission of it this validator knows now (events arrive in chain order: all those before the slash)
        spent = max([upheld, spent, *(int(r["id"]) for r in state.records("submission")
                                      if str(r["data"].get("node", "")).lower() == worker)])
        ev = WorkerEvidence(worker=worker, compute_class=ev.compute_class)
        state.put(KIND, worker, "tracking", {"evidence": json.loads(ev.model_dump_json()), "upheld": upheld,
                                             "spent_until": spent, "challenged": None})
    if sid <= spent:
        return ev
    flagged = ev.add(sid, llr, rules, rollouts_cid=str(sub.get("rollouts_cid", "")))
    old = state.record(KIND, worker)
    status = "challenged" if old is not None and old["status"] == "challenged" and flagged else (
        "flagged" if flagged else "tracking")
    state.put(KIND, worker, status, {"evidence": json.loads(ev.model_dump_json())})
    if flagged and status == "flagged":
        run, s = ev.cited()
        log.warning("worker %s flagged: %d consecutive submissions, evidence %.1f ≥ h = %.1f", worker, len(run), s,
                    rules.threshold)
    return ev


def last_upheld(state: Any, worker: str) -> int | None:
    """The newest submission of `worker` whose challenge was upheld (the worker slashed and wiped then), or None."""
    ids = [int(r["id"]) for r in state.records("challenge", "upheld")
           if str(r["data"].get("node", "")).lower() == worker.lower()]
    return max(ids) if ids else None


def open_challenge(state: Any, worker: str) -> int | None:
    """A challenge of one of `worker`'s submissions that is open, or being opened for less than `OPENING_GRACE_S`
    (one whose transaction never went through does not block the next flag's challenge), or None."""
    now = time.time()
    for status in ("open", "opening"):
        for r in state.records("challenge", status):
            if str(r["data"].get("node", "")).lower() != worker.lower():
                continue
            if status == "open" or now - float(r.get("updated_at", now)) < OPENING_GRACE_S:
                return int(r["id"])
    return None


def flagged_target(state: Any, ev: WorkerEvidence, now: int) -> int | None:
    """The cited submission to challenge: the newest one whose window is still open and that is not challenged."""
    run, _ = ev.cited()
    for c in reversed(run):
        sub = state.record("submission", c.submission_id)
        if sub is None or int(sub["data"].get("window_end", 0)) <= now:
            continue
        if state.record("challenge", c.submission_id) is not None:
            continue
        return c.submission_id
    return None


def due_challenge(state: Any, rules: EvidenceRules, ev: WorkerEvidence,
                  now: Callable[[], int]) -> tuple[int, Verdict] | None:
    """What to challenge for a flagged worker's evidence `ev`: (the cited submission, the rejecting verdict whose
    evidence is the claim), or None: the worker is challenged already, a challenge of it is open (then recorded as
    its challenge), or no cited submission is still in its window at chain time `now()` (asked only then)."""
    worker = ev.worker.lower()
    rec = state.record(KIND, worker)
    if rec is not None and rec["status"] == "challenged":
        return None
    if (open_id := open_challenge(state, worker)) is not None:  # one challenge at a time
        state.put(KIND, worker, "challenged", {"challenged": open_id})
        return None
    target = flagged_target(state, ev, now())
    if target is None:
        log.error("worker %s flagged, but no cited submission is still in its window", worker)
        return None
    claim = ev.claim(rules)
    run, total = ev.cited()
    return target, Verdict(submission_id=target, accepted=False, outcome="reject", reason=EVIDENCE_REASON,
                           detail=f"{len(run)} consecutive submissions of {worker}, evidence {total:.2f} ≥ "
                                  f"h = {rules.threshold:.2f}",
                           stats={"evidence": json.loads(claim.model_dump_json(by_alias=True))})


def challenge_claim(ipfs: Any, challenge: dict[str, Any]) -> EvidenceClaim | None:
    """The `EvidenceClaim` a challenge's evidence document (its `challenge` record's data) on IPFS holds, or None for
    a challenge of another kind or evidence that is not retrievable (logged: judged without it)."""
    cid = challenge.get("evidence_cid")
    if not cid or ipfs is None:
        return None
    try:
        return claim_of(ipfs.cat(cid, max_size=1 << 20))
    except Exception as exc:  # the challenger's evidence must be retrievable: judged without it
        log.warning("evidence %s of a challenge not retrievable: %s", cid, exc)
        return None


def vote_on_challenge(state: Any, rules: EvidenceRules, claim: EvidenceClaim | None, challenge: dict[str, Any],
                      sub: dict[str, Any]) -> bool | None:
    """How a validator votes on an open challenge (its `challenge` record's data; `sub` the challenged submission's
    record; `claim` its evidence claim, `challenge_claim`), None: not now. Its own verdict of the submission, or,
    for a challenge of a flagged worker (its evidence is an `EvidenceClaim`), its own recomputation of the cited
    evidence (`vote_on_claim`); it never upholds a challenge of a submission it found ambiguous on that submission's
    own grounds."""
    if sub["status"] == "rejected":
        return True
    if claim is not None:
        uphold, why = vote_on_claim(state, rules, claim, str(challenge.get("node") or sub["data"]["node"]))
        log.info("evidence claim against %s: %s (%s)", claim.worker, uphold, why)
        return uphold
    return False if sub["status"] == "accepted" else None


def claim_of(evidence_json: bytes) -> EvidenceClaim | None:
    """The `EvidenceClaim` of a challenge's evidence document, or None when the challenge is of another kind."""
    try:
        doc = json.loads(evidence_json)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("reason") != EVIDENCE_REASON:
        return None
    raw = (doc.get("stats") or {}).get("evidence")
    try:
        return EvidenceClaim.model_validate(raw)
    except ValueError:
        return None


def vote_on_claim(state: Any, rules: EvidenceRules, claim: EvidenceClaim, challenged_node: str) -> tuple[bool | None, str]:
    """A voter's decision from its own records: (True/False, why), or (None, why) while it has not judged every
    cited submission yet (vote on a later pass)."""
    if claim.worker.lower() != challenged_node.lower():
        return False, f"the claim is about {claim.worker}, the challenged submission is {challenged_node}'s"
    llr_of: dict[int, float] = {}
    pending = []
    for c in claim.cited:
        rec = state.record("submission", c.submission_id)
        if rec is None or str(rec["data"].get("node", "")).lower() != claim.worker.lower():
            return False, f"submission {c.submission_id} is not {claim.worker}'s in this pool"
        if rec["status"] in JUDGED or rec["status"] == "rejected":
            llr = (rec["data"].get("verdict") or {}).get("llr")
            llr_of[c.submission_id] = float(llr) if llr is not None else 0.0
        else:
            pending.append(c.submission_id)
    if pending:
        return None, f"cited submissions {pending[:10]} not judged here yet"
    lo, hi = min(llr_of), max(llr_of)
    known = [int(r["id"]) for r in state.records("submission")
             if str(r["data"].get("node", "")).lower() == claim.worker.lower() and lo <= int(r["id"]) <= hi
             and r["status"] in JUDGED]
    return recheck_claim(claim, rules, known, llr_of)
