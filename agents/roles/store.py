"""Work that outlives the worker (issue 19): a worker pushes each rollout file to a store the pool
names before `submitWork`, so it needs no inbound connection and may go offline afterwards.

    trainer            POST <trainer endpoint>/store  {"schema": "intellect.store/v2", "cid", "task_id",
                       "node", "data" (base64), "signature"}; the signature (EIP-191, the node key) covers
                       schema, chain id, ledger address, task id and CID
    kubo:<RPC URL>     `ipfs add --cid-version 1 --raw-leaves` on any Kubo node (pinned); the CID it
                       answers must be the worker's

`/store` keeps only the work it exists for (issue 32). The trainer's checks, cheapest first, each refusal a
4xx whose one-line reason starts with the rule's name:

    store.schema    the body is an `intellect.store/v2` object (v1, without a task id, is refused by name)
    store.size      the file is at most MAX_STORE_BYTES (before anything is decoded)
    store.signature the signature recovers to `node`
    store.rate      at most `trainer.store.pushes_per_minute` pushes per signer in the last 60 s
    store.eligible  `node` is an active worker with at least the worker minimum stake (what `claimTask`
                    asks of it: NodeRegistry.isActive + StakeManager.hasMinStake)
    store.lease     `task_id` is a task of this trainer's pool leased to `node`, and its lease is open
                    (Claimed, not past its expiry), or it was submitted with exactly this CID and is still
                    in its window (Submitted or Challenged)
    store.cid       the bytes' CID is `cid`
    store.claim     the file is within the claim's size bound (`claim_size_bound`: rows = problems per task ×
                    group size of the pool's rules, each with the longest prompt and the largest budget)
    store.quota     the worker keeps at most `trainer.store.max_files` files and `max_bytes` bytes pinned
                    at once (one file per lease: a new file for the same lease replaces the old one)
    store.rollout   the bytes parse as a v2 rollout file (Parquet v1 is refused unread: it is read only in a
                    child process, too dear per push) (`RolloutFile.from_bytes`, with the claim's row and
                    token caps) whose meta names this worker and this task, no completion over the largest
                    budget

Each stored file is recorded in the trainer's state store (kind `stored`, id the CID: `pinned`, then
`unpinned` with the reason), and `sweep_stored` (the trainer's loop, every SWEEP_EVERY_S) unpins what will
never be needed: a file whose lease ended without a submission of that CID, and one whose submission's
window ended and that was settled (unchallenged, paid, upheld or voided; a challenged one waits for its
resolution, one in the trainer's current batch for the step). Its blocks are then dropped from the
embedded store, so the gateway no longer serves them.

A validator only challenges a file as `unavailable` once no peer serves it for the whole retry period
(agents/roles/validator.py): a file pinned at the trainer is always served while it is in its window, so
a worker that went offline is not slashed for it. No contract change: availability stays an off-chain
judgement.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct

from intellect.agents.roles._server import HttpError
from intellect.sdk import ContractRevert, IntellectError, NodeStatus, Role, TaskStatus
from intellect.sdk.http import fetch
from intellect.sdk.ipfs import KuboIpfs, compute_cid
from intellect.verifier.rollouts import RolloutFile, RolloutFileError, RolloutLimits

__all__ = ["MAX_STORE_BYTES", "STORE_SCHEMA", "SWEEP_EVERY_S", "accept_pushed_file", "claim_size_bound", "push_file",
           "push_to", "read_signed_push", "store_message", "store_request", "sweep_stored"]

log = logging.getLogger(__name__)

STORE_SCHEMA = "intellect.store/v2"
OLD_STORE_SCHEMAS = ("intellect.store/v1",)
#: largest file the trainer's /store accepts: base64 of it must fit the agent server's 4 MiB body cap
MAX_STORE_BYTES = 3 * 1024 * 1024 - 4096

# The claim's size bound (`claim_size_bound`). Measured on zstd Parquet rollout files of random token ids
# and random 258-byte proofs (incompressible, the worst case): 6.4 KB for a file of 2 rows of 1 token,
# 14.3-14.4 bytes per completion token at 512-2048 tokens per row (4 bytes of id, 8.1 of proof per token,
# levels and page headers), under 5 bytes per prompt token when every row has its own prompt.
FILE_BYTES = 16 * 1024
"""Parquet footer, schema and the file's meta"""
ROW_BYTES = 1024
"""per row: problem id, the scalar columns, list and page overhead"""
PROMPT_TOKEN_BYTES = 5
COMPLETION_TOKEN_BYTES = 16
PROMPT_TOKENS_ALLOWANCE = 8192
"""prompt tokens a row may hold when the trainer has no task set to measure its prompts by"""
TEMPLATE_TOKENS = 512
"""tokens a chat template and the thinking-budget suffix add to a task's prompt"""
SWEEP_EVERY_S = 30.0
"""how often the trainer's loop looks for stored files to unpin"""
ELIGIBILITY_TTL_S = 15.0
"""how long the trainer believes a node's eligibility (a stake read) before asking the chain again"""


