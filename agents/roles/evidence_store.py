"""Challenge evidence that outlives its challenger's reachability (issue 36): a validator behind NAT opens a
challenge whose evidence document (`challenges.open_challenge`: the failing statistics, or an evidence claim
citing a worker's history) sits only in its own store, which no voter can reach. So the challenger pushes the
document to the pool's trainer, as workers push their rollout files (`store.py`), and the trainer's gateway serves
it to every voter by its CID.

    validator          POST <trainer endpoint>/store/evidence  {"schema": "intellect.store-evidence/v1", "cid",
                       "submission_id", "node", "data" (base64), "signature"}; the signature (EIP-191, the
                       validator's node key) covers schema, chain id, ledger address, submission id and CID
    kubo:<RPC URL>     `validator.push_evidence: kubo:<url>`: any Kubo node pins it
    none               only the challenger's own gateway serves it (it must be reachable)

The trainer keeps exactly the evidence the chain names and nothing else; its checks, cheapest first, each refusal
a 4xx whose one-line reason starts with the rule's name:

    evidence.schema     the body is an `intellect.store-evidence/v1` object
    evidence.size       the document is at most MAX_EVIDENCE_BYTES (what a voter reads), before decoding
    evidence.signature  the signature recovers to `node`
    evidence.rate       at most `trainer.store.pushes_per_minute` pushes per signer in the last 60 s
    evidence.challenge  submission `submission_id` is this trainer pool's, is challenged now, and the ChallengeOpened
                        of its latest round names `node` as challenger and `cid` as evidence (read once per round)
    evidence.cid        the bytes' CID is `cid`

So a stranger can store nothing: every byte kept is the evidence of a challenge someone paid a bond to open, one
document per round. Kept in the trainer's state store (kind `evidence`, id the CID), unpinned by the trainer's
sweep (`sweep_evidence`) once the submission is no longer challenged and its window has ended.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct

from intellect.agents.roles._server import HttpError
from intellect.agents.roles.store import (
    SWEEP_EVERY_S,
    _check_rate,
    _drop,
    _keeper,
    accept_pushed_file,
    push_to,
    read_signed_push,
    sweep_stored,
)
from intellect.sdk import TaskStatus
from intellect.sdk.ipfs import compute_cid

__all__ = ["EVIDENCE_SCHEMA", "KIND", "MAX_EVIDENCE_BYTES", "PUSH_RETRY_S", "accept_pushed_evidence", "evidence_message",
           "evidence_request", "push_challenge_evidence", "push_evidence", "serve_stores", "sweep_evidence",
           "sweep_stores"]

log = logging.getLogger(__name__)

EVIDENCE_SCHEMA = "intellect.store-evidence/v1"
KIND = "evidence"
MAX_EVIDENCE_BYTES = 1 << 20
"""Largest evidence document kept: what a voter reads of one (`evidence.challenge_claim`)."""
_ROUNDS_CACHED = 4096
PUSH_RETRY_S = (5.0, 30.0, 120.0, 600.0)
"""Seconds before each retry of a failed evidence push (`push_challenge_evidence`): past the vote period of a
devnet pool, within any production one's."""


def evidence_message(chain_id: int, ledger: str, submission_id: int, cid: str) -> str:
    """What a challenger signs (EIP-191) to push `cid` as the evidence of its challenge of `submission_id`."""
    return f"{EVIDENCE_SCHEMA}:{chain_id}:{ledger.lower()}:{int(submission_id)}:{cid}"


def evidence_request(private_key: Any, chain_id: int, ledger: str, submission_id: int, cid: str,
                     data: bytes) -> dict[str, Any]:
    """The body of `POST /store/evidence` for `data` (whose CID is `cid`), signed with the validator's node key."""
    account = Account.from_key(private_key)
    signed = account.sign_message(encode_defunct(text=evidence_message(chain_id, ledger, submission_id, cid)))
    return {"schema": EVIDENCE_SCHEMA, "cid": cid, "submission_id": int(submission_id), "node": account.address,
            "data": base64.b64encode(data).decode(), "signature": "0x" + bytes(signed.signature).hex()}


