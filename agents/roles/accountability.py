"""Voters held to their word (issue 21): a validator slashes the validators that voted on the losing side of a
challenge it took part in.

    validator loop (settle pass, `validator.slash_losing_voters`, on by default)
        → slash_losing_voters(protocol, state): per resolved challenge this validator opened or voted on
            VoteCast events of the challenge since its latest round opened (one ChallengeOpened + one VoteCast
            query, both filtered on the indexed challenge id: no scan of the validator set)
            → each voter whose `voteOf` is the latest round and the side that lost → `AttesterBook.slashVoter`
              (the sender gets the challenger's share of the slash)

Each challenge is handled once per round: the state store's `voter_slash` record (id = challenge id) keeps the
round done and who was slashed. A revert `AttesterBookAlreadySlashed` (someone slashed it first) or
`AttesterBookNotLosingVoter` (a newer round, or the vote was not what the event said) counts as done; any other
failure leaves the challenge to the next pass. This validator never slashes itself.
"""

from __future__ import annotations

import logging
import threading
from contextlib import nullcontext
from typing import Any

from intellect.sdk import ChallengeStatus, ContractRevert

__all__ = ["KIND", "losing_voters", "slash_losing_voters"]

log = logging.getLogger(__name__)

KIND = "voter_slash"
"""The state store's records of handled challenges: status `done`, data {round, slashed: [...], skipped: [...]}."""
SETTLED_REVERTS = ("AttesterBookAlreadySlashed", "AttesterBookNotLosingVoter")


def losing_voters(protocol: Any, challenge_id: int) -> tuple[int, list[str]]:
    """(round, voters) of a resolved challenge: the validators whose recorded vote is in its latest round and on
    the side that lost, read from its VoteCast events since that round's ChallengeOpened and checked with
    `voteOf` (one eth_call per distinct voter). Raises ValueError while the challenge is not resolved."""
    info = protocol.challenge_info(challenge_id)
    if info.status not in (ChallengeStatus.UPHELD, ChallengeStatus.REJECTED):
        raise ValueError(f"challenge {challenge_id} is {info.status.name.lower()}, not resolved")
    upheld = info.status == ChallengeStatus.UPHELD
    # the round opened in the block after its snapshot block: no log older than that is read
    opened = protocol.get_events(["ChallengeOpened"], from_block=int(info.snapshot_block) + 1,
                                 filters={"challengeId": int(challenge_id)})
    since = max((e.block_number for e in opened if int(e.args.get("round", 0)) == int(info.round)),
                default=opened[-1].block_number if opened else None)
    votes = protocol.get_events(["VoteCast"], from_block=since, filters={"challengeId": int(challenge_id)})
    out: list[str] = []
    for v in dict.fromkeys(e.args["validator"] for e in votes if bool(e.args["uphold"]) != upheld):
        rnd, uphold = protocol.vote_of(challenge_id, v)
        if rnd == int(info.round) and uphold != upheld:
            out.append(v)
    return int(info.round), out


def _took_part(rec: dict[str, Any]) -> bool:
    d = rec["data"]
    return bool(d.get("mine") or d.get("voted"))


def slash_losing_voters(protocol: Any, state: Any, *, lock: threading.Lock | None = None) -> int:
    """Slash every losing voter of the resolved challenges (`challenge` records upheld or rejected) this
    validator opened or voted on, each once per round; returns the total slashed (wei). A challenge handled
    carries `voters_slashed` in its `challenge` record (the validator's ChallengeOpened handler clears it when a
    new round opens), so a pass costs no RPC for the challenges already handled."""
    me = protocol.address.lower()
    total = 0
    for rec in state.records("challenge"):
        if rec["status"] not in ("upheld", "rejected") or rec["data"].get("voters_slashed") or not _took_part(rec):
            continue
        cid = int(rec["id"])
        try:
            total += _slash_challenge(protocol, state, cid, me, lock)
        except Exception:  # this challenge is tried again next pass; the others still go now
            log.exception("challenge %d: slashing its losing voters failed; retrying next pass", cid)
    return total


def _slash_challenge(protocol: Any, state: Any, cid: int, me: str, lock: threading.Lock | None) -> int:
    """One resolved challenge's losing voters (see `slash_losing_voters`); returns the wei slashed."""
    total = 0
    rnd, voters = losing_voters(protocol, cid)
    prev = state.record(KIND, cid)
    pd = prev["data"] if prev is not None and int(prev["data"].get("round", -1)) == rnd else {}
    slashed, skipped = list(pd.get("slashed", [])), list(pd.get("skipped", []))
    for v in voters:
        if v.lower() == me or v.lower() in slashed or v.lower() in skipped:
            continue
        try:
            with lock or nullcontext():
                amount = protocol.slash_voter(cid, v)
            total += amount
            slashed.append(v.lower())
            log.warning("challenge %d: validator %s voted against its outcome: slashed %g tokens", cid, v,
                        amount / 1e18)
        except ContractRevert as exc:
            if exc.name not in SETTLED_REVERTS:
                raise
            skipped.append(v.lower())  # someone else slashed it first, or the vote is not a losing one
            log.info("challenge %d: slashVoter(%s): %s", cid, v, exc.name)
        finally:  # each voter once, even if a later one fails and the challenge is tried again
            state.put(KIND, cid, "partial", {"round": rnd, "slashed": slashed, "skipped": skipped})
    with state.transaction():
        state.put(KIND, cid, "done", {"round": rnd, "slashed": slashed, "skipped": skipped})
        cur = state.record("challenge", cid)  # a new round may have opened meanwhile: then not done
        if cur is not None and cur["status"] in ("upheld", "rejected"):
            state.put("challenge", cid, cur["status"], {"voters_slashed": True})
    return total
