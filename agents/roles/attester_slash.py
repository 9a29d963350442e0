"""Attesters of upheld work pay for it (issue 33): the trainer slashes every validator whose accepting
attestation of a submission it holds, once a challenge of that submission is upheld, canary or not.

    trainer's event follower: ChallengeResolved(upheld) of a submission of its pool → `attester_slash` record
        (`mark_upheld`), status `pending`
    trainer loop (every attestation pull) → slash_upheld_attesters(protocol, state):
        per pending record: the submission's kept attestations (one prefix seek of the state store, no log scan)
            → `AttesterBook.slashAttester(sid, validator, rollouts CID, proofs hash, policy step, signature)`
              for each validator not handled yet (the sender gets the challenger's share of the slash)
        the record stays `pending` until the submission's window has closed (an attestation that comes late, by
        POST or pull, is slashed too), then `done`

Why the trainer: it is the one party that holds the attesters' signatures (validators POST them to it, and it
pulls them), and the book pays the reporter, so slashing costs it nothing. The challenger and the voters do not
hold them.

Bounds and failures: at most `ATTESTER_SLASHES_PER_PASS` transactions per pass (the rest next pass); each
validator of a submission is tried until it is handled: slashed (by this trainer, or `AttesterBookAlreadySlashed`:
by someone else first), or refused by the book (`AttesterBookBadSignature`, or another revert: logged, not tried
again). An RPC failure leaves it for the next pass; a failure never stops the loop nor the other submissions. The
record keeps who was handled, so a restart repeats no transaction. A canary's attesters are left to the canary
injector (`roles.canary`) while it runs.
"""

from __future__ import annotations

import logging
from typing import Any

from intellect.sdk import ContractRevert, IntellectError

__all__ = ["ATTESTER_SLASHES_PER_PASS", "KIND", "mark_upheld", "slash_upheld_attesters"]

log = logging.getLogger(__name__)

KIND = "attester_slash"
"""The trainer's records of upheld submissions: id = submission id; status `pending` → `done`; data {slashed: [...],
refused: {validator: revert name}, window_end}."""
CANARY_KIND = "canary"
"""`roles.canary.KIND`: the trainer's records of its canaries (not imported: that module loads the engines)"""
ATTESTER_SLASHES_PER_PASS = 16
"""`slashAttester` transactions one pass sends, at most."""


def mark_upheld(state: Any, sid: int) -> bool:
    """Record that a challenge of submission `sid` was upheld (its attesters are to be slashed), if `sid` is one of
    the trainer's recorded submissions (its pool's) and not marked yet. True if it marked it."""
    if state.record("submission", sid) is None or state.record(KIND, sid) is not None:
        return False
    state.put(KIND, sid, "pending", {"slashed": [], "refused": {}})
    return True


def slash_upheld_attesters(protocol: Any, state: Any, metrics: Any = None, *, canaries: bool = False,
                           max_tx: int = ATTESTER_SLASHES_PER_PASS) -> int:
    """One pass over the pending `attester_slash` records (see the module's docstring); returns the wei slashed.
    `canaries`: the canary injector runs, and slashes its canaries' attesters itself (they are skipped here).
    Never raises: a failure is logged (and counted in `metrics`' `errors_total`) and retried next pass."""
    if "AttesterBook" not in protocol.contracts:
        return 0
    skip = {int(r["id"]) for r in state.records(CANARY_KIND)} if canaries else set()
    pending = [r for r in state.records(KIND, "pending") if int(r["id"]) not in skip]
    if not pending:
        return 0
    try:
        now = protocol.chain_time()
    except Exception as exc:
        if metrics is not None:
            metrics.inc("errors_total", kind=type(exc).__name__)
        log.warning("slashing the attesters of upheld work: no chain time (retried next pass): %s", exc)
        return 0
    total, budget = 0, max_tx
    for rec in pending:
        sid = int(rec["id"])
        try:
            got, budget, finished = _slash_one(protocol, state, sid, rec["data"], budget)
            total += got
            if finished and now >= int(state.record(KIND, sid)["data"]["window_end"]):
                state.put(KIND, sid, "done")
        except Exception as exc:  # this submission next pass; the others still go now
            if metrics is not None:
                metrics.inc("errors_total", kind=type(exc).__name__)
            log.exception("submission %d: slashing its attesters failed; retrying next pass", sid)
    return total


def _slash_one(protocol: Any, state: Any, sid: int, d: dict[str, Any], budget: int) -> tuple[int, int, bool]:
    """Slash the unhandled attesters of upheld submission `sid` with at most `budget` transactions; returns (wei
    slashed, budget left, whether every kept attestation of it is handled)."""
    sub = state.record("submission", sid)
    assert sub is not None  # mark_upheld checked it
    s = sub["data"]
    if "window_end" not in d:  # once per record: after it, the pass costs no RPC until the window closes
        d = {**d, "window_end": int(protocol.task(sid).window_end)}
        state.put(KIND, sid, "pending", {"window_end": d["window_end"]})
    slashed, refused = list(d.get("slashed", [])), dict(d.get("refused", {}))
    total, finished = 0, True
    for r in state.with_prefix("attestation", f"{sid}:"):
        a = r["data"]
        v = str(a.get("validator", "")).lower()
        if int(a.get("submission_id", -1)) != sid or not a.get("signature") or v in slashed or v in refused:
            continue
        if budget <= 0:
            finished = False
            break
        budget -= 1
        try:
            amount = protocol.slash_attester(sid, a["validator"], rollouts_cid=s["rollouts_cid"],
                                             proofs_hash=s["proofs_hash"], policy_step=int(s["policy_step"]),
                                             signature=a["signature"])
            slashed.append(v)
            total += amount
            log.warning("submission %d was upheld as bad: validator %s attested it, slashed %g tokens", sid,
                        a["validator"], amount / 1e18)
        except ContractRevert as exc:
            if exc.name == "AttesterBookAlreadySlashed":
                slashed.append(v)
                log.info("submission %d: attester %s was slashed already", sid, a["validator"])
            else:  # a signature the book refuses, or a revert it would repeat: logged, not tried again
                refused[v] = exc.name or "revert"
                log.error("submission %d: slashAttester(%s) refused: %s", sid, a["validator"], exc)
        except IntellectError as exc:
            finished = False
            log.warning("submission %d: slashing attester %s failed (retried next pass): %s", sid,
                        a["validator"], exc)
        finally:
            state.put(KIND, sid, "pending", {"slashed": slashed, "refused": refused})
    return total, budget, finished
