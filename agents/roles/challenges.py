"""A validator's side of the chain's disputes: open a challenge with its evidence on IPFS, follow its rounds in the
state store, send the votes, resolutions and new rounds `accountability.round_actions` asks for, and after an upheld
challenge of its own void the slashed worker's other wiped submissions.

Plain functions over the chain client (`Protocol`), the state store (`challenge` records, id = submission id) and,
for the evidence, IPFS; the validator's loop (`agents/roles/validator.py`) calls them with its transaction lock
(one challenge at a time: its bond approval must not race) and counts what they did.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from intellect.agents.roles.accountability import round_actions
from intellect.sdk import ContractRevert, TaskStatus
from intellect.verifier.submission import Verdict

__all__ = ["EVIDENCE_SCHEMA", "Evidence", "open_challenge", "send_round_actions", "track_challenge",
           "void_wiped_submissions"]

log = logging.getLogger(__name__)

EVIDENCE_SCHEMA = "intellect.evidence/v1"


class Evidence(BaseModel):
    """What a challenge points to (JSON on IPFS, schema `intellect.evidence/v1`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(EVIDENCE_SCHEMA, alias="schema")
    submission_id: int
    rollouts_cid: str
    node: str
    reason: str
    detail: str
    stats: dict[str, Any] = Field(default_factory=dict)
    validator: str
    checked_at: float


def open_challenge(protocol: Any, state: Any, ipfs: Any, sid: int, sub: dict[str, Any], verdict: Verdict) -> str | None:
    """Challenge submission `sid` (its `submission` record's data `sub`) on the chain for `verdict`, the caller
    holding the transaction lock; returns the evidence CID when this call opened the round, None when nothing was
    sent: the submission is already challenged (tracked), no longer challengeable (`moot`), or its window closed
    (`too_late`). The evidence of an attempt that did not go through (status `opening`) is reused."""
    t = protocol.known_task(sid)
    if t is None:  # the chain lost the submission (a restart from an older state, a reorg): nothing to challenge
        state.put("challenge", sid, "moot", {"task_status": "vanished"})
        return None
    if t.status == TaskStatus.CHALLENGED:  # already challenged (by us before a crash, or by another validator)
        track_challenge(protocol, state, sid, sub["node"])
        return None
    if t.status != TaskStatus.SUBMITTED:
        state.put("challenge", sid, "moot", {"task_status": t.status.name.lower()})
        return None
    if protocol.chain_time() >= t.window_end:
        state.put("challenge", sid, "too_late")
        log.error("submission %d: window closed before the challenge", sid)
        return None
    rec = state.record("challenge", sid)
    # our own evidence of an attempt that did not go through; a round someone else opened had theirs
    cid = rec["data"].get("evidence_cid") if rec is not None and rec["status"] == "opening" else None
    if not cid:
        ev = Evidence(submission_id=sid, rollouts_cid=sub["rollouts_cid"], node=sub["node"],
                      reason=verdict.reason or "rejected", detail=verdict.detail[:2000], stats=verdict.stats,
                      validator=protocol.address, checked_at=time.time())
        cid = ipfs.add(ev.model_dump_json(by_alias=True).encode())
    state.put("challenge", sid, "opening", {"evidence_cid": cid, "reason": verdict.reason, "node": sub["node"]})
    try:
        protocol.challenge(sid, cid)
    except ContractRevert as exc:
        if exc.name == "TaskLedgerAlreadyChallenged":
            track_challenge(protocol, state, sid, sub["node"])
            return None
        raise
    track_challenge(protocol, state, sid, sub["node"])
    return str(cid)


def track_challenge(protocol: Any, state: Any, sid: int, node: str) -> None:
    """Record the chain's view of the challenge of submission `sid` (status, round, challenger) in its `challenge`
    record, keeping the rounds this validator opened (`own`)."""
    info = protocol.challenge_info(sid)
    mine = info.challenger.lower() == protocol.address.lower()
    status = info.status.name.lower()
    old = (state.record("challenge", sid) or {}).get("data", {})
    own = set(old.get("own") or []) | ({int(info.round)} if mine else set())
    same_round = int(old.get("round", 0)) == int(info.round)
    state.put("challenge", sid, status, {"challenger": info.challenger, "vote_end": info.vote_end,
                                         "node": node, "mine": mine, "round": int(info.round),
                                         "own": sorted(own),
                                         "voters_slashed": bool(old.get("voters_slashed")) and same_round})


def send_round_actions(protocol: Any, state: Any, *, lock: threading.Lock,
                       vote_of: Callable[[dict[str, Any], dict[str, Any]], bool | None],
                       rechallenge: Callable[[int, dict[str, Any], Verdict], None],
                       count: Callable[[str], Any], metrics: Any) -> None:
    """Send what `round_actions` asks for (issue 33): a vote (`vote_of` says which way) in every open round of a
    submission this validator has a verdict for, the resolution of rounds that can be resolved, and a new round
    (`rechallenge`) for work its verdict rejects whose last round ended Rejected or NoQuorum inside the window.
    Each failure is logged (`metrics`' `errors_total`); the rest still go. `count` gets `votes` and `resolved`."""
    for act in round_actions(protocol, state, vote_of=vote_of):
        cid = act.challenge_id
        try:
            if act.kind == "vote":
                with lock:
                    protocol.vote(cid, act.uphold)
                count("votes")
                log.info("voted %s on challenge %d (round %d)", "uphold" if act.uphold else "reject", cid, act.round)
                state.put("challenge", cid, "open", {"voted": True, "voted_round": act.round})
            elif act.kind == "resolve":
                with lock:
                    upheld = protocol.resolve(cid)
                count("resolved")
                log.info("resolved challenge %d: %s", cid, "upheld" if upheld else "not upheld")
            else:
                sub = state.record("submission", cid)
                assert sub is not None  # round_actions re-challenges only work this validator rejected
                log.warning("submission %d: round %d of its challenge ended without upholding it; this "
                            "validator's verdict rejects it: challenging again", cid, act.round)
                rechallenge(cid, sub["data"], Verdict.model_validate(sub["data"]["verdict"]))
        except ContractRevert as exc:
            if exc.name == "TaskLedgerAlreadyVoted":
                state.put("challenge", cid, "open", {"voted": True, "voted_round": act.round})
            elif exc.name != "TaskLedgerChallengeNotOpen":
                log.warning("%s on challenge %d refused: %s", act.kind, cid, exc)
        except Exception as exc:  # this action again next pass; the others still go now
            metrics.inc("errors_total", kind=type(exc).__name__)
            log.warning("%s on challenge %d failed (retried later): %r", act.kind, cid, exc)
            continue
        if act.kind == "resolve":
            info = protocol.challenge_info(cid)
            if info.status.name.lower() in ("upheld", "rejected", "no_quorum"):
                state.put("challenge", cid, info.status.name.lower())


def void_wiped_submissions(protocol: Any, state: Any, *, lock: threading.Lock, metrics: Any) -> None:
    """After a challenge of ours is upheld, void the slashed worker's other wiped submissions (frees their
    reservations in the ledger; `voidSubmissions`, checked by eth_call first so one bad id sends nothing). Each
    upheld challenge once (`voided_done`); a failure is logged and tried again on the next pass."""
    for r in state.records("challenge", "upheld"):
        if not r["data"].get("mine") or r["data"].get("voided_done"):
            continue
        node = str(r["data"].get("node") or "").lower()
        candidates = [int(s["id"]) for s in state.records("submission")
                      if int(s["id"]) != int(r["id"]) and str(s["data"].get("node", "")).lower() == node]
        void = []
        try:
            for sid in candidates:
                try:
                    protocol.call("TaskLedger", "voidSubmissions", [sid])
                    void.append(sid)
                except ContractRevert:
                    pass  # not submitted any more, or not wiped by the slash
            if void:
                with lock:
                    released = protocol.void_submissions(void)
                log.info("voided %d wiped submission(s) of %s after challenge %s: %d wei released",
                         len(void), node, r["id"], released)
            state.put("challenge", r["id"], "upheld", {"voided_done": True, "voided": void})
        except Exception as exc:
            metrics.inc("errors_total", kind=type(exc).__name__)
            log.warning("voiding the wiped submissions of %s failed (retried later): %s", node, exc)