def store_message(chain_id: int, ledger: str, task_id: int, cid: str) -> str:
    """What a worker signs (EIP-191) to push `cid` for ledger task `task_id`: bound to the chain and the
    ledger, so a push is no use on another deployment or for another task."""
    return f"{STORE_SCHEMA}:{chain_id}:{ledger.lower()}:{int(task_id)}:{cid}"


def store_request(private_key: Any, chain_id: int, ledger: str, task_id: int, cid: str,
                  data: bytes) -> dict[str, Any]:
    """The body of `POST /store` for `data` (whose CID is `cid`, the rollout file of ledger task `task_id`),
    signed with the worker's node key."""
    account = Account.from_key(private_key)
    signed = account.sign_message(encode_defunct(text=store_message(chain_id, ledger, task_id, cid)))
    return {"schema": STORE_SCHEMA, "cid": cid, "task_id": int(task_id), "node": account.address,
            "data": base64.b64encode(data).decode(), "signature": "0x" + bytes(signed.signature).hex()}


class StoreRefused(IntellectError, RuntimeError):
    """The trainer's store answered a push with HTTP `status` (not 200): 429 is its rate (try later), another 4xx
    refuses this file for good (not eligible, no such lease, too large, not a rollout file of the claim)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def final(self) -> bool:
        return 400 <= self.status < 500 and self.status not in (408, 429)


def push_to(agent: Any, target: str, setting: str, what: str, data: bytes, cid: str, route: str,
            body: Callable[[], dict[str, Any]]) -> str | None:
    """Store `data` (the `what` whose CID is `cid`) where `target`, the value of config key `setting`, says:
    `none` (returns None), `kubo:<RPC API URL>` (that Kubo node adds and pins it; returns the URL) or `trainer`
    (the signed request `body()` POSTed to the pool trainer's registered endpoint + `route`; returns the
    endpoint). Raises on failure: the caller decides what a failed push means (its own gateway may still serve
    the bytes)."""
    target = target.strip()
    if target == "none":
        return None
    if target.startswith("kubo:"):
        url = target[len("kubo:"):]
        got = KuboIpfs(url, timeout=60.0).add(data, pin=True)
        if got != cid:
            raise RuntimeError(f"Kubo node {url} stored the {what} as {got}, not {cid}")
        return url
    if target != "trainer":
        raise RuntimeError(f"{setting} {target!r}: not 'trainer', 'kubo:<RPC API URL>' or 'none'")
    endpoint = agent.protocol.node(agent.pool.params.trainer).endpoint
    if not endpoint:
        raise RuntimeError(f"pool {agent.pool_id}'s trainer registered no endpoint to push the {what} to")
    reply = fetch("POST", endpoint.rstrip("/") + route, json_body=body(), deadline=60.0, max_bytes=64 * 1024)
    if reply.status != 200:
        raise StoreRefused(reply.status, f"trainer store {endpoint}: HTTP {reply.status} {reply.body[:200]!r}")
    return endpoint


def push_file(agent: Any, path: Path, cid: str, task_id: int | None = None) -> str | None:
    """Store `path` (whose CID is `cid`, the file of ledger task `task_id`) where `worker.push_to` says;
    returns where, or None for `none` (`push_to`).

    Raises on failure: the caller decides whether to submit anyway (its own gateway still serves it)."""
    data = Path(path).read_bytes()

    def body() -> dict[str, Any]:
        if task_id is None:
            raise RuntimeError("pushing to the trainer's store names the ledger task the file answers: no task id "
                               "given")
        if len(data) > MAX_STORE_BYTES:
            raise RuntimeError(f"rollout file {path} is {len(data)} bytes, over the trainer store's "
                               f"{MAX_STORE_BYTES}")
        p = agent.protocol
        return store_request(p.account.key, p.chain_id, p.contracts["TaskLedger"].address, task_id, cid, data)

    return push_to(agent, agent.cfg.worker.push_to, "worker.push_to", "file", data, cid, "/store", body)


# -- the trainer's side -----------------------------------------------------------------------------


def claim_size_bound(problems: int, group_size: int, max_tokens: int, prompt_tokens: int) -> int:
    """The most bytes an honest rollout file of one claim can take: `problems × group_size` rows, each with a
    prompt of `prompt_tokens` and a completion of `max_tokens` (the largest budget), at the measured worst
    case per token (random ids and proofs do not compress), or MAX_STORE_BYTES, whichever is smaller."""
    rows = problems * group_size
    need = FILE_BYTES + rows * (ROW_BYTES + prompt_tokens * PROMPT_TOKEN_BYTES + max_tokens * COMPLETION_TOKEN_BYTES)
    return min(MAX_STORE_BYTES, need)


class _Keeper:
    """Per-trainer state of `/store`: a lock around quota check, pin and record; the pushes of the last
    minute per signer; cached eligibility answers; the claim's bound (computed once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pushes: dict[str, deque[float]] = {}
        self.eligible: dict[str, tuple[float, str | None]] = {}
        self.shape: tuple[int, int, int, int] | None = None
        self.last_sweep = 0.0
        self.last_evidence_sweep = 0.0


