"""Which validators' attestations count for a submission: the chain assigns them, the worker does not.

    k = assignment_size(quorum, rules.assigned_validators)            # a pool rule, at least the quorum
    assigned = assigned_validators(seed, owners_at_claim, k, exclude=(worker, worker_owner))

The rule is rendezvous hashing: every validator of the set gets the rank keccak256(seed ‖ address) and
the k lowest ranks are assigned. `seed` is the task claim's seed (keccak of the claim block's hash, the
node and the task id: `intellect.sdk.claim_seed`), and the set is the validators that were active and
staked at the end of the block before the claim's block (`intellect.sdk.ValidatorHistory`), so:

- a worker cannot pick its validators: the seed is drawn from a block hash its claim could not know, and
  the set was fixed before that block;
- nothing done after the claim changes the assignment: a validator registered, staked or exited later is
  neither added nor removed (only its own stake's history at that block counts);
- every node computes the same list from the chain alone, and removing one validator from the set moves
  only the slots that validator held (rendezvous hashing's property), so the spread stays even.

With `owners`, the rule takes at most one validator per operator (its lowest-ranked key) and leaves out
the worker's own operator (`exclude`): k assigned validators are k distinct operators, none of them the
worker's, which is what the trainer's quorum counts. The quorum itself (`effective_quorum`) is the
pool's on-chain rule, never below `NON_DEV_MIN_QUORUM` off development chains.

Pure functions, no chain access and no torch: the trainer, the validators and the tests share them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from eth_utils import keccak

from intellect.sdk import DEV_CHAIN_IDS

__all__ = [
    "DEV_CHAIN_IDS",
    "NON_DEV_MIN_QUORUM",
    "assigned_validators",
    "assignment_size",
    "effective_quorum",
    "validator_rank",
]

NON_DEV_MIN_QUORUM = 2
"""Fewest distinct validators (of distinct operators) whose attestations make a submission trainable
on any chain other than a development one."""
MAX_ASSIGNED = 64
"""Most validators one submission is assigned (the pool rules' bound)."""


def effective_quorum(configured: int | None, pool_quorum: int, chain_id: int) -> int:
    """Attestations needed per submission: the pool's rule (`quorum`, the one its challenges use), at
    least `NON_DEV_MIN_QUORUM` off development chains, raised (never lowered) by the trainer's setting."""
    floor = 1 if chain_id in DEV_CHAIN_IDS else NON_DEV_MIN_QUORUM
    return max(floor, int(pool_quorum), int(configured or 0))


def assignment_size(quorum: int, rule: int | None = None) -> int:
    """How many validators each submission is assigned: the pool rule `assigned_validators` (default
    quorum + 1, so one assigned validator may be offline), never fewer than the quorum."""
    return max(int(quorum), int(rule) if rule else int(quorum) + 1)


def _address(a: str) -> str:
    s = str(a).lower()
    if len(s) != 42 or not s.startswith("0x"):
        raise ValueError(f"not an address: {a!r}")
    int(s[2:], 16)  # ValueError when not hex
    return s


def validator_rank(seed: bytes, validator: str) -> bytes:
    """keccak256(seed ‖ the validator's 20 address bytes): lower ranks are assigned first."""
    return keccak(bytes(seed) + bytes.fromhex(_address(validator)[2:]))


def assigned_validators(seed: bytes, validators: Sequence[str] | Iterable[str], k: int, *,
                        owners: Mapping[str, str] | None = None, exclude: Iterable[str] = ()) -> list[str]:
    """The validators (lower case, best rank first) assigned to the claim whose seed is `seed`.

    `validators`: the set active and staked at the claim (any order; duplicates and case do not matter).
    `k`: how many to assign (fewer when the set is smaller). `owners` maps validator → owner (the
    operator): with it, at most one validator per operator is taken. `exclude`: addresses (the worker and
    its owner) whose validators are left out, matched against each validator's address and its owner.
    """
    if not isinstance(seed, bytes | bytearray) or len(seed) == 0:
        raise ValueError("seed must be non-empty bytes")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    own = {_address(v): _address(o) for v, o in owners.items()} if owners is not None else None
    out_of = {_address(a) for a in exclude}
    ranked = sorted({_address(v) for v in validators}, key=lambda v: validator_rank(seed, v))
    picked: list[str] = []
    operators: set[str] = set()
    for v in ranked:
        if len(picked) >= k:
            break
        operator = own.get(v, v) if own is not None else v
        if v in out_of or operator in out_of or operator in operators:
            continue
        operators.add(operator)
        picked.append(v)
    return picked
