"""The trainer's side of the attestation exchange (issue 34: moved out of `Trainer`): which attestations it
keeps, how it pulls them from the validators, and how it records on-chain the ones it trained on.

    intake = AttestationIntake(protocol, state, pool_id, lookup=..., count=...)
    intake.accept(body)                          # POST /attestations and every pulled item: checked, then kept
    pull_attestations(directory, state, intake.accept)   # GET /attestations of every listed validator, paged
    attestation_sets(state, sids)                # {submission: {validator, ...}} of the kept ones
    record_used_attestations(protocol, state, pool_id, assigned=..., metrics=...)   # AttesterBook, issue 21
    record_attestation_root(protocol, state, pool_id, ipfs=..., step=..., assigned=..., metrics=...)  # issue 38
    record_trained_attestations(trainer)         # either, as `trainer.attestation_records` says

Kept attestations are state records `attestation` keyed `"<submission>:<validator>"`, so one submission's are
one prefix seek (`StateStore.with_prefix`). Trust rules: a valid signature for this chain and ledger, an
accepting verdict, an active validator staked at least the minimum, a match with the on-chain submission, and
not the worker's own operator (`same_operator`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from intellect.agents.attestation import Attestation, AttestationError
from intellect.agents.roles._runtime import MAX_ATTESTATIONS_PAGE
from intellect.agents.roles._server import HttpError
from intellect.agents.roles._state import StateStore
from intellect.agents.roles.attester_release import release_unpayable_leaves
from intellect.sdk import ContractRevert
from intellect.sdk.attestation_root import AttestationRootFile
from intellect.sdk.http import PeerHttpError, fetch

__all__ = ["AttestationIntake", "attestation_sets", "pull_attestations", "record_attestation_root",
           "record_trained_attestations", "record_used_attestations", "same_operator"]

log = logging.getLogger(__name__)

VALIDATOR_CHECK_TTL = 15.0
"""seconds a validator's role-and-stake check is reused"""


def same_operator(validator: str, validator_owner: str, worker: str, worker_owner: str) -> bool:
    """True when an attestation by `validator` on `worker`'s work is the worker vouching for itself: the
    same node key, the same owner, or one node's key owning the other."""
    v, vo, w, wo = (a.lower() for a in (validator, validator_owner, worker, worker_owner))
    return v == w or vo in (wo, w) or wo == v


def attestation_sets(state: StateStore, sids: Iterable[int]) -> dict[int, set[str]]:
    """{submission id: the validators (lower case) whose kept attestations name it} for the submissions `sids`
    that have any: one prefix seek each, never the whole attestation history."""
    out: dict[int, set[str]] = {}
    for sid in sids:
        for r in state.with_prefix("attestation", f"{int(sid)}:"):
            out.setdefault(int(r["data"]["submission_id"]), set()).add(r["data"]["validator"].lower())
    return out