_KEEPERS_LOCK = threading.Lock()


def _keeper(agent: Any) -> _Keeper:
    with _KEEPERS_LOCK:
        k = agent.__dict__.get("_store_keeper")
        if k is None:
            k = agent.__dict__["_store_keeper"] = _Keeper()
        return k


def _settings(agent: Any) -> Any:
    return agent.cfg.trainer.store


def _claim_shape(agent: Any, k: _Keeper) -> tuple[int, int, int, int]:
    """(problems per task, group size, largest budget, prompt tokens) of the pool's rules (the trainer's
    configuration carries them once `apply_pool_rules` ran; a pool without rules: the configuration)."""
    if k.shape is None:
        rules = getattr(agent, "rules", None)
        if rules is not None:
            problems, group, max_tokens = rules.problems_per_task, rules.group_size, rules.max_budget
        else:
            w = agent.cfg.worker
            problems, group = w.problems_per_task, w.group_size
            max_tokens = max(max(v) for v in agent.cfg.tasks.budgets.values())
        task_set = getattr(agent, "task_set", None)
        if task_set is not None and len(task_set):
            # a token covers at least one byte of text (byte-level BPE, SentencePiece with byte fallback)
            prompt = max(len(t.prompt.encode()) for t in task_set) + TEMPLATE_TOKENS
        else:
            prompt = PROMPT_TOKENS_ALLOWANCE
        k.shape = (int(problems), int(group), int(max_tokens), int(prompt))
    return k.shape


def _check_rate(agent: Any, k: _Keeper, node: str) -> None:
    limit = _settings(agent).pushes_per_minute
    now = time.monotonic()
    with k.lock:
        if len(k.pushes) > 4096:  # signers of long ago: forget them (each new key costs a signature only)
            for a in [a for a, q in k.pushes.items() if not q or now - q[-1] > 60]:
                del k.pushes[a]
        q = k.pushes.setdefault(node.lower(), deque())
        while q and now - q[0] > 60:
            q.popleft()
        if len(q) >= limit:
            raise HttpError(429, f"store.rate: {node} pushed {len(q)} files in the last 60 s; at most {limit} "
                                 f"a minute (trainer.store.pushes_per_minute)")
        q.append(now)


def _check_eligible(agent: Any, k: _Keeper, node: str) -> None:
    """What `claimTask` asks of a worker (StakeManager.isEligible): an active worker node, staked at least
    the worker minimum. Cached for ELIGIBILITY_TTL_S, a refusal as well as an acceptance."""
    now = time.monotonic()
    cached = k.eligible.get(node.lower())
    if cached is None or now - cached[0] > ELIGIBILITY_TTL_S:
        p = agent.protocol
        _, role, status = p.node_core(node)
        why: str | None = None
        if role != Role.WORKER or status != NodeStatus.ACTIVE:
            why = f"{node} is not an active worker (registered as {role.name.lower()}, {status.name.lower()})"
        else:
            have, need = p.active_stake(node), p.min_stake(Role.WORKER)
            if have < need:
                why = f"{node} has {have} wei staked, under the worker minimum {need}"
        if len(k.eligible) > 4096:
            k.eligible.clear()
        k.eligible[node.lower()] = cached = (now, why)
    if cached[1] is not None:
        raise HttpError(403, f"store.eligible: {cached[1]}")


