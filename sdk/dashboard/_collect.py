"""Builds the dashboard's Snapshot from the chain and the agents' `/status`.

`ChainIndex` keeps every protocol event of one deployment, scanned incrementally (only blocks
past the last scan are fetched; a reorg under the last scanned block makes it rescan from the
deployment block). `collect()` derives the state from those events alone — the contracts emit
an event for every state change: node records (NodeRegistered/Updated/Exited/KeyRotated), stake
(StakeUpdated, ChallengeLockUpdated), task status (WorkSubmitted → ChallengeOpened →
ChallengeResolved → RewardClaimed / SubmissionVoided), wipes (WorkerWiped bumps the worker's
slash epoch: every earlier unpaid submission is void), challenge tallies (VoteCast) — plus one
`pool()` view per pool, so a refresh costs O(new blocks) RPC calls, not O(submissions).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._fetch import PeerHttpError, Reply, fetch
from .._models import LISTING_FLOOR, DecodedEvent, TaskStatus, format_tokens
from ._models import (
    AGENT_STATUS_SCHEMA,
    ChallengeView,
    CheckpointView,
    NodeView,
    PathEvent,
    PoolView,
    RewardPoint,
    Snapshot,
    SubmissionView,
    Totals,
    VoteView,
)

if TYPE_CHECKING:
    from .._client import Protocol

__all__ = ["ChainIndex", "StatusFetcher", "challenge_table", "collect"]

log = logging.getLogger(__name__)

# events the dashboard reads (all from the four protocol contracts)
EVENTS = [
    "NodeRegistered", "NodeUpdated", "NodeExited", "NodeKeyRotated",
    "Staked", "StakeUpdated", "ChallengeLockUpdated", "Slashed", "UnstakeRequested", "Withdrawn",
    "PoolCreated", "CheckpointPublished", "TaskClaimed", "WorkSubmitted",
    "ChallengeOpened", "VoteCast", "ChallengeResolved", "RewardClaimed", "SubmissionVoided", "WorkerWiped",
]
_MAX_STATUS = 4 * 1024 * 1024  # bytes of an agent's /status read at most
MAX_STATUS_FETCHES = 64
"""Most agents' `/status` documents one refresh asks for: the pools' trainers, then nodes staked at least
`LISTING_FLOOR`, the most staked first. Registering is free: a node without the stake is shown from its
events but never asked, so a flood of registrations does not slow the page (issue 22)."""
_ROLE = {0: "none", 1: "worker", 2: "validator", 3: "trainer", 4: "relay"}


class ChainIndex:
    """Every dashboard event of a deployment, kept up to date by `refresh()` (thread-safe)."""

    def __init__(self, protocol: Protocol) -> None:
        self.p = protocol
        self.events: list[DecodedEvent] = []
        self._next_block = protocol.deployment.block
        self._last_hash: tuple[int, str] | None = None
        self._times: dict[int, int] = {}
        self._lock = threading.Lock()

    def _hash(self, n: int) -> str:
        return "0x" + bytes(self.p.w3.eth.get_block(n)["hash"]).hex()

    def refresh(self) -> int:
        """Fetch the events of blocks mined since the last call; returns the head scanned."""
        with self._lock:
            head = self.p.block_number()
            if self._last_hash is not None:
                n, h = self._last_hash
                if n > head or self._hash(n) != h:
                    log.warning("dashboard: chain reorganised under block %d; rescanning", n)
                    self.events, self._next_block = [], self.p.deployment.block
            if head >= self._next_block:
                self.events.extend(self.p.get_events(EVENTS, from_block=self._next_block, to_block=head))
                self._next_block = head + 1
            blk = self.p.w3.eth.get_block(head)  # one read: its hash for the reorg check, its time for collect()
            self._times[head] = int(blk["timestamp"])
            self._last_hash = (head, "0x" + bytes(blk["hash"]).hex())
            return head

    def block_time(self, n: int) -> int:
        t = self._times.get(n)
        if t is None:
            t = int(self.p.w3.eth.get_block(n)["timestamp"])
            self._times[n] = t
        return t



class StatusFetcher:
    """GETs `<endpoint>/status` of many agents at once; an agent that is down is reported, not fatal."""

    def __init__(self, timeout: float = 1.5, max_workers: int = 8, *, get: Callable[..., Reply] = fetch) -> None:
        self.timeout = timeout
        self.max_workers = max_workers
        self.get = get  # the bounded `fetch`; the fuzz target hands in a stand-in that returns its bytes

    def fetch_one(self, endpoint: str) -> tuple[dict[str, Any] | None, str | None]:
        if not endpoint.startswith(("http://", "https://")):
            return None, f"endpoint {endpoint!r} is not an http(s) URL" if endpoint else "no endpoint registered"
        url = endpoint.rstrip("/") + "/status"
        try:  # a total deadline: an agent dripping its status cannot hold the page (issue 22)
            resp = self.get("GET", url, deadline=self.timeout, max_bytes=_MAX_STATUS)
            if resp.status >= 400:
                return None, f"{url} unreachable: HTTP {resp.status}"
            doc = json.loads(resp.body)
        except (PeerHttpError, OSError) as exc:
            return None, f"{url} unreachable: {exc}"
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested or a 4,300-digit int: issue 32
            return None, f"{url} did not return JSON: {type(exc).__name__}: {str(exc)[:200]}"
        if not isinstance(doc, dict):
            return None, f"{url} returned a {type(doc).__name__}, not a status object"
        schema = doc.get("schema")
        if schema is not None and schema != AGENT_STATUS_SCHEMA:
            return None, f"{url} has status schema {schema!r}; this dashboard reads {AGENT_STATUS_SCHEMA}"
        return doc, None

    def fetch(self, endpoints: list[str]) -> dict[str, tuple[dict[str, Any] | None, str | None]]:
        unique = sorted(set(endpoints))
        if not unique:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(unique))) as ex:
            return dict(zip(unique, ex.map(self.fetch_one, unique), strict=True))


def _tok(wei: Any) -> str:
    return f"{format_tokens(int(wei))} INTL"


def _num(v: Any) -> float | None:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return None
    try:
        return float(v)
    except OverflowError:  # an int past a float's range in a peer's document
        return None


def trainer_steps(status: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    """Per-step records from a trainer's status: `steps: [{step, mean_reward, rollouts_used, ...}]`."""
    out: dict[int, dict[str, Any]] = {}
    if not status:
        return out
    steps = status.get("steps")
    if steps is None and isinstance(status.get("trainer"), dict):
        steps = status["trainer"].get("steps")
    if isinstance(steps, dict):
        steps = [{"step": k, **v} for k, v in steps.items() if isinstance(v, dict)]
    if not isinstance(steps, list):  # absent, or a peer's `"steps": 1` (found by fuzz/fuzz_dashboard.py)
        return out
    for item in steps:
        if isinstance(item, dict) and "step" in item:
            try:
                out[int(item["step"])] = item
            except (TypeError, ValueError, OverflowError):  # 1e999 is a float: int() overflows
                continue
    return out