class AttestationIntake:
    """Checks and keeps the attestations offered to the trainer. `lookup(sid)`: the submission's record or None
    (`submission_log.lookup_submission`); `count(name)`: the agent's counters (`attestations_received`,
    `attestations_refused`). Validators' checks are cached `VALIDATOR_CHECK_TTL` s, nodes' owners for good."""

    def __init__(self, protocol: Any, state: StateStore, pool_id: int, *,
                 lookup: Callable[[int], dict[str, Any] | None], count: Callable[[str], None]) -> None:
        self.protocol, self.state, self.pool_id = protocol, state, pool_id
        self.lookup, self.count = lookup, count
        self.validator_ok: dict[str, tuple[float, bool]] = {}
        self.owners: dict[str, str] = {}
        self._lock = threading.Lock()

    def is_validator(self, address: str) -> bool:
        cached = self.validator_ok.get(address.lower())
        if cached is not None and time.monotonic() - cached[0] < VALIDATOR_CHECK_TTL:
            return cached[1]
        ok = self.protocol.is_active(address, "validator") and self.protocol.has_min_stake(address, "validator")
        self.validator_ok[address.lower()] = (time.monotonic(), ok)
        return ok

    def owner(self, address: str) -> str:
        """The registered owner of a node (cached: a node's owner never changes)."""
        key = address.lower()
        if key not in self.owners:
            self.owners[key] = self.protocol.node(address).owner
        return self.owners[key]

    def _refuse(self, status: int, message: str) -> HttpError:
        self.count("attestations_refused")
        return HttpError(status, message)

    def accept(self, body: Any) -> dict[str, Any]:
        """Check one attestation (schema, signature, domain, signer's role and stake, match with the
        on-chain submission) and keep it. Raises HttpError with the reason otherwise."""
        try:
            att = Attestation.model_validate(body)
            att.verify()
        except (ValidationError, AttestationError) as exc:
            raise self._refuse(400, f"invalid attestation: {exc}") from None
        ledger = self.protocol.contracts["TaskLedger"].address
        if att.chain_id != self.protocol.chain_id or att.ledger.lower() != ledger.lower():
            raise self._refuse(400, f"attestation is for chain {att.chain_id} ledger {att.ledger}, not this pool's")
        if not att.accepted:
            raise HttpError(400, "only accepting attestations are collected here")
        if not self.is_validator(att.validator):
            raise self._refuse(403, f"{att.validator} is not an active, staked validator")
        sub = self.lookup(att.submission_id)
        if sub is None:
            raise HttpError(404, f"submission {att.submission_id} is not in pool {self.pool_id}")
        if (sub["rollouts_cid"] != att.rollouts_cid or sub["proofs_hash"].lower() != att.proofs_hash.lower()
                or sub["policy_step"] != att.policy_step):
            raise self._refuse(400, f"attestation does not match submission {att.submission_id} on-chain")
        if same_operator(att.validator, self.owner(att.validator), sub["node"], self.owner(sub["node"])):
            log.warning("attestation of submission %d by %s refused: same operator as worker %s",
                        att.submission_id, att.validator, sub["node"])
            raise self._refuse(403, f"validator {att.validator} shares its operator with worker {sub['node']}: "
                                    f"a worker's own validators do not count towards the quorum")
        key = f"{att.submission_id}:{att.validator.lower()}"
        with self._lock:
            if self.state.record("attestation", key) is None:
                self.state.put("attestation", key, "valid", {"submission_id": att.submission_id,
                                                              "validator": att.validator,
                                                              "owner": self.owner(att.validator),
                                                              "signature": att.signature})
                self.count("attestations_received")
        return {"ok": True, "submission_id": att.submission_id}


def pull_attestations(directory: Any, state: StateStore, accept: Callable[[Any], Any], max_pages: int = 4) -> None:
    """Ask every active validator for attestations since the last pull (after a restart, or missed POSTs) and
    offer each to `accept` (`AttestationIntake.accept`): pages of `MAX_ATTESTATIONS_PAGE`, at most `max_pages`
    per validator per call (the cursor, state `pulled:<validator>`, carries on next time), each request with a
    total deadline. Only listed validators are asked (`Directory.by_role`: staked at least the validator
    minimum, the most staked first); one that fails or stalls is benched like any peer (`Directory.penalise`)
    and not asked meanwhile."""
    for node in directory.by_role("validator"):
        if not node.endpoint or directory.benched(node.address):
            continue
        key = f"pulled:{node.address.lower()}"
        cursor = state.get(key, 0.0)
        since, after = (float(cursor), -1) if not isinstance(cursor, list) else (float(cursor[0]), int(cursor[1]))
        for _ in range(max_pages):
            try:
                resp = fetch("GET", node.endpoint.rstrip("/") + "/attestations",
                             params={"since": repr(since), "after": after, "limit": MAX_ATTESTATIONS_PAGE},
                             deadline=5.0, max_bytes=MAX_ATTESTATIONS_PAGE * 4096)
                items = resp.json() if resp.ok else []
            except (PeerHttpError, ValueError, RecursionError) as exc:  # stalled, cut off or garbled
                log.debug("pulling attestations from %s: %s", node.address, exc)
                directory.penalise(node.address, exc)
                break
            if not isinstance(items, list):
                break
            for item in items[:MAX_ATTESTATIONS_PAGE]:
                if not isinstance(item, dict):
                    continue
                try:
                    cur = (float(item.pop("_updated_at")), int(item.pop("_id", -1)))
                except (KeyError, TypeError, ValueError, OverflowError):  # 10**400 or 1e999: issue 32
                    continue
                since, after = max((since, after), cur)
                try:
                    accept(item)
                except HttpError as exc:
                    log.debug("pulled attestation refused: %s", exc.message)
            state.set(key, [since, after])
            if len(items) < MAX_ATTESTATIONS_PAGE:
                break