def _submitted_cid(agent: Any, task_id: int) -> str | None:
    """The rollouts CID task `task_id` was submitted with: the trainer's record of its WorkSubmitted event,
    else the event itself."""
    rec = agent.state.record("submission", task_id)
    if rec is not None and rec["data"].get("rollouts_cid"):
        return str(rec["data"]["rollouts_cid"])
    evs = agent.protocol.get_events(["WorkSubmitted"], filters={"submissionId": int(task_id)})
    return str(evs[-1].args["rolloutsCid"]) if evs else None


def _check_lease(agent: Any, node: str, task_id: int, cid: str) -> Any:
    """The ledger task `task_id` if `node` may store `cid` for it now (HttpError store.lease otherwise)."""
    p = agent.protocol
    try:
        t = p.task(task_id)
    except ContractRevert as exc:
        if exc.name != "TaskLedgerUnknownTask":
            raise
        raise HttpError(404, f"store.lease: task {task_id} does not exist") from None
    if t.status == TaskStatus.NONE:
        raise HttpError(404, f"store.lease: task {task_id} does not exist")
    if int(t.pool_id) != int(agent.pool_id):
        raise HttpError(403, f"store.lease: task {task_id} is pool {t.pool_id}'s; this trainer keeps pool "
                             f"{agent.pool_id}'s work")
    if t.node.lower() != node.lower():
        raise HttpError(403, f"store.lease: task {task_id} is leased to {t.node}, not {node}")
    now = p.chain_time()
    if t.status == TaskStatus.CLAIMED:
        if now > t.lease_expiry:
            raise HttpError(409, f"store.lease: task {task_id}'s lease expired at {t.lease_expiry} unsubmitted")
        return t
    if t.status in (TaskStatus.SUBMITTED, TaskStatus.CHALLENGED):
        got = _submitted_cid(agent, task_id)
        if got != cid:
            raise HttpError(409, f"store.lease: task {task_id} was submitted with {got}, not {cid}")
        if t.status == TaskStatus.SUBMITTED and now >= t.window_end:
            raise HttpError(409, f"store.lease: task {task_id}'s window ended at {t.window_end}")
        return t
    raise HttpError(409, f"store.lease: task {task_id} is {t.status.name.lower()}: its lease is closed")


def _pinned_by(agent: Any, node: str) -> list[dict[str, Any]]:
    return [r for r in agent.state.records("stored", "pinned") if str(r["data"].get("node", "")).lower() == node.lower()]


def _check_quota(agent: Any, node: str, task_id: int, cid: str, size: int) -> list[str]:
    """The CIDs this push replaces (the worker's other unsubmitted file for the same lease); HttpError
    store.quota when the worker's pinned files would exceed its quota."""
    s = _settings(agent)
    mine = [r for r in _pinned_by(agent, node) if r["id"] != cid]
    replaced = [r["id"] for r in mine if int(r["data"].get("task_id", -1)) == task_id and "window_end" not in r["data"]]
    kept = [r for r in mine if r["id"] not in replaced]
    files, used = len(kept) + 1, sum(int(r["data"].get("bytes", 0)) for r in kept) + size
    if files > s.max_files:
        raise HttpError(429, f"store.quota: {node} keeps {len(kept)} files pinned here; at most {s.max_files} "
                             f"at once (trainer.store.max_files)")
    if used > s.max_bytes:
        raise HttpError(429, f"store.quota: {node} would keep {used} bytes pinned here; at most {s.max_bytes} "
                             f"at once (trainer.store.max_bytes)")
    return replaced