def push_evidence(agent: Any, cid: str, submission_id: int) -> str | None:
    """Store the evidence document `cid` of this validator's challenge of `submission_id` where
    `validator.push_evidence` says (the bytes read from this agent's own store; `store.push_to`); returns where,
    None for `none`. Raises on failure (the caller logs it: the challenge stands, served by this agent's gateway
    if reachable)."""
    if agent.cfg.validator.push_evidence.strip() == "none":
        return None
    data = agent.ipfs.cat(cid, max_size=MAX_EVIDENCE_BYTES)
    p = agent.protocol
    return push_to(agent, agent.cfg.validator.push_evidence, "validator.push_evidence", "evidence", data, cid,
                   "/store/evidence",
                   lambda: evidence_request(p.account.key, p.chain_id, p.contracts["TaskLedger"].address,
                                            submission_id, cid, data))


def push_challenge_evidence(agent: Any, cid: str, submission_id: int,
                            retry_after: tuple[float, ...] = PUSH_RETRY_S) -> threading.Thread | None:
    """`push_evidence` after the validator opened a challenge. The first try is made here; after a failure (the
    trainer down or restarting, its RPC node behind this one's) the push is tried again in a background thread
    after each of `retry_after` seconds, until it succeeds or the agent stops; returns that thread (None: done
    here). Failures are logged, never raised: the challenge stands, and voters may still reach this validator's
    own gateway."""
    if _try_push(agent, cid, submission_id, retry_in=retry_after[0] if retry_after else None):
        return None
    t = threading.Thread(target=_retry_push, args=(agent, cid, submission_id, retry_after), daemon=True,
                         name=f"evidence-push-{submission_id}")
    t.start()
    return t


def _retry_push(agent: Any, cid: str, submission_id: int, retry_after: tuple[float, ...]) -> None:
    for i, delay in enumerate(retry_after):
        if agent.stop_event.wait(delay):
            return
        nxt = retry_after[i + 1] if i + 1 < len(retry_after) else None
        if _try_push(agent, cid, submission_id, retry_in=nxt):
            return


def _try_push(agent: Any, cid: str, submission_id: int, retry_in: float | None) -> bool:
    """One `push_evidence`; True when it is done (stored, or nowhere to push), False after a failure (logged, with
    when it is tried again)."""
    try:
        where = push_evidence(agent, cid, submission_id)
    except Exception as exc:
        agent.metrics.inc("errors_total", kind="push_evidence")
        log.warning("evidence %s of the challenge of submission %d: pushing to %s failed: %s; %s", cid, submission_id,
                    agent.cfg.validator.push_evidence, exc,
                    "giving up" if retry_in is None else f"trying again in {retry_in:.0f} s")
        return False
    if where:
        agent.count("evidence_pushed")
        log.info("evidence %s of the challenge of submission %d stored at %s", cid, submission_id, where)
    return True


# -- the trainer's side -----------------------------------------------------------------------------


def serve_stores(agent: Any) -> None:
    """Route the trainer's stores on its server: `POST /store` (workers' rollout files, `store.py`) and
    `POST /store/evidence` (challengers' evidence)."""
    agent.server.route("POST", "/store", lambda _q, body: accept_pushed_file(agent, body))
    agent.server.route("POST", "/store/evidence", lambda _q, body: accept_pushed_evidence(agent, body))


def sweep_stores(agent: Any) -> int:
    """The trainer loop's sweep of both stores (`store.sweep_stored`, `sweep_evidence`: each at most every
    SWEEP_EVERY_S); returns how many files were unpinned. A failure is logged and tried again next time."""
    done = sweep_stored(agent)
    k = _keeper(agent)
    if time.monotonic() - k.last_evidence_sweep >= SWEEP_EVERY_S:
        k.last_evidence_sweep = time.monotonic()
        try:
            done += sweep_evidence(agent)
        except Exception as exc:  # the chain unreachable: the next pass tries again
            log.warning("sweeping stored evidence failed (retried): %s", exc)
    return done


