"""A validator's attester rewards (issue 21, AttesterBook): claim the reward of each of its recorded attestations
once it is payable, asking the chain only about the due ones. Called from the validator's settle pass.

Two kinds of record (issue 38): one `AttestationRecorded` per submission, claimed one by one, and the leaves of a
step's attestation root (`AttestationRootRecorded`: `note_root` keeps it pending; `read_roots` fetches the leaves
file by its CID, bounded, checks it rebuilds the recorded root, keeps it under the data directory and adds this
validator's leaves as records), claimed together: one multiproof transaction per root and pass."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any

from intellect.sdk import ContractRevert, IntellectError, TaskStatus
from intellect.sdk.attestation_root import (
    MAX_LEAVES_PER_CALL,
    MAX_ROOT_FILE_BYTES,
    AttestationRootError,
    AttestationRootFile,
)

__all__ = ["ATTESTER_CLAIMS_PER_PASS", "ROOT_LEAVES_PER_CLAIM", "claim_attester_rewards", "note_attester_event",
           "note_root", "read_roots"]

log = logging.getLogger(__name__)

ATTESTER_CLAIMS_PER_PASS = 32  # due attester rewards asked (one eth_call each) per settle pass, at most
ROOT_LEAVES_PER_CLAIM = MAX_LEAVES_PER_CALL  # the book's bound on leaves per claimAttesterRewards
ROOT_READ_TRIES = 8  # fetches of a root's leaves file before it is given up (logged)


def note_attester_event(state: Any, event: str, args: Any, *, me: str, pool_id: int) -> None:
    """The event follower's side (no I/O): an `AttestationRecorded` naming `me` becomes an `attester` record; an
    `AttestationRootRecorded` of this pool a pending root (`note_root`)."""
    if event == "AttestationRecorded" and args["validator"].lower() == me.lower():
        state.put("attester", int(args["submissionId"]), "recorded", {"reward": int(args["reward"])})
    elif event == "AttestationRootRecorded":
        note_root(state, args, pool_id=pool_id)


def note_root(state: Any, args: Any, *, pool_id: int) -> None:
    """An `AttestationRootRecorded` of this pool: kept as a pending root (the event follower's side: no I/O)."""
    if int(args["poolId"]) != pool_id:
        return
    raw = args["root"]  # decoded events give bytes32 as hex (no 0x); raw logs as bytes
    root = "0x" + (raw.lower().removeprefix("0x") if isinstance(raw, str) else bytes(raw).hex())
    if state.record("attester_root", root) is None:
        state.put("attester_root", root, "pending", {"cid": str(args["leavesCid"]), "pool_id": pool_id,
                                                     "leaf_count": int(args["leafCount"])})


def _root_path(root_dir: Path, root: str) -> Path:
    return root_dir / f"{root}.json"


@lru_cache(maxsize=8)
def _kept_root(path: Path, size: int, mtime_ns: int, root: str) -> AttestationRootFile:
    """A kept leaves file, parsed (its root rebuilt) once per file version, not on every settle pass."""
    return AttestationRootFile.parse(path.read_bytes(), expect_root=root)


def read_roots(protocol: Any, state: Any, ipfs: Any, root_dir: Path) -> int:
    """Fetch the leaves file of each pending root (by its CID, at most `MAX_ROOT_FILE_BYTES`), check it (schema,
    the recorded root rebuilt, this chain, book, pool and leaf count), keep it under `root_dir` and add this
    validator's leaves as `attester` records. A file that fails a check is refused for good (logged: the trainer
    published a bad one); one that cannot be fetched is tried again on later passes, `ROOT_READ_TRIES` times.
    Returns the leaves added."""
    added = 0
    me = protocol.address.lower()
    for r in state.records("attester_root", "pending")[:8]:
        root, d = r["id"], r["data"]
        try:
            data = ipfs.cat(d["cid"], max_size=MAX_ROOT_FILE_BYTES)
            f = AttestationRootFile.parse(data, expect_root=root)
            book = protocol.contracts["AttesterBook"].address
            if (f.chain_id, f.book.lower(), f.pool_id, len(f.leaves)) != (
                    protocol.chain_id, book.lower(), d["pool_id"], d["leaf_count"]):
                raise AttestationRootError(f"attestation root file {d['cid']} is for chain {f.chain_id}, book "
                                           f"{f.book}, pool {f.pool_id}, {len(f.leaves)} leaves; the record says "
                                           f"chain {protocol.chain_id}, book {book}, pool {d['pool_id']}, "
                                           f"{d['leaf_count']} leaves")
        except AttestationRootError as exc:
            log.warning("attestation root %s refused: %s", root, exc)
            state.put("attester_root", root, "refused", {"error": str(exc)[:300]})
            continue
        except (IntellectError, OSError) as exc:
            tries = int(d.get("tries", 0)) + 1
            log.info("attestation root %s: leaves file %s not read (%s); try %d of %d", root, d["cid"], exc, tries,
                     ROOT_READ_TRIES)
            state.put("attester_root", root, "pending" if tries < ROOT_READ_TRIES else "unreadable",
                      {"tries": tries})
            continue
        root_dir.mkdir(parents=True, exist_ok=True)
        tmp = _root_path(root_dir, root).with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(_root_path(root_dir, root))
        mine = [leaf for leaf in f.leaves if leaf.validator.lower() == me]
        for leaf in mine:
            state.put("attester", leaf.submission_id, "recorded", {"reward": leaf.amount, "root": root,
                                                                   "index": leaf.index})
        state.put("attester_root", root, "read", {"leaves": len(mine), "step": f.step})
        added += len(mine)
        if mine:
            log.info("attestation root %s (step %d): %d leaves of this validator", root, f.step, len(mine))
    return added


def claim_attester_rewards(protocol: Any, state: Any, *, lock: threading.Lock, ipfs: Any = None,
                           data_dir: Path | None = None) -> int:
    """Claim the rewards of this validator's recorded attestations once they are payable; returns the wei paid.
    The unsettled set is the state store's `attester` records in status `recorded`: the event follower adds one per
    AttestationRecorded naming this validator, incrementally (its cursor is in the state store, its pages
    bounded), so nothing here reads the event log. A record costs no RPC while its submission's window is open or
    a challenge of it is open (both known locally, from WorkSubmitted and the challenge events); a due one is
    checked by one eth_call of `claimAttesterReward` (at most `ATTESTER_CLAIMS_PER_PASS` per pass, earliest window
    first) and leaves the set once paid, or found settled by someone else (AttesterBookBadRecord: paid, released or
    slashed), or never payable (its work upheld or voided); one not payable yet (a wiped worker's, say) is asked
    again after a back-off in chain time. Transactions are sent under `lock`. Leaves of attestation roots (read
    first, with `ipfs`, into `data_dir`/attestation-roots: `read_roots`) are claimed per root with one multiproof
    (`_claim_leaves`)."""
    root_dir = None if data_dir is None else Path(data_dir) / "attestation-roots"
    if ipfs is not None and root_dir is not None:
        read_roots(protocol, state, ipfs, root_dir)
    me, paid = protocol.address, 0
    pending = state.records("attester", "recorded")
    if not pending:
        return 0
    now = protocol.chain_time()
    due: list[tuple[int, int]] = []
    leaves: dict[str, list[tuple[int, int]]] = defaultdict(list)  # root -> (submission, leaf index), due
    tries: dict[int, int] = {}
    for r in pending:
        sid, d = int(r["id"]), r["data"]
        if "window_end" not in d:  # from the WorkSubmitted the follower kept, else (once) from the chain
            sub = state.record("submission", sid)
            end = (sub or {}).get("data", {}).get("window_end")
            if end is None:
                t = protocol.known_task(sid)
                if t is None:  # the chain lost the submission (a restart from an older state, a reorg)
                    state.put("attester", sid, "settled", {"task_status": "vanished"})
                    continue
                end = t.window_end
            d = {**d, "window_end": int(end)}
            state.put("attester", sid, "recorded", {"window_end": int(end)})
        challenge = state.record("challenge", sid)
        if (d["window_end"] > now or d.get("recheck_at", 0) > now
                or (challenge is not None and challenge["status"] in ("open", "opening"))):
            continue
        if "root" in d:
            leaves[d["root"]].append((sid, int(d["index"])))
            tries[sid] = int(d.get("tries", 0))
            continue
        due.append((int(d["window_end"]), sid))
        tries[sid] = int(d.get("tries", 0))
    for root, mine in leaves.items():
        if root_dir is not None:
            paid += _claim_leaves(protocol, state, root, sorted(mine)[:ROOT_LEAVES_PER_CLAIM], tries, now=now,
                                  lock=lock, root_dir=root_dir)
    for _, sid in sorted(due)[:ATTESTER_CLAIMS_PER_PASS]:
        try:
            protocol.call("AttesterBook", "claimAttesterReward", sid, me)
        except ContractRevert as exc:  # settled by someone (paid, released), never payable, or not yet
            _not_payable(protocol, state, sid, exc, tries, now)
            continue
        with lock:
            amount = protocol.claim_attester_reward(sid, me)
        state.put("attester", sid, "paid", {"amount": amount})
        paid += amount
    if paid:
        log.info("claimed %d wei of attester rewards", paid)
    return paid


def _not_payable(protocol: Any, state: Any, sid: int, exc: ContractRevert, tries: dict[int, int], now: int) -> None:
    """A leaf or record that the book refused to pay: settled for good when it never will be (settled already,
    its work upheld or voided, the submission gone, a leaf that breaks a rule), else asked again after a back-off."""
    if exc.name in ("AttesterBookBadRecord", "AttesterBookLeafSettled", "AttesterBookNotAttester",
                    "AttesterBookBadProof", "AttesterBookRootSpent"):
        state.put("attester", sid, "settled", {"reason": exc.name})
        return
    t = protocol.known_task(sid)
    if t is None:
        state.put("attester", sid, "settled", {"task_status": "vanished"})
    elif t.status in (TaskStatus.UPHELD, TaskStatus.VOIDED):
        state.put("attester", sid, "settled", {"task_status": t.status.name.lower()})
    else:
        n = tries.get(sid, 0) + 1
        state.put("attester", sid, "recorded", {"tries": n, "recheck_at": now + min(60 * 2**n, 86_400)})


def _claim_leaves(protocol: Any, state: Any, root: str, mine: list[tuple[int, int]], tries: dict[int, int], *,
                  now: int, lock: threading.Lock, root_dir: Path) -> int:
    """Claim this validator's due leaves `mine` ((submission, index)) of `root` in one transaction: an eth_call of
    them all first; when it reverts, one eth_call per leaf (at most `ATTESTER_CLAIMS_PER_PASS`) sorts the payable
    from the rest (`_not_payable`), and the payable ones are sent together. Returns the wei paid."""
    try:
        path = _root_path(root_dir, root)
        st = path.stat()
        f = _kept_root(path, st.st_size, st.st_mtime_ns, root)
    except (OSError, AttestationRootError) as exc:  # the kept copy is gone or damaged: read the root again
        log.warning("attestation root %s: kept leaves file unreadable (%s); fetching it again", root, exc)
        state.put("attester_root", root, "pending", {"tries": 0})
        return 0
    me = protocol.address
    by_index = {i: sid for sid, i in mine}
    try:
        protocol.claim_attester_leaves(f, me, list(by_index), dry_run=True)
        payable = list(by_index)
    except ContractRevert:
        payable = []
        for i, sid in list(by_index.items())[:ATTESTER_CLAIMS_PER_PASS]:
            try:
                protocol.claim_attester_leaves(f, me, [i], dry_run=True)
                payable.append(i)
            except ContractRevert as exc:
                _not_payable(protocol, state, sid, exc, tries, now)
    if not payable:
        return 0
    with lock:
        amount = protocol.claim_attester_leaves(f, me, payable)
    for i in payable:
        state.put("attester", by_index[i], "paid", {"amount": f.leaves[i].amount})
    log.info("attestation root %s: claimed %d leaves, %d wei", root, len(payable), amount)
    return amount