def _check_rollout(agent: Any, data: bytes, cid: str, node: str, task_id: int,
                   shape: tuple[int, int, int, int]) -> None:
    if data[:4] == b"PAR1":  # v1 is read only in a child process (seconds each): not for a push endpoint
        raise HttpError(422, "store.rollout: Parquet (intellect.rollouts/v1) files are not kept here; "
                             "send intellect.rollouts/v2 (`RolloutFile.to_bytes()`)")
    problems, group, max_tokens, prompt = shape
    rows = problems * group
    limits = RolloutLimits(max_rows=rows, max_tokens_per_row=prompt + max_tokens,
                           max_total_tokens=rows * (prompt + max_tokens))
    try:
        rf = RolloutFile.from_bytes(data, name=cid, limits=limits)
    except RolloutFileError as exc:
        raise HttpError(422, f"store.rollout: not a rollout file of this pool's claims: {exc}"[:300]) from None
    if rf.meta.worker.lower() != node.lower():
        raise HttpError(422, f"store.rollout: the file names worker {rf.meta.worker}, not {node}")
    if rf.meta.task_id != str(task_id):
        raise HttpError(422, f"store.rollout: the file answers task {rf.meta.task_id[:80]!r}, not {task_id}")
    longest = max(len(r.completion_ids) for r in rf.rows)
    if longest > max_tokens:
        raise HttpError(422, f"store.rollout: a completion of {longest} tokens, over the pool's largest budget "
                             f"{max_tokens}")


def read_signed_push(agent: Any, body: Any, *, schema: str, rule: str, id_field: str, what: str, max_bytes: int,
                     message: Any) -> tuple[str, str, int, bytes]:
    """(cid, signer, id, bytes) of a signed push to one of the trainer's stores: a `schema` object with `cid`,
    `node`, `data` (base64, at most `max_bytes` decoded), `signature` (EIP-191 over `message(chain id, ledger,
    id, cid)`) and the ledger id under `id_field`; each refusal an HttpError whose reason starts with `rule`
    (`<rule>.schema`, `.size` before anything is decoded, `.signature`)."""
    if not isinstance(body, dict) or body.get("schema") != schema:
        raise HttpError(400, f"{rule}.schema: body must be a {schema} object")
    cid, node, sig, b64, ident = (body.get(k) for k in ("cid", "node", "signature", "data", id_field))
    if not all(isinstance(v, str) for v in (cid, node, sig, b64)):
        raise HttpError(400, f"{rule}.schema: cid, node, signature and data must be strings")
    if isinstance(ident, bool) or not isinstance(ident, int) or not 0 <= ident < 2**256:
        raise HttpError(400, f"{rule}.schema: {id_field} must be the ledger {id_field.split('_')[0]} id (an integer)")
    if len(b64) > (max_bytes * 4) // 3 + 4:
        raise HttpError(413, f"{rule}.size: {what} over {max_bytes} bytes")
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise HttpError(400, f"{rule}.schema: data is not base64") from None
    if len(data) > max_bytes:
        raise HttpError(413, f"{rule}.size: {what} of {len(data)} bytes, over {max_bytes}")
    p = agent.protocol
    try:
        signer = Account.recover_message(
            encode_defunct(text=message(p.chain_id, p.contracts["TaskLedger"].address, ident, cid)), signature=sig)
    except Exception as exc:  # eth_keys raises several types for a malformed signature
        raise HttpError(400, f"{rule}.signature: bad signature: {type(exc).__name__}") from None
    if signer.lower() != node.lower():
        raise HttpError(403, f"{rule}.signature: signed by {signer}, not {node}")
    return cid, signer, ident, data


