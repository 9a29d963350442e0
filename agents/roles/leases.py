"""A worker's claims on the chain, from the decision to claim to the reward: whether a claim now could be paid in
full (`claim_blocker`, issue 33), whether a submission fits the pool's cap, the claims a crash left open
(`unfinished_claims`), freeing the slots of leases that ran out (`free_expired_leases`) and the submissions whose
reward is claimable (`claimable_submissions`).

Plain functions over the chain client (`Protocol`) and the worker's state store: `claim` records (id = task id,
status `claimed` then `closed`; data: seed, block, pool, lease expiry) and `submission` records (`planned`, `sent`,
`expired`, ...), so that a pass costs the blocks since the last one and the open leases, not a scan of every claim
since the deployment.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from intellect.agents.roles._runtime import AgentError, bare_hex
from intellect.sdk import ContractRevert, IntellectError, TaskStatus

__all__ = ["VANISH_AFTER_S", "DefundWatch", "adopt_key", "check_units_fit", "claim_blocked", "claim_blocker",
           "claim_due", "claim_ready_rewards", "claimable_submissions", "forget_vanished", "free_expired_leases",
           "max_submission_units", "open_claims", "record_settled", "unfinished_claims"]

log = logging.getLogger(__name__)


def max_submission_units(budgets: list[int], group_size: int, problems_per_task: int) -> int:
    """The most paid units (completion tokens) an honest submission can hold: every completion of every
    problem at the largest thinking budget this worker may be assigned."""
    return max(budgets) * group_size * problems_per_task


def claim_blocker(*, budget: int, reserved: int, reward: int, max_reservation_bps: int, my_reserved: int,
                  my_stake: int, leverage: int, announced_defund: int = 0) -> str | None:
    """Why a claim now could not be paid in full (None: it could), issue 33: a lease whose submission reverts
    expires on the node's record and lowers its budget class. `reward` is a full-length submission's reward; the
    pool's unreserved `budget` less the owner's announced defund must hold it, and the node's reservations plus it
    must stay within `max_reservation_bps` of the escrow (`budget + reserved`) and `leverage` times its stake."""
    free = budget - announced_defund
    if free < reward:
        return f"the pool's free budget {free} (after an announced defund of {announced_defund}) is below {reward}"
    cap = (budget + reserved) * max_reservation_bps // 10_000
    if leverage:
        cap = min(cap, my_stake * leverage)
    if my_reserved + reward > cap:
        return f"reservations {my_reserved} + {reward} would exceed this node's cap {cap}"
    return None


def check_units_fit(units: int, pool_max: int, pool_id: int, what: str) -> None:
    """`AgentError` when `units` exceed the pool's `maxUnitsPerSubmission`: `submitWork` would revert
    (TaskLedgerInvalidWorkUnits) and the generated work would be lost, so the worker says so first."""
    if units > pool_max:
        raise AgentError(f"{what} holds {units} units but pool {pool_id} admits at most {pool_max} per submission "
                         f"(maxUnitsPerSubmission): it would revert on-chain. Use shorter budgets (tasks.budgets for "
                         f"this hardware class), a smaller worker.group_size/problems_per_task, or a pool whose "
                         f"maxUnitsPerSubmission admits its largest budget (intellect pool create checks it)")


class DefundWatch:
    """The amount of the pool owner's latest defund announcement (PoolDefundAnnounced), read incrementally: each
    call reads only the blocks since the previous one."""

    def __init__(self) -> None:
        self.from_block: int | None = None
        self.amount = 0

    def latest(self, protocol: Any, pool_id: int, head: int) -> int:
        announced = protocol.get_events(["PoolDefundAnnounced"], from_block=self.from_block, to_block=head,
                                        filters={"poolId": pool_id})
        if announced:
            self.amount = int(announced[-1].args["amount"])
        self.from_block = head + 1
        return self.amount


def claim_blocked(protocol: Any, pool_id: int, units: int, defunds: DefundWatch) -> str | None:
    """`claim_blocker` for a full-length submission of `units` units of this node in pool `pool_id`, from the chain
    now (the pool, this node's book and stake, the ledger's leverage, the owner's latest defund announcement)."""
    pool = protocol.pool(pool_id)
    announced = defunds.latest(protocol, pool_id, protocol.block_number())
    return claim_blocker(budget=pool.budget, reserved=pool.reserved, reward=units * pool.params.reward_per_unit,
                         max_reservation_bps=pool.params.max_reservation_bps,
                         my_reserved=protocol.node_book(protocol.address, pool_id).reserved,
                         my_stake=protocol.active_stake(protocol.address),
                         leverage=protocol.reservation_leverage(), announced_defund=announced)


VANISH_AFTER_S = 300.0
"""How long the ledger must keep answering "no such task" for one of this node's records before the record is
dropped (`forget_vanished`): an RPC provider behind a load balancer may answer from a backend that lags the chain
for a while, and a sent submission's record is the node's only claim to its reward."""


def forget_vanished(state: Any, task_id: int) -> str:
    """This node's records of task `task_id`, which the ledger does not hold (`Protocol.known_task` None): the chain
    lost the block of its claim (an RPC node restarted from an older state dump, a reorg), or this node's RPC
    answers from a backend that lags. The first such answer only marks the records (`unknown_since`) and returns
    `unknown` (the caller goes on with other work); once the ledger has not known it for VANISH_AFTER_S, the
    records are logged and deleted, so no restart or reward pass asks about them again, a lost submission does not
    count towards `worker.max_tasks`, and the shorter chain may give the id to a new claim; returns `vanished`.
    Before, a worker whose chain lost a block retried the lost task on every pass and never claimed again."""
    recs = [(kind, r) for kind in ("claim", "submission") if (r := state.record(kind, task_id)) is not None]
    now = time.time()
    since = min((float(r["data"]["unknown_since"]) for _, r in recs if "unknown_since" in r["data"]), default=None)
    if since is None:
        for kind, r in recs:
            state.put(kind, task_id, r["status"], {"unknown_since": now})
        log.warning("task %d is not on the ledger (the chain lost its block, or this node's RPC lags): its records "
                    "are dropped if it is still unknown in %.0f s", task_id, VANISH_AFTER_S)
        return "unknown"
    if now - since < VANISH_AFTER_S:
        return "unknown"
    sub = dict(recs).get("submission")
    log.warning("task %d has not been on the ledger for %.0f s (the chain lost the block that held it): forgetting "
                "its claim%s", task_id, now - since,
                f" and its {sub['status']} submission {sub['data'].get('rollouts_cid') or ''}".rstrip()
                if sub is not None else "")
    state.delete("claim", task_id)
    state.delete("submission", task_id)
    return "vanished"


def open_claims(protocol: Any, state: Any, pool_id: int) -> list[dict[str, Any]]:
    """This node's claims in the pool that may still hold a lease: the state store's `claim` records in status
    `claimed` (the loop writes one after each claimTask), after adding any TaskClaimed of this node from the
    blocks past the persisted cursor `claims_scanned_to:<pool>` (a claim whose record a crash lost between
    its transaction and the write; a state file from before the cursor is scanned from the deployment once).
    A record whose submission was sent is closed here without asking the chain; the others close once the
    chain says the task left Claimed. So a pass costs the blocks since the last pass and the open leases
    (at most the pool's `max_open_leases`), not every claim since the deployment."""
    key = f"claims_scanned_to:{pool_id}"
    head = protocol.block_number()
    first = int(protocol.deployment.block)
    start = int(state.get(key, first - 1)) + 1
    if start > head + 1:  # the chain is shorter than what was scanned (it lost blocks): scan it again, once
        log.warning("claim cursor of pool %d at block %d is past the chain's head %d: rescanning", pool_id, start - 1,
                    head)
        start = first
    if start <= head:
        for e in protocol.get_events(["TaskClaimed"], from_block=start, to_block=head,
                                     filters={"node": protocol.address, "poolId": pool_id}):
            tid = int(e.args["taskId"])
            if state.record("claim", tid) is None:
                state.put("claim", tid, "claimed", {
                    "seed": bare_hex(e.args["seed"]),
                    "lease_expiry": int(e.args["leaseExpiry"]), "pool": pool_id, "block": e.block_number})
        state.set(key, head)
    out = []
    for r in state.records("claim", "claimed"):
        if int(r["data"].get("pool", pool_id)) != pool_id:
            continue
        sub = state.record("submission", r["id"])
        if sub is not None and sub["status"] == "sent":
            state.put("claim", r["id"], "closed", {"submission": "sent"})
            continue
        out.append(r)
    return out


def record_settled(state: Any, task_id: int, task: Any | None) -> str:
    """Record what the chain's `task` says of a claim this node can no longer submit for; returns the local status:
    `sent` when the task was submitted (by this node before a crash), `unknown` or `vanished` when the ledger does
    not hold it (None: `forget_vanished`), else `expired`."""
    if task is None:
        return forget_vanished(state, task_id)
    if task.status == TaskStatus.CLAIMED:  # lease expired before we could submit
        state.put("submission", task_id, "expired")
        return "expired"
    if task.status >= TaskStatus.SUBMITTED:
        log.info("task %d is already %s on-chain: not submitting again", task_id, task.status.name.lower())
        state.put("submission", task_id, "sent", {"found_on_chain": True})
        return "sent"
    state.put("submission", task_id, "expired")
    return "expired"


def unfinished_claims(protocol: Any, state: Any, pool_id: int) -> list[tuple[int, bytes]]:
    """Claims of this node with a live lease and no sent submission (seeds from TaskClaimed)."""
    now = protocol.chain_time()
    out = []
    for r in open_claims(protocol, state, pool_id):
        tid = int(r["id"])
        rec = state.record("submission", tid)
        if rec is not None and rec["status"] == "expired":
            continue  # its slot is freed by free_expired_leases
        t = protocol.known_task(tid)
        if t is None:
            forget_vanished(state, tid)
            continue
        if t.status != TaskStatus.CLAIMED:
            state.put("claim", tid, "closed", {"task_status": t.status.name.lower()})
            if rec is not None:
                record_settled(state, tid, t)
            continue
        if t.lease_expiry <= now + 5:
            state.put("submission", tid, "expired")
            continue
        out.append((tid, bytes.fromhex(r["data"]["seed"])))
    return out


def free_expired_leases(protocol: Any, state: Any, pool_id: int) -> int:
    """Frees the slots of this node's leases that ran out unsubmitted (TaskLedger.expireLease; the pool
    caps open leases per node and an expired one holds its slot until freed); returns how many. Asks the chain
    only about open claims whose lease ran out (`open_claims`)."""
    now, freed = protocol.chain_time(), 0
    for r in open_claims(protocol, state, pool_id):
        tid = int(r["id"])
        expiry = r["data"].get("lease_expiry")
        if expiry is not None and int(expiry) >= now:
            continue  # still leased: nothing to free, no call
        t = protocol.known_task(tid)
        if t is None:
            forget_vanished(state, tid)
            continue
        if t.status != TaskStatus.CLAIMED:
            state.put("claim", tid, "closed", {"task_status": t.status.name.lower()})
            continue
        if t.lease_expiry < now:
            try:
                protocol.expire_lease(tid)
                state.put("submission", tid, "expired")
                state.put("claim", tid, "closed", {"task_status": "expired"})
                freed += 1
            except ContractRevert as exc:
                log.warning("expiring lease %d refused: %s", tid, exc)
    return freed


def adopt_key(state: Any, address: str, where: Any = "") -> str | None:
    """Make `address` the key of this data dir's records; returns the key they were made by when that was another.

    A submission's reward can be claimed only by the key that made it or its owner, and a lease finished only by
    its key, so when an agent starts with another key over the same `data_dir` (its owner rotated the node:
    `NodeKeyRotated`, or another keystore was pointed at it) the old key's unsettled submissions are marked
    settled (`other_key`, never asked again: the owner claims them, `intellect rewards claim --node OLD`) and its
    open claims closed (a retired key's leases expire), with one warning naming `where` (the data_dir). Without
    this the new key's claim of the old ids reverted `TaskLedgerNotNodeOrOwner`, and every later claim with them
    (one transaction for all of them)."""
    prev = state.get("node_key")
    state.set("node_key", address)
    if prev is None or str(prev).lower() == address.lower():
        return None
    for r in state.records("submission", "sent"):
        if not r["data"].get("paid") and not r["data"].get("settled"):
            state.put("submission", r["id"], "sent", {"settled": "other_key", "node": prev})
    for r in state.records("claim", "claimed"):
        state.put("claim", r["id"], "closed", {"task_status": "other_key", "node": prev})
    log.warning("data_dir %s holds the records of key %s; this agent runs as %s: %s's unsettled submissions are "
                "left to its owner (`intellect rewards claim --node %s`), its open leases expire", where, prev, address,
                prev, prev)
    return str(prev)


def claimable_submissions(protocol: Any, state: Any) -> list[int]:
    """This node's sent submissions (state store) whose reward is claimable now. Only those not yet
    settled are asked, and only once their window closed; one found paid by someone else, upheld or
    voided is marked settled and never asked again (so a pass costs the unsettled ones, not a scan of
    every WorkSubmitted event since the deployment)."""
    now, ready = None, []
    for r in state.records("submission", "sent"):
        d, sid = r["data"], int(r["id"])
        if d.get("paid") or d.get("settled"):
            continue
        if d.get("window_end") is not None:
            now = protocol.chain_time() if now is None else now
            if d["window_end"] > now:
                continue
        if protocol.claimable(sid):
            ready.append(sid)
            continue
        t = protocol.known_task(sid)
        if t is None:  # a lost submission is not asked again (it read as an error on every pass before)
            forget_vanished(state, sid)
            continue
        status = t.status
        if status in (TaskStatus.UPHELD, TaskStatus.PAID, TaskStatus.VOIDED):
            state.put("submission", sid, "sent", {"settled": status.name.lower()})
    return ready


def claim_due(protocol: Any, state: Any, *, batch: int, wait_s: int) -> bool:
    """Whether a claim of this node's rewards is due (issue 38: one transaction for several): at least `batch` sent
    submissions, not settled, have had their windows closed, or the oldest of them closed `wait_s` chain seconds
    ago or more. Reads the chain's time only (no per-submission call), from the windows' ends the state keeps; one
    with no end recorded counts as long closed."""
    if batch <= 1:
        return True
    ends = [r["data"].get("window_end") for r in state.records("submission", "sent")
            if not (r["data"].get("paid") or r["data"].get("settled"))]
    if not ends:
        return False
    now = protocol.chain_time()
    closed = [e or 0 for e in ends if (e or 0) <= now]
    return len(closed) >= batch or (bool(closed) and now - min(closed) >= wait_s)


def claim_ready_rewards(protocol: Any, state: Any, metrics: Any, *, batch: int = 1, wait_s: int = 0) -> int:
    """Claim this node's claimable rewards (`claimable_submissions`) in one transaction and mark them paid, once a
    claim is due (`claim_due`: `batch` of them, or the oldest `wait_s` old; the default claims any at once);
    returns the wei paid. A claim that fails (the RPC node, a revert) is logged and left for the next pass: the
    caller's work goes on (a worker stuck on its rewards would never see its pool finish)."""
    try:
        if not claim_due(protocol, state, batch=batch, wait_s=wait_s):
            return 0
        ready = claimable_submissions(protocol, state)
        if not ready:
            return 0
        paid = int(protocol.claim_rewards(ready))
    except IntellectError as exc:
        metrics.inc("errors_total", kind=type(exc).__name__)
        log.warning("claiming rewards failed: %s; retrying on the next pass", exc)
        return 0
    for sid in ready:
        state.put("submission", sid, "sent", {"paid": True})
    log.info("claimed %g tokens for %d submissions", paid / 1e18, len(ready))
    return paid
