"""A step's used attestations as one Merkle root (issue 38: a chain bill per step, not per submission).

The trainer records, once per trained step, the root of a tree whose leaves are (index, submission id, validator,
amount) instead of one `recordAttestations` transaction per submission; it publishes the leaves as a JSON file
(`AttestationRootFile`, schema `intellect.attestation-root/v1`) under the CID the event names. A validator reads
that file, checks that it rebuilds the recorded root, and claims any set of its leaves with one OpenZeppelin
multiproof (`AttesterBook.claimAttesterRewards`).

    file = AttestationRootFile.build(chain_id=..., book=..., pool_id=..., step=..., entries=[(sid, validator, amount)])
    file.root                             # 0x... : what recordAttestationRoot records
    file.to_bytes()                       # canonical JSON, what the CID names
    AttestationRootFile.parse(data)       # a stranger's bytes: bounded, schema-checked, root recomputed
    proof, flags = file.tree().multiproof([i, j, ...])

The tree is OpenZeppelin's (`@openzeppelin/merkle-tree`'s `makeMerkleTree` / `getMultiProof`, reimplemented
here): leaves in array order at the end of a complete binary tree, pairs hashed sorted (commutative), each leaf
hashed twice (keccak256(keccak256(abi.encode(uint256 index, uint256 submissionId, address validator, uint256
amount)))) so that no inner node can pass for a leaf. Leaves are sorted by validator, then submission, so one
validator's leaves are consecutive and its multiproof stays small (about 2·log2(leaves) hashes for any number of
them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import cached_property

from eth_abi import encode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from web3 import Web3

from ._errors import IntellectError

__all__ = ["MAX_LEAVES_PER_CALL", "MAX_ROOT_FILE_BYTES", "MAX_ROOT_LEAVES", "ROOT_FILE_SCHEMA", "AttestationRootError",
           "AttestationRootFile", "MerkleTree", "RootLeaf", "leaf_hash"]

ROOT_FILE_SCHEMA = "intellect.attestation-root/v1"
MAX_ROOT_LEAVES = 1 << 20
"""leaves a root file may hold (a step of a million attested slots)"""
MAX_ROOT_FILE_BYTES = 256 << 20
"""bytes a root file may take (about 160 bytes a leaf)"""
MAX_LEAVES_PER_CALL = 256
"""leaves one `claimAttesterRewards` or `releaseAttesterRewards` carries, at most (the book's `_MAX_LEAVES`)"""


class AttestationRootError(IntellectError):
    """An attestation root file that is malformed, too large, of another schema, or that does not rebuild its
    root."""


def _keccak(data: bytes) -> bytes:
    return bytes(Web3.keccak(data))


def leaf_hash(index: int, submission_id: int, validator: str, amount: int) -> bytes:
    """The contract's leaf: keccak256(keccak256(abi.encode(index, submissionId, validator, amount)))."""
    inner = _keccak(encode(["uint256", "uint256", "address", "uint256"],
                           [int(index), int(submission_id), Web3.to_checksum_address(validator), int(amount)]))
    return _keccak(inner)


def _node(a: bytes, b: bytes) -> bytes:
    return _keccak(min(a, b) + max(a, b))


class MerkleTree:
    """OpenZeppelin's tree over `leaves` (hashes, in order): `root`, `multiproof(indices)`."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        n = len(leaves)
        if n == 0:
            raise AttestationRootError("an attestation tree needs at least one leaf")
        tree: list[bytes] = [b""] * (2 * n - 1)
        for i, leaf in enumerate(leaves):
            tree[len(tree) - 1 - i] = leaf
        for i in range(len(tree) - 1 - n, -1, -1):
            tree[i] = _node(tree[2 * i + 1], tree[2 * i + 2])
        self.n = n
        self._tree = tree

    @property
    def root(self) -> bytes:
        return self._tree[0]

    def multiproof(self, indices: Iterable[int]) -> tuple[list[bytes], list[bool]]:
        """The proof and proof flags of the leaves `indices` (leaf numbers), to be sent with those leaves in
        ascending order (`getMultiProof`)."""
        wanted = sorted({int(i) for i in indices})
        if not wanted or wanted[0] < 0 or wanted[-1] >= self.n:
            raise AttestationRootError(f"leaves {wanted[:4]}... are not in a tree of {self.n}")
        size = len(self._tree)
        stack = [size - 1 - i for i in wanted]  # tree positions, descending
        proof: list[bytes] = []
        flags: list[bool] = []
        head = 0  # stack[head:] is the queue
        while head < len(stack) and stack[head] > 0:
            j = stack[head]
            head += 1
            s = j + 1 if j % 2 else j - 1
            if head < len(stack) and stack[head] == s:
                flags.append(True)
                head += 1
            else:
                flags.append(False)
                proof.append(self._tree[s])
            stack.append((j - 1) // 2)
        return proof, flags


def _checked_address(v: str) -> str:
    if not Web3.is_address(v):
        raise ValueError(f"not an address: {v[:60]!r}")
    return Web3.to_checksum_address(v)


class RootLeaf(BaseModel):
    """One used attestation: leaf `index` pays `validator` `amount` for `submission_id`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=0)
    submission_id: int = Field(ge=0, lt=1 << 256)
    validator: str
    amount: int = Field(ge=0, lt=1 << 128)

    _address = field_validator("validator")(_checked_address)

    def hash(self) -> bytes:
        return leaf_hash(self.index, self.submission_id, self.validator, self.amount)