def accept_pushed_file(agent: Any, body: Any) -> dict[str, Any]:
    """The trainer's `POST /store`: check and pin a worker's rollout file (HttpError 4xx naming the rule
    that refused it; the module docstring lists them in order)."""
    if isinstance(body, dict) and body.get("schema") in OLD_STORE_SCHEMAS:
        raise HttpError(400, f"store.schema: {body['schema']} is no longer accepted (it names no lease): "
                             f"send {STORE_SCHEMA} with the ledger task id the file answers")
    cid, signer, task_id, data = read_signed_push(agent, body, schema=STORE_SCHEMA, rule="store", id_field="task_id",
                                                  what="file", max_bytes=MAX_STORE_BYTES, message=store_message)
    k = _keeper(agent)
    _check_rate(agent, k, signer)
    _check_eligible(agent, k, signer)
    task = _check_lease(agent, signer, task_id, cid)
    got = compute_cid(data)
    if got != cid:
        raise HttpError(400, f"store.cid: the bytes' CID is {got}, not {cid}")
    shape = _claim_shape(agent, k)
    bound = claim_size_bound(*shape)
    if len(data) > bound:
        raise HttpError(413, f"store.claim: file of {len(data)} bytes, over the claim's bound {bound} (problems "
                             f"{shape[0]} × group {shape[1]} rows of ≤ {shape[3]} prompt + {shape[2]} tokens)")
    rec = agent.state.record("stored", cid)
    if rec is not None and rec["status"] == "pinned" and str(rec["data"].get("node", "")).lower() == signer.lower():
        return {"cid": cid, "pinned": True}  # pushed before (a retry): nothing more to keep
    _check_quota(agent, signer, task_id, cid, len(data))  # before the parse: cheap refusals first
    _check_rollout(agent, data, cid, signer, task_id, shape)
    with k.lock:  # quota, pin and record as one: two pushes at once cannot both take the last slot
        replaced = _check_quota(agent, signer, task_id, cid, len(data))
        stored = agent.ipfs.add(data, pin=True)
        if stored != cid:  # a store with other import settings (a misconfigured Kubo): say so, keep nothing
            _drop(agent, stored)
            raise HttpError(500, f"this store imports the file as {stored}, not {cid}")
        agent.state.put("stored", cid, "pinned", {
            "node": signer, "task_id": task_id, "bytes": len(data), "stored_at": time.time(),
            "lease_expiry": int(task.lease_expiry)})
        for old in replaced:
            _unpin(agent, old, f"replaced by {cid} for the same lease")
    agent.count("files_stored")
    log.info("stored %s (%d bytes) for worker %s, task %d", cid, len(data), signer, task_id)
    return {"cid": cid, "pinned": True}


def _drop(agent: Any, cid: str) -> None:
    if hasattr(agent.ipfs, "unpin"):
        agent.ipfs.unpin(cid)
    if hasattr(agent.ipfs, "drop"):
        agent.ipfs.drop(cid)


def _unpin(agent: Any, cid: str, reason: str) -> None:
    _drop(agent, cid)
    agent.state.put("stored", cid, "unpinned", {"reason": reason, "unpinned_at": time.time()})
    agent.count("files_unpinned")
    log.info("unpinned stored file %s: %s", cid, reason)


def sweep_stored(agent: Any, force: bool = False) -> int:
    """Unpin the stored files no one will need (the trainer's loop; at most every SWEEP_EVERY_S unless
    `force`): a file whose lease ended without a submission of its CID, and one whose submission left its
    window settled (unchallenged, paid, upheld or voided) and is not in the trainer's current batch.
    Asks the chain only about files whose lease or window end has passed, or whose submission the trainer's
    event follower recorded. Returns how many it unpinned;
    a failure is logged and tried again next time."""

    k = _keeper(agent)
    if not force and time.monotonic() - k.last_sweep < SWEEP_EVERY_S:
        return 0
    k.last_sweep = time.monotonic()
    done = 0
    try:
        records = agent.state.records("stored", "pinned")
        if not records:
            return 0
        p = agent.protocol
        now = p.chain_time()
        plan = agent.state.get("plan") or {}
        in_plan = {int(s) for s in plan.get("submissions", [])}
        for r in records:
            cid, d = r["id"], r["data"]
            tid = int(d["task_id"])
            if "window_end" in d and now < int(d["window_end"]):
                continue  # submitted, still in its window
            if ("window_end" not in d and now <= int(d.get("lease_expiry", 0))
                    and agent.state.record("submission", tid) is None):
                continue  # the lease is open and no WorkSubmitted followed yet: it may yet be submitted
            t = p.task(tid)  # the chain is read outside the lock: pushes go on meanwhile
            why: str | None = None
            if t.status in (TaskStatus.NONE, TaskStatus.CLAIMED, TaskStatus.EXPIRED):
                if t.status == TaskStatus.CLAIMED and now <= t.lease_expiry:
                    continue
                why = f"task {tid}'s lease ended without a submission"
            elif _submitted_cid(agent, tid) != cid:
                why = f"task {tid} was submitted with another file"
            elif not (now < t.window_end or t.status == TaskStatus.CHALLENGED or tid in in_plan):
                why = f"task {tid}'s window ended ({t.status.name.lower()})"
            with k.lock:
                cur = agent.state.record("stored", cid)
                if cur is None or cur["status"] != "pinned":
                    continue  # replaced meanwhile
                if why is None:
                    agent.state.put("stored", cid, "pinned", {"window_end": int(t.window_end)})
                    continue
                _unpin(agent, cid, why)
                done += 1
    except Exception as exc:  # the chain unreachable: the next pass tries again
        log.warning("sweeping stored files failed (retried): %s", exc)
    return done
