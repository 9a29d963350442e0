"""The attestation-root leaves file and tree (issue 38) without a chain: the leaf encoding the contract hashes,
OpenZeppelin's tree layout and multiproof invariant, and every refusal of a stranger's file with its reason. The
contract's verifier is exercised against this tree in tests/contracts/test_contracts_attester_roots.py."""

from __future__ import annotations

import json

import pytest
from eth_abi import encode
from web3 import Web3

from intellect.sdk.attestation_root import (
    MAX_ROOT_FILE_BYTES,
    AttestationRootError,
    AttestationRootFile,
    MerkleTree,
    leaf_hash,
)

BOOK, V1, V2 = "0x" + "11" * 20, "0x" + "2a" * 20, "0x" + "1b" * 20


def _file(entries=((7, V1, 2), (8, V1, 2), (7, V2, 4))) -> AttestationRootFile:
    return AttestationRootFile.build(chain_id=1337, book=BOOK, pool_id=1, step=3, entries=entries)


def test_leaf_is_the_double_keccak_of_the_abi_encoding():
    inner = Web3.keccak(encode(["uint256", "uint256", "address", "uint256"], [5, 9, Web3.to_checksum_address(V1), 3]))
    assert leaf_hash(5, 9, V1, 3) == bytes(Web3.keccak(bytes(inner)))


def test_tree_root_is_openzeppelins_sorted_pair_hash():
    a, b, c = (bytes([i]) * 32 for i in (1, 2, 3))

    def node(x, y):
        return bytes(Web3.keccak(min(x, y) + max(x, y)))

    assert MerkleTree([a]).root == a
    assert MerkleTree([a, b]).root == node(a, b)
    # three leaves: OZ puts leaf i at position 4 - i of a 5-slot array; node 1 = (3, 4) = (b, a), root = (1, 2)
    assert MerkleTree([a, b, c]).root == node(node(a, b), c)


def test_multiproof_satisfies_openzeppelins_count_invariant_for_every_subset():
    tree = MerkleTree([bytes([i + 1]) * 32 for i in range(6)])
    for mask in range(1, 64):
        picked = [i for i in range(6) if mask >> i & 1]
        proof, flags = tree.multiproof(picked)
        assert len(picked) + len(proof) == len(flags) + 1
    with pytest.raises(AttestationRootError, match="not in a tree of 6"):
        tree.multiproof([6])
    with pytest.raises(AttestationRootError, match="at least one leaf"):
        MerkleTree([])


def test_build_sorts_by_validator_then_submission_and_refuses_a_pair_twice():
    f = _file()
    assert [(leaf.validator.lower(), leaf.submission_id) for leaf in f.leaves] == [(V2, 7), (V1, 7), (V1, 8)]
    assert [leaf.index for leaf in f.leaves] == [0, 1, 2] and f.total == 8
    assert [leaf.index for leaf in f.of(V1.upper().replace("0X", "0x"))] == [1, 2]
    with pytest.raises(AttestationRootError, match="listed twice"):
        _file([(7, V1, 2), (7, V1.upper().replace("0X", "0x"), 3)])


def test_parse_round_trips_and_checks_the_expected_root():
    f = _file()
    assert AttestationRootFile.parse(f.to_bytes(), expect_root=f.root.upper().replace("0X", "0x")) == f
    with pytest.raises(AttestationRootError, match="not the recorded 0x00"):
        AttestationRootFile.parse(f.to_bytes(), expect_root="0x" + "00" * 32)


@pytest.mark.parametrize(("mutate", "reason"), [
    (lambda d: d.replace(b"attestation-root/v1", b"attestation-root/v2"), "this reader knows"),
    (lambda d: b"{" + d, "not JSON"),
    (lambda d: b"[1, 2]", "not a JSON object"),
    (lambda d: json.dumps({**json.loads(d), "root": "0x" + "00" * 32}).encode(), "rebuild root"),
    (lambda d: json.dumps({**json.loads(d), "extra": 1}).encode(), "malformed"),
    (lambda d: json.dumps({**json.loads(d), "leaves": []}).encode(), "malformed"),
    (lambda d: d.replace(b'"amount":4', b'"amount":5'), "rebuild root"),
    (lambda d: d.replace(b'"index":1', b'"index":2', 1), "has index 2"),
    (lambda d: json.dumps({**json.loads(d), "book": "0xzz"}).encode(), "not an address"),
    (lambda d: d + b" " * MAX_ROOT_FILE_BYTES, "over the"),
])
def test_parse_refuses_a_bad_file_naming_the_fault(mutate, reason):
    data = mutate(_file().to_bytes())
    with pytest.raises(AttestationRootError, match=reason):
        AttestationRootFile.parse(data)