class AttestationRootFile(BaseModel):
    """The leaves of one recorded attestation root, as the trainer publishes them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: str = Field(ROOT_FILE_SCHEMA, alias="schema")
    chain_id: int = Field(ge=0)
    book: str
    pool_id: int = Field(ge=0, lt=1 << 32)
    step: int = Field(ge=0)
    root: str
    leaves: list[RootLeaf] = Field(min_length=1, max_length=MAX_ROOT_LEAVES)

    _book = field_validator("book")(_checked_address)

    @classmethod
    def build(cls, *, chain_id: int, book: str, pool_id: int, step: int,
              entries: Iterable[tuple[int, str, int]]) -> AttestationRootFile:
        """The file of `entries` (submission id, validator, amount): sorted by validator then submission, indexed
        in that order, the root computed. A (submission, validator) pair listed twice is refused."""
        rows = sorted(((Web3.to_checksum_address(v), int(sid), int(amount)) for sid, v, amount in entries),
                      key=lambda r: (r[0].lower(), r[1]))
        seen = {(v, sid) for v, sid, _ in rows}
        if len(seen) != len(rows):
            raise AttestationRootError("a (submission, validator) pair is listed twice")
        leaves = [RootLeaf(index=i, submission_id=sid, validator=v, amount=amount)
                  for i, (v, sid, amount) in enumerate(rows)]
        root = MerkleTree([leaf.hash() for leaf in leaves]).root
        return cls(chain_id=chain_id, book=Web3.to_checksum_address(book), pool_id=pool_id, step=step,
                   root="0x" + root.hex(), leaves=leaves)

    @property
    def total(self) -> int:
        return sum(leaf.amount for leaf in self.leaves)

    @cached_property
    def _tree(self) -> MerkleTree:
        return MerkleTree([leaf.hash() for leaf in self.leaves])

    def tree(self) -> MerkleTree:
        """The leaves' tree, built once per file object (two hashes a leaf; a claim's multiproofs reuse it)."""
        return self._tree

    def of(self, validator: str) -> list[RootLeaf]:
        """`validator`'s leaves, in index order."""
        v = validator.lower()
        return [leaf for leaf in self.leaves if leaf.validator.lower() == v]

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): the bytes the CID names."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True,
                          separators=(",", ":")).encode()

    @classmethod
    def parse(cls, data: bytes, *, expect_root: str | None = None) -> AttestationRootFile:
        """A root file from a stranger's bytes: at most `MAX_ROOT_FILE_BYTES`, schema `ROOT_FILE_SCHEMA`, leaves
        indexed 0..n-1 in order, the root rebuilt from them equal to the file's (and to `expect_root`, the one
        recorded on-chain). Raises `AttestationRootError` naming the fault."""
        if len(data) > MAX_ROOT_FILE_BYTES:
            raise AttestationRootError(f"attestation root file of {len(data)} bytes is over the "
                                       f"{MAX_ROOT_FILE_BYTES}-byte limit")
        try:
            raw = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise AttestationRootError(f"attestation root file is not JSON: {exc}") from None
        if not isinstance(raw, dict):
            raise AttestationRootError("attestation root file is not a JSON object")
        if raw.get("schema") != ROOT_FILE_SCHEMA:
            raise AttestationRootError(f"attestation root file has schema {str(raw.get('schema'))[:80]!r}; this "
                                       f"reader knows {ROOT_FILE_SCHEMA!r}")
        try:
            f = cls.model_validate(raw)
        except ValidationError as exc:
            raise AttestationRootError(f"attestation root file is malformed: {exc.errors()[0]['loc']}: "
                                       f"{exc.errors()[0]['msg']}") from None
        for i, leaf in enumerate(f.leaves):
            if leaf.index != i:
                raise AttestationRootError(f"attestation root file's leaf {i} has index {leaf.index}")
        rebuilt = "0x" + f.tree().root.hex()
        if rebuilt != f.root.lower():
            raise AttestationRootError(f"attestation root file's leaves rebuild root {rebuilt}, not its {f.root}")
        if expect_root is not None and rebuilt != expect_root.lower():
            raise AttestationRootError(f"attestation root file is of root {rebuilt}, not the recorded {expect_root}")
        return f