def _round_evidence(agent: Any, sid: int) -> tuple[int, str, str]:
    """(round, challenger, evidence CID) of the open challenge of submission `sid` in this trainer's pool
    (HttpError evidence.challenge otherwise). The round's ChallengeOpened is read once per (submission, round)."""
    p = agent.protocol
    t = p.known_task(sid)
    if t is None:
        raise HttpError(404, f"evidence.challenge: submission {sid} does not exist")
    if int(t.pool_id) != int(agent.pool_id):
        raise HttpError(403, f"evidence.challenge: submission {sid} is pool {t.pool_id}'s; this trainer keeps pool "
                             f"{agent.pool_id}'s")
    if t.status != TaskStatus.CHALLENGED:
        raise HttpError(409, f"evidence.challenge: submission {sid} is {t.status.name.lower()}, not challenged")
    info = p.challenge_info(sid)
    cache: dict[tuple[int, int], tuple[str, str]] = agent.__dict__.setdefault("_evidence_rounds", {})
    key = (sid, int(info.round))
    if key not in cache:
        opened = p.get_events(["ChallengeOpened"], from_block=int(info.snapshot_block) + 1,
                              filters={"challengeId": sid})
        ours = [e for e in opened if int(e.args["round"]) == int(info.round)]
        if not ours:  # this node's RPC lacks the log (a pruned provider): not a refusal of the pusher's
            raise HttpError(503, f"evidence.challenge: the ChallengeOpened of submission {sid}'s round {info.round} "
                                 f"is not readable here yet; push again later")
        if len(cache) >= _ROUNDS_CACHED:
            cache.clear()
        cache[key] = (str(ours[-1].args["challenger"]), str(ours[-1].args["evidenceCid"]))
    challenger, cid = cache[key]
    return int(info.round), challenger, cid


def accept_pushed_evidence(agent: Any, body: Any) -> dict[str, Any]:
    """The trainer's `POST /store/evidence`: check and pin a challenger's evidence document (HttpError 4xx naming
    the rule that refused it; the module docstring lists them in order)."""
    cid, signer, sid, data = read_signed_push(agent, body, schema=EVIDENCE_SCHEMA, rule="evidence",
                                              id_field="submission_id", what="document", max_bytes=MAX_EVIDENCE_BYTES,
                                              message=evidence_message)
    k = _keeper(agent)
    try:
        _check_rate(agent, k, signer)
    except HttpError as exc:
        raise HttpError(exc.status, "evidence." + exc.message.removeprefix("store.")) from None
    rnd, challenger, named = _round_evidence(agent, sid)
    if challenger.lower() != signer.lower():
        raise HttpError(403, f"evidence.challenge: round {rnd} of submission {sid}'s challenge was opened by "
                             f"{challenger}, not {signer}")
    if named != cid:
        raise HttpError(409, f"evidence.challenge: round {rnd} of submission {sid}'s challenge names evidence "
                             f"{named[:80]}, not {cid[:80]}")
    got = compute_cid(data)
    if got != cid:
        raise HttpError(400, f"evidence.cid: the bytes' CID is {got}, not {cid}")
    rec = agent.state.record(KIND, cid)
    if rec is not None and rec["status"] == "pinned":
        return {"cid": cid, "pinned": True}  # pushed before (a retry)
    with k.lock:
        stored = agent.ipfs.add(data, pin=True)
        if stored != cid:  # a store with other import settings (a misconfigured Kubo): keep nothing
            _drop(agent, stored)
            raise HttpError(500, f"this store imports the document as {stored}, not {cid}")
        agent.state.put(KIND, cid, "pinned", {"node": signer, "submission_id": sid, "round": rnd,
                                              "bytes": len(data), "stored_at": time.time()})
    agent.count("evidence_stored")
    log.info("stored evidence %s (%d bytes) of %s's challenge of submission %d (round %d)", cid, len(data), signer,
             sid, rnd)
    return {"cid": cid, "pinned": True}


def sweep_evidence(agent: Any) -> int:
    """Unpin the evidence of submissions no longer challenged whose window has ended (no round can open or be voted
    on); returns how many. Called from the trainer's sweep of stored files (`store.sweep_stored`)."""
    records = agent.state.records(KIND, "pinned")
    if not records:
        return 0
    p, done = agent.protocol, 0
    now = p.chain_time()
    for r in records:
        sid = int(r["data"]["submission_id"])
        t = p.known_task(sid)
        if t is not None and (t.status == TaskStatus.CHALLENGED or now < int(t.window_end)):
            continue
        _drop(agent, r["id"])
        agent.state.put(KIND, r["id"], "unpinned", {"unpinned_at": time.time()})
        done += 1
        log.info("unpinned evidence %s of submission %d: %s", r["id"], sid,
                 "gone from the ledger" if t is None else f"{t.status.name.lower()}, its window over")
    return done