@dataclass
class _Scan:
    """The events of one `collect()`, grouped by name, and the per-node paths built from them."""

    block_time: Callable[[int], int]  # block number -> its time
    now: int  # the head block's time
    events: list[DecodedEvent]
    by: dict[str, list[DecodedEvent]] = field(default_factory=lambda: defaultdict(list))
    paths: dict[str, list[PathEvent]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        for e in self.events:
            self.by[e.event].append(e)

    def time(self, e: DecodedEvent) -> int:
        return self.block_time(e.block_number)

    def add(self, node: str, e: DecodedEvent, kind: str, detail: str = "", sid: int | None = None,
            outcome: str = "") -> None:
        """Put event `e` on `node`'s path."""
        self.paths[node.lower()].append(PathEvent(kind=kind, time=self.time(e), block=e.block_number, tx=e.tx_hash,
                                                  submission_id=sid, detail=detail, outcome=outcome))


def collect(p: Protocol, index: ChainIndex, fetcher: StatusFetcher | None = None) -> Snapshot:
    """One Snapshot of the deployment at the current head."""
    errors: list[str] = []
    head = index.refresh()
    now = index.block_time(head)
    scan = _Scan(index.block_time, now, list(index.events))
    pools = _pools(p, scan, errors)
    trainers = {pv.trainer.lower(): pv.pool_id for pv in pools}
    nodes = _nodes(scan)
    checkpoints = _checkpoints(scan, trainers, nodes)
    challenges, slashed_by_challenge = _challenges(scan, nodes)
    submissions, claimed = _submissions(scan, nodes, slashed_by_challenge)
    trainer_status = _agent_statuses(fetcher, nodes, trainers) if fetcher is not None else None
    curve = reward_curve(trainer_steps(trainer_status), submissions, checkpoints)

    node_list = list(nodes.values())
    paths = scan.paths
    for k in paths:
        paths[k].sort(key=lambda pe: (pe.time, pe.block))
    totals = Totals(
        nodes=len(node_list), submissions=len(submissions),
        accepted=sum(1 for s in submissions if s.verdict in ("accepted", "paid")),
        pending_windows=sum(1 for s in submissions if s.verdict == "in window"),
        challenges=len(challenges), open_challenges=sum(1 for c in challenges if c.status == "open"),
        upheld=sum(1 for c in challenges if c.status == "upheld"),
        slashed=sum(n.slashed for n in node_list), rewards_claimed=sum(claimed.values()),
        checkpoints=len(checkpoints),
        agents_up=sum(1 for n in node_list if n.agent_status is not None),
        agents_down=sum(1 for n in node_list if n.agent_asked and n.agent_status is None))
    return Snapshot(
        chain_id=p.chain_id, rpc_url=p.rpc_url, block=head, chain_time=now, generated_at=time.time(),
        contracts={name: c.address for name, c in p.contracts.items()}, pools=pools, nodes=node_list,
        checkpoints=checkpoints, submissions=submissions, challenges=challenges, reward_curve=curve, totals=totals,
        paths={nodes[k].address if k in nodes else k: v for k, v in paths.items()}, errors=errors)


def _pools(p: Protocol, scan: _Scan, errors: list[str]) -> list[PoolView]:
    """Every pool created, with its parameters and budget read from the chain (one view each)."""
    pools: list[PoolView] = []
    for e in scan.by["PoolCreated"]:
        pid = int(e.args["poolId"])
        try:
            pool = p.pool(pid)
        except Exception as exc:
            errors.append(f"pool {pid}: {exc}")
            continue
        pr = pool.params
        pools.append(PoolView(pool_id=pid, owner=pool.owner, trainer=pr.trainer, rules_cid=pr.rules_cid,
                              reward_per_unit=pr.reward_per_unit, challenge_bond=pr.challenge_bond,
                              slash_amount=pr.slash_amount, window_length=pr.window_length,
                              vote_period=pr.vote_period, async_level=pr.async_level, quorum=pr.quorum,
                              budget=pool.budget, reserved=pool.reserved, latest_step=pool.latest_step))
    return pools


def _nodes(scan: _Scan) -> dict[str, NodeView]:
    """Node records and stake by lower-case address; registration, stake and task events on their paths."""
    by, add = scan.by, scan.add
    deposited: dict[str, int] = defaultdict(int)
    for e in by["Staked"]:
        deposited[e.args["node"].lower()] += int(e.args["amount"])
    stake: dict[str, tuple[int, int]] = {}
    for e in by["StakeUpdated"]:
        stake[e.args["node"].lower()] = (int(e.args["active"]), int(e.args["unbonding"]))
    locks: dict[str, int] = {}
    for e in by["ChallengeLockUpdated"]:
        locks[e.args["node"].lower()] = int(e.args["openChallenges"])
    nodes: dict[str, NodeView] = {}
    for e in by["NodeRegistered"]:
        a = e.args
        k = a["node"].lower()
        active, unbonding = stake.get(k, (0, 0))
        nodes[k] = NodeView(
            address=a["node"], owner=a["owner"], role=_ROLE.get(int(a["role"]), str(a["role"])), status="active",
            gpu_model=a["gpuModel"], vram_gib=int(a["vramGiB"]), gpu_count=int(a["gpuCount"]), endpoint=a["endpoint"],
            registered_at=scan.time(e), stake_active=active, stake_unbonding=unbonding,
            stake_deposited=deposited[k], open_challenges=locks.get(k, 0))
    for e in by["NodeUpdated"]:
        nv = nodes.get(e.args["node"].lower())
        if nv is not None:
            nv.gpu_model, nv.vram_gib = e.args["gpuModel"], int(e.args["vramGiB"])
            nv.gpu_count, nv.endpoint = int(e.args["gpuCount"]), e.args["endpoint"]
    for e in by["NodeExited"]:
        nv = nodes.get(e.args["node"].lower())
        if nv is not None:
            nv.status = "exited"
    for e in by["NodeKeyRotated"]:  # the new key takes over owner, role, hardware, endpoint and registration time
        old, new = e.args["oldNode"], e.args["newNode"]
        ov = nodes.get(old.lower())
        if ov is None:
            continue
        active, unbonding = stake.get(new.lower(), (0, 0))
        nodes[new.lower()] = ov.model_copy(update={
            "address": new, "status": "active", "stake_active": active, "stake_unbonding": unbonding,
            "stake_deposited": deposited[new.lower()], "open_challenges": locks.get(new.lower(), 0),
            "rotated_from": old, "rotated_to": None})
        ov.status, ov.rotated_to = "rotated", new

    for e in by["NodeRegistered"]:
        a = e.args
        add(a["node"], e, "registered", f"{_ROLE.get(int(a['role']), a['role'])} · {a['gpuCount']} x "
            f"{a['gpuModel']} ({a['vramGiB']} GiB) · {a['endpoint'] or 'no endpoint'}")
    for e in by["Staked"]:
        add(e.args["node"], e, "staked", f"{_tok(e.args['amount'])} from {e.args['from']}")
    for e in by["UnstakeRequested"]:
        add(e.args["node"], e, "unstake", f"{_tok(e.args['amount'])}, release at {e.args['releaseAt']}")
    for e in by["Withdrawn"]:
        add(e.args["node"], e, "withdrawn", f"{_tok(e.args['amount'])} to {e.args['to']}")
    for e in by["NodeExited"]:
        add(e.args["node"], e, "exited")
    for e in by["NodeKeyRotated"]:
        add(e.args["oldNode"], e, "key rotated", f"to {e.args['newNode']} by its owner {e.args['owner']}")
        add(e.args["newNode"], e, "key rotated", f"from {e.args['oldNode']}: stake and record moved here")
    for e in by["TaskClaimed"]:
        a = e.args
        add(a["node"], e, "task", f"task {a['taskId']} of pool {a['poolId']}, seed 0x{str(a['seed'])[:16]}…",
            sid=int(a["taskId"]))
    return nodes


def _checkpoints(scan: _Scan, trainers: dict[str, int], nodes: dict[str, NodeView]) -> list[CheckpointView]:
    """Every checkpoint published, also put on its pool trainer's path."""
    checkpoints = [CheckpointView(pool_id=int(e.args["poolId"]), step=int(e.args["step"]),
                                  manifest_cid=e.args["manifestCid"], block=e.block_number,
                                  time=scan.time(e), tx=e.tx_hash)
                   for e in scan.by["CheckpointPublished"]]
    for e in scan.by["CheckpointPublished"]:
        pid = int(e.args["poolId"])
        for tr, tpid in trainers.items():
            if tpid == pid and tr in nodes:
                scan.add(tr, e, "checkpoint", f"step {e.args['step']} · manifest {e.args['manifestCid']}")
    return checkpoints


# ChallengeResolved's `outcome` (ITaskLedger.ChallengeStatus): a round that missed its quorum is no rejection
_OUTCOMES = {2: "upheld", 3: "rejected", 4: "no quorum"}


def _outcome(args: Any) -> str:
    outcome = args.get("outcome")
    if outcome is not None and int(outcome) in _OUTCOMES:
        return _OUTCOMES[int(outcome)]
    return "upheld" if args["upheld"] else "rejected"


class _Rounds:
    """Each challenge's rounds, replayed in chain order: a challenge's opening (again for a re-opened one: a new
    round) starts its tally with the challenger's uphold vote and an empty vote list; each VoteCast adds one vote
    to the round then open (the contract weighs them by stake: the weights are in ChallengeResolved); a
    resolution ends the round. Each vote and resolution is labelled with its own round's number and tally, not
    the latest round's (`at`)."""

    def __init__(self, scan: _Scan) -> None:
        self.votes: dict[int, list[VoteView]] = defaultdict(list)  # the latest round's
        self.tally: dict[int, tuple[int, int]] = {}  # the latest round's
        self.round_of: dict[int, int] = {}  # the latest round's number
        self.at: dict[tuple[int, int], tuple[int, tuple[int, int]]] = {}  # event position -> (round, tally then)
        self.slashed: dict[int, int] = {}
        self.resolved: dict[int, str] = {}
        for e in scan.events:
            if e.event not in ("ChallengeOpened", "VoteCast", "ChallengeResolved"):
                continue
            cid = int(e.args["challengeId"])
            if e.event == "ChallengeOpened":
                self.tally[cid] = (1, 0)
                self.votes[cid] = []
                self.round_of[cid] = int(e.args.get("round") or self.round_of.get(cid, 0) + 1)
                self.resolved.pop(cid, None)
            elif e.event == "VoteCast":
                up, down = self.tally.get(cid, (1, 0))
                self.tally[cid] = (up + 1, down) if e.args["uphold"] else (up, down + 1)
                self.votes[cid].append(VoteView(validator=e.args["validator"], uphold=bool(e.args["uphold"]),
                                                block=e.block_number, time=scan.time(e)))
            else:
                self.slashed[cid] = int(e.args["slashed"])
                self.resolved[cid] = _outcome(e.args)
            self.at[e.position] = (self.round_of.get(cid, 1), self.tally.get(cid, (1, 0)))


def _challenges(scan: _Scan, nodes: dict[str, NodeView]) -> tuple[list[ChallengeView], dict[int, int]]:
    """Challenges with their votes and outcome (and the slash of each resolved one, by challenge id);
    challenge, vote, verdict, slash and wipe events on the paths of the nodes involved."""
    by, add, now = scan.by, scan.add, scan.now
    rounds = _Rounds(scan)
    votes, votes_tally, round_of, at = rounds.votes, rounds.tally, rounds.round_of, rounds.at
    slashed_by_challenge, resolved = rounds.slashed, rounds.resolved
    challenges: dict[int, ChallengeView] = {}  # one row per challenge: its latest round
    challenged_node: dict[int, str] = {}
    for e in by["ChallengeOpened"]:
        a = e.args
        cid = int(a["challengeId"])
        challenged_node[cid] = a["node"]
        tally = votes_tally.get(cid, (1, 0))
        status = resolved.get(cid, "open")
        vote_end = int(a["voteEnd"])
        rnd = at.get(e.position, (1, tally))[0]
        challenges[cid] = ChallengeView(
            challenge_id=cid, node=a["node"], challenger=a["challenger"], evidence_cid=a["evidenceCid"],
            vote_end=vote_end, seconds_left=max(0, vote_end - now) if status == "open" else 0, votes_for=tally[0],
            votes_against=tally[1], status=status, votes=votes[cid], slashed=slashed_by_challenge.get(cid, 0),
            round=round_of.get(cid, 1))
        again = f" again (round {rnd})" if rnd > 1 else ""
        add(a["node"], e, "challenged", f"submission {cid} challenged{again} by {a['challenger']} · evidence "
            f"{a['evidenceCid']}", sid=cid)
        add(a["challenger"], e, "challenged", f"opened a challenge{again} of submission {cid} ({a['node']})", sid=cid)
        if a["challenger"].lower() in nodes:
            nodes[a["challenger"].lower()].challenges_opened += 1
        if a["node"].lower() in nodes:
            nodes[a["node"].lower()].challenged += 1
    for e in by["VoteCast"]:
        a = e.args
        cid = int(a["challengeId"])
        way = "uphold" if a["uphold"] else "reject"
        rnd = at.get(e.position, (1, (1, 0)))[0]
        of_round = f" (round {rnd})" if rnd > 1 else ""
        add(a["validator"], e, "vote", f"voted {way} on challenge {cid}{of_round}", sid=cid)
        if cid in challenged_node:
            add(challenged_node[cid], e, "vote", f"{a['validator']} voted {way}{of_round}", sid=cid)
        if a["validator"].lower() in nodes:
            nodes[a["validator"].lower()].votes_cast += 1
    for e in by["ChallengeResolved"]:
        a = e.args
        cid = int(a["challengeId"])
        outcome = _outcome(a)
        target = challenged_node.get(cid)
        if target is not None:
            rnd, (up, down) = at.get(e.position, (1, (1, 0)))  # this round's tally, not the latest round's
            of_round = f" (round {rnd})" if rnd > 1 else ""
            add(target, e, "verdict", f"challenge {cid}{of_round} {outcome} ({up} for, {down} against; stake "
                f"{a['weightFor']} for, {a['weightAgainst']} against)", sid=cid, outcome=outcome)
            if a["upheld"] and target.lower() in nodes:
                nodes[target.lower()].upheld += 1
    for e in by["Slashed"]:
        a = e.args
        add(a["node"], e, "slash", f"{_tok(a['amount'])} slashed; challenger {a['challenger']} got "
            f"{_tok(a['challengerReward'])}")
        if a["node"].lower() in nodes:
            nodes[a["node"].lower()].slashed += int(a["amount"])
    for e in by["WorkerWiped"]:
        add(e.args["node"], e, "wiped", f"unfinalised rewards wiped (epoch {e.args['newEpoch']})")
    return list(challenges.values()), slashed_by_challenge


def challenge_table(events: list[DecodedEvent], now: int, block_time: Callable[[int], int]
                    ) -> tuple[list[ChallengeView], dict[str, list[PathEvent]]]:
    """The dashboard's challenge rows from protocol events in chain order (what `collect` shows, without a
    chain: events from `Protocol.get_events`, a `ChainIndex` or a file): one row per challenge, its latest
    round (votes, tally, status, slash), and the challenge, vote, verdict, slash and wipe events on the path
    of each node involved (keyed by lower-case address, in event order). `now`: the head's time (an open
    challenge's seconds left); `block_time(n)`: block n's time."""
    scan = _Scan(block_time, now, list(events))
    challenges, _ = _challenges(scan, {})
    return challenges, dict(scan.paths)


def _task_statuses(events: list[DecodedEvent]) -> tuple[dict[int, TaskStatus], dict[str, list[tuple[int, int]]]]:
    """Each submission's status, replaying the events in chain order the way the contract moved it, and
    the chain positions of each worker's wipes (by lower-case address)."""
    status_of: dict[int, TaskStatus] = {}
    wiped_after: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        a = e.args
        if e.event == "WorkSubmitted":
            status_of[int(a["submissionId"])] = TaskStatus.SUBMITTED
        elif e.event == "ChallengeOpened":
            status_of[int(a["challengeId"])] = TaskStatus.CHALLENGED
        elif e.event == "ChallengeResolved":
            status_of[int(a["challengeId"])] = TaskStatus.UPHELD if a["upheld"] else TaskStatus.SUBMITTED
        elif e.event == "RewardClaimed":
            status_of[int(a["submissionId"])] = TaskStatus.PAID
        elif e.event == "SubmissionVoided":
            status_of[int(a["submissionId"])] = TaskStatus.VOIDED
        elif e.event == "WorkerWiped":
            wiped_after[a["node"].lower()].append(e.position)
    return status_of, wiped_after


def _submissions(scan: _Scan, nodes: dict[str, NodeView],
                 slashed_by_challenge: dict[int, int]) -> tuple[list[SubmissionView], dict[int, int]]:
    """Submissions with their verdict, and the rewards claimed by submission id; reward, proof and
    window-closed events on the workers' paths."""
    by, add, now = scan.by, scan.add, scan.now
    claimed: dict[int, int] = {}
    for e in by["RewardClaimed"]:
        a = e.args
        claimed[int(a["submissionId"])] = int(a["amount"])
        add(a["node"], e, "reward", f"{_tok(a['amount'])} for submission {a['submissionId']} to {a['owner']}",
            sid=int(a["submissionId"]))
        if a["node"].lower() in nodes:
            nodes[a["node"].lower()].rewards_claimed += int(a["amount"])
    status_of, wiped_after = _task_statuses(scan.events)
    submissions: list[SubmissionView] = []
    for e in by["WorkSubmitted"]:
        a = e.args
        sid = int(a["submissionId"])
        status = status_of[sid]
        wiped = any(pos > e.position for pos in wiped_after.get(a["node"].lower(), []))
        window_end = int(a["windowEnd"])
        closed = now >= window_end
        verdict = _verdict(status, wiped=wiped, closed=closed)
        claimable = int(a["reward"]) if verdict == "accepted" else 0
        ph = a["proofsHash"]
        submissions.append(SubmissionView(
            submission_id=sid, pool_id=int(a["poolId"]), node=a["node"], rollouts_cid=a["rolloutsCid"],
            proofs_hash=ph if str(ph).startswith("0x") else "0x" + str(ph), work_units=int(a["workUnits"]),
            policy_step=int(a["policyStep"]), reward=int(a["reward"]), window_end=window_end,
            seconds_left=max(0, window_end - now), status=status.name.lower(), verdict=verdict,
            block=e.block_number, time=scan.time(e)))
        add(a["node"], e, "proof", f"submission {sid}: {a['workUnits']} units at policy step {a['policyStep']} · "
            f"rollouts {a['rolloutsCid']} · proofs 0x{str(ph).removeprefix('0x')[:16]}…", sid=sid)
        nv = nodes.get(a["node"].lower())
        if nv is not None:
            nv.submissions += 1
            if verdict in ("accepted", "paid"):
                nv.accepted += 1
            elif verdict == "in window":
                nv.pending += 1
            nv.rewards_claimable += claimable
        if closed and verdict in ("accepted", "paid"):
            # the window closing is not an event: place it at the window end on the path
            scan.paths[a["node"].lower()].append(PathEvent(
                kind="verdict", time=window_end, block=e.block_number, submission_id=sid, outcome="accepted",
                detail=f"submission {sid}: window closed unchallenged" if sid not in slashed_by_challenge
                else f"submission {sid}: challenge rejected, work stands"))
    return submissions, claimed


def _verdict(status: TaskStatus, *, wiped: bool, closed: bool) -> str:
    """What the dashboard calls a submission in `status`: "accepted" only when its reward is claimable."""
    if status == TaskStatus.PAID:
        return "paid"
    if status == TaskStatus.UPHELD:
        return "slashed"
    if status == TaskStatus.VOIDED:
        return "voided"
    if status == TaskStatus.CHALLENGED:
        return "challenged"
    if wiped:  # its slash epoch is over: never claimable
        return "wiped"
    if not closed:
        return "in window"
    return "accepted"


def _agent_statuses(fetcher: StatusFetcher, nodes: dict[str, NodeView],
                    trainers: dict[str, int]) -> dict[str, Any] | None:
    """Fill each node's agent status (or why there is none); returns a trainer's status document. Asked: the
    pools' trainers and nodes with at least `LISTING_FLOOR` active stake (a slashed node under its role's
    minimum too: an operator wants to see it), most staked first, at most `MAX_STATUS_FETCHES`."""
    trainer_status: dict[str, Any] | None = None

    def staked(nv: NodeView) -> bool:
        return nv.stake_active >= LISTING_FLOOR

    asked = sorted((nv for k, nv in nodes.items() if nv.endpoint and (k in trainers or staked(nv))),
                   key=lambda nv: (nv.address.lower() not in trainers, -nv.stake_active))[:MAX_STATUS_FETCHES]
    results = fetcher.fetch([nv.endpoint for nv in asked])
    for nv in asked:
        nv.agent_asked = True
    for nv in nodes.values():
        if not nv.endpoint:
            nv.agent_error = "no endpoint registered"
            continue
        nv.agent_url = nv.endpoint.rstrip("/") + "/status"
        if not nv.agent_asked:
            nv.agent_error = ("not asked: staked below the listing floor" if not staked(nv)
                              else f"not asked: over the {MAX_STATUS_FETCHES} asked per refresh")
            continue
        doc, err = results.get(nv.endpoint, (None, "not fetched"))
        nv.agent_status, nv.agent_error = doc, err
        if doc is not None and nv.address.lower() in trainers:
            trainer_status = doc
        if doc is not None and trainer_status is None and (doc.get("role") == "trainer"):
            trainer_status = doc
    return trainer_status


def reward_curve(steps: dict[int, dict[str, Any]], submissions: list[SubmissionView],
                  checkpoints: list[CheckpointView]) -> list[RewardPoint]:
    """Per step: fills the checkpoint rows (submissions, rollouts used, mean reward); returns the curve."""
    per_step_subs: dict[int, list[SubmissionView]] = defaultdict(list)
    for s in submissions:
        per_step_subs[s.policy_step].append(s)
    for c in checkpoints:
        c.submissions = len(per_step_subs.get(c.step, []))
        rec = steps.get(c.step)
        if rec:
            c.rollouts_used = _rollouts_used(rec)
            c.mean_reward = _num(rec.get("mean_reward"))
            c.eval_pass_at_1 = _num(rec.get("eval_pass_at_1"))
            c.eval_mean_reward = _num(rec.get("eval_mean_reward"))
    curve = []
    for st in sorted(set(steps) | {c.step for c in checkpoints} | set(per_step_subs)):
        rec = steps.get(st, {})
        curve.append(RewardPoint(step=st, mean_reward=_num(rec.get("mean_reward")),
                                 eval_pass_at_1=_num(rec.get("eval_pass_at_1")), rollouts=_rollouts_used(rec),
                                 submissions=len(per_step_subs.get(st, [])),
                                 tokens=sum(s.reward for s in per_step_subs.get(st, []))))
    return curve


def _rollouts_used(rec: dict[str, Any]) -> int | None:
    used = rec.get("rollouts_used", rec.get("rollouts"))
    if not isinstance(used, int | float) or (isinstance(used, float) and not math.isfinite(used)):
        return None
    return int(used)
