"""`Protocol`'s calls of the attester book: one concern of the SDK's contract client (issue 34 split
the class; use them through `intellect.sdk.Protocol`).

`_AttesterCalls` is a mixin of `intellect.sdk._client.Protocol`: its methods use the client's `call`, `transact`,
`get_events`, `_ask`, `contracts`, `account` and friends, and are public on `Protocol` under the same names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from web3 import Web3

from ._client_util import _addr, _hex_bytes
from ._errors import ConfigError, ContractRevert
from ._events import write_atomic
from ._models import (
    AttestationRootRecord,
    AttesterPoolRule,
    AttesterRecord,
    Receipt,
    TaskStatus,
)
from .attestation_root import MAX_LEAVES_PER_CALL, MAX_ROOT_FILE_BYTES, AttestationRootFile

__all__ = ["AttesterClaimCursor", "_AttesterCalls"]

log = logging.getLogger(__name__)


class AttesterClaimCursor(BaseModel):
    """Where `Protocol.claim_attester_rewards` stands for one validator: the last block whose AttestationRecorded
    events it scanned, and its unsettled records (submission id -> the window's end, -1 while not read)."""

    chain_id: int
    validator: str
    scanned_to: int
    pending: dict[int, int] = Field(default_factory=dict)


class _AttesterCalls:
    """AttesterBook: validators paid per used attestation, slashed for attesting upheld work."""

    ROOT_LEAVES_PER_CALL = MAX_LEAVES_PER_CALL
    """leaves one claim or release of a root's leaves carries, at most"""

    # -- AttesterBook: validators paid per used attestation, slashed for attesting upheld work ------------
    def _book(self) -> str:
        if "AttesterBook" not in self.contracts:
            raise ConfigError(f"deployment for chain {self.chain_id} has no AttesterBook address "
                              "(deployed by scripts/deploy.py since issue 21): redeploy or add it to the file")
        return "AttesterBook"

    def set_attester_reward(self, pool_id: int, reward_per_attestation: int) -> AttesterPoolRule:
        """Fix, once, the pool's reward per recorded attestation. Only the pool's owner."""
        self.transact(self._book(), "setAttesterReward", int(pool_id), int(reward_per_attestation))
        return self.attester_pool_rule(pool_id)

    def fund_attester_rewards(self, pool_id: int, amount: int, *, approve: bool = True) -> AttesterPoolRule:
        """Escrow `amount` for the pool's attester rewards (anyone)."""
        if approve:
            self._ensure_allowance(self._book(), amount)
        self.transact(self._book(), "fundAttesterRewards", int(pool_id), int(amount))
        return self.attester_pool_rule(pool_id)

    def attester_pool_rule(self, pool_id: int) -> AttesterPoolRule:
        reward, budget = self.call(self._book(), "poolRule", int(pool_id))
        return AttesterPoolRule(pool_id=pool_id, reward_per_attestation=reward, budget=budget)

    def record_attestations(self, submission_id: int, validators: Sequence[str]) -> list[AttesterRecord]:
        """The trainer records the validators whose attestations of `submission_id` it used (inside the
        window; at most 16 per call; each once); reserves one reward each. Returns the records made."""
        rc = self.transact(self._book(), "recordAttestations", int(submission_id), [_addr(v) for v in validators])
        return [AttesterRecord(submission_id=e.args["submissionId"], validator=e.args["validator"],
                               reward=e.args["reward"], reserved=e.args["reward"], block_number=rc.block_number)
                for e in rc.events if e.event == "AttestationRecorded"]

    def record_attestation_root(self, root_file: AttestationRootFile, leaves_cid: str) -> Receipt:
        """The trainer records a step's used attestations as one Merkle root (`root_file`, published under
        `leaves_cid`), reserving their total from the pool's attester budget: one transaction per step instead of one
        per submission (issue 38)."""
        return self.transact(self._book(), "recordAttestationRoot", int(root_file.pool_id),
                             bytes.fromhex(root_file.root[2:]), len(root_file.leaves), int(root_file.total),
                             leaves_cid)

    def attestation_root(self, pool_id: int, root: str | bytes) -> tuple[int, int, int]:
        """(recorded at (0: never), leaves, what it still reserves) of pool `pool_id`'s root `root`."""
        at, count, remaining = self.call(self._book(), "attestationRoot", int(pool_id), _hex_bytes(root))
        return int(at), int(count), int(remaining)

    def attester_leaf_settled(self, pool_id: int, root: str | bytes, index: int) -> bool:
        """Whether leaf `index` of pool `pool_id`'s root `root` is settled (paid or released)."""
        return bool(self.call(self._book(), "leafSettled", int(pool_id), _hex_bytes(root), int(index)))

    def _leaf_args(self, root_file: AttestationRootFile, validator: str, indices: Sequence[int]) -> tuple:
        v = _addr(validator)
        want = sorted(set(int(i) for i in indices))
        leaves = [root_file.leaves[i] for i in want]
        if any(leaf.validator.lower() != v.lower() for leaf in leaves):
            raise ValueError(f"leaves {want} of root {root_file.root} are not all {v}'s")
        proof, flags = root_file.tree().multiproof(want)
        return (int(root_file.pool_id), bytes.fromhex(root_file.root[2:]), v,
                [(leaf.index, leaf.submission_id, leaf.amount) for leaf in leaves], proof, flags)

    def claim_attester_leaves(self, root_file: AttestationRootFile, validator: str, indices: Sequence[int], *,
                              dry_run: bool = False) -> int:
        """Pay `validator`'s owner the rewards of its leaves `indices` of a recorded root, with one multiproof
        (anyone may send it; at most 256 leaves a call); returns the total paid (with `dry_run`: what an eth_call
        says would be paid, reverting as the transaction would)."""
        args = self._leaf_args(root_file, validator, indices)
        if dry_run:
            return int(self.call(self._book(), "claimAttesterRewards", *args))
        rc = self.transact(self._book(), "claimAttesterRewards", *args)
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "AttesterRewardPaid")

    def release_attester_leaves(self, root_file: AttestationRootFile, validator: str, indices: Sequence[int]) -> int:
        """Return to the pool's budget the rewards of leaves that can never be paid (upheld or voided work, or a
        leaf that breaks a rule); anyone; returns the total released."""
        rc = self.transact(self._book(), "releaseAttesterRewards", *self._leaf_args(root_file, validator, indices))
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "AttesterRewardReleased")

    def attestation_roots(self, pool_id: int, *, from_block: int | None = None) -> list[AttestationRootRecord]:
        """Pool `pool_id`'s recorded attestation roots, oldest first, each with what it still reserves (read
        now)."""
        out = []
        for e in self.get_events(["AttestationRootRecorded"], from_block=from_block, filters={"poolId": int(pool_id)}):
            root = "0x" + _hex_bytes(e.args["root"]).hex()
            out.append(AttestationRootRecord(
                pool_id=int(pool_id), root=root, leaf_count=int(e.args["leafCount"]), total=int(e.args["total"]),
                leaves_cid=str(e.args["leavesCid"]), remaining=self.attestation_root(pool_id, root)[2],
                block_number=e.block_number))
        return out

    def attestation_root_file(self, record: AttestationRootRecord, store: Any) -> AttestationRootFile:
        """A recorded root's leaves file, read from IPFS `store` by the CID its event names (at most
        `MAX_ROOT_FILE_BYTES`) and checked against the recorded root (`AttestationRootFile.parse`)."""
        return AttestationRootFile.parse(store.cat(record.leaves_cid, max_size=MAX_ROOT_FILE_BYTES),
                                         expect_root=record.root)

    def unpayable_attester_leaves(self, root_file: AttestationRootFile) -> dict[str, list[int]]:
        """{validator: leaf indices} of a recorded root's unsettled leaves whose work can never be paid (the
        submission upheld or voided), which `release_attester_leaves` returns to the pool's budget (anyone may):
        one status read per submission, one settled read per leaf. Leaves the book would also release for
        breaking a rule (a validator of the worker's owner, say) are not looked for."""
        f = root_file
        final: dict[int, bool] = {}
        out: dict[str, list[int]] = {}
        for leaf in f.leaves:
            sid = leaf.submission_id
            if sid not in final:
                final[sid] = self.task(sid).status in (TaskStatus.UPHELD, TaskStatus.VOIDED)
            if final[sid] and not self.attester_leaf_settled(f.pool_id, f.root, leaf.index):
                out.setdefault(leaf.validator, []).append(leaf.index)
        return out

    def attestation_reserved(self, submission_id: int, validator: str) -> int:
        """The reward reserved for `validator`'s recorded attestation of `submission_id` (0: none or settled)."""
        return int(self.call(self._book(), "recorded", int(submission_id), _addr(validator)))

    def attester_records(self, validator: str | None = None, *, from_block: int | None = None,
                         unsettled_only: bool = True) -> list[AttesterRecord]:
        """The attestations of `validator` (default: this account) that trainers recorded, from the event
        log, with what each still reserves; by default only those not yet paid, released or slashed."""
        v = _addr(validator or self.address)
        out = []
        for e in self.get_events(["AttestationRecorded"], from_block=from_block, filters={"validator": v}):
            sid = int(e.args["submissionId"])
            reserved = self.attestation_reserved(sid, v)
            if reserved or not unsettled_only:
                out.append(AttesterRecord(submission_id=sid, validator=v, reward=e.args["reward"],
                                          reserved=reserved, block_number=e.block_number))
        return out

    def claim_attester_reward(self, submission_id: int, validator: str | None = None) -> int:
        """Pay a recorded attestation's reward to the validator's owner (anyone may send it) once the
        submission is final and payable; returns the amount paid."""
        rc = self.transact(self._book(), "claimAttesterReward", int(submission_id), _addr(validator or self.address))
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "AttesterRewardPaid")

    def release_attester_reward(self, submission_id: int, validator: str) -> int:
        """Return the reward of an attestation of upheld or voided work to its pool (anyone)."""
        rc = self.transact(self._book(), "releaseAttesterReward", int(submission_id), _addr(validator))
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "AttesterRewardReleased")

    def claim_attester_rewards(self, validator: str | None = None, *, from_block: int | None = None,
                               cursor_path: Path | str | None = None) -> int:
        """Claim every recorded attestation reward of `validator` (default: this account) that is payable now;
        returns the total paid.

        Incremental: the first call scans AttestationRecorded from `from_block` (default the deployment block);
        later calls on this `Protocol` scan only the blocks after the last one scanned and ask only about the
        records not yet settled: a record costs one read of its window's end when first seen, nothing while that
        window is open, then one eth_call of `claimAttesterReward` per pass until it is paid or found settled
        (by anyone: paid, released, slashed) or never payable (its work upheld or voided). With `cursor_path`
        that state (`AttesterClaimCursor`: the last block scanned and the unsettled records) is kept in a JSON
        file, replaced atomically, so a restarted program resumes instead of rescanning from the deployment."""
        v = _addr(validator or self.address)
        cur = self._attester_cursor(v, from_block, cursor_path)
        head = self.block_number()
        if head > cur.scanned_to:
            for e in self.get_events(["AttestationRecorded"], from_block=cur.scanned_to + 1, to_block=head,
                                     filters={"validator": v}):
                cur.pending.setdefault(int(e.args["submissionId"]), -1)  # window end not read yet
            cur.scanned_to = head
        now, total = None, 0
        for sid in sorted(cur.pending):
            if cur.pending[sid] < 0:
                cur.pending[sid] = int(self.task(sid).window_end)
            now = self.chain_time() if now is None else now
            if cur.pending[sid] > now:
                continue  # window open: nothing to ask
            try:
                self.call(self._book(), "claimAttesterReward", sid, v)
            except ContractRevert as exc:
                if exc.name == "AttesterBookBadRecord" or self.task(sid).status in (TaskStatus.UPHELD,
                                                                                    TaskStatus.VOIDED):
                    del cur.pending[sid]  # settled by someone, or released to the pool instead
                continue  # else not payable yet (challenged): asked again next call
            total += self.claim_attester_reward(sid, v)
            del cur.pending[sid]
        if cursor_path is not None:
            write_atomic(Path(cursor_path), cur.model_dump_json())
        return total

    def _attester_cursor(self, validator: str, from_block: int | None,
                         cursor_path: Path | str | None) -> AttesterClaimCursor:
        cursors = self._attester_cursors
        cur = cursors.get(validator)
        if cur is None and cursor_path is not None and Path(cursor_path).is_file():
            try:
                cur = AttesterClaimCursor.model_validate_json(Path(cursor_path).read_text())
            except ValueError as exc:
                raise ConfigError(f"attester cursor {cursor_path} is invalid ({exc}); delete it to rescan") from None
            if cur.chain_id != self.chain_id or cur.validator != validator:
                raise ConfigError(f"attester cursor {cursor_path} is for validator {cur.validator} on chain "
                                  f"{cur.chain_id}, not {validator} on chain {self.chain_id}")
        if cur is None:
            start = int(self.deployment.block if from_block is None else from_block)
            cur = AttesterClaimCursor(chain_id=self.chain_id, validator=validator, scanned_to=start - 1)
        cursors[validator] = cur
        return cur

    def slash_attester(self, submission_id: int, validator: str, *, rollouts_cid: str, proofs_hash: bytes | str,
                       policy_step: int, signature: bytes | str) -> int:
        """Slash `validator` for its accepting EIP-712 attestation (`signature` over the submission's rollouts
        CID, proofs hash and policy step) of `submission_id`, which the ledger upheld as bad (anyone; the
        sender gets the challenger's share). Returns the amount slashed."""
        ph, sig = _hex_bytes(proofs_hash), _hex_bytes(signature)
        if len(ph) != 32:
            raise ValueError(f"proofs_hash must be 32 bytes, got {len(ph)}")
        rc = self.transact(self._book(), "slashAttester", int(submission_id), _addr(validator),
                           bytes(Web3.keccak(text=rollouts_cid)), ph, int(policy_step), sig)
        return sum(int(e.args["slashed"]) for e in rc.events if e.event == "AttesterSlashed")

    def slash_voter(self, challenge_id: int, validator: str) -> int:
        """Slash `validator` for voting against the outcome of the challenge's latest resolved round (anyone;
        the sender gets the challenger's share). Returns the amount slashed."""
        rc = self.transact(self._book(), "slashVoter", int(challenge_id), _addr(validator))
        return sum(int(e.args["slashed"]) for e in rc.events if e.event == "VoterSlashed")

    def set_voter_reward(self, pool_id: int, reward_per_challenge: int) -> int:
        """Fix, once, the pool's reward per resolved challenge (below its challenge bond), shared by the winning
        side of each challenge's latest round by stake weight, paid from the attester budget. Only the pool's
        owner. Returns the reward as the book now holds it."""
        self.transact(self._book(), "setVoterReward", int(pool_id), int(reward_per_challenge))
        return self.voter_reward(pool_id)

    def voter_reward(self, pool_id: int) -> int:
        """The pool's reward per resolved challenge (0: none)."""
        return int(self.call(self._book(), "voterReward", int(pool_id)))

    def claim_voter_reward(self, challenge_id: int, validator: str | None = None) -> int:
        """Pay `validator`'s (default: this account's) owner its share of the pool's reward for having been on
        the winning side of the challenge's latest resolved round (anyone may send it; once per round); returns
        the amount paid."""
        rc = self.transact(self._book(), "claimVoterReward", int(challenge_id), _addr(validator or self.address))
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "VoterRewardPaid")

    def attester_slash(self) -> int:
        return int(self.call(self._book(), "attesterSlash"))

    def voter_slash(self) -> int:
        return int(self.call(self._book(), "voterSlash"))

    def set_attester_slash(self, amount: int) -> Receipt:
        """Admin only."""
        return self.transact(self._book(), "setAttesterSlash", int(amount))

    def set_voter_slash(self, amount: int) -> Receipt:
        """Admin only."""
        return self.transact(self._book(), "setVoterSlash", int(amount))

    def attestation_digest(self, submission_id: int, rollouts_cid: str, proofs_hash: bytes | str, policy_step: int,
                           accepted: bool = True) -> bytes:
        """The EIP-712 digest a validator signs to attest a submission (as the AttesterBook checks it)."""
        return bytes(self.call(self._book(), "attestationDigest", int(submission_id),
                               bytes(Web3.keccak(text=rollouts_cid)), _hex_bytes(proofs_hash), int(policy_step),
                               bool(accepted)))
