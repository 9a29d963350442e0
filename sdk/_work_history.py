"""A worker's record in a pool at a past block, from event logs alone (no archive state).

    history = WorkHistory(protocol, pool_id, lease_duration=p.lease_duration, window_length=p.window_length)
    hw = history.declared(node, claim_block - 1)        # (gpu_model, vram_gib, gpu_count) or None
    outcomes = history.outcomes(node, claim_block - 1, limit=4)   # its last decided leases, claim order

What a lease became, as of the end of block B (time T = B's timestamp):

- claimed, no submission up to B, lease expiry < T: *expired* (a failure: 0 units over the whole lease;
  no later block can take its submission), unless the pool was finished (`PoolStateChanged`, issue 37) by the
  lease's expiry: the pool's end left it unfinished, not the worker, and it is left out;
- submitted, window end ≤ T, no challenge open and none upheld up to B, not voided by a wipe of the node up
  to B: *verified* (its work units over submit time − claim time);
- submitted and upheld, or voided (submitted before an upheld challenge of the node that came while its
  window was open): a failure (0 units over the whole lease);
- anything else (a live lease, a window still open, a challenge open) is not decided and left out.

Claim and submit times come from the events themselves (lease expiry − the pool's lease duration, window end
− the pool's window length; both fixed when the pool is made), so the only block read is B's timestamp (and
each wipe's, rare). The declared hardware is the node's latest `NodeRegistered`/`NodeUpdated` up to B, so a
record rewritten after a claim changes nothing for it.

A node whose owner rotated its key (`NodeKeyRotated`, issue 36) keeps its record: as of B, the new key's
leases include those of every key it was rotated from up to B (each judged against its own key's wipes), and
its declared hardware is the old key's until it updates it.

Cost: the events of the ledger and registry are scanned once, incrementally (one eth_getLogs per 10,000 new
blocks for the seven event types together), plus one eth_getBlock per block asked about (cached) and per
wipe. `outcomes` walks back from the node's latest claim and stops after `limit` decided leases.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["LeaseOutcome", "WorkHistory"]

_EVENTS = ["TaskClaimed", "WorkSubmitted", "ChallengeOpened", "ChallengeResolved", "WorkerWiped", "NodeRegistered",
           "NodeUpdated", "PoolStateChanged", "NodeKeyRotated"]
_FINISHED = 2  # ITaskLedger.PoolState.Finished

Pos = tuple[int, int]


@dataclass(frozen=True)
class LeaseOutcome:
    """One decided lease of a node: its verified units (0 for a failure) over its lease seconds."""

    task_id: int
    units: int
    seconds: int
    verified: bool


class WorkHistory:
    """Claims, submissions, challenges, wipes and declared hardware of one pool's nodes (see the module docstring)."""

    def __init__(self, protocol: Any, pool_id: int, *, lease_duration: int, window_length: int,
                 cache_blocks: int = 256) -> None:
        self.protocol = protocol
        self.pool_id = int(pool_id)
        self.lease_duration = int(lease_duration)
        self.window_length = int(window_length)
        self.cache_blocks = cache_blocks
        self._lock = threading.Lock()
        self._scanned = int(protocol.deployment.block) - 1
        self._head = self._scanned
        """the highest chain head seen: the scan never passes it (a block not yet mined has no events *yet*)"""
        self._claims: dict[str, list[tuple[Pos, int, int]]] = {}  # node -> [(pos, task id, lease expiry)]
        self._subs: dict[int, tuple[Pos, int, int]] = {}  # task id -> (pos, units, window end)
        self._challenges: dict[int, list[tuple[Pos, str]]] = {}  # task id -> [(pos, open|upheld|rejected)]
        self._wipes: dict[str, list[tuple[Pos, int]]] = {}  # node -> [(pos, block)]
        self._hardware: dict[str, list[tuple[Pos, tuple[str, int, int]]]] = {}
        self._rotated_from: dict[str, tuple[Pos, str]] = {}  # new key -> (pos, the key it was rotated from)
        self._times: OrderedDict[int, int] = OrderedDict()
        self._claim_blocks: dict[int, int] = {}  # task id -> its claim's block (filled by the scan)
        self._finished_block: int | None = None  # the block that finished the pool (PoolStateChanged), if any
        self.rpc_calls = 0

    # -- the scan ---------------------------------------------------------------------------------
    def _scan_to(self, block: int) -> None:
        if block <= self._scanned:
            return
        if block > self._head:
            # asked past the last head seen: scan only to the chain's head, else events mined later at blocks
            # up to `block` would never be read
            self._head = int(self.protocol.block_number())
            self.rpc_calls += 1
            block = min(block, self._head)
            if block <= self._scanned:
                return
        evs = self.protocol.get_events(_EVENTS, from_block=self._scanned + 1, to_block=block)
        self.rpc_calls += 1 + (block - self._scanned - 1) // 10_000
        for e in evs:
            a, pos = e.args, e.position
            if e.event == "TaskClaimed" and int(a["poolId"]) == self.pool_id:
                self._claims.setdefault(str(a["node"]).lower(), []).append((pos, int(a["taskId"]),
                                                                          int(a["leaseExpiry"])))
                self._claim_blocks[int(a["taskId"])] = pos[0]
            elif e.event == "WorkSubmitted" and int(a["poolId"]) == self.pool_id:
                self._subs[int(a["submissionId"])] = (pos, int(a["workUnits"]), int(a["windowEnd"]))
            elif e.event in ("ChallengeOpened", "ChallengeResolved") and int(a["challengeId"]) in self._subs:
                kind = "open" if e.event == "ChallengeOpened" else ("upheld" if a["upheld"] else "rejected")
                self._challenges.setdefault(int(a["challengeId"]), []).append((pos, kind))
            elif e.event == "WorkerWiped":
                self._wipes.setdefault(str(a["node"]).lower(), []).append((pos, e.block_number))
            elif e.event == "PoolStateChanged" and int(a["poolId"]) == self.pool_id and int(a["state"]) == _FINISHED:
                self._finished_block = e.block_number
            elif e.event in ("NodeRegistered", "NodeUpdated"):
                self._hardware.setdefault(str(a["node"]).lower(), []).append(
                    (pos, (str(a["gpuModel"]), int(a["vramGiB"]), int(a["gpuCount"]))))
            elif e.event == "NodeKeyRotated":
                old, new = str(a["oldNode"]).lower(), str(a["newNode"]).lower()
                self._rotated_from[new] = (pos, old)
                if self._hardware.get(old):  # the new key declares what the old one did, until it updates
                    self._hardware.setdefault(new, []).append((pos, self._hardware[old][-1][1]))
        self._scanned = block

    def time_of(self, block: int) -> int:
        """Timestamp of `block` (cached)."""
        block = int(block)
        with self._lock:
            if block in self._times:
                return self._times[block]
        t = int(self.protocol._ask(lambda: self.protocol.w3.eth.get_block(block)["timestamp"], "get_block"))
        with self._lock:
            self.rpc_calls += 1
            self._times[block] = t
            while len(self._times) > self.cache_blocks:
                self._times.popitem(last=False)
        return t

    # -- queries ----------------------------------------------------------------------------------
    def claim_block(self, task_id: int) -> int | None:
        """The block of task `task_id`'s claim in this pool (scanning to the chain head), None if none."""
        head = int(self.protocol.block_number())
        with self._lock:
            self._head = max(self._head, head)
            self._scan_to(head)
            return self._claim_blocks.get(int(task_id))

    def declared(self, node: str, block: int) -> tuple[str, int, int] | None:
        """(gpu_model, vram_gib, gpu_count) the node declared as of the end of `block` (None: not registered)."""
        with self._lock:
            self._scan_to(int(block))
            recs = [hw for pos, hw in self._hardware.get(node.lower(), []) if pos[0] <= block]
        return recs[-1] if recs else None

    def outcomes(self, node: str, block: int, *, limit: int | None = None) -> list[LeaseOutcome]:
        """The node's decided leases in the pool as of the end of `block`, in claim order; with `limit`, only
        the last `limit` of them (found walking back from the latest claim)."""
        block = int(block)
        now = self.time_of(block)
        with self._lock:
            self._scan_to(block)
            keys = self._keys_of(node.lower(), block)
            wipes = {k: [(pos, b) for pos, b in self._wipes.get(k, []) if pos[0] <= block] for k in keys}
        wipe_times = {k: [(pos, self.time_of(b)) for pos, b in w] for k, w in wipes.items()}
        with self._lock:
            fin = self._finished_block if self._finished_block is not None and self._finished_block <= block else None
        finished_at = self.time_of(fin) if fin is not None else None
        out: list[LeaseOutcome] = []
        with self._lock:
            for pos, task_id, expiry, k in self._newest_first(keys):
                if pos[0] > block:
                    continue
                o = self._outcome(task_id, expiry, block, now, wipe_times[k], finished_at)
                if o is not None:
                    out.append(o)
                    if limit is not None and len(out) >= limit:
                        break
        return out[::-1]

    def _newest_first(self, keys: list[str]) -> Iterator[tuple[Pos, int, int, str]]:
        """(pos, task id, lease expiry, key): the leases claimed under `keys` (newest key first, `_keys_of`), newest
        first, read lazily: a walk that stops after `limit` outcomes reads no more of them. Each key's list is in
        chain order, and a retired key claims nothing after its rotation (the stake manager makes it ineligible), so
        each older key's claims all precede the newer key's (call with the lock held)."""
        for k in keys:
            for pos, task_id, expiry in reversed(self._claims.get(k, [])):
                yield pos, task_id, expiry, k

    def _keys_of(self, key: str, block: int) -> list[str]:
        """`key` and the keys it was rotated from up to `block`, newest first (call with the lock held)."""
        keys = [key]
        while (prev := self._rotated_from.get(keys[-1])) is not None and prev[0][0] <= block and prev[1] not in keys:
            keys.append(prev[1])
        return keys

    def _outcome(self, task_id: int, expiry: int, block: int, now: int,
                 wipes: list[tuple[Pos, int]], finished_at: int | None = None) -> LeaseOutcome | None:
        failed = LeaseOutcome(task_id, 0, self.lease_duration, False)
        sub = self._subs.get(task_id)
        if sub is None or sub[0][0] > block:
            if finished_at is not None and finished_at <= expiry:
                return None  # the pool ended during the lease: no submission could be paid, not the worker's doing
            return failed if expiry < now else None
        pos, units, window_end = sub
        marks = [kind for p, kind in self._challenges.get(task_id, []) if p[0] <= block]
        if "upheld" in marks:
            return failed
        if any(wpos > pos and window_end > wtime for wpos, wtime in wipes):
            return failed  # voided: submitted before a wipe that came while its window was open
        if window_end > now or (marks and marks[-1] == "open"):
            return None
        seconds = (window_end - self.window_length) - (expiry - self.lease_duration)
        return LeaseOutcome(task_id, units, max(1, seconds), True)