def record_used_attestations(protocol: Any, state: StateStore, pool_id: int, *,
                             assigned: Callable[[int], Iterable[str]], metrics: Any) -> None:
    """Record on-chain (`AttesterBook.recordAttestations`) the validators whose attestations each trained
    submission counted on (those of its `assigned` validators, each once per slot it holds): they are paid per
    recorded slot once its window closes (issue 21; per slot, not per key: issue 33). Only when the pool's owner
    set a reward per attestation; each submission once. A failure logs (and counts in `metrics`' `errors_total`)
    and is tried again on the next pass; a closed window or an empty budget gives up on that submission."""
    if "AttesterBook" not in protocol.contracts:
        return
    todo = [int(r["id"]) for r in state.records("submission", "consumed")
            if state.record("attester_record", int(r["id"])) is None]
    if not todo:
        return
    try:
        if protocol.attester_pool_rule(pool_id).reward_per_attestation == 0:
            return
        used = _used_slots(state, todo, assigned)
        for sid in todo:
            slots = used[sid]
            recorded: list[str] = []
            try:
                if slots:
                    recorded = [r.validator for r in protocol.record_attestations(sid, slots)]
            except ContractRevert as exc:
                if exc.name not in ("AttesterBookNotAttester", "AttesterBookBadRecord"):
                    if exc.name not in ("AttesterBookWindowClosed", "AttesterBookInsufficientBudget"):
                        raise
                    log.warning("submission %d: attestations not recorded: %s", sid, exc)
                    state.put("attester_record", sid, "failed", {"error": str(exc)[:300]})
                    continue
                for v, held in Counter(slots).items():  # one exited, or recorded already: the others alone
                    try:
                        recorded += [r.validator for r in protocol.record_attestations(sid, [v] * held)]
                    except ContractRevert as one:
                        log.info("submission %d: attestation of %s not recorded: %s", sid, v, one.name)
            state.put("attester_record", sid, "recorded", {"validators": recorded})
            if recorded:
                log.info("submission %d: recorded the attestations of %d validator(s)", sid, len(recorded))
    except Exception as exc:
        metrics.inc("errors_total", kind=type(exc).__name__)
        log.warning("recording used attestations failed (retried later): %s", exc)


def _used_slots(state: StateStore, sids: list[int], assigned: Callable[[int], Iterable[str]]) -> dict[int, list[str]]:
    """{submission: its assigned validators whose kept attestations the quorum counted, once per slot held, sorted
    (adjacent), at most 16}: what the book pays per slot, never per key (issue 33)."""
    used = attestation_sets(state, sids)
    return {sid: sorted(v for v in assigned(sid) if v in used.get(sid, set()))[:16] for sid in sids}


def _send_root(protocol: Any, state: StateStore, f: AttestationRootFile, cid: str, sids: list[int]) -> bool:
    """`recordAttestationRoot` of `f` unless the chain has it already; then its submissions are `recorded`. An
    empty budget marks them `failed` (False); any other revert raises."""
    try:
        if not protocol.attestation_root(f.pool_id, f.root)[0]:
            protocol.record_attestation_root(f, cid)
    except ContractRevert as exc:
        if exc.name != "AttesterBookInsufficientBudget":
            raise
        log.warning("step %d: attestation root of %d submissions not recorded: %s", f.step, len(sids), exc)
        for sid in sids:
            state.put("attester_record", sid, "failed", {"error": str(exc)[:300]})
        return False
    for sid in sids:
        state.put("attester_record", sid, "recorded", {"root": f.root})
    log.info("step %d: recorded the attestations of %d submissions as root %s (%d leaves, leaves file %s)", f.step,
             len(sids), f.root, len(f.leaves), cid)
    return True


