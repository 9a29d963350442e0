"""Voters held to their word (issue 21): a validator slashes the validators that voted on the losing side of a
challenge it took part in.

    validator loop (settle pass, `validator.slash_losing_voters`, on by default)
        → slash_losing_voters(protocol, state): per resolved challenge this validator opened or voted on
            VoteCast events of the challenge since its latest round opened (one ChallengeOpened + one VoteCast
            query, both filtered on the indexed challenge id: no scan of the validator set)
            → each voter whose `voteOf` is the latest round and the side that lost → `AttesterBook.slashVoter`
              (the sender gets the challenger's share of the slash)
            → its own share of the pool's reward per resolved challenge when it was on the winning side (its vote
              was the outcome, or it opened an upheld round) → `AttesterBook.claimVoterReward`

Each challenge is handled once per round: the state store's `voter_slash` record (id = challenge id) keeps the
round done and who was slashed. A revert `AttesterBookAlreadySlashed` (someone slashed it first) or
`AttesterBookNotLosingVoter` (a newer round, or the vote was not what the event said) counts as done; any other
failure leaves the challenge to the next pass. This validator never slashes itself. A round that missed its quorum
(`NoQuorum`, issue 33) has no outcome and no losing voter: nobody is slashed for it.

Rounds followed to their end (issue 33), `round_actions`: every open round of a submission this validator has a
verdict for gets its vote (uphold iff its verdict rejects the work), once per round, whoever opened it; a round that
ended Rejected or NoQuorum while its own verdict rejects the work is challenged again inside the window (at most
`MAX_OWN_ROUNDS` rounds opened by this validator per submission: a bond per Rejected round), so a friendly sham
challenge that ends before the honest verdicts exist clears nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Literal

from intellect.sdk import ChallengeStatus, ContractRevert

__all__ = ["KIND", "MAX_OWN_ROUNDS", "RoundAction", "losing_voters", "own_rounds", "round_actions", "slash_losing_voters"]

log = logging.getLogger(__name__)

KIND = "voter_slash"
"""The state store's records of handled challenges: status `done`, data {round, slashed: [...], skipped: [...], paid:
wei of this validator's own share of the challenge's voter reward (0: none)}."""
SETTLED_REVERTS = ("AttesterBookAlreadySlashed", "AttesterBookNotLosingVoter")
SHARE_SETTLED_REVERTS = ("AttesterBookNotWinningVoter", "AttesterBookVoteSettled", "AttesterBookNoVoterReward",
                         "AttesterBookInsufficientBudget")
"""Reverts of `claimVoterReward` that settle this validator's share: not on the winning side, already paid, no
reward in the pool, or a pool budget too small for it (logged: the pool's owner underfunded it)."""
MAX_OWN_ROUNDS = 3
"""Most rounds of one submission a validator opens itself (its first challenge included): re-challenges cost a bond
per Rejected round; a round that ended NoQuorum returns it."""


def losing_voters(protocol: Any, challenge_id: int) -> tuple[int, list[str]]:
    """(round, voters) of a resolved challenge: the validators whose recorded vote is in its latest round and on
    the side that lost, read from its VoteCast events since that round's ChallengeOpened and checked with
    `voteOf` (one eth_call per distinct voter). Raises ValueError while the challenge is not resolved."""
    info = protocol.challenge_info(challenge_id)
    if info.status == ChallengeStatus.NO_QUORUM:
        return int(info.round), []  # no outcome, no loser (issue 33)
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


@dataclass(frozen=True)
class RoundAction:
    """One thing `round_actions` asks the validator to send: `vote` (with `uphold`) in round `round`, `resolve`
    the open round, or `rechallenge` the submission (its last round `round` ended Rejected or NoQuorum)."""

    kind: Literal["vote", "resolve", "rechallenge"]
    challenge_id: int
    round: int
    uphold: bool = False


def round_actions(protocol: Any, state: Any, *, now: int | None = None,
                  vote_of: Callable[[dict[str, Any], dict[str, Any]], bool | None] | None = None) -> list[RoundAction]:
    """What an honest validator sends now about the challenges of its state store (`challenge` records; the
    `submission` record of the same id holds its verdict, status `accepted`, `rejected` or `ambiguous`), in record
    order:

    - an `open` round it did not open and has not voted in (`voteOf`), with a verdict and the vote period running:
      `vote` (every round, whoever opened it), uphold iff the verdict rejects the work, or as `vote_of(challenge
      data, submission record)` says when given (the validator's: it also recomputes a flagged worker's cited
      evidence, issue 35); no vote while that says None (an ambiguous verdict without evidence);
    - an `open` round whose vote period ended or whose outcome the ledger can already fix: `resolve`;
    - a `rejected` or `no_quorum` round (the chain agrees) of work its verdict rejects, inside the submission's
      window, with fewer than `MAX_OWN_ROUNDS` rounds opened by this validator: `rechallenge`.

    One `challengeInfo` (and a `voteOf`) per open round and per re-challengeable one; none for other records. A
    record whose chain status moved on (resolved, or a newer round) is left to the event follower."""
    me = protocol.address.lower()
    out: list[RoundAction] = []
    for rec in state.records("challenge"):
        status, d, cid = rec["status"], rec["data"], int(rec["id"])
        if status not in ("open", "rejected", "no_quorum"):
            continue
        sub = state.record("submission", cid)
        verdict = sub["status"] if sub is not None and sub["status"] in ("accepted", "rejected", "ambiguous") else None
        if status != "open" and (verdict != "rejected" or own_rounds(d) >= MAX_OWN_ROUNDS):
            continue
        if status != "open":
            now = protocol.chain_time() if now is None else now
            if now >= int(sub["data"].get("window_end", 0)):  # type: ignore[index]
                continue
        info = protocol.challenge_info(cid)
        now = protocol.chain_time() if now is None else now
        if info.status == ChallengeStatus.OPEN:
            if (verdict is not None and now < info.vote_end and info.challenger.lower() != me
                    and int(d.get("voted_round", 0)) != int(info.round)):
                uphold = ({"rejected": True, "accepted": False}.get(verdict) if vote_of is None
                          else vote_of(d, sub))  # type: ignore[arg-type]
                voted_round, _ = (None, None) if uphold is None else protocol.vote_of(cid, protocol.address)
                if uphold is not None and int(voted_round) != int(info.round):
                    out.append(RoundAction("vote", cid, int(info.round), uphold=uphold))
            if now >= info.vote_end or info.resolvable:
                out.append(RoundAction("resolve", cid, int(info.round)))
        elif info.status in (ChallengeStatus.REJECTED, ChallengeStatus.NO_QUORUM) and status != "open":
            out.append(RoundAction("rechallenge", cid, int(info.round)))
    return out


def own_rounds(data: dict[str, Any]) -> int:
    """How many rounds of a challenge record's submission this validator opened (`own`: their numbers; a record
    from before issue 33 counts its `mine` flag as one)."""
    own = data.get("own")
    return len(set(own)) if own else int(bool(data.get("mine")))


def _took_part(rec: dict[str, Any]) -> bool:
    d = rec["data"]
    return bool(d.get("mine") or d.get("voted"))


def slash_losing_voters(protocol: Any, state: Any, *, lock: threading.Lock | None = None) -> int:
    """Slash every losing voter of the resolved challenges (`challenge` records upheld or rejected) this
    validator opened or voted on, each once per round; returns the total slashed (wei). A challenge handled
    carries `voters_slashed` in its `challenge` record (the validator's ChallengeOpened handler clears it when a
    new round opens), so a pass costs no RPC for the challenges already handled. Before marking a challenge done
    it claims this validator's own share of the pool's reward per challenge where it won (`_claim_share`)."""
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


def _claim_share(protocol: Any, cid: int, lock: threading.Lock | None) -> int:
    """This validator's share of the pool's reward for the challenge's resolved round (issue 33): paid when it
    was on the winning side; 0 when the book says it was not, or already paid, or the pool pays none."""
    try:
        with lock or nullcontext():
            amount = int(protocol.claim_voter_reward(cid))
    except ContractRevert as exc:
        if exc.name not in SHARE_SETTLED_REVERTS:
            raise
        if exc.name == "AttesterBookInsufficientBudget":
            log.warning("challenge %d: the pool's attester budget cannot pay this vote's share (%s)", cid,
                        exc.error_args)
        return 0
    log.info("challenge %d: paid %g tokens for voting with its outcome", cid, amount / 1e18)
    return amount


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
    paid = pd.get("paid")
    if paid is None:
        paid = _claim_share(protocol, cid, lock)
        state.put(KIND, cid, "partial", {"round": rnd, "slashed": slashed, "skipped": skipped, "paid": paid})
    with state.transaction():
        state.put(KIND, cid, "done", {"round": rnd, "slashed": slashed, "skipped": skipped, "paid": paid})
        cur = state.record("challenge", cid)  # a new round may have opened meanwhile: then not done
        if cur is not None and cur["status"] in ("upheld", "rejected"):
            state.put("challenge", cid, cur["status"], {"voters_slashed": True})
    return total