def record_attestation_root(protocol: Any, state: StateStore, pool_id: int, *, ipfs: Any, step: int,
                            assigned: Callable[[int], Iterable[str]], metrics: Any) -> str | None:
    """Record the used attestations of every trained submission not yet recorded as one Merkle root (issue 38):
    a leaf per (submission, validator) paying the reward per attestation times the slots it held, the leaves file
    (`AttestationRootFile`) added to IPFS, `recordAttestationRoot` with its CID: one transaction per trained step
    instead of one per submission. Only when the pool's owner set a reward per attestation. Returns the root, or
    None when there was nothing to record. The submissions are marked `recording` (with the root and the file's
    CID) before the transaction, so a trainer restarted in between finishes that root, from the same file, and
    never puts them in a second one (two roots would pay their leaves twice). A failure logs (counted in
    `metrics`' `errors_total`) and is tried again on the next pass; an empty budget marks the submissions
    `failed`."""
    if "AttesterBook" not in protocol.contracts:
        return None
    try:
        unfinished: dict[tuple[str, str], list[int]] = {}
        for r in state.records("attester_record", "recording"):
            unfinished.setdefault((r["data"]["root"], r["data"]["cid"]), []).append(int(r["id"]))
        for (root, cid), sids in unfinished.items():
            _send_root(protocol, state, AttestationRootFile.parse(ipfs.cat(cid), expect_root=root), cid, sids)
        todo = [int(r["id"]) for r in state.records("submission", "consumed")
                if state.record("attester_record", int(r["id"])) is None]
        if not todo:
            return None
        reward = protocol.attester_pool_rule(pool_id).reward_per_attestation
        if reward == 0:
            return None
        slots = _used_slots(state, todo, assigned)
        entries = [(sid, v, reward * held) for sid in todo for v, held in Counter(slots[sid]).items()]
        if not entries:
            for sid in todo:
                state.put("attester_record", sid, "recorded", {"validators": []})
            return None
        f = AttestationRootFile.build(chain_id=protocol.chain_id, book=protocol.contracts["AttesterBook"].address,
                                      pool_id=pool_id, step=step, entries=entries)
        cid = ipfs.add(f.to_bytes())
        for sid in todo:
            state.put("attester_record", sid, "recording", {"root": f.root, "cid": cid,
                                                            "validators": sorted(set(slots[sid]))})
        return f.root if _send_root(protocol, state, f, cid, todo) else None
    except Exception as exc:
        metrics.inc("errors_total", kind=type(exc).__name__)
        log.warning("recording the attestation root failed (retried later): %s", exc)
        return None


def record_trained_attestations(trainer: Any) -> None:
    """The trainer's pass: `record_attestation_root` (`trainer.attestation_records: root`, one transaction a step)
    then `attester_release.release_unpayable_leaves` (the leaves of upheld or voided work back to the pool), or
    `record_used_attestations` (`submission`), over the trainer's protocol, state, pool and slot assignment."""
    t = trainer
    if t.cfg.trainer.attestation_records == "root":
        record_attestation_root(t.protocol, t.state, t.pool_id, ipfs=t.ipfs, step=t.gt.step, assigned=t._assigned,
                                metrics=t.metrics)
        try:
            release_unpayable_leaves(t.protocol, t.state, t.ipfs)
        except Exception as exc:
            t.metrics.inc("errors_total", kind=type(exc).__name__)
            log.warning("releasing the leaves of upheld or voided work failed (retried later): %s", exc)
    else:
        record_used_attestations(t.protocol, t.state, t.pool_id, assigned=t._assigned, metrics=t.metrics)
